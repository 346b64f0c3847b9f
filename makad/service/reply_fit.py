"""How many events one reply carries: replies that return whole event texts (read_events,
search_history, retrieve) hold as many as fit in ``MAX_READ_BYTES`` as JSON, one at least,
and say what they left out. An event is at most ``MAX_EVENT_BYTES`` as JSON (appends check
it), so such a reply fits the default 16 MiB reply cap whatever the events."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from makad.core.refs import event_ref
from makad.core.types import Event, RefResult
from makad.wire.ledger import HistoryHit

# One event, as JSON, as sent and once redacted (a secret's marker can be longer than the
# secret): half the default reply cap, so one reply can always carry any event back.
MAX_EVENT_BYTES = 8 * 1024 * 1024
MAX_READ_BYTES = MAX_EVENT_BYTES
# Above the characters an event holds, what its other fields (and a hit's or a ref
# result's own) take as JSON at most.
_EVENT_FIELDS_BYTES = 4_096
# What ``textCut`` and ``textChars`` add to a hit whose text is cut, with room to spare.
_CUT_FIELDS_BYTES = 64

_encoder = msgspec.json.Encoder()


def surely_within_read_bytes(events: Sequence[Event]) -> bool:
    """Whether ``events`` fit ``MAX_READ_BYTES`` counting 6 bytes a character, the most one
    takes as JSON (``\\uXXXX``): cheap, so the common reply needs no exact count."""
    characters = 0
    for event in events:
        characters += len(event.text) + len(event.tool_name or "") + len(event.tool_call_id or "")
        if event.meta:
            characters += sum(len(k) + len(v) for k, v in event.meta.items())
    return characters * 6 + _EVENT_FIELDS_BYTES * len(events) <= MAX_READ_BYTES


def within_read_bytes(events: list[Event]) -> list[Event]:
    """The first of ``events`` (one at least) whose JSON fits ``MAX_READ_BYTES``."""
    total = 0
    for count, event in enumerate(events):
        total += len(_encoder.encode(event))
        if total > MAX_READ_BYTES and count:
            return events[:count]
    return events


def hits_within_read_bytes(hits: list[HistoryHit]) -> tuple[list[HistoryHit], int]:
    """The first of ``hits`` whose JSON fits ``MAX_READ_BYTES``, and how many were left
    out. When the first alone does not fit, it is kept with its text cut to fit."""
    if surely_within_read_bytes([hit.event for hit in hits]):
        return hits, 0
    total = 0
    for count, hit in enumerate(hits):
        size = len(_encoder.encode(hit))
        if total + size > MAX_READ_BYTES:
            if count:
                return hits[:count], len(hits) - count
            return [_cut(hit, size)], len(hits) - 1
        total += size
    return hits, 0


def _cut(hit: HistoryHit, size: int) -> HistoryHit:
    """``hit`` with the end of its text dropped so its JSON fits ``MAX_READ_BYTES``: a
    character takes one byte as JSON at least, so dropping as many as the excess does."""
    text = hit.event.text
    keep = max(0, len(text) - (size + _CUT_FIELDS_BYTES - MAX_READ_BYTES))
    event = msgspec.structs.replace(hit.event, text=text[:keep])
    return msgspec.structs.replace(hit, event=event, text_cut=True, text_chars=len(text))


def results_within_read_bytes(
    results: list[RefResult], refs: Sequence[str]
) -> tuple[list[RefResult], list[str]]:
    """The first of ``results`` (one event at least) whose JSON fits ``MAX_READ_BYTES``,
    and the refs left out: those of ``refs`` (as asked) not reached, led by the rest of a
    range that was cut. A cut result keeps its verdict on its whole range."""
    if surely_within_read_bytes([e for r in results for e in r.events]):
        return results, []
    total = 0
    kept: list[RefResult] = []
    for index, result in enumerate(results):
        total += len(_encoder.encode(msgspec.structs.replace(result, events=[])))
        events: list[Event] = []
        for event in result.events:
            total += len(_encoder.encode(event))
            if total > MAX_READ_BYTES and (kept or events):
                break
            events.append(event)
        else:
            kept.append(result)
            continue
        if not events:
            return kept, list(refs[index:])
        kept.append(msgspec.structs.replace(result, events=events))
        rest = event_ref(result.session_id, events[-1].seq + 1, result.to_seq)
        return kept, [rest, *refs[index + 1 :]]
    return kept, []

"""The event hash chain: how an appended event is prepared and hashed, and how any set
of stored events is verified against it. Pure: the stores hand it rows.

Event hash chain::

    hash(event) = sha256_hex(utf8(previous_hash + canonical(event)))

``previous_hash`` is the hash of the session's previous event, ``""`` for seq 1.
``canonical(event)`` is the event as compact JSON without its ``hash``: camelCase
keys sorted, no whitespace, non-ASCII written as UTF-8, absent optional fields
written as ``null`` (keys: meta, seq, sessionId, text, tokens, toolCallId,
toolName, ts, type).

Verification checks each link of a session's chain: event ``n`` links onto ``n - 1``
when ``event_hash(previous.hash, event) == event.hash`` (``""`` before seq 1), and the
newest event must be the head recorded for the session. An event is *verified*
when both of its links hold: onto its predecessor, and its successor onto it.

Any change to a stored event breaks a link: text edited in place breaks the
link into it; edited *and* re-hashed, the link out of it (its successor still
carries the old hash). Either way the two events on that link are unverified:
from the chain alone the damage cannot be pinned on one of them, so neither is
trusted. A missing row (a gap) breaks the links on both sides of it.

Reads only fetch the rows on the edges of what they return (one before and one
after each run of consecutive seqs) and hash only those and the events they
return.

A renamed session (one stored under an id holding a secret, before ids were screened:
``makad.store.ledger.renames``) keeps the hashes its events were given. Its events up to
``through_seq`` are hashed with the id they were appended under (``ChainedAs``, kept by
the ledger for that alone and never returned); later ones with the session's id.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, get_args

import msgspec

from makad.core.refs import EventSpan
from makad.core.tokens import estimate_tokens
from makad.core.types import Event, EventInput, EventType, RefResult
from makad.errors import InvalidParams

MAX_APPEND_EVENTS: Final = 10_000
EVENT_TYPES: Final[frozenset[str]] = frozenset(get_args(EventType))

EventKey = tuple[str, int]
Head = tuple[int, str]  # a session's (last_seq, last_hash)
# A renamed session's (id its early events were hashed with, the last seq hashed so).
ChainedAs = tuple[str, int]


class _Canonical(msgspec.Struct, rename="camel"):
    """An event's hashed fields, declared in the sorted order of their keys."""

    meta: dict[str, str] | None
    seq: int
    session_id: str
    text: str
    tokens: int
    tool_call_id: str | None
    tool_name: str | None
    ts: int
    type: str


# Sorting also orders meta's keys; a Struct encodes ~40% faster than the equivalent dict,
# which matters to reads that verify every event they return.
_CANONICAL = msgspec.json.Encoder(order="sorted")


def canonical_event(event: Event, chained_as: ChainedAs | None = None) -> bytes:
    """The bytes an event's hash covers (see the module docstring)."""
    session_id = event.session_id
    if chained_as is not None and event.seq <= chained_as[1]:
        session_id = chained_as[0]
    return _CANONICAL.encode(
        _Canonical(
            event.meta,
            event.seq,
            session_id,
            event.text,
            event.tokens,
            event.tool_call_id,
            event.tool_name,
            event.ts,
            event.type,
        )
    )


def event_hash(previous_hash: str, event: Event, chained_as: ChainedAs | None = None) -> str:
    """Chain ``event`` onto ``previous_hash`` (``chained_as``: its session's, if renamed)."""
    return hashlib.sha256(previous_hash.encode("utf-8") + canonical_event(event, chained_as)).hexdigest()


def prepare_event(new: EventInput, at: int) -> Event:
    """Validate an incoming event and fill in ts (``at``) and tokens; seq and hash come later."""
    if new.type not in EVENT_TYPES:
        raise InvalidParams("unknown event type", type=new.type, allowed=sorted(EVENT_TYPES))
    if new.tokens is not None and new.tokens < 0:
        raise InvalidParams("tokens must not be negative")
    return Event(
        session_id="",
        seq=0,
        ts=at if new.ts is None else new.ts,
        type=new.type,
        text=new.text,
        tool_call_id=new.tool_call_id,
        tool_name=new.tool_name,
        meta=new.meta,
        tokens=estimate_tokens(new.text) if new.tokens is None else new.tokens,
    )


def first_bad_seq(
    events: Iterable[Event], last_seq: int, last_hash: str, chained_as: ChainedAs | None = None
) -> int | None:
    """The first seq where a session's chain breaks (gap, bad hash, head mismatch), else None."""
    expected_seq, chain = 1, ""
    for event in events:
        if event.seq != expected_seq or event_hash(chain, event, chained_as) != event.hash:
            return expected_seq
        expected_seq, chain = expected_seq + 1, event.hash
    if expected_seq - 1 != last_seq:
        return expected_seq
    if chain != last_hash:
        return max(last_seq, 1)
    return None


def verify_span(
    span: EventSpan, by_seq: Mapping[int, Event], head: Head | None, chained_as: ChainedAs | None = None
) -> RefResult:
    """Check a ref's events against the chain (see ``RefResult``).

    ``by_seq`` holds the stored events from ``from - 1`` to ``to + 1``; ``head``
    is the session's ``(last_seq, last_hash)``; ``chained_as`` its, if it was renamed.
    """
    ref, session_id, first, last = span
    events = [by_seq[seq] for seq in range(first, last + 1) if seq in by_seq]
    missing = [seq for seq in range(first, last + 1) if seq not in by_seq]
    mismatched: list[int] = []
    for event in events:
        before = by_seq.get(event.seq - 1)
        previous = "" if event.seq == 1 else None if before is None else before.hash
        if previous is None or event_hash(previous, event, chained_as) != event.hash:
            mismatched.append(event.seq)
    intact = True
    if events and head is not None:
        tail = events[-1]
        successor = by_seq.get(tail.seq + 1)
        if successor is not None:
            intact = event_hash(tail.hash, successor, chained_as) == successor.hash
        else:
            intact = (tail.seq, tail.hash) == head
    return RefResult(
        ref=ref,
        session_id=session_id,
        from_seq=first,
        to_seq=last,
        events=events,
        ok=intact and not mismatched and not missing,
        chain_intact=intact,
        mismatched_seqs=mismatched,
        missing_seqs=missing,
    )


def mark_span(result: RefResult) -> None:
    """Per-event ``verified`` for a retrieved range, as ``unverified`` judges it: an event
    fails when it or its successor does not chain (the tail: ``chain_intact``)."""
    broken = set(result.mismatched_seqs) | set(result.missing_seqs)
    tail = result.events[-1].seq if result.events else None
    for event in result.events:
        if event.seq == tail:
            event.verified = event.seq not in broken and result.chain_intact
        else:
            event.verified = event.seq not in broken and event.seq + 1 not in broken


def runs(events: Iterable[Event]) -> list[tuple[str, int, int]]:
    """``(session_id, first_seq, last_seq)`` of each run of consecutive seqs."""
    by_session: dict[str, set[int]] = defaultdict(set)
    for event in events:
        by_session[event.session_id].add(event.seq)
    found: list[tuple[str, int, int]] = []
    for sid, seqs in by_session.items():
        ordered = sorted(seqs)
        first = previous = ordered[0]
        for seq in ordered[1:]:
            if seq != previous + 1:
                found.append((sid, first, previous))
                first = seq
            previous = seq
        found.append((sid, first, previous))
    return found


def edge_spans(events: Iterable[Event]) -> list[tuple[str, int, int]]:
    """The rows a verification needs besides the events: one on each side of every run."""
    spans: list[tuple[str, int, int]] = []
    for sid, first, last in runs(events):
        if first > 1:
            spans.append((sid, first - 1, first - 1))
        spans.append((sid, last + 1, last + 1))
    return spans


def unverified(
    events: Sequence[Event],
    edges: Iterable[Event],
    heads: Mapping[str, Head],
    renamed: Mapping[str, ChainedAs] | None = None,
) -> set[EventKey]:
    """Keys of the ``events`` that do not chain both ways (see the module docstring).

    ``edges`` are the stored rows ``edge_spans`` named (absent where none exists);
    ``heads`` each session's ``(last_seq, last_hash)`` (absent: session gone);
    ``renamed`` each renamed session's ``ChainedAs``.
    One pass over the events in (session, seq) order hashes each event and each
    edge row after a run once.
    """
    around = {(e.session_id, e.seq): e for e in edges}
    chained = renamed or {}
    ordered = sorted(events, key=lambda e: (e.session_id, e.seq))
    bad: set[EventKey] = set()
    previous: Event | None = None
    # Whether the previous event chains onto its own predecessor (None: no previous).
    previous_ok: bool | None = None
    for event in ordered:
        sid, seq = event.session_id, event.seq
        follows = previous is not None and previous.session_id == sid and previous.seq == seq - 1
        if follows:
            assert previous is not None
            before: str | None = previous.hash
        elif seq == 1:
            before = ""
        else:
            before = _hash_of(around.get((sid, seq - 1)))
        ok = before is not None and event_hash(before, event, chained.get(sid)) == event.hash
        if previous is not None:
            if follows:
                if not (previous_ok and ok):
                    bad.add((previous.session_id, previous.seq))
            elif not (previous_ok and _closes(previous, around, heads, chained)):
                bad.add((previous.session_id, previous.seq))
        if heads.get(sid) is None:
            ok = False
        previous, previous_ok = event, ok
    if previous is not None and not (previous_ok and _closes(previous, around, heads, chained)):
        bad.add((previous.session_id, previous.seq))
    return bad


def _closes(
    last: Event,
    around: Mapping[EventKey, Event],
    heads: Mapping[str, Head],
    renamed: Mapping[str, ChainedAs],
) -> bool:
    """The event that ends a run is chained onto by the stored row after it, or is the head."""
    successor = around.get((last.session_id, last.seq + 1))
    if successor is not None:
        return event_hash(last.hash, successor, renamed.get(last.session_id)) == successor.hash
    return (last.seq, last.hash) == heads.get(last.session_id)


def _hash_of(event: Event | None) -> str | None:
    return None if event is None else event.hash

"""Session ids and the refs that point into the ledger: built here, parsed here.

A ref names where something came from: ``event:<sessionId>:<seq>`` (one event),
``event:<sessionId>:<from>-<to>`` (a range), ``episode:<episodeId>``,
``memory:<entryId>``, ``checkpoint:<checkpointId>``. Session ids we mint are
time-sortable: 12 hex digits of creation time in milliseconds then 20 random hex
digits (32 in all, like a uuid4 hex, but the lexicographic order is the creation
order). Client-chosen ids must match ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}`` so an
``event:`` ref stays unambiguous.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from typing import Final, Literal, NamedTuple

from makad.core.types import MAX_INT64
from makad.errors import ECHO_LIMIT, InvalidParams, TooLarge, echoed

MAX_RETRIEVE_EVENTS: Final = 10_000
SESSION_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# A seq has at most 19 digits (it is a SQLite integer; see the bound in parse_event_refs).
EVENT_REF: Final = re.compile(r"event:(?P<session>[^:]+):(?P<first>\d{1,19})(?:-(?P<last>\d{1,19}))?")
EVENT_PREFIX: Final = "event:"
EPISODE_PREFIX: Final = "episode:"
MEMORY_PREFIX: Final = "memory:"
CHECKPOINT_PREFIX: Final = "checkpoint:"

# (ref, session_id, from_seq, to_seq) of one parsed ``event:`` ref.
EventSpan = tuple[str, str, int, int]
# A ref quoted in an error's data is cut to this many characters (and an ellipsis).
QUOTED_REF_CHARS: Final = ECHO_LIMIT

SourceKind = Literal["event", "memory", "checkpoint", "episode"]
SOURCE_KINDS: Final[tuple[SourceKind, ...]] = ("event", "memory", "checkpoint", "episode")


class SourceRef(NamedTuple):
    """One source ref a call hands in, parsed: its position in the call's list, the ref,
    its kind, what it names (a session, entry, checkpoint or episode id) and, for an
    ``event:`` ref, its seqs (0 otherwise)."""

    position: int
    ref: str
    kind: SourceKind
    target: str
    first: int = 0
    last: int = 0


def quoted_ref(ref: str) -> str:
    """A ref as an error's data quotes it: at most ``QUOTED_REF_CHARS`` characters."""
    return echoed(ref, QUOTED_REF_CHARS)


def unresolved_ref(source: SourceRef, reason: str, message: str, **data: object) -> InvalidParams:
    """The refusal of a source ref that names nothing stored: ``invalid_params`` at
    ``$.sourceRefs[<index>]`` with a stable ``data.reason`` and the ref (as stored: scrubbed)."""
    return InvalidParams(
        message, path=f"$.sourceRefs[{source.position}]", reason=reason, ref=quoted_ref(source.ref), **data
    )


def parse_source_refs(refs: Sequence[str]) -> list[SourceRef]:
    """Each ref of a call parsed, in order; ``InvalidParams`` (``data.reason``
    ``not_a_source_ref``, ``data.path`` ``$.sourceRefs[i]``) for the first that is not
    ``event:<session>:<seq>``, ``event:<session>:<from>-<to>`` (1 <= from <= to),
    ``memory:<id>``, ``checkpoint:<id>`` or ``episode:<id>``."""
    parsed: list[SourceRef] = []
    for index, ref in enumerate(refs):
        kind, _, target = ref.partition(":")
        if kind == "event":
            match = EVENT_REF.fullmatch(ref)
            if match is not None:
                first = int(match["first"])
                last = first if match["last"] is None else int(match["last"])
                if 1 <= first <= last <= MAX_INT64 and SESSION_ID.fullmatch(match["session"]):
                    parsed.append(SourceRef(index, ref, "event", match["session"], first, last))
                    continue
        elif kind in SOURCE_KINDS and target and target.strip() == target:
            parsed.append(SourceRef(index, ref, kind, target))
            continue
        raise InvalidParams(
            "a source ref is event:<sessionId>:<seq>, event:<sessionId>:<from>-<to>, "
            "memory:<entryId>, checkpoint:<id> or episode:<episodeId>",
            path=f"$.sourceRefs[{index}]",
            reason="not_a_source_ref",
            ref=quoted_ref(ref),
        )
    return parsed


def new_session_id(at_ms: int) -> str:
    """A time-sortable id: 12 hex digits of milliseconds, 20 random hex digits (also
    used for episode ids)."""
    return f"{at_ms:012x}{secrets.token_hex(10)}"


def checked_session_id(session_id: str) -> str:
    if not SESSION_ID.fullmatch(session_id):
        raise InvalidParams(
            "a session id is 1-128 letters, digits, '.', '_' or '-'",
            pattern=SESSION_ID.pattern,
        )
    return session_id


def event_ref(session_id: str, first: int, last: int | None = None) -> str:
    """``event:<sid>:<seq>``, or ``event:<sid>:<from>-<to>`` for a range of several."""
    if last is None or last == first:
        return f"{EVENT_PREFIX}{session_id}:{first}"
    return event_range(session_id, first, last)


def event_range(session_id: str, first: int, last: int) -> str:
    """``event:<sid>:<from>-<to>``, written as a range even when it holds one event."""
    return f"{EVENT_PREFIX}{session_id}:{first}-{last}"


def episode_ref(episode_id: str) -> str:
    return f"{EPISODE_PREFIX}{episode_id}"


def episode_id_of(ref_or_id: str) -> str:
    """An episode id, given the id itself or its ``episode:`` ref."""
    return ref_or_id.removeprefix(EPISODE_PREFIX)


def memory_ref(entry_id: str) -> str:
    """A memory entry's source id in manifests and packs."""
    return f"{MEMORY_PREFIX}{entry_id}"


def checkpoint_ref(checkpoint_id: str) -> str:
    return f"{CHECKPOINT_PREFIX}{checkpoint_id}"


def ref_session(ref: str) -> str | None:
    """The session an ``event:<session>:<seqs>`` ref names (loosely: any seqs), else None."""
    kind, sep, rest = ref.partition(":")
    session, sep2, _ = rest.rpartition(":")
    if kind == "event" and sep and sep2 and session:
        return session
    return None


def check_ref_count(refs: Sequence[str]) -> None:
    """``TooLarge`` when there are more refs than events a call returns (each names one at
    least): refused before any ref is read."""
    if len(refs) > MAX_RETRIEVE_EVENTS:
        raise TooLarge("refs name too many events", limit=MAX_RETRIEVE_EVENTS, count=len(refs))


def parse_event_refs(refs: Sequence[str], field: str | None = None) -> list[EventSpan]:
    """``(ref, session_id, from_seq, to_seq)`` for each ``event:`` ref, within the size cap.
    ``field``: the param holding ``refs`` (``$.sourceRefs``): a refusal then names the
    ref's place in it (``data.path``) and says why (``data.reason`` ``not_an_event_ref``)."""
    spans: list[EventSpan] = []
    for index, ref in enumerate(refs):
        where = {} if field is None else {"path": f"{field}[{index}]", "reason": "not_an_event_ref"}
        match = EVENT_REF.fullmatch(ref)
        if match is None:
            raise InvalidParams("not an event ref", ref=ref, **where)
        first = int(match["first"])
        last = first if match["last"] is None else int(match["last"])
        if first < 1 or last < first or last > MAX_INT64:
            raise InvalidParams(f"an event ref needs 1 <= from <= to <= {MAX_INT64}", ref=ref, **where)
        spans.append((ref, match["session"], first, last))
    total = sum(last - first + 1 for _, _, first, last in spans)
    if total > MAX_RETRIEVE_EVENTS:
        raise TooLarge("refs name too many events", limit=MAX_RETRIEVE_EVENTS, count=total)
    return spans

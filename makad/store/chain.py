"""Per-event verification against the hash chain, for any set of events a read returns.

Each link of a session's chain is checked: event ``n`` links onto ``n - 1`` when
``event_hash(previous.hash, event) == event.hash`` (``""`` before seq 1), and the
newest event must be the head recorded in ``sessions``. An event is *verified*
when both of its links hold: onto its predecessor, and its successor onto it.

Any change to a stored event breaks a link: text edited in place breaks the
link into it; edited *and* re-hashed, the link out of it (its successor still
carries the old hash). Either way the two events on that link are unverified:
from the chain alone the damage cannot be pinned on one of them, so neither is
trusted. A missing row (a gap) breaks the links on both sides of it.

Reads only fetch the rows on the edges of what they return (one before and one
after each run of consecutive seqs) and hash only those and the events they
return.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from makad.core.types import Event
from makad.store.ledger_schema import event_hash

EventKey = tuple[str, int]
Head = tuple[int, str]  # a session's (last_seq, last_hash)


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


def unverified(events: Sequence[Event], edges: Iterable[Event], heads: Mapping[str, Head]) -> set[EventKey]:
    """Keys of the ``events`` that do not chain both ways (see the module docstring).

    ``edges`` are the stored rows ``edge_spans`` named (absent where none exists);
    ``heads`` each session's ``(last_seq, last_hash)`` (absent: session gone).
    One pass over the events in (session, seq) order hashes each event and each
    edge row after a run once.
    """
    around = {(e.session_id, e.seq): e for e in edges}
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
        ok = before is not None and event_hash(before, event) == event.hash
        if previous is not None:
            if follows:
                if not (previous_ok and ok):
                    bad.add((previous.session_id, previous.seq))
            elif not (previous_ok and _closes(previous, around, heads)):
                bad.add((previous.session_id, previous.seq))
        if heads.get(sid) is None:
            ok = False
        previous, previous_ok = event, ok
    if previous is not None and not (previous_ok and _closes(previous, around, heads)):
        bad.add((previous.session_id, previous.seq))
    return bad


def _closes(last: Event, around: Mapping[EventKey, Event], heads: Mapping[str, Head]) -> bool:
    """The event that ends a run is chained onto by the stored row after it, or is the head."""
    successor = around.get((last.session_id, last.seq + 1))
    if successor is not None:
        return event_hash(last.hash, successor) == successor.hash
    return (last.seq, last.hash) == heads.get(last.session_id)


def _hash_of(event: Event | None) -> str | None:
    return None if event is None else event.hash

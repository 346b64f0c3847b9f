"""Replay a generated history through the pure pipeline in simulated time, and score it.

At each moment (a session's start, ``now`` its first event's time) the replay does what
the daemon would have done by then (``makad/service/attention.py``):

- every earlier session that is **closed** (its close comes ``CLOSE_AFTER_MS`` after its
  last event) or **idle** (``IDLE_MS``, 15 minutes, past its last event) has its events
  read into behavior records: ``behaviors.gather`` over its events, the segments it
  closed recorded with ``closed=False`` and no working state, the open one flushed with
  ``closed`` = whether the session was closed and the session's working state (the
  open threads its agent kept); a session is read once, after its last event;
- the newest ``MAX_RECORDS`` (300) records by end time go to ``attention.derive`` with
  the proposals pending at ``now`` (queued before, not decided yet) and those rejected
  before ``now``;
- ``suggestions.suggest(now, state, records, dismissed, session_id=<the new session>)``
  gives what makad would say; the **baseline** says one thing: the newest line (by its
  time) of Active threads / Recently abandoned, or nothing when both are empty.

The generated user dismisses a makad suggestion that did not help with the persona's
``dismiss_p``, for as long as the daemon's ``dismiss_suggestion`` hides one by default
(``DISMISS_MS``: ``MAKAD_SUGGESTION_COOLDOWN_MS``'s default, 3 days; ``dismissed[id] = now +
DISMISS_MS``, the time the dismissal lasts until), unless ``dismiss`` is off.
"""

from __future__ import annotations

import importlib
import random
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from makad.core import attention, behaviors
from makad.core.types import Event, WorkingState
from proactivity_eval.generator import History, Session, persona
from proactivity_eval.truth import Score, score_moment

IDLE_MS = 15 * 60_000
CLOSE_AFTER_MS = 30_000
MAX_RECORDS = 300
try:
    from makad.settings import DEFAULT_SUGGESTION_COOLDOWN_MS as DISMISS_MS
except ImportError:  # a daemon without dismissals yet
    DISMISS_MS = 3 * 86_400_000

Fired = list[tuple[list[str], str]]


def suggester() -> tuple[Any | None, str]:
    """``makad.core.suggestions`` when it exists, else None and why."""
    try:
        return importlib.import_module("makad.core.suggestions"), ""
    except ImportError as exc:
        return None, f"makad.core.suggestions is not importable: {exc}"


def to_events(session: Session) -> list[Event]:
    return [
        Event(
            session_id=session.id,
            seq=e.seq,
            ts=e.ts,
            type=e.type,  # type: ignore[arg-type]
            text=e.text,
            tool_call_id=e.tool_call_id,
            tool_name=e.tool_name,
            meta=e.meta,
        )
        for e in session.events
    ]


def records_of(session: Session) -> list[behaviors.Behavior]:
    """The session's behavior records, as the service writes them once it is closed or idle."""
    closed, carry = behaviors.gather(session.id, behaviors.Carry(), to_events(session))
    out = [r for c in closed for r in behaviors.records(session.id, c, closed=False, working=None)]
    if not carry.empty():
        working = WorkingState(open_threads=list(session.open_threads))
        out.extend(behaviors.records(session.id, carry, closed=session.closed, working=working))
    return out


def readable_at(session: Session) -> int:
    """When the service would have read the session into records."""
    return session.end + (CLOSE_AFTER_MS if session.closed else IDLE_MS)


def baseline(state: attention.AttentionState) -> Fired:
    """The newest open line, or nothing."""
    lines = [line for name, line in state.lines() if name in attention.OPEN_SECTIONS]
    if not lines:
        return []
    newest = max(lines, key=lambda line: line.at)
    return [(list(newest.refs), newest.text)]


@dataclass(slots=True)
class Outcome:
    makad: Score = field(default_factory=Score)
    baseline: Score = field(default_factory=Score)
    moments: list[dict[str, Any]] = field(default_factory=list)
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # makad's kind → [fired, hits]


def replay(
    history: History,
    suggest: Callable[..., Sequence[Any]] | None,
    *,
    dismiss: bool = True,
) -> Outcome:
    """Every moment of ``history`` scored for makad (when ``suggest`` is given) and the baseline."""
    naming = history.naming()
    rng = random.Random(zlib.crc32(f"dismiss:{history.seed}:{history.persona}".encode()))
    dismiss_p = persona(history.persona).dismiss_p if dismiss else 0.0
    out = Outcome()
    read: dict[str, list[behaviors.Behavior]] = {}
    dismissed: dict[str, int] = {}
    for index, session in enumerate(history.sessions):
        now = session.start
        for earlier in history.sessions[:index]:
            if earlier.id not in read and readable_at(earlier) <= now:
                read[earlier.id] = records_of(earlier)
        records = sorted(
            (r for rs in read.values() for r in rs), key=lambda r: (r.ended_at, r.session_id, r.from_seq)
        )[-MAX_RECORDS:]
        pending = [
            attention.Pending(proposal_id=p.id, title=p.title, created_at=p.created_at)
            for p in history.proposals
            if p.created_at <= now and (p.decided_at is None or p.decided_at > now)
        ]
        rejected = [
            attention.Rejected(proposal_id=p.id, title=p.title, reason=p.reason, at=p.decided_at)
            for p in history.proposals
            if p.rejected and p.decided_at is not None and p.decided_at <= now
        ]
        state = attention.derive(now, records, pending, rejected)
        moment: dict[str, Any] = {
            "persona": history.persona,
            "session": session.id,
            "now": now,
            "items": [[i.key, i.kind] for i in session.items],
        }
        base = baseline(state)
        s, hits = score_moment(base, session.items, naming, session.why_not)
        out.baseline.add(s)
        moment["baseline"] = [{"text": t, "refs": r, "hit": h} for (r, t), h in zip(base, hits, strict=True)]
        if suggest is not None:
            fired = list(suggest(now, state, records, dict(dismissed), session_id=session.id))
            pairs: Fired = [(list(f.refs), f.text) for f in fired]
            s, hits = score_moment(pairs, session.items, naming, session.why_not)
            out.makad.add(s)
            moment["makad"] = [
                {"text": f.text, "refs": list(f.refs), "kind": f.kind, "score": f.score, "hit": h}
                for f, h in zip(fired, hits, strict=True)
            ]
            for f, h in zip(fired, hits, strict=True):
                counts = out.by_kind.setdefault(f.kind, [0, 0])
                counts[0] += 1
                counts[1] += int(h)
                if not h and rng.random() < dismiss_p:
                    dismissed[f.id] = now + DISMISS_MS
        out.moments.append(moment)
    return out

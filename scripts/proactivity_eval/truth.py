"""What would genuinely help at the start of a session: the ground truth, and how a fired
suggestion is matched to it.

This definition was written down before looking at how any suggester works. It says what
a reasonable user would want to be reminded of, from the generator's hidden state (what
the user has in mind), not what a method can see in the ledger.

**Moment.** The start of each session, before its first request: the agent could say one
or more things before the user types anything. ``now`` is the session's first event's
time; everything before it (earlier sessions, proposals decided before it) is history.

**Truth items at a moment** (the set of things a suggestion would genuinely help with):

- ``thread:<id>`` of kind ``open`` — a thread of work the user started and has not
  finished, *and* has not deliberately dropped ("never mind, drop that"), *and* still
  cares about, *and* that has been idle for at least ``MIN_IDLE_MS`` (2 hours: a
  reminder of what you did an hour ago is noise), and less than ``MAX_CARE_MS`` (21
  days) in any case. Caring is hidden state: each time a thread is left open the
  generated user keeps it in mind for a while — a few days for the threads they
  silently give up on (never resumed afterwards), 10 to 21 days for the others — and
  keeps at most ``MAX_IN_MIND`` (6) open threads in mind at once (past that the least
  recently touched are given up). A reminder of a thread the user gave up is noise;
- the same ``thread:<id>`` of kind ``failing`` when the last run of its check failed and
  nothing fixed it since (a failure left standing) — same conditions; a failing thread
  is one item, not two (a suggestion about the failure or about the thread helps
  alike);
- ``proposals:waiting`` — one item for all the proposals the agent queued that the user
  has not approved or rejected yet and that have been waiting at least
  ``PROPOSAL_NUDGE_MS`` (2 days): one nudge to review them helps, one nag per proposal
  does not help more. A suggestion naming any of them names this item.

Nothing else is an item: finished threads, dropped ones, threads the user lost
interest in, rejected proposals (re-proposing them is the opposite of help), paths
touched, rhythm. A moment with no item is a **skip** moment: the helpful thing is to
say nothing.

**Matching a fired suggestion to an item.** Through its refs first: every event the
generator wrote for a thread (its requests, replies, tool calls and results, the
failing run, the "thanks" or "drop that") is owned by that thread, so a ref
``event:<session>:<seq>`` (or a range ``event:<session>:<a>-<b>``) names the threads
owning those events, and ``proposal:<id>`` names that proposal. **Text fallback**, only
when no ref of the suggestion names a thread or proposal: the suggestion names the
thread whose subject phrase or whose main path (``src/billing.py``) its text contains
(case aside), or the proposal whose title it contains.

A suggestion is a **hit** when it names an item of the moment not already credited to
an earlier suggestion of the same moment (one item, one credit). Anything else — a
thread that is done, dropped or no longer cared about, one touched less than 2 hours
ago, a second suggestion about an item already credited, a suggestion naming nothing
— is a **false fire**.

**Metrics** over (moment, item) pairs: precision = hits / suggestions fired; recall =
items hit / items; F1 their harmonic mean; **restraint** = false fires per persona-day
(the calendar days a persona's history covers). Also per moment: the share of skip
moments at which nothing fired, and the share of help moments at which something hit;
and ``threads_only``: precision, recall and F1 with the proposals item and the
suggestions naming only proposals left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from makad.core.refs import EVENT_REF

HOUR_MS = 3_600_000
DAY_MS = 86_400_000
MIN_IDLE_MS = 2 * HOUR_MS
MAX_CARE_MS = 21 * DAY_MS
PROPOSAL_NUDGE_MS = 2 * DAY_MS
MAX_RANGE = 500  # a ref range longer than this is read as its ends only


PROPOSALS_KEY = "proposals:waiting"


@dataclass(frozen=True, slots=True)
class Item:
    """One thing that would help at a moment: ``key`` is ``thread:<id>`` or
    ``proposals:waiting``; ``names`` the thread or proposal keys a suggestion may name it by."""

    key: str
    kind: str  # open | failing | proposal
    names: frozenset[str]


@dataclass(slots=True)
class Naming:
    """What the generator knows to map a suggestion back to threads and proposals."""

    owners: dict[tuple[str, int], str] = field(default_factory=dict)  # (session, seq) → thread key
    phrases: dict[str, list[str]] = field(default_factory=dict)  # key → phrases for the text fallback
    proposals: set[str] = field(default_factory=set)  # proposal keys


def named_by_refs(refs: Iterable[str], naming: Naming) -> set[str]:
    found: set[str] = set()
    for ref in refs:
        if ref.startswith("proposal:"):
            if ref in naming.proposals:
                found.add(ref)
            continue
        m = EVENT_REF.fullmatch(ref)
        if m is None:
            continue
        sid, first = m.group("session"), int(m.group("first"))
        last = int(m.group("last") or first)
        seqs = range(first, last + 1) if last - first <= MAX_RANGE else (first, last)
        for seq in seqs:
            owner = naming.owners.get((sid, seq))
            if owner is not None:
                found.add(owner)
    return found


def named_by_text(text: str, naming: Naming) -> set[str]:
    folded = text.casefold()
    return {key for key, phrases in naming.phrases.items() if any(p.casefold() in folded for p in phrases)}


def named(refs: Sequence[str], text: str, naming: Naming) -> tuple[set[str], bool]:
    """The keys a suggestion names, and whether it took the text fallback."""
    by_refs = named_by_refs(refs, naming)
    if by_refs:
        return by_refs, False
    return named_by_text(text, naming), True


@dataclass(slots=True)
class Score:
    """Counts over (moment, item) pairs, summed over moments."""

    moments: int = 0
    skip_moments: int = 0
    skip_silent: int = 0  # skip moments at which nothing fired
    help_moments: int = 0
    help_hit: int = 0  # help moments at which at least one suggestion hit
    fired: int = 0
    hits: int = 0
    items: int = 0
    items_hit: int = 0
    by_text: int = 0  # hits matched through the text fallback
    fired_proposals: int = 0  # suggestions naming proposals only
    items_by_kind: dict[str, int] = field(default_factory=dict)
    hit_by_kind: dict[str, int] = field(default_factory=dict)
    false_by_reason: dict[str, int] = field(default_factory=dict)

    def add(self, other: Score) -> None:
        for name in (
            "moments",
            "skip_moments",
            "skip_silent",
            "help_moments",
            "help_hit",
            "fired",
            "hits",
            "items",
            "items_hit",
            "by_text",
            "fired_proposals",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for mine, theirs in (
            (self.items_by_kind, other.items_by_kind),
            (self.hit_by_kind, other.hit_by_kind),
            (self.false_by_reason, other.false_by_reason),
        ):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v


def score_moment(
    fired: Sequence[tuple[Sequence[str], str]],
    items: Sequence[Item],
    naming: Naming,
    why_not: Mapping[str, str] | None = None,
) -> tuple[Score, list[bool]]:
    """Score one moment: ``fired`` is each suggestion's (refs, text) in the order shown;
    ``why_not`` says, for keys that are not items now, why (for the false-fire reasons).
    Returns the counts and, per suggestion, whether it hit."""
    s = Score(moments=1, fired=len(fired), items=len(items))
    wanted = {name: item for item in items for name in item.names}
    credited: set[str] = set()
    hits: list[bool] = []
    for item in items:
        s.items_by_kind[item.kind] = s.items_by_kind.get(item.kind, 0) + 1
    for refs, text in fired:
        keys, fallback = named(refs, text, naming)
        s.fired_proposals += int(bool(keys) and all(k.startswith("proposal:") for k in keys))
        fresh = sorted(wanted[k].key for k in keys if k in wanted and wanted[k].key not in credited)
        if fresh:
            key = fresh[0]
            credited.add(key)
            s.hits += 1
            s.by_text += int(fallback)
            kind = next(item.kind for item in items if item.key == key)
            s.hit_by_kind[kind] = s.hit_by_kind.get(kind, 0) + 1
            hits.append(True)
            continue
        hits.append(False)
        if not keys:
            reason = "names_nothing"
        elif {wanted[k].key for k in keys if k in wanted} & credited:
            reason = "duplicate"
        else:
            reasons = sorted({(why_not or {}).get(k, "not_wanted") for k in keys})
            reason = reasons[0]
        s.false_by_reason[reason] = s.false_by_reason.get(reason, 0) + 1
    s.items_hit = len(credited)
    if items:
        s.help_moments = 1
        s.help_hit = int(bool(credited))
    else:
        s.skip_moments = 1
        s.skip_silent = int(not fired)
    return s, hits


def metrics(s: Score, persona_days: int) -> dict[str, object]:
    precision = s.hits / s.fired if s.fired else (1.0 if not s.items else 0.0)
    recall = s.items_hit / s.items if s.items else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    false = s.fired - s.hits
    # The same over threads alone: proposal items and suggestions naming only proposals left out.
    t_fired = s.fired - s.fired_proposals
    t_hits = s.hits - s.hit_by_kind.get("proposal", 0)
    t_items = s.items - s.items_by_kind.get("proposal", 0)
    t_precision = t_hits / t_fired if t_fired else (1.0 if not t_items else 0.0)
    t_recall = t_hits / t_items if t_items else 1.0
    t_f1 = 2 * t_precision * t_recall / (t_precision + t_recall) if t_precision + t_recall else 0.0
    return {
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "false_fires_per_day": round(false / persona_days, 4) if persona_days else 0.0,
        "skip_silent_share": round(s.skip_silent / s.skip_moments, 4) if s.skip_moments else None,
        "help_hit_share": round(s.help_hit / s.help_moments, 4) if s.help_moments else None,
        "threads_only": {
            "precision": round(t_precision, 4),
            "recall": round(t_recall, 4),
            "f1": round(t_f1, 4),
            "fired": t_fired,
            "hits": t_hits,
            "items": t_items,
        },
        "counts": {
            "moments": s.moments,
            "help_moments": s.help_moments,
            "skip_moments": s.skip_moments,
            "fired": s.fired,
            "hits": s.hits,
            "false_fires": false,
            "items": s.items,
            "items_hit": s.items_hit,
            "hits_by_text_fallback": s.by_text,
            "items_by_kind": dict(sorted(s.items_by_kind.items())),
            "hit_by_kind": dict(sorted(s.hit_by_kind.items())),
            "false_by_reason": dict(sorted(s.false_by_reason.items())),
        },
    }

"""Proactive suggestions, with restraint: what to offer the user unasked, and when not to.

Pure: built from a workspace's attention state (``makad.core.attention``) and the behavior
records it was derived from (``makad.core.behaviors``). Every suggestion's text comes from
a line of the state — which already left out resolved threads, threads past the forgotten
horizon, sessions the user forgot and memory text the user deleted or corrected — so a
suggestion never says something the state does not; the records only add what the score
needs (the session, the outcome, the paths, what happened afterwards).

Kinds:

- ``resume_thread`` — an open thread (``Open: …``) or a request that got no reply
  (``Unanswered: …``) of an earlier session: "Resume: … (left 3 days ago)";
- ``unfixed_failure`` — a failed call no later result fixed: "Still failing since Tue: …"
  (the same call failing in several sessions is one suggestion, since the first);
- ``waiting_review`` — the proposals in PENDING.md that have waited at least
  ``REVIEW_AFTER_MS`` (2 days), as one suggestion: "3 proposals have waited 4 days for
  review: …".

**Score** (0..1) is a product of parts, each said in ``reason``:

- *prior* — how much the kind is worth offering: ``unfixed_failure`` 0.9, ``resume_thread``
  0.8, ``waiting_review`` 0.6 plus 0.1 for each further proposal past the age (at most 0.9);
- *timing* — by how long the thread has been idle: 0 under ``WARM_MS`` (1 hour: it may
  still be under way), rising from 0.5 to 1 until ``SETTLED_MS`` (6 hours), 1 until
  ``STALE_MS`` (3 days), then falling to 0.3 at ``FORGOTTEN_AFTER_MS`` (14 days), and 0 past
  it (the attention state drops it too);
- *moved on* — 0.75 for each later session (at most 6) that did real work (a tool, a path
  or more than one request) on other paths since:
  a thread left hours ago in a busy day was left for something else; one left before a
  quiet break is the one to pick up;
- *substance* (threads) — 0.5 for a single exchange with no tool and no path (a question
  answered, most likely), 1 otherwise; 0.85 when the thread is only the opening request,
  1 when the working state named it an open thread; and, for such a thread, 0.6 more when
  the request is a question ("how …", "why …", "…?"): asked and answered, most likely.

- *passed by* (failures) — 0.5 when at least ``PASSED_BY`` (2) other calls succeeded
  after it in its thread's record: the work went on, the failure did not stop it (a ``grep``
  finding nothing, a probe that was expected to fail).

A candidate scores 0 — and says why — when the current session (``session_id``) is the
one it came from, already touches its paths or is on the same thread (its records say:
the service adds records of the session's latest events); when its record ended with
the user letting it go (``dropped``: "never mind", "forget it", …) or a later record of
the same thread, naming it or taking it up again, did; when a later record fixed the
call or resolved the thread (the state may be older than the records); when it was
passed over: ``PASSED_OVER_SESSIONS`` (3) later sessions went by, none working on its
paths (the user left it without a word, and each of them started without taking it up);
or when it is too fresh, too old, or (proposals) not waiting long enough. Such a veto holds for the fact
wherever else it shows: the same thread left in another session is skipped too.

``candidates`` lists every candidate with its score, best first (the skipped ones too:
for explanation and evaluation). ``suggest`` keeps those scoring at least ``THRESHOLD``
(0.5), not dismissed (``dismissed`` maps an id to the time, ms, its dismissal lasts
until), one per session, at most ``MAX_SUGGESTIONS`` (3).

**Ids** are stable: a digest of the kind and the underlying fact — the thread's words
(``resume_thread``: the same thread left in two sessions is one suggestion), the failed
call (``unfixed_failure``), the oldest proposal waiting (``waiting_review``) — so the
same fact has the same id in every derivation and after a restart, and a dismissal holds
until the fact changes.

Bounded: the state holds at most ``MAX_LINES`` lines a section, and the records are the
bounded window the service reads; the work is O(lines × records).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from makad.core.attention import (
    ABANDONED_AFTER_MS,
    DAY_MS,
    FORGOTTEN_AFTER_MS,
    LINE_CHARS,
    MAX_LINES,
    OPEN_SECTIONS,
    AttentionLine,
    AttentionState,
    ago,
    ago_with,
    lets_go,
    same_thread,
)
from makad.core.behaviors import Behavior, FailureNote, call_key, covering_keys, naming_words
from makad.core.compaction import abbreviate
from makad.core.counted import counted
from makad.core.ownership import fact_key
from makad.core.when import utc_moment

KINDS: Final = ("resume_thread", "unfixed_failure", "waiting_review")
THRESHOLD: Final[float] = 0.5
MAX_SUGGESTIONS: Final = 3
HOUR_MS: Final = 3_600_000
WARM_MS: Final = HOUR_MS
SETTLED_MS: Final = 6 * HOUR_MS
STALE_MS: Final = 3 * DAY_MS
REVIEW_AFTER_MS: Final = ABANDONED_AFTER_MS
MOVED_ON: Final = 0.75
PASSED_BY: Final = 2
# A state line is cut at a word boundary past half its 200 characters, after a label of
# at most ~30: the first 64 characters of a thread's words survive every cut.
THREAD_KEY_CHARS: Final = 64
MAX_MOVED_ON: Final = 6
# Later sessions that went by without taking a thread or failure up, after which it is no
# longer offered (it stays in the attention state until the forgotten horizon).
PASSED_OVER_SESSIONS: Final = 3
PRIOR: Final = {"unfixed_failure": 0.9, "resume_thread": 0.8, "waiting_review": 0.6}
ID_PATTERN: Final = re.compile(r"sg_[0-9a-f]{16}")
_LINE: Final = re.compile(r"(Open|Unanswered|Failed)(?: \(idle [^)]*\))?: (.*)", re.DOTALL)
# A request that asks rather than tasks: a wh-question, or one ending in a question mark
# that is not a polite task ("can you …?", "could you …?", "please …?").
_WH: Final = re.compile(r"\s*(?:what|why|how|where|when|which|who|whose)\b", re.IGNORECASE)
_POLITE: Final = re.compile(r"\s*(?:(?:can|could|would|will) you\b|please\b|pls\b)", re.IGNORECASE)
# Reasons a candidate is skipped that hold for the fact wherever else it shows (another
# session left the same thread, the same call failed elsewhere): they win a merge.
OWN_SESSION: Final = "the current session is the one it came from"
SAME_PATHS: Final = "the current session already touches its paths"
SAME_THREAD: Final = "the current session is on the same thread"
DROPPED: Final = "the user let it go (dropped)"
VETOES: Final = frozenset({OWN_SESSION, SAME_PATHS, SAME_THREAD, DROPPED})
_WEEKDAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# A thread whose words open with "Resume" ("Resume the retry logic"): said once, not
# "Resume: Resume …".
_SAYS_RESUME: Final = re.compile(r"resume\b[\s:,]*(?=\S)", re.IGNORECASE)


class Suggestion(msgspec.Struct, kw_only=True, rename="camel"):
    """One thing worth offering the user, with its score and why."""

    id: str
    kind: str
    text: str
    score: float
    reason: str
    refs: list[str]


def suggestion_id(kind: str, anchor: str) -> str:
    """The stable id of a fact: ``sg_`` and 16 hex digits."""
    digest = hashlib.sha256(f"{kind}\x00{anchor}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"sg_{digest[:16]}"


def valid_id(text: str) -> bool:
    return ID_PATTERN.fullmatch(text) is not None


def session_of(refs: Sequence[str]) -> str | None:
    """The session an ``event:`` ref among ``refs`` names (the first), if any."""
    for ref in refs:
        if ref.startswith("event:"):
            return ref[len("event:") :].rsplit(":", 1)[0]
    return None


def timing(idle: int) -> float:
    """The timing part of the score for something idle ``idle`` ms (see module doc)."""
    if idle < WARM_MS or idle >= FORGOTTEN_AFTER_MS:
        return 0.0
    if idle < SETTLED_MS:
        return 0.5 + 0.5 * (idle - WARM_MS) / (SETTLED_MS - WARM_MS)
    if idle <= STALE_MS:
        return 1.0
    return 1.0 - 0.7 * (idle - STALE_MS) / (FORGOTTEN_AFTER_MS - STALE_MS)


def _since(now: int, at: int) -> str:
    """When something began, by the UTC calendar: the time on the day of ``now``, the
    weekday within the six days before it, else the date — never a clock time or a weekday
    that reads as today for an earlier day."""
    moment = utc_moment(at)
    days = (utc_moment(now).date() - moment.date()).days
    if days <= 0:
        return f"{moment:%H:%M} UTC"
    if days < 7:
        return _WEEKDAYS[moment.weekday()]
    return f"{moment:%Y-%m-%d}"


def _one_line(text: str, chars: int = LINE_CHARS) -> str:
    return abbreviate(" ".join(text.split()), chars)


class _Seen(msgspec.Struct, kw_only=True):
    """What the records say about one state line."""

    record: Behavior | None
    session: str | None
    paths: set[str]


def _record_for(line: AttentionLine, by_ref: Mapping[str, Behavior]) -> Behavior | None:
    for ref in line.refs:
        if ref in by_ref:
            return by_ref[ref]
    return None


def _later(records: Sequence[Behavior], at: int, session_id: str | None) -> list[Behavior]:
    return [r for r in records if r.started_at > at and r.session_id != session_id]


def _moved_on(later: Sequence[Behavior], paths: set[str], own: str | None) -> int:
    """How many later sessions (not ``own``, the one it was left in) did real work (a tool,
    a path or more than one request) on other paths (none of ``paths``)."""
    sessions = {
        r.session_id
        for r in later
        if r.session_id != own and (r.tools or r.paths or r.turns > 1) and not (paths & set(r.paths))
    }
    return min(len(sessions), MAX_MOVED_ON)


def _passed_over(later: Sequence[Behavior], paths: set[str], own: str | None) -> int:
    """How many later sessions (not ``own``, the one it was left in) went by without
    working on any of ``paths``."""
    return len({r.session_id for r in later if r.session_id != own and not (paths & set(r.paths))})


def _resolved(later: Sequence[Behavior], seen: _Seen) -> bool:
    thread_seq = seen.record.thread_seq if seen.record is not None else 0
    for r in later:
        if r.outcome != "done":
            continue
        if same_thread(r, seen.session or "", thread_seq) or seen.paths & set(r.paths):
            return True
    return False


def thread_key(text: str) -> str:
    """What a thread is known by: the start of its words (``THREAD_KEY_CHARS`` of its
    ``fact_key``), the same however a line cut it (a longer label, an ellipsis)."""
    return fact_key(text.rstrip().removesuffix("…"))[:THREAD_KEY_CHARS]


def _question(request: str) -> bool:
    if _WH.match(request):
        return True
    return request.rstrip().endswith("?") and not _POLITE.match(request)


def _proposal_title(text: str) -> str | None:
    """The title in a "Waiting on the user" line (``Proposal "…" waiting … for review``)."""
    head, tail = 'Proposal "', '" waiting '
    if not (text.startswith(head) and text.endswith(" for review")):
        return None
    end = text.rfind(tail)
    return text[len(head) : end] if end >= len(head) else None


class _Current(msgspec.Struct):
    """What the asking session is doing, from its records: the paths it touches, the
    threads and requests it is on (as ``thread_key``)."""

    paths: set[str]
    threads: set[str]


def _current(records: Sequence[Behavior], session_id: str | None) -> _Current:
    mine = [r for r in records if session_id is not None and r.session_id == session_id]
    return _Current(
        paths={p for r in mine for p in r.paths},
        threads={thread_key(t) for r in mine for t in (r.thread, r.intent) if t},
    )


class _Part(msgspec.Struct):
    """One factor of a score and how it reads."""

    factor: float
    words: str


def _score(parts: Sequence[_Part]) -> tuple[float, str]:
    score = 1.0
    for part in parts:
        score *= part.factor
    score = round(min(max(score, 0.0), 1.0), 4)
    return score, "; ".join(f"{p.words} ×{p.factor:.2f}" for p in parts)


def _last_fix(records: Sequence[Behavior], failed_in: Behavior, failure: FailureNote) -> str:
    """The ref of the latest success of ``failure``'s call (or of a wider run of it) before
    it failed — before its record ended, or earlier in that record — or "" when none of
    ``records`` holds one."""
    covering = covering_keys(call_key(failure.tool, failure.call))
    best: tuple[int, int, str] = (0, 0, "")
    for record in records:
        same = record.session_id == failed_in.session_id and record.from_seq == failed_in.from_seq
        if record.ended_at > failed_in.ended_at or (record.ended_at == failed_in.ended_at and not same):
            continue
        for fix in record.fixes:
            if same and fix.seq > failure.seq:
                continue
            if call_key(fix.tool, fix.call) in covering:
                best = max(best, (record.ended_at, fix.seq, f"event:{record.session_id}:{fix.seq}"))
    return best[2]


def _skip(kind: str, anchor: str, text: str, refs: list[str], why: str) -> Suggestion:
    return Suggestion(id=suggestion_id(kind, anchor), kind=kind, text=text, score=0.0, reason=why, refs=refs)


def _thread_candidate(
    now: int,
    section: str,
    line: AttentionLine,
    seen: _Seen,
    records: Sequence[Behavior],
    session_id: str | None,
    current: _Current,
) -> Suggestion | None:
    match = _LINE.fullmatch(line.text) if section in OPEN_SECTIONS else None
    if match is None:
        return None
    label, fact = match.group(1), match.group(2).strip()
    record = seen.record
    refs = list(line.refs)
    idle = max(now - line.at, 0)
    if label == "Failed":
        kind = "unfixed_failure"
        failure = None
        if record is not None:
            seqs = {ref.rsplit(":", 1)[-1] for ref in line.refs}
            failure = next((f for f in record.failures if str(f.seq) in seqs), None)
        anchor = call_key(failure.tool, failure.call) if failure is not None else fact_key(fact)
        if failure is not None and record is not None:
            fixed = _last_fix(records, record, failure)
            if fixed:  # failing again after a fix: a fact of its own, not hidden by an older dismissal
                anchor = f"{anchor}\x00fixed:{fixed}"
        text = _one_line(f"Still failing since {_since(now, line.at)}: {fact}")
    else:
        kind = "resume_thread"
        failure = None
        anchor = thread_key(fact)
        head = f"Resume{' (unanswered)' if label == 'Unanswered' else ''}: "
        tail = f" (left {ago(now, line.at)} ago)"  # the thread's words are cut, never the age
        resume = _SAYS_RESUME.match(fact)
        said = fact[resume.end() :] if resume is not None else fact
        text = f"{head}{_one_line(said, LINE_CHARS - len(head) - len(tail))}{tail}"
    if seen.session is not None and seen.session == session_id:
        return _skip(kind, anchor, text, refs, OWN_SESSION)
    if seen.paths & current.paths:
        return _skip(kind, anchor, text, refs, SAME_PATHS)
    if kind == "resume_thread" and thread_key(fact) in current.threads:
        return _skip(kind, anchor, text, refs, SAME_THREAD)
    if record is not None and record.outcome == "dropped":
        return _skip(kind, anchor, text, refs, DROPPED)
    later = _later(records, line.at, session_id)
    words = naming_words(f"{fact} {record.intent}" if record is not None else fact)
    if kind == "resume_thread" and any(
        r.outcome == "dropped"
        and (
            thread_key(fact) in (thread_key(r.thread), thread_key(r.intent))
            or lets_go(words, seen.session or "", line.at, r, record.thread_seq if record else 0, seen.paths)
        )
        for r in later
    ):
        return _skip(kind, anchor, text, refs, DROPPED)
    if failure is not None:
        covering = covering_keys(call_key(failure.tool, failure.call))
        if any(call_key(f.tool, f.call) in covering for r in later for f in r.fixes):
            return _skip(kind, anchor, text, refs, "a later result of the same call fixed it")
    if _resolved(later, seen):
        return _skip(kind, anchor, text, refs, "a later session that ended done resolved it")
    if idle < WARM_MS:
        why = f"idle {ago_with('only', now, line.at)}: it may still be under way"
        return _skip(kind, anchor, text, refs, why)
    passed_over = _passed_over(later, seen.paths, seen.session)
    if passed_over >= PASSED_OVER_SESSIONS:
        why = f"passed over: {passed_over} later sessions went by without it"
        return _skip(kind, anchor, text, refs, why)
    if idle >= FORGOTTEN_AFTER_MS:
        return _skip(kind, anchor, text, refs, f"idle {ago(now, line.at)}: past the forgotten horizon")
    parts = [
        _Part(PRIOR[kind], "unfixed failure" if failure is not None or label == "Failed" else "open thread"),
        _Part(timing(idle), f"idle {ago(now, line.at)}"),
    ]
    if failure is not None and record is not None:
        past = sum(1 for f in record.fixes if f.seq > failure.seq)
        if past >= PASSED_BY:
            parts.append(_Part(0.5, f"the work went on past it ({past} successful calls after)"))
    moved = _moved_on(later, seen.paths, seen.session)
    if moved:
        parts.append(_Part(MOVED_ON**moved, f"{counted(moved, 'later session')} on other work"))
    if kind == "resume_thread" and record is not None:
        if record.turns <= 1 and not record.tools and not record.paths:
            parts.append(_Part(0.5, "a single exchange, no tools or paths"))
        if label == "Open" and record.thread == record.intent:
            parts.append(_Part(0.85, "only the opening request says it"))
            if _question(record.intent):
                parts.append(_Part(0.6, "a question, most likely answered"))
    score, reason = _score(parts)
    return Suggestion(
        id=suggestion_id(kind, anchor), kind=kind, text=text, score=score, reason=reason, refs=refs
    )


def _review_candidate(now: int, lines: Sequence[AttentionLine]) -> Suggestion | None:
    waiting = sorted(
        (line for line in lines if _proposal_title(line.text) is not None), key=lambda line: line.at
    )
    if not waiting:
        return None
    due = [line for line in waiting if now - line.at >= REVIEW_AFTER_MS]
    shown = due or waiting
    oldest = shown[0]
    titles = ", ".join(f'"{_proposal_title(line.text)}"' for line in shown)
    refs = [ref for line in shown for ref in line.refs]
    anchor = next((r for r in oldest.refs if r.startswith("proposal:")), fact_key(oldest.text))
    if len(shown) == 1:
        text = f"Proposal {titles} has waited {ago(now, oldest.at)} for review"
    else:  # the state lists the oldest MAX_LINES: more may be due only when all of them are
        count = f"At least {len(shown)}" if len(shown) >= MAX_LINES else str(len(shown))
        text = f"{count} proposals have waited {ago_with('up to', now, oldest.at)} for review: {titles}"
    text = _one_line(text)
    if not due:
        return _skip(
            "waiting_review",
            anchor,
            text,
            refs,
            f"the oldest has waited {ago_with('only', now, oldest.at)} "
            f"(fires after {ago(REVIEW_AFTER_MS, 0)})",
        )
    prior = min(PRIOR["waiting_review"] + 0.1 * (len(due) - 1), 0.9)
    score, reason = _score(
        [_Part(prior, f"{counted(len(due), 'proposal')} waiting past {ago(REVIEW_AFTER_MS, 0)}")]
    )
    return Suggestion(
        id=suggestion_id("waiting_review", anchor),
        kind="waiting_review",
        text=text,
        score=score,
        reason=reason,
        refs=refs,
    )


def _wins(one: Suggestion, other: Suggestion) -> bool:
    """Of two candidates for one fact, whether ``one`` is kept: a veto first, then the score."""
    return (one.reason in VETOES, one.score) > (other.reason in VETOES, other.score)


def _failed_at(record: Behavior, ref: str) -> int:
    """When the failure ``ref`` cites happened: its result's time, never after its record
    ended (a clock running ahead is read as the record is), else the record's end."""
    seq = ref.rsplit(":", 1)[-1]
    for failure in record.failures:
        if str(failure.seq) == seq and failure.at:
            return min(failure.at, record.ended_at)
    return record.ended_at


def candidates(
    now: int, state: AttentionState, records: Sequence[Behavior], *, session_id: str | None = None
) -> list[Suggestion]:
    """Every candidate with its score, best first — the skipped ones too (score 0, the
    reason saying why): see module doc."""
    by_ref: dict[str, Behavior] = {}
    for record in records:
        for ref in record.refs:
            by_ref.setdefault(ref, record)
    current = _current(records, session_id)

    found: dict[str, Suggestion] = {}
    first_failed: dict[str, int] = {}
    for section, line in state.lines():
        source = _record_for(line, by_ref)
        seen = _Seen(
            record=source,
            session=source.session_id if source is not None else session_of(line.refs),
            paths=set(source.paths) if source is not None else set(),
        )
        candidate = _thread_candidate(now, section, line, seen, records, session_id, current)
        if candidate is None:
            continue
        earlier = found.get(candidate.id)
        if earlier is not None:  # the same fact from another session: one suggestion
            keep, other = (candidate, earlier) if _wins(candidate, earlier) else (earlier, candidate)
            keep.refs = list(dict.fromkeys([*keep.refs, *other.refs]))
            candidate = keep
        if candidate.kind == "unfixed_failure":  # since the earliest failure its refs cite
            cited = [_failed_at(by_ref[ref], ref) for ref in line.refs if ref in by_ref]
            since = min(first_failed.get(candidate.id, line.at), line.at, *cited)
            first_failed[candidate.id] = since
            fact = candidate.text.split(": ", 1)[1]
            candidate.text = _one_line(f"Still failing since {_since(now, since)}: {fact}")
        found[candidate.id] = candidate
    waiting = [line for name, line in state.lines() if name == "Waiting on the user"]
    review = _review_candidate(now, waiting)
    if review is not None:
        found[review.id] = review
    return sorted(found.values(), key=lambda s: (-s.score, s.kind, s.id))


def suggest(
    now: int,
    state: AttentionState,
    records: Sequence[Behavior],
    dismissed: Mapping[str, int] | None = None,
    *,
    session_id: str | None = None,
) -> list[Suggestion]:
    """What to offer now: candidates scoring at least ``THRESHOLD``, not dismissed (until a
    later time than ``now``), one per session, at most ``MAX_SUGGESTIONS``."""
    return pick(now, candidates(now, state, records, session_id=session_id), dismissed)


def pick(
    now: int, found: Sequence[Suggestion], dismissed: Mapping[str, int] | None = None
) -> list[Suggestion]:
    """``suggest``'s choice among ``found`` (``candidates``' answer, best first)."""
    return _choose(now, found, dismissed)[0]


def explained(
    now: int, found: Sequence[Suggestion], dismissed: Mapping[str, int] | None = None
) -> list[Suggestion]:
    """``found`` with the reason why each one scoring at least ``THRESHOLD`` that ``pick``
    leaves out is not offered (dismissed, another of its session offered, the cap)."""
    held = _choose(now, found, dismissed)[1]
    return [
        msgspec.structs.replace(c, reason=f"{c.reason}; not offered: {held[c.id]}") if c.id in held else c
        for c in found
    ]


def _choose(
    now: int, found: Sequence[Suggestion], dismissed: Mapping[str, int] | None
) -> tuple[list[Suggestion], dict[str, str]]:
    """The suggestions offered, and why each other one over the threshold is not."""
    dismissed = dismissed or {}
    out: list[Suggestion] = []
    held: dict[str, str] = {}
    offered_in: dict[str, str] = {}
    for candidate in found:
        if candidate.score < THRESHOLD:
            break
        until = dismissed.get(candidate.id, 0)
        if until > now:
            held[candidate.id] = f"dismissed until {utc_moment(until):%Y-%m-%d %H:%M} UTC"
            continue
        if len(out) >= MAX_SUGGESTIONS:
            held[candidate.id] = f"{MAX_SUGGESTIONS} better ones are offered"
            continue
        session = session_of(candidate.refs)
        if session is not None and session in offered_in:
            held[candidate.id] = f"{offered_in[session]} from the same session is (one per session)"
            continue
        if session is not None:
            offered_in[session] = candidate.id
        out.append(candidate)
    return out, held

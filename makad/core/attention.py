"""The attention state of a workspace: what the user is in the middle of, derived.

Pure: ``derive`` takes the bounded inputs the service reads (the latest behavior
records, ``makad.core.behaviors``; the proposals waiting in PENDING.md; recent
rejections; digests of memory text the user deleted or corrected) and gives six
sections, each line with its refs, each fact in one section only:

- **Active threads**: the open work of the last ``ABANDONED_AFTER_MS`` (2 days): each
  thread's latest record (a session's threads: ``Behavior.thread_seq``) that did not end
  ``done`` or ``dropped`` (its open thread: the working state's, else the request), and
  each failed call no later record fixed;
- **Recently abandoned**: the same, idle for 2 to ``FORGOTTEN_AFTER_MS`` (14) days;
- **Currently focused**: the paths touched most in the last day before the newest record;
- **Waiting on the user**: proposals pending in PENDING.md, oldest first, with their age;
- **Do not re-propose**: proposals the user rejected in the last ``COOLDOWN_MS`` (14
  days), with the reason;
- **Rhythm**: on which weekdays and at which hours (UTC) the workspace is worked on.

A failed call is one line, its latest failure's, citing the earlier ones too (at most
``MAX_REFS`` refs in all). A thread is resolved — and leaves the open sections — when a
later record of the same thread ends ``done`` (not another thread of its session: a
"thanks" for other work), when a later record of any session that ends ``done``
touched one of its paths, and (a failure) when a later successful result of the same
call fixed it. An open thread is also let go when a later record of the same thread,
one with a request naming it, or one that took it up again (one of its paths and a
request naming it) ends ``dropped`` (``DROP_SHARED_WORDS`` of its words; the
failures stay listed), and it is listed once: when a later segment of another session
took it up again (one of its paths, and a request naming it) and left the work open or
failing again, that later segment's line tells it.
A line whose text repeats memory text the user deleted or corrected
(``retracted_digests``) is left out, whatever section it was meant for.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from typing import Final

import msgspec

from makad.core.behaviors import SHARED_WORDS, Behavior, call_key, covering_keys, naming_words
from makad.core.compaction import abbreviate
from makad.core.counted import counted
from makad.core.ownership import fact_key
from makad.core.types import UnixMs
from makad.core.when import utc_moment

SECTIONS: Final = (
    "Active threads",
    "Recently abandoned",
    "Currently focused",
    "Waiting on the user",
    "Do not re-propose",
    "Rhythm",
)
# Sections whose lines are work left open (a resolved thread leaves them).
OPEN_SECTIONS: Final = ("Active threads", "Recently abandoned")
DAY_MS: Final = 86_400_000
ABANDONED_AFTER_MS: Final = 2 * DAY_MS
FORGOTTEN_AFTER_MS: Final = 14 * DAY_MS
FOCUS_WINDOW_MS: Final = DAY_MS
COOLDOWN_MS: Final = 14 * DAY_MS
MAX_LINES: Final = 8  # per section
LINE_CHARS: Final = 200
MAX_REFS: Final = 3
SHINGLE_WORDS: Final = 5
_WORD: Final = re.compile(r"\w+")
# A later request that lets work go names an open thread when they share this many words
# (``naming_words``): "never mind the parser split" names "split the parser in …".
DROP_SHARED_WORDS: Final = SHARED_WORDS
_WEEKDAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


class AttentionLine(msgspec.Struct, kw_only=True, rename="camel"):
    """One fact: its text, the refs it came from, and when it last changed (ms)."""

    text: str
    refs: list[str]
    at: UnixMs = 0


class AttentionSection(msgspec.Struct, kw_only=True, rename="camel"):
    name: str
    lines: list[AttentionLine]


class AttentionState(msgspec.Struct, kw_only=True, rename="camel"):
    """A workspace's attention state: its sections in ``SECTIONS`` order (empty ones too)."""

    computed_at: int
    sections: list[AttentionSection]
    # The newest behavior record it was derived from (its row id; 0: none).
    records_upto: int = 0

    def lines(self) -> list[tuple[str, AttentionLine]]:
        return [(section.name, line) for section in self.sections for line in section.lines]


WAITING = "Waiting on the user"
PROPOSAL_REF = "proposal:"


def without_settled(state: AttentionState, open_ids: frozenset[str] | set[str]) -> AttentionState:
    """``state`` without the "Waiting on the user" lines of proposals no longer open (approved,
    rejected or deleted since it was derived: the keeper derives again a moment later, and
    until then a pack must not say a settled proposal still waits)."""

    def waits(line: AttentionLine) -> bool:
        return any(r.startswith(PROPOSAL_REF) and r[len(PROPOSAL_REF) :] in open_ids for r in line.refs)

    if not any(s.name == WAITING and not all(waits(x) for x in s.lines) for s in state.sections):
        return state
    sections = [
        AttentionSection(name=s.name, lines=[x for x in s.lines if waits(x)]) if s.name == WAITING else s
        for s in state.sections
    ]
    return msgspec.structs.replace(state, sections=sections)


class Pending(msgspec.Struct, kw_only=True):
    proposal_id: str
    title: str
    created_at: int


class Rejected(msgspec.Struct, kw_only=True):
    proposal_id: str
    title: str
    reason: str
    at: int


# What ``ago`` says for a time under an hour: a bound already, so no "up to" or "only" before it.
UNDER_AN_HOUR: Final = "less than an hour"


def ago(now: int, at: int) -> str:
    """The time from ``at`` to ``now`` in words: "3 days", "1 hour", "less than an hour"."""
    days = max(now - at, 0) // DAY_MS
    if days >= 1:
        return counted(days, "day")
    hours = max(now - at, 0) // 3_600_000
    return counted(hours, "hour") if hours >= 1 else UNDER_AN_HOUR


def ago_with(word: str, now: int, at: int) -> str:
    """``ago`` after a qualifier such as "up to" or "only" ("up to 4 days"); alone when it is
    "less than an hour", which "up to less than an hour" would only garble."""
    span = ago(now, at)
    return span if span == UNDER_AN_HOUR else f"{word} {span}"


# ---------------------------------------------------------------- retraction ---


def _digest(words: Sequence[str]) -> str:
    return hashlib.sha256(" ".join(words).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def text_digests(text: str) -> set[str]:
    """Digests of a text's runs of ``SHINGLE_WORDS`` words (the whole text when shorter):
    what is kept of deleted memory text, so it can be recognised without being kept."""
    words = _WORD.findall(fact_key(text))
    if not words:
        return set()
    if len(words) <= SHINGLE_WORDS:
        return {_digest(words)}
    return {_digest(words[i : i + SHINGLE_WORDS]) for i in range(len(words) - SHINGLE_WORDS + 1)}


def retracted_digests(old: str, new: str = "") -> set[str]:
    """What a deletion (``new`` empty) or a correction retracts: the old text's digests
    the new text does not have."""
    return text_digests(old) - text_digests(new)


def repeats_retracted(text: str, retracted: frozenset[str] | set[str]) -> bool:
    """Whether ``text`` says something the user deleted or corrected away."""
    if not retracted:
        return False
    words = _WORD.findall(fact_key(text))
    if not words:
        return False
    if _digest(words) in retracted:
        return True
    return any(
        _digest(words[i : i + SHINGLE_WORDS]) in retracted for i in range(len(words) - SHINGLE_WORDS + 1)
    )


# -------------------------------------------------------------------- derive ---


class _Thread(msgspec.Struct, kw_only=True):
    text: str
    refs: list[str]
    at: int
    paths: set[str]
    session_id: str
    open: bool = False  # an Open/Unanswered thread (else a failure)
    thread_seq: int = 0  # which of its session's threads (0: the session's only one)
    words: frozenset[str] = frozenset()  # the words a later request names it by


def same_thread(record: Behavior, session_id: str, thread_seq: int) -> bool:
    """Whether ``record`` is of the thread ``thread_seq`` of session ``session_id`` (records
    written before threads were told apart: of the session)."""
    if record.session_id != session_id:
        return False
    return not record.thread_seq or not thread_seq or record.thread_seq == thread_seq


def lets_go(
    words: frozenset[str],
    session_id: str,
    at: int,
    record: Behavior,
    thread_seq: int = 0,
    paths: Collection[str] = (),
) -> bool:
    """Whether ``record`` let go of an open thread (its naming ``words``, session, time,
    thread, paths): it ended ``dropped`` later, on the same thread, with a request naming
    it, or after taking it up again (back on one of its ``paths`` with a request naming it:
    "Back to the parser refactor" … "never mind, drop that"). Not by its paths alone: a
    thread touching several paths drops only the work its requests name."""
    if record.outcome != "dropped" or record.ended_at < at:
        return False
    if same_thread(record, session_id, thread_seq):
        return True
    if len(words & naming_words(record.let_go)) >= DROP_SHARED_WORDS:
        return True
    return (
        bool(set(paths) & set(record.paths)) and len(words & naming_words(record.intent)) >= DROP_SHARED_WORDS
    )


def _resolved_by_later(thread: _Thread, record: Behavior) -> bool:
    if record.ended_at < thread.at or record.outcome != "done":
        return False
    if same_thread(record, thread.session_id, thread.thread_seq):
        return True
    return bool(thread.paths & set(record.paths))


def _taken_up_again(thread: _Thread, record: Behavior) -> bool:
    """Whether ``record``, a later segment of another session, took the open thread up
    again — went back to its paths with a request naming it (``DROP_SHARED_WORDS`` of its
    words) — and left the work open or failing again: its own line tells it now."""
    return (
        thread.open
        and record.session_id != thread.session_id
        and record.ended_at >= thread.at
        and record.outcome in ("open", "abandoned", "errors")
        and bool(thread.paths & set(record.paths))
        and len(thread.words & naming_words(f"{record.thread} {record.intent}")) >= DROP_SHARED_WORDS
    )


def _latest_of_thread(latest: dict[tuple[str, int], int], record: Behavior, index: int) -> bool:
    """Whether the ``index``-th record is its thread's latest (a record written before
    threads were told apart is of its session's only thread, and one after it tells it)."""
    if record.thread_seq:
        return (
            latest[(record.session_id, record.thread_seq)] == index
            and latest.get((record.session_id, 0), -1) < index
        )
    return max(i for (sid, _), i in latest.items() if sid == record.session_id) == index


def _threads(records: Sequence[Behavior]) -> list[_Thread]:
    """Open threads and unfixed failures no later record resolved, newest first."""
    ordered = sorted(records, key=lambda r: (r.ended_at, r.session_id, r.from_seq))
    latest: dict[tuple[str, int], int] = {}  # a thread's latest record
    for index, record in enumerate(ordered):
        latest[(record.session_id, record.thread_seq)] = index
    # fixed_after[i] / failed_after[i]: the calls a record after the i-th fixed / failed.
    fixed_after: list[set[str]] = [set() for _ in ordered]
    failed_after: list[set[str]] = [set() for _ in ordered]
    running: set[str] = set()
    failing: set[str] = set()
    for index in range(len(ordered) - 1, -1, -1):
        fixed_after[index] = set(running)
        failed_after[index] = set(failing)
        running |= {call_key(f.tool, f.call) for f in ordered[index].fixes}
        failing |= {call_key(f.tool, f.call) for f in ordered[index].failures}
    # The refs of a call's earlier failures, carried by its latest (one line a call).
    earlier: dict[str, list[str]] = {}
    done = [(i, r) for i, r in enumerate(ordered) if r.outcome == "done"]
    dropped = [(i, r) for i, r in enumerate(ordered) if r.outcome == "dropped"]
    left = [(i, r) for i, r in enumerate(ordered) if r.outcome in ("open", "abandoned", "errors")]
    found: list[_Thread] = []
    for index, record in enumerate(ordered):
        paths = set(record.paths)
        mine: list[_Thread] = []
        for failure in record.failures:
            key = call_key(failure.tool, failure.call)
            if fixed_after[index] & covering_keys(key):
                continue
            ref = f"event:{record.session_id}:{failure.seq}"
            if key in failed_after[index]:  # it failed again later: that line tells it
                earlier.setdefault(key, []).insert(0, ref)
                continue
            call = f" {failure.call}" if failure.call else ""
            mine.append(
                _Thread(
                    text=f"Failed: {failure.tool}{call}: {failure.text}",
                    refs=list(dict.fromkeys([ref, *earlier.get(key, [])]))[:MAX_REFS],
                    at=record.ended_at,
                    paths=paths,
                    session_id=record.session_id,
                    thread_seq=record.thread_seq,
                )
            )
        last = _latest_of_thread(latest, record, index)
        if last and record.outcome not in ("done", "dropped") and record.thread:
            label = "Unanswered" if record.outcome == "abandoned" else "Open"
            mine.append(
                _Thread(
                    text=f"{label}: {record.thread}",
                    refs=record.refs[:MAX_REFS],
                    at=record.ended_at,
                    paths=paths,
                    session_id=record.session_id,
                    open=True,
                    thread_seq=record.thread_seq,
                    words=naming_words(f"{record.thread} {record.intent}"),
                )
            )
        found.extend(
            t
            for t in mine
            if not any(j > index and _resolved_by_later(t, r) for j, r in done)
            and not (
                t.open
                and any(
                    j > index and lets_go(t.words, t.session_id, t.at, r, t.thread_seq, t.paths)
                    for j, r in dropped
                )
            )
            and not any(j > index and _taken_up_again(t, r) for j, r in left)
        )
    found.sort(key=lambda t: -t.at)
    return found


def _focus(records: Sequence[Behavior], newest: int) -> list[AttentionLine]:
    counts: Counter[str] = Counter()
    refs: dict[str, list[str]] = {}
    at: dict[str, int] = {}
    for record in records:
        if record.ended_at < newest - FOCUS_WINDOW_MS:
            continue
        for path, count in record.paths.items():
            counts[path] += count
            refs.setdefault(path, []).append(record.refs[-1])
            at[path] = max(at.get(path, 0), record.ended_at)
    return [
        AttentionLine(text=f"{path} (touched {count}×)", refs=refs[path][-MAX_REFS:], at=at[path])
        for path, count in counts.most_common(MAX_LINES)
    ]


def _rhythm(records: Sequence[Behavior], now: int) -> list[AttentionLine]:
    if not records:
        return []
    days: Counter[int] = Counter()
    hours: Counter[int] = Counter()
    sessions: set[str] = set()
    for record in records:
        moment = utc_moment(record.started_at)
        days[moment.weekday()] += 1
        hours[moment.hour] += 1
        sessions.add(record.session_id)
    top_days = sorted(d for d, _ in days.most_common(3))
    top_hours = sorted(h for h, _ in hours.most_common(3))
    newest = max(records, key=lambda r: r.ended_at)
    text = (
        f"Worked mostly on {', '.join(_WEEKDAYS[d] for d in top_days)}, around "
        f"{', '.join(f'{h:02d}:00' for h in top_hours)} UTC; {counted(len(sessions), 'session')} in the "
        f"records, the last {ago(now, newest.ended_at)} ago"
    )
    return [AttentionLine(text=text, refs=[newest.refs[-1]], at=newest.ended_at)]


def derive(
    now: int,
    records: Sequence[Behavior],
    pending: Iterable[Pending] = (),
    rejected: Iterable[Rejected] = (),
    retracted: frozenset[str] | set[str] = frozenset(),
) -> AttentionState:
    """The attention state (see module doc)."""
    sections: dict[str, list[AttentionLine]] = {name: [] for name in SECTIONS}
    for thread in _threads(records):
        idle = now - thread.at
        if idle >= FORGOTTEN_AFTER_MS:
            continue
        name = "Recently abandoned" if idle >= ABANDONED_AFTER_MS else "Active threads"
        if name == "Recently abandoned":  # the age goes with the label, the fact stays whole
            label, fact = thread.text.split(": ", 1)
            text = f"{label} (idle {ago(now, thread.at)}): {fact}"
        else:
            text = thread.text
        sections[name].append(AttentionLine(text=text, refs=thread.refs, at=thread.at))
    newest = max((r.ended_at for r in records), default=0)
    sections["Currently focused"] = _focus(records, newest)
    for item in sorted(pending, key=lambda p: (p.created_at, p.proposal_id)):
        sections[WAITING].append(
            AttentionLine(
                text=f'Proposal "{item.title}" waiting {ago(now, item.created_at)} for review',
                refs=[f"proposal:{item.proposal_id}"],
                at=item.created_at,
            )
        )
    for gone in sorted(rejected, key=lambda r: -r.at):
        if now - gone.at >= COOLDOWN_MS:
            continue
        reason = f": {gone.reason}" if gone.reason else ""
        title = f'"{gone.title}"' if gone.title else f"proposal {gone.proposal_id}"
        sections["Do not re-propose"].append(
            AttentionLine(
                text=f"{title} rejected {ago(now, gone.at)} ago{reason}",
                refs=[f"proposal:{gone.proposal_id}"],
                at=gone.at,
            )
        )
    sections["Rhythm"] = _rhythm(records, now)
    out: list[AttentionSection] = []
    seen: set[str] = set()
    for name in SECTIONS:
        kept: list[AttentionLine] = []
        for line in sections[name]:
            line.text = abbreviate(" ".join(line.text.split()), LINE_CHARS)
            key = fact_key(line.text)
            if key in seen or repeats_retracted(line.text, retracted):
                continue
            seen.add(key)
            kept.append(line)
            if len(kept) >= MAX_LINES:
                break
        out.append(AttentionSection(name=name, lines=kept))
    return AttentionState(computed_at=now, sections=out)


def without_sessions(
    state: AttentionState, gone: set[str], retracted: frozenset[str] = frozenset()
) -> AttentionState:
    """``state`` without the lines citing a session in ``gone`` (forgotten meanwhile) or
    repeating text retracted meanwhile."""
    if not gone and not retracted:
        return state

    def cites(line: AttentionLine) -> bool:
        if repeats_retracted(line.text, retracted):
            return True
        return any(ref.startswith("event:") and ref.split(":")[1] in gone for ref in line.refs)

    return AttentionState(
        computed_at=state.computed_at,
        records_upto=state.records_upto,
        sections=[
            AttentionSection(name=s.name, lines=[line for line in s.lines if not cites(line)])
            for s in state.sections
        ],
    )


def render_lines(section: str, lines: Sequence[AttentionLine]) -> str:
    """A section as the pack shows it: a heading, then one line a fact with its refs."""
    body = [f"- {line.text} ({', '.join(line.refs)})" if line.refs else f"- {line.text}" for line in lines]
    return "\n".join([f"### {section}", *body])

"""Seeded histories of coding workspaces: personas, threads of work, the events they leave.

A persona works in one workspace for ``days`` (30) days. Each active day has sessions
at the persona's hours; each session works on one or more **threads** (a bug, a feature,
a refactor, each with a subject, a main path and a check — a test command). Working on a
thread writes real event sequences: the user's request (new or resumed), the
assistant's replies, tool calls and their results (reads and edits naming paths, test
runs that fail — exit code or error text — and pass), then how the block ends:

- **finished**: the check passes (the same command; sometimes a different, wider one)
  and the user says so ("thanks, that works", "lgtm", "nice, that's sorted", …);
- **fixed but still open**: the failure is fixed, the work is not finished;
- **left failing**: the last run of the check failed;
- **left open**: a reply, nothing said about being done;
- **dropped**: the user says to drop it ("never mind, drop that", "let's scrap it", …);
- **cut off**: the session's last request got no reply.

Hidden state the ledger never sees: whether the user still cares about a thread left
open (some are silently given up after a few days and never resumed), which threads are
dropped, proposals (queued by the agent; approved or rejected days later, or not at
all). ``truth.py`` turns that state into what would help at the start of each session;
the generator records it on the session (``Session.items``, ``Session.why_not``).

Wording comes from templates × vocabulary, all drawn from one ``random.Random`` seeded
by (seed, persona): the same seed gives the same history, byte for byte.
"""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from proactivity_eval.truth import (
    DAY_MS,
    HOUR_MS,
    MAX_CARE_MS,
    MIN_IDLE_MS,
    PROPOSAL_NUDGE_MS,
    PROPOSALS_KEY,
    Item,
    Naming,
)

# 2: the asker persona (question-only sessions); the other personas' histories are unchanged.
GENERATOR_VERSION = "2"
CARE_DAYS = (10, 21)
MAX_IN_MIND = 6
MINUTE_MS = 60_000
# Monday 2026-01-05 00:00 UTC: where the pure replay's calendar starts.
EPOCH_MS = int(datetime(2026, 1, 5, tzinfo=UTC).timestamp() * 1000)


# ------------------------------------------------------------------ personas ---


@dataclass(frozen=True, slots=True)
class Persona:
    name: str
    about: str
    weekday_p: tuple[float, ...]  # Mon..Sun: the chance a day is worked on
    hours: tuple[int, ...]  # session start hours (UTC) to draw from
    sessions: tuple[int, int]  # sessions on a worked day (inclusive)
    burst_p: float  # a worked day is a burst (twice the sessions)
    gap_p: float  # at a day, the chance a gap (3-6 days off) starts
    threads_per_session: tuple[int, int]
    resume_p: float  # the chance a session block resumes an open thread rather than starting one
    resume_pick: str  # newest | oldest | random | failing
    finish_p: float
    fix_open_p: float  # fixed but still open
    fail_left_p: float
    drop_p: float
    cutoff_p: float  # the session's last request gets no reply
    test_p: float  # a block runs the check
    fail_p: float  # a run of the check fails (a new thread's first run)
    lose_interest_p: float  # a thread left open is silently given up
    interest_days: tuple[int, int]  # ... after this many days
    close_p: float  # the session is closed (else it goes idle)
    working_state_p: float  # the agent keeps the open threads in the working state
    propose_p: float  # per session: the agent queues a proposal
    review_days: tuple[float, float]  # when the user decides on it
    never_review_p: float
    reject_p: float
    dismiss_p: float  # the user dismisses a suggestion that did not help
    # A session is one question and its answer, no tool used, no thread touched, and
    # nothing more said. Drawn only when above 0, so the other personas' histories stay
    # as they were, event for event.
    question_p: float = 0.0


PERSONAS: tuple[Persona, ...] = (
    Persona(
        name="steady",
        about="steady daily developer: weekdays, mornings and early afternoons, one thread at a time",
        weekday_p=(0.95, 0.95, 0.95, 0.95, 0.9, 0.05, 0.02),
        hours=(8, 9, 10, 13, 14, 15),
        sessions=(1, 3),
        burst_p=0.05,
        gap_p=0.02,
        threads_per_session=(1, 1),
        resume_p=0.6,
        resume_pick="newest",
        finish_p=0.45,
        fix_open_p=0.12,
        fail_left_p=0.12,
        drop_p=0.06,
        cutoff_p=0.05,
        test_p=0.8,
        fail_p=0.5,
        lose_interest_p=0.15,
        interest_days=(4, 10),
        close_p=0.8,
        working_state_p=0.5,
        propose_p=0.2,
        review_days=(0.2, 2.5),
        never_review_p=0.1,
        reject_p=0.3,
        dismiss_p=0.5,
    ),
    Persona(
        name="hobbyist",
        about="bursty evenings and weekends, long gaps between, threads resumed days later",
        weekday_p=(0.25, 0.2, 0.3, 0.2, 0.35, 0.8, 0.75),
        hours=(19, 20, 21, 22, 10, 15),
        sessions=(1, 2),
        burst_p=0.35,
        gap_p=0.08,
        threads_per_session=(1, 2),
        resume_p=0.55,
        resume_pick="random",
        finish_p=0.3,
        fix_open_p=0.1,
        fail_left_p=0.2,
        drop_p=0.1,
        cutoff_p=0.12,
        test_p=0.6,
        fail_p=0.55,
        lose_interest_p=0.35,
        interest_days=(3, 12),
        close_p=0.5,
        working_state_p=0.2,
        propose_p=0.15,
        review_days=(1.0, 9.0),
        never_review_p=0.35,
        reject_p=0.4,
        dismiss_p=0.3,
    ),
    Persona(
        name="juggler",
        about="multi-thread juggler: several threads a session, many left dangling, slow to review",
        weekday_p=(0.9, 0.9, 0.85, 0.9, 0.8, 0.3, 0.2),
        hours=(9, 11, 14, 16, 18, 21),
        sessions=(2, 4),
        burst_p=0.15,
        gap_p=0.03,
        threads_per_session=(2, 3),
        resume_p=0.5,
        resume_pick="random",
        finish_p=0.2,
        fix_open_p=0.1,
        fail_left_p=0.25,
        drop_p=0.12,
        cutoff_p=0.15,
        test_p=0.7,
        fail_p=0.55,
        lose_interest_p=0.4,
        interest_days=(2, 9),
        close_p=0.4,
        working_state_p=0.35,
        propose_p=0.3,
        review_days=(2.0, 12.0),
        never_review_p=0.4,
        reject_p=0.35,
        dismiss_p=0.25,
    ),
    Persona(
        name="finisher",
        about="tidy finisher: picks the oldest open thread, almost always finishes, reviews quickly",
        weekday_p=(0.9, 0.9, 0.9, 0.9, 0.9, 0.1, 0.1),
        hours=(9, 10, 11, 14, 16),
        sessions=(1, 2),
        burst_p=0.05,
        gap_p=0.02,
        threads_per_session=(1, 2),
        resume_p=0.7,
        resume_pick="oldest",
        finish_p=0.75,
        fix_open_p=0.08,
        fail_left_p=0.05,
        drop_p=0.04,
        cutoff_p=0.02,
        test_p=0.9,
        fail_p=0.45,
        lose_interest_p=0.05,
        interest_days=(7, 14),
        close_p=0.95,
        working_state_p=0.7,
        propose_p=0.2,
        review_days=(0.1, 1.2),
        never_review_p=0.02,
        reject_p=0.25,
        dismiss_p=0.7,
    ),
    Persona(
        name="oncall",
        about="on-call fixer: short sessions at any hour, failures fixed at once or left for the next shift",
        weekday_p=(0.85, 0.85, 0.85, 0.85, 0.85, 0.5, 0.5),
        hours=(0, 3, 7, 9, 12, 15, 18, 20, 23),
        sessions=(2, 6),
        burst_p=0.2,
        gap_p=0.02,
        threads_per_session=(1, 1),
        resume_p=0.45,
        resume_pick="failing",
        finish_p=0.5,
        fix_open_p=0.1,
        fail_left_p=0.2,
        drop_p=0.05,
        cutoff_p=0.1,
        test_p=0.95,
        fail_p=0.7,
        lose_interest_p=0.2,
        interest_days=(1, 5),
        close_p=0.6,
        working_state_p=0.15,
        propose_p=0.08,
        review_days=(0.5, 5.0),
        never_review_p=0.25,
        reject_p=0.5,
        dismiss_p=0.4,
    ),
    Persona(
        name="explorer",
        about="explorer: many short investigations, most dropped or given up, few finished",
        weekday_p=(0.6, 0.7, 0.6, 0.7, 0.6, 0.4, 0.3),
        hours=(10, 13, 16, 20, 22),
        sessions=(1, 3),
        burst_p=0.1,
        gap_p=0.05,
        threads_per_session=(1, 2),
        resume_p=0.3,
        resume_pick="newest",
        finish_p=0.2,
        fix_open_p=0.05,
        fail_left_p=0.15,
        drop_p=0.3,
        cutoff_p=0.1,
        test_p=0.5,
        fail_p=0.5,
        lose_interest_p=0.55,
        interest_days=(1, 6),
        close_p=0.7,
        working_state_p=0.25,
        propose_p=0.12,
        review_days=(0.5, 6.0),
        never_review_p=0.3,
        reject_p=0.5,
        dismiss_p=0.45,
    ),
    Persona(
        name="asker",
        about="asker: mostly one-question sessions without tools; the odd thread of work left without a word",
        weekday_p=(0.8, 0.8, 0.8, 0.8, 0.7, 0.2, 0.1),
        hours=(8, 9, 11, 13, 15, 17),
        sessions=(1, 4),
        burst_p=0.1,
        gap_p=0.03,
        threads_per_session=(1, 1),
        resume_p=0.5,
        resume_pick="random",
        finish_p=0.25,
        fix_open_p=0.0,
        fail_left_p=0.2,
        drop_p=0.05,
        cutoff_p=0.05,
        test_p=0.6,
        fail_p=0.5,
        lose_interest_p=0.5,
        interest_days=(1, 4),
        close_p=0.3,
        working_state_p=0.2,
        propose_p=0.05,
        review_days=(0.5, 4.0),
        never_review_p=0.3,
        reject_p=0.4,
        dismiss_p=0.4,
        question_p=0.7,
    ),
)


def persona(name: str) -> Persona:
    for p in PERSONAS:
        if p.name == name:
            return p
    raise KeyError(name)


# ---------------------------------------------------------------- vocabulary ---

MODULES = (
    "billing", "auth", "search", "export", "cache", "upload", "parser", "scheduler",
    "invoices", "webhooks", "metrics", "i18n", "sync", "queue", "reports", "profile",
    "migrations", "ratelimit", "dates", "payments", "notifier", "settings", "importer",
    "sessions", "thumbnails", "audit", "geo", "pricing", "mailer", "tokens",
)  # fmt: skip
LAYOUTS = (
    ("src/{m}.py", "tests/test_{m}.py", "python"),
    ("app/{m}/service.ts", "app/{m}/service.test.ts", "node"),
    ("pkg/{m}/{m}.go", "pkg/{m}/{m}_test.go", "go"),
    ("lib/{m}/core.rs", "tests/{m}.rs", "rust"),
)
SUBJECTS = (
    "the retry logic in {m}",
    "pagination of {m} results",
    "{m} cache invalidation",
    "error messages from {m}",
    "the flaky {m} test",
    "a CSV endpoint for {m}",
    "null handling in {m}",
    "the {m} timeout on large inputs",
    "{m} config loading",
    "splitting the {m} module",
    "the slow {m} query",
    "unicode names in {m}",
    "{m} batch size limits",
    "the {m} race on shutdown",
    "logging in {m}",
    "the {m} migration to the new API",
    "duplicate rows from {m}",
    "{m} rounding errors",
)
KINDS = ("bug", "feature", "refactor", "investigation")
NEW_REQUESTS = (
    "Can you fix {s}? It's in {p}.",
    "Let's work on {s} — start from {p}",
    "I'd like to look into {s}.",
    "{S} is broken again, see {p}",
    "Please refactor {s} in {p}",
    "hey, {s}: can we sort that out today?",
    "New task: {s}. The code is in {p}.",
    "Could you take a look at {s}? Users are complaining.",
    "Quick one: {s}, file {p}",
    "I want to change {s}. Where do we start?",
)
RESUME_REQUESTS = (
    "Let's get back to {s}.",
    "Picking up {s} where we left it",
    "where did we leave {s}?",
    "ok, {s} again",
    "Continue with {s}, please",
    "Back on {s} — what was failing?",
    "Resume {s}",
    "Right, {s}. Let's finish it.",
)
FOLLOWUPS = (
    "Now run the tests.",
    "Can you check {p} once more?",
    "ok, and the edge case with empty input?",
    "Try it again",
    "What does the test say now?",
    "Let's also add a test for it.",
    "Hmm, run the check again please",
)
DONE_SAYS = (
    "Thanks, that works",
    "thanks!",
    "Perfect, that's it.",
    "lgtm, ship it",
    "Great, it works now",
    "All good, thank you",
    "tests are green, thanks",
    "nice, that's sorted",
    "cool, moving on",
    "excellent, appreciate it",
    "Brilliant — that was the last bit.",
    "Fixed, cheers",
)
DROP_SAYS = (
    "never mind, drop that",
    "forget about {s}, not worth it",
    "let's scrap that idea",
    "actually, leave {s} — we won't do it",
    "nah, abandon this one",
    "Stop, we're not doing {s} after all.",
    "Drop it, the product team cancelled it.",
)
OPENERS = (
    "morning!",
    "hi",
    "Where were we?",
    "ok, what's next?",
    "hello again",
    "let's get going",
)
REPLIES = (
    "I've updated {p}.",
    "Looking at {p} now.",
    "The change is in {p}; the call sites are unchanged.",
    "I found the cause in {p}.",
    "Here's what I changed in {p}.",
    "I read {p}: the logic lives in one function.",
)
FAIL_REPLIES = (
    "The check fails: {e}",
    "Still failing — {e}",
    "It fails with {e}; I'll need to look deeper.",
)
PASS_REPLIES = ("The check passes now.", "All green.", "It passes.", "Passing now.")
DROP_REPLIES = ("OK, dropping it.", "Understood, I'll leave it.", "Sure, reverted the changes.")
DONE_REPLIES = ("Glad to help.", "Great.", "You're welcome.", "Done then.")
ERRORS = (
    "AssertionError: expected {n} got {k}",
    "KeyError: '{m}_id'",
    "TypeError: cannot read property 'id' of undefined",
    "ValueError: invalid literal for int()",
    "timeout after 30s",
    "mismatched types: expected u32, found i64",
    "index out of range [{n}] with length {k}",
)
CASES = ("edge_case", "empty_input", "roundtrip", "large_batch", "unicode", "timezone", "retry", "limits")
PROPOSALS = (
    "Use {m} fixtures from tests/conftest.py",
    "Always run the {m} tests with -x",
    "Prefer the new {m} client over the legacy one",
    "Keep {m} errors in one enum",
    "Deploy {m} only on weekdays",
    "Document {m} settings in the README",
)
QUESTIONS = (
    "How do I undo the last commit but keep the changes?",
    "what's the difference between a list and a tuple?",
    "Quick question: what does HTTP 409 mean?",
    "regex for a UUID?",
    "How do I see which process listens on port 8080?",
    "is it ok to catch Exception in a CLI entry point?",
    "What's a good name for a function that retries with backoff?",
    "how do I format a date as ISO 8601 in JS?",
    "Can you explain what a context manager is, briefly?",
    "what's the syntax for a multi-line f-string?",
    "Which is faster for lookups, a dict or a set?",
    "How do I squash my last three commits?",
)
ANSWERS = (
    "Short answer: yes, and here is why.",
    "Here's the one-liner you want.",
    "It depends on the case, but usually the second option.",
    "That's the standard way; an example follows.",
    "In short: they differ in mutability.",
)
REJECT_REASONS = ("not true any more", "too specific", "we decided otherwise", "")


# ------------------------------------------------------------------- records ---


@dataclass(slots=True)
class Thread:
    id: str
    subject: str
    module: str
    path: str
    test_path: str
    lang: str
    kind: str
    check: str  # the test command
    wide_check: str  # a wider command (fixes the same failure under another call)
    created_at: int
    last_touched: int = 0
    status: str = "open"  # open | done | dropped
    failing: bool = False
    failure_text: str = ""
    failure_ref: tuple[str, int] | None = None
    forget_at: int | None = None  # the user gives up on it from then (hidden)
    sessions: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"thread:{self.id}"


@dataclass(slots=True)
class Proposal:
    id: str
    title: str
    created_at: int
    decided_at: int | None
    rejected: bool
    reason: str

    @property
    def key(self) -> str:
        return f"proposal:{self.id}"


@dataclass(slots=True)
class Event:
    seq: int
    ts: int
    type: str
    text: str
    tool_call_id: str | None = None
    tool_name: str | None = None
    meta: dict[str, str] | None = None
    thread: str | None = None  # the thread key that owns it (hidden)

    def wire(self, ts_shift: int = 0) -> dict[str, Any]:
        """As ``append_events`` takes it."""
        out: dict[str, Any] = {"type": self.type, "text": self.text, "ts": self.ts + ts_shift}
        if self.tool_call_id:
            out["toolCallId"] = self.tool_call_id
        if self.tool_name:
            out["toolName"] = self.tool_name
        if self.meta:
            out["meta"] = dict(self.meta)
        return out


@dataclass(slots=True)
class Session:
    id: str
    start: int
    events: list[Event] = field(default_factory=list)
    closed: bool = False
    open_threads: list[str] = field(default_factory=list)  # the agent's working state at the end
    items: list[Item] = field(default_factory=list)  # what would help at its start
    why_not: dict[str, str] = field(default_factory=dict)  # known keys that would not, and why
    threads: list[str] = field(default_factory=list)  # thread keys it worked on

    @property
    def end(self) -> int:
        return self.events[-1].ts if self.events else self.start


@dataclass(slots=True)
class History:
    persona: str
    seed: int
    days: int
    start: int
    sessions: list[Session]
    threads: dict[str, Thread]
    proposals: list[Proposal]

    def naming(self) -> Naming:
        naming = Naming()
        for session in self.sessions:
            for event in session.events:
                if event.thread:
                    naming.owners[(session.id, event.seq)] = event.thread
        for thread in self.threads.values():
            naming.phrases[thread.key] = [thread.subject, thread.path]
        for proposal in self.proposals:
            naming.proposals.add(proposal.key)
            naming.phrases[proposal.key] = [proposal.title]
        return naming

    def digest(self) -> str:
        """A stable digest of everything generated (the determinism check)."""
        blob = json.dumps(
            [
                [
                    s.id,
                    s.start,
                    s.closed,
                    s.open_threads,
                    [[e.seq, e.ts, e.type, e.text, e.meta] for e in s.events],
                ]
                for s in self.sessions
            ]
            + [[p.id, p.title, p.created_at, p.decided_at, p.rejected] for p in self.proposals],
            sort_keys=True,
        )
        return f"{zlib.crc32(blob.encode()):08x}-{len(blob)}"


# ----------------------------------------------------------------- generator ---


class _Writer:
    """Appends one session's events with a moving clock."""

    def __init__(self, rng: random.Random, session: Session) -> None:
        self.rng = rng
        self.session = session
        self.clock = session.start
        self.calls = 0

    def add(self, type_: str, text: str, thread: str | None, **kw: Any) -> Event:
        if self.session.events:
            self.clock += self.rng.randint(8, 150) * 1000
        event = Event(
            seq=len(self.session.events) + 1, ts=self.clock, type=type_, text=text, thread=thread, **kw
        )
        self.session.events.append(event)
        return event

    def pause(self, minutes: tuple[int, int]) -> None:
        self.clock += self.rng.randint(*minutes) * MINUTE_MS

    def call(
        self, tool: str, text: str, result: str, thread: str | None, meta: dict[str, str] | None = None
    ) -> Event:
        self.calls += 1
        cid = f"call_{self.calls}"
        self.add("tool_call", text, thread, tool_call_id=cid, tool_name=tool)
        return self.add("tool_result", result, thread, tool_call_id=cid, tool_name=tool, meta=meta)


class Generator:
    def __init__(
        self, p: Persona, seed: int, days: int = 30, start: int = EPOCH_MS, tag: str | None = None
    ) -> None:
        self.p = p
        self.seed = seed
        self.days = days
        self.start = start
        self.rng = random.Random(zlib.crc32(f"{seed}:{p.name}:{days}:{tag or ''}".encode()))
        self.threads: dict[str, Thread] = {}
        self.proposals: list[Proposal] = []
        self.sessions: list[Session] = []
        self.tag = tag or p.name[:3]

    # --- wording ---------------------------------------------------------------------------

    def pick(self, options: Sequence[str]) -> str:
        return options[self.rng.randrange(len(options))]

    def say(self, options: Sequence[str], thread: Thread | None = None, **extra: str) -> str:
        template = self.pick(options)
        s = thread.subject if thread else ""
        values = {
            "s": s,
            "S": s[:1].upper() + s[1:],
            "p": thread.path if thread else "",
            "m": thread.module if thread else "",
            **extra,
        }
        return template.format(**values)

    def new_thread(self, at: int) -> Thread:
        used = {t.module for t in self.threads.values() if t.status == "open"}
        modules = [m for m in MODULES if m not in used] or list(MODULES)
        m = self.pick(modules)
        path_t, test_t, lang = LAYOUTS[self.rng.randrange(len(LAYOUTS))]
        path, test_path = path_t.format(m=m), test_t.format(m=m)
        check = {
            "python": f"pytest {test_path} -q",
            "node": f"npx jest {test_path}",
            "go": f"go test ./pkg/{m}/...",
            "rust": f"cargo test --test {m}",
        }[lang]
        wide = {"python": "pytest -q", "node": "npm test", "go": "go test ./...", "rust": "cargo test"}[lang]
        thread = Thread(
            id=f"{self.tag}{len(self.threads) + 1:03d}",
            subject=self.say(SUBJECTS, None, m=m),
            module=m,
            path=path,
            test_path=test_path,
            lang=lang,
            kind=self.pick(KINDS),
            check=check,
            wide_check=wide,
            created_at=at,
        )
        self.threads[thread.key] = thread
        return thread

    def failure(self, thread: Thread) -> tuple[str, dict[str, str] | None]:
        error = self.say(ERRORS, thread, n=str(self.rng.randint(2, 9)), k=str(self.rng.randint(10, 99)))
        case = self.pick(CASES)
        style = self.rng.randrange(4)
        if style == 0:
            return f"FAILED {thread.test_path}::test_{case} - {error}", {"exit_code": "1"}
        if style == 1:
            return f"1 failed, {self.rng.randint(3, 40)} passed\n{thread.test_path}: test_{case}: {error}", {
                "exit_code": "1"
            }
        if style == 2:
            return f"Error: {error}\n    at {thread.path}:{self.rng.randint(10, 400)}", None
        return f"--- FAIL: test_{case}\n{error}", {"status": "failed"}

    def passing(self) -> str:
        n = self.rng.randint(3, 60)
        return self.pick(
            (f"{n} passed in 0.{n}s", f"ok\t{n} tests", f"Tests: {n} passed, {n} total", "test result: ok")
        )

    # --- one block of work on a thread ------------------------------------------------------

    def run_check(self, w: _Writer, thread: Thread, fail: bool, wide: bool = False) -> None:
        command = thread.wide_check if wide else thread.check
        if fail:
            text, meta = self.failure(thread)
            event = w.call("bash", command, text, thread.key, meta)
            w.add(
                "assistant_message", self.say(FAIL_REPLIES, thread, e=text.splitlines()[-1][:80]), thread.key
            )
            thread.failing = True
            thread.failure_text = text.splitlines()[0]
            thread.failure_ref = (w.session.id, event.seq)
        else:
            w.call(
                "bash",
                command,
                self.passing(),
                thread.key,
                {"exit_code": "0"} if self.rng.random() < 0.5 else None,
            )
            w.add("assistant_message", self.pick(PASS_REPLIES), thread.key)
            thread.failing = False
            thread.failure_ref = None

    def block(self, w: _Writer, thread: Thread, resumed: bool, last: bool) -> None:
        p, rng = self.p, self.rng
        key = thread.key
        w.add("user_message", self.say(RESUME_REQUESTS if resumed else NEW_REQUESTS, thread), key)
        w.call(
            "read_file",
            json.dumps({"path": thread.path}),
            f"{thread.path}\n(…{rng.randint(40, 600)} lines)",
            key,
        )
        w.add("assistant_message", self.say(REPLIES, thread), key)
        for _ in range(rng.randint(0, 2)):
            w.add("user_message", self.say(FOLLOWUPS, thread), key)
            w.call(
                "edit_file",
                json.dumps({"path": thread.path, "edit": "…"}),
                json.dumps({"path": thread.path}),
                key,
            )
            w.add("assistant_message", self.say(REPLIES, thread), key)
        tested = rng.random() < p.test_p or thread.failing
        if tested:
            fail = rng.random() < (0.6 if thread.failing else p.fail_p)
            self.run_check(w, thread, fail)
        r = rng.random()
        ending = "open"
        for name, chance in (
            ("finish", p.finish_p),
            ("fix_open", p.fix_open_p),
            ("fail_left", p.fail_left_p),
            ("drop", p.drop_p),
        ):
            if r < chance:
                ending = name
                break
            r -= chance
        if ending == "finish":
            if thread.failing or (tested and rng.random() < 0.3):
                w.add("user_message", self.say(FOLLOWUPS, thread), key)
                w.call(
                    "edit_file",
                    json.dumps({"path": thread.path, "edit": "…"}),
                    json.dumps({"path": thread.path}),
                    key,
                )
                self.run_check(w, thread, False, wide=rng.random() < 0.25)
            w.add("user_message", self.say(DONE_SAYS, thread), key)
            w.add("assistant_message", self.pick(DONE_REPLIES), key)
            thread.status = "done"
        elif ending == "fix_open":
            if thread.failing:
                w.add("user_message", self.say(FOLLOWUPS, thread), key)
                self.run_check(w, thread, False, wide=rng.random() < 0.25)
            w.add("user_message", f"Good. We still need to finish {thread.subject} later.", key)
            w.add("assistant_message", f"Noted: {thread.subject} is still open.", key)
        elif ending == "fail_left":
            w.add("user_message", self.say(FOLLOWUPS, thread), key)
            self.run_check(w, thread, True)
        elif ending == "drop":
            w.add("user_message", self.say(DROP_SAYS, thread), key)
            w.add("assistant_message", self.pick(DROP_REPLIES), key)
            thread.status = "dropped"
        if last and thread.status == "open" and rng.random() < p.cutoff_p:
            w.add("user_message", self.say(FOLLOWUPS, thread), key)  # the session ends unanswered
        thread.last_touched = w.clock
        if thread.status == "open":
            # How long the user keeps it in mind (hidden): some are given up after a few days,
            # the rest would be come back to within CARE_DAYS if they still mattered.
            days = p.interest_days if rng.random() < p.lose_interest_p else CARE_DAYS
            thread.forget_at = w.clock + rng.randint(*days) * DAY_MS
        if thread.key not in w.session.threads:
            w.session.threads.append(thread.key)
        thread.sessions.append(w.session.id)

    # --- the truth at a moment ----------------------------------------------------------------

    def cares(self, thread: Thread, now: int) -> bool:
        return thread.status == "open" and (thread.forget_at is None or now < thread.forget_at)

    def truth(self, now: int) -> tuple[list[Item], dict[str, str]]:
        items: list[Item] = []
        why: dict[str, str] = {}
        for thread in self.threads.values():
            idle = now - thread.last_touched
            if thread.status != "open":
                why[thread.key] = thread.status
            elif not self.cares(thread, now):
                why[thread.key] = "lost_interest"
            elif idle < MIN_IDLE_MS:
                why[thread.key] = "too_recent"
            elif idle >= MAX_CARE_MS:
                why[thread.key] = "stale"
            else:
                items.append(
                    Item(thread.key, "failing" if thread.failing else "open", frozenset({thread.key}))
                )
        waiting: list[str] = []
        for proposal in self.proposals:
            if proposal.created_at > now:
                continue
            if proposal.decided_at is not None and proposal.decided_at <= now:
                why[proposal.key] = "rejected" if proposal.rejected else "approved"
            elif now - proposal.created_at < PROPOSAL_NUDGE_MS:
                why[proposal.key] = "proposal_young"
            else:
                waiting.append(proposal.key)
        if waiting:
            items.append(Item(PROPOSALS_KEY, "proposal", frozenset(waiting)))
        return items, why

    # --- sessions ----------------------------------------------------------------------------

    def pick_resume(self, now: int, exclude: set[str]) -> Thread | None:
        # The user resumes only what they still care about (given-up threads stay given up).
        open_ = [t for t in self.threads.values() if self.cares(t, now) and t.key not in exclude]
        if not open_:
            return None
        how = self.p.resume_pick
        if how == "failing" and any(t.failing for t in open_):
            open_ = [t for t in open_ if t.failing]
            how = "newest"
        if how == "newest":
            return max(open_, key=lambda t: t.last_touched)
        if how == "oldest":
            return min(open_, key=lambda t: t.last_touched)
        return open_[self.rng.randrange(len(open_))]

    def session(self, start: int, *, final: str | None = None) -> Session:
        p, rng = self.p, self.rng
        session = Session(id=f"{self.tag}-s{len(self.sessions) + 1:03d}", start=start)
        session.items, session.why_not = self.truth(start)
        w = _Writer(rng, session)
        if final is None and p.question_p and rng.random() < p.question_p:
            return self.question_session(w)
        if rng.random() < 0.3:  # an ordinary opener, owned by no thread
            w.add("user_message", self.pick(OPENERS), None)
            w.add("assistant_message", "Hi — what would you like to work on?", None)
        count = rng.randint(*p.threads_per_session)
        done: set[str] = set()
        for index in range(count):
            last = index == count - 1
            thread = None
            if rng.random() < p.resume_p:
                thread = self.pick_resume(start, done)
            resumed = thread is not None
            if thread is None:
                thread = self.new_thread(w.clock)
            if final and last:
                self.final_block(w, thread, resumed, final)
            else:
                self.block(w, thread, resumed, last)
            done.add(thread.key)
            w.pause((1, 8))
        in_mind = sorted(
            (t for t in self.threads.values() if self.cares(t, w.clock)), key=lambda t: -t.last_touched
        )
        for thread in in_mind[MAX_IN_MIND:]:  # more than a person keeps track of: the oldest go
            thread.forget_at = w.clock
        session.closed = rng.random() < p.close_p or final is not None
        if rng.random() < p.working_state_p or final is not None:
            session.open_threads = [
                self.threads[k].subject for k in session.threads if self.threads[k].status == "open"
            ]
        if rng.random() < p.propose_p:
            self.propose(w.clock)
        self.sessions.append(session)
        return session

    def question_session(self, w: _Writer) -> Session:
        """One question, its answer, then nothing: no tool, no thread, no working state."""
        w.add("user_message", self.pick(QUESTIONS), None)
        w.add("assistant_message", self.pick(ANSWERS), None)
        w.session.closed = self.rng.random() < self.p.close_p
        self.sessions.append(w.session)
        return w.session

    def final_block(self, w: _Writer, thread: Thread, resumed: bool, final: str) -> None:
        """The continuity check's last block: the thread left open with its check failing."""
        key = thread.key
        w.add("user_message", self.say(RESUME_REQUESTS if resumed else NEW_REQUESTS, thread), key)
        w.call("read_file", json.dumps({"path": thread.path}), f"{thread.path}\n(…120 lines)", key)
        w.add("assistant_message", self.say(REPLIES, thread), key)
        self.run_check(w, thread, True)
        thread.status = "open"
        thread.forget_at = None
        thread.last_touched = w.clock
        w.session.threads.append(key)
        thread.sessions.append(w.session.id)

    def propose(self, at: int) -> None:
        p, rng = self.p, self.rng
        m = self.pick(MODULES)
        decided: int | None = None
        if rng.random() >= p.never_review_p:
            decided = at + int(rng.uniform(*p.review_days) * DAY_MS)
        self.proposals.append(
            Proposal(
                id=f"{self.tag}p{len(self.proposals) + 1:02d}",
                title=self.say(PROPOSALS, None, m=m),
                created_at=at,
                decided_at=decided,
                rejected=rng.random() < p.reject_p,
                reason=self.pick(REJECT_REASONS),
            )
        )

    def history(self, *, final: str | None = None) -> History:
        p, rng = self.p, self.rng
        day = 0
        clock = self.start
        while day < self.days:
            if rng.random() < p.gap_p:
                day += rng.randint(3, 6)
                continue
            weekday = datetime.fromtimestamp((self.start + day * DAY_MS) / 1000, tz=UTC).weekday()
            if rng.random() < p.weekday_p[weekday]:
                n = rng.randint(*p.sessions)
                if rng.random() < p.burst_p:
                    n *= 2
                hours = sorted(rng.choice(p.hours) for _ in range(n))
                for hour in hours:
                    start = self.start + day * DAY_MS + hour * HOUR_MS + rng.randint(0, 50) * MINUTE_MS
                    start = max(start, clock + rng.randint(5, 40) * MINUTE_MS)
                    if start >= self.start + self.days * DAY_MS:
                        break
                    clock = self.session(start).end
            day += 1
        if final:
            start = max(clock + rng.randint(1, 4) * HOUR_MS, self.start + (self.days - 1) * DAY_MS)
            clock = self.session(start, final=final).end
        return History(
            persona=p.name,
            seed=self.seed,
            days=self.days,
            start=self.start,
            sessions=self.sessions,
            threads=self.threads,
            proposals=self.proposals,
        )


def generate(
    name: str,
    seed: int,
    days: int = 30,
    *,
    start: int = EPOCH_MS,
    final: str | None = None,
    tag: str | None = None,
) -> History:
    """The history of persona ``name`` (see module doc)."""
    return Generator(persona(name), seed, days, start, tag).history(final=final)

"""Threads within one session's records: which thread a turn belongs to (by path, call,
a path's topic or words, else order), each thread's own outcome, and a thread's identity
across an idle cut and across reading steps."""

from __future__ import annotations

from typing import Any

from makad.core import behaviors
from makad.core.attention import OPEN_SECTIONS, derive
from makad.core.behaviors import Behavior, Carry, gather, records
from makad.core.types import Event, WorkingState

NOW = 1_800_000_000_000
DAY = 86_400_000


def script(*steps: tuple[str, ...]) -> list[Event]:
    """Events from compact steps: ("u", text), ("a", text), ("t", tool, call, result)."""
    events: list[Event] = []
    at = NOW - DAY

    def add(type_: Any, text: str, **fields: Any) -> None:
        seq = len(events) + 1
        events.append(
            Event(session_id="s", seq=seq, ts=at + seq - 1, type=type_, text=text, tokens=5, **fields)
        )

    for step in steps:
        kind, rest = step[0], step[1:]
        if kind == "t":
            tool, call, result = rest
            cid = f"c{len(events)}"
            add("tool_call", call, tool_call_id=cid, tool_name=tool)
            add("tool_result", result, tool_call_id=cid, tool_name=tool)
        else:
            add("user_message" if kind == "u" else "assistant_message", rest[0])
    return events


DATES = (
    ("u", "The DST test in tests/test_dates.py fails, please fix it"),
    ("t", "edit_file", '{"path": "src/dates.py"}', '{"path": "src/dates.py"}'),
    ("a", "I changed how src/dates.py keeps the offset."),
)
MIGRATION = (
    ("u", "Add a migration for the users.email column"),
    ("t", "write_file", '{"path": "migrations/0042_users_email.py"}', "migrations/0042_users_email.py"),
    ("a", "Migration 0042 is written."),
)


def read(events: list[Event], *, closed: bool = True, working: WorkingState | None = None) -> list[Behavior]:
    done, carry = gather("s", Carry(), events)
    assert done == []
    return records("s", carry, closed=closed, working=working)


def open_lines(found: list[Behavior]) -> list[str]:
    return [line.text for name, line in derive(NOW, found).lines() if name in OPEN_SECTIONS]


def test_thanks_closes_the_thread_it_answers_not_an_earlier_one() -> None:
    """A fix left half-way, a migration done, "thanks": two records, the fix open, the
    migration done; the state lists the fix only."""
    found = read(script(*DATES, *MIGRATION, ("u", "thanks!"), ("a", "You're welcome.")))
    assert [(r.intent[:14], r.outcome) for r in found] == [
        ("The DST test i", "open"),
        ("Add a migratio", "done"),
    ]
    assert found[0].thread_seq == 1 and found[1].thread_seq == 5
    assert open_lines(found) == ["Open: The DST test in tests/test_dates.py fails, please fix it"]


def test_a_turn_on_the_same_topic_continues_the_thread() -> None:
    """A test run on tests/test_dates.py continues the thread on src/dates.py (their
    topic), a question in words continues the thread worked on last, and the thanks after
    it closes that one."""
    found = read(
        script(
            *DATES,
            *MIGRATION,
            ("u", "Run the date test now"),
            ("t", "bash", "pytest tests/test_dates.py", "3 passed"),
            ("a", "It passes."),
            ("u", "Why was the offset lost in the first place?"),
            ("a", "The parser dropped it."),
            ("u", "Thanks, that works"),
            ("a", "Glad to help."),
        )
    )
    assert [(r.thread_seq, r.outcome, r.turns) for r in found] == [(5, "open", 1), (1, "done", 4)]


def test_new_work_after_a_finished_thread_on_the_same_file_is_a_thread_of_its_own() -> None:
    """Work thanked for, then a new request on the same file: the finished thread stays
    done, the new one is open."""
    found = read(
        script(
            *DATES,
            ("u", "perfect, thanks"),
            ("a", "Glad to help."),
            ("u", "Now also handle leap seconds"),
            ("t", "edit_file", '{"path": "src/dates.py"}', '{"path": "src/dates.py"}'),
            ("a", "Started on it."),
        ),
        closed=False,
    )
    assert [(r.intent[:18], r.outcome) for r in found] == [
        ("The DST test in te", "done"),
        ("Now also handle le", "open"),
    ]


def test_a_drop_lets_go_only_of_its_thread() -> None:
    """ "never mind, drop that" after the migration lets go of the migration; the fix
    left before it stays open."""
    found = read(script(*DATES, *MIGRATION, ("u", "never mind, drop that"), ("a", "Dropped.")))
    assert [r.outcome for r in found] == ["open", "dropped"]
    assert open_lines(found) == ["Open: The DST test in tests/test_dates.py fails, please fix it"]


def test_the_working_state_goes_to_the_thread_it_names() -> None:
    """The working state's open thread names the migration: the migration is open with
    it, and the fix the agent does not list was finished."""
    working = WorkingState(open_threads=["the users.email migration still needs a backfill"])
    found = read(script(*DATES, *MIGRATION), working=working)
    assert [(r.outcome, r.thread) for r in found] == [
        ("done", DATES[0][1]),
        ("open", "the users.email migration still needs a backfill"),
    ]


def test_a_thread_keeps_its_identity_across_an_idle_cut_and_reading_steps() -> None:
    """Read in two steps with the session idle between them, a later turn back on the fix
    is the fix's thread (the same thread_seq) and its "thanks" resolves the fix, not the
    migration; reading in two steps without the cut gives the records of one read."""
    events = script(
        *DATES,
        *MIGRATION,
        ("u", "Back to the DST test"),
        ("t", "bash", "pytest tests/test_dates.py", "3 passed"),
        ("a", "It passes."),
        ("u", "thanks!"),
        ("a", "Glad to help."),
    )
    _, first = gather("s", Carry(), events[:8])
    before = records("s", first, closed=False, working=None)
    assert [(r.thread_seq, r.outcome) for r in before] == [(1, "open"), (5, "open")]
    _, second = gather("s", behaviors.continued(first), events[8:])
    after = records("s", second, closed=True, working=None)
    assert [(r.thread_seq, r.outcome) for r in after] == [(1, "done")]
    assert open_lines([*before, *after]) == ["Open: Add a migration for the users.email column"]
    _, mid = gather("s", Carry(), events[:10])
    _, end = gather("s", mid, events[10:])
    assert records("s", end, closed=True, working=None) == read(events)


def test_records_written_before_threads_were_told_apart_keep_a_session_one_thread() -> None:
    """A record without thread_seq (stored by an earlier version) is its session's only
    thread: a later done record of the session resolves it."""
    (old,) = read(script(*DATES), closed=False)
    old.thread_seq = 0
    (later,) = read(script(("u", "thanks, all good now"), ("a", "Great.")))
    later.from_seq, later.to_seq, later.started_at, later.ended_at = 9, 10, NOW - 1_000, NOW - 900
    assert open_lines([old]) and open_lines([old, later]) == []


def test_no_need_lets_the_work_go_unless_it_declines_the_agents_offer() -> None:
    """ "No need." after a reply saying more is to do lets the work go; after the agent's
    question ("Shall I also …?") it declines the offer and the work stays open, as a
    lead-in before "forget it" or "skip it" does not keep it."""
    offer = ("a", "Shall I also add a test for leap years?")
    declined = read(script(*DATES, offer, ("u", "No need."), ("a", "OK.")), closed=False)
    assert [r.outcome for r in declined] == ["open"]
    for last in ("No need.", "Well, you know what, skip it.", "Bah, lassen wir das."):
        let_go = read(script(*DATES, ("u", last), ("a", "OK.")), closed=False)
        assert [r.outcome for r in let_go] == ["dropped"], last


def test_a_wider_run_passing_fixes_the_narrower_failure_and_nothing_else() -> None:
    """Within a session, ``pytest tests/`` passing fixes ``pytest tests/test_dates.py::test_tz``
    failing; ``npm run`` passing does not fix ``npm run build``, nor does ``cd web`` fix
    ``cd web && make``."""
    fixed = read(
        script(
            ("u", "Fix the tz test in tests/test_dates.py"),
            ("t", "bash", "pytest tests/test_dates.py::test_tz", "FAILED tests/test_dates.py::test_tz"),
            ("t", "bash", "pytest tests/", "40 passed"),
            ("a", "Green."),
        ),
        closed=False,
    )
    assert [r.failures for r in fixed] == [[]]
    for failing, passing in (("npm run build", "npm run"), ("cd web && make", "cd web")):
        kept = read(
            script(
                ("u", "Build the web app"),
                ("t", "bash", failing, "Error: exit status 2"),
                ("t", "bash", passing, "ok"),
                ("a", "Still broken."),
            ),
            closed=False,
        )
        assert [f.call for r in kept for f in r.failures] == [failing]


def test_putting_work_off_keeps_it_open_but_a_request_the_agent_works_on_is_a_request() -> None:
    """ "Thanks, let's pick this up tomorrow." answered in words leaves the work open even
    in a closed session; "write the migration now and run it later", which the agent then
    works on, is an ordinary request: closed after its reply, the work is done."""
    later = read(script(*DATES, ("u", "Thanks, let's pick this up tomorrow."), ("a", "Sure!")), closed=True)
    assert [r.outcome for r in later] == ["open"]
    request = read(
        script(
            *DATES,
            ("u", "Write the migration now and run it later"),
            ("t", "write_file", '{"path": "src/dates.py"}', "ok"),
            ("a", "Written."),
        ),
        closed=True,
    )
    assert [r.outcome for r in request] == ["done"]


def test_a_close_after_a_reply_saying_work_remains_leaves_it_open() -> None:
    """Closed right after "It still needs a test for leap years." the work is open; closed
    after "The suite remains green." or after more tool work that followed such a reply,
    it is done."""
    remains = read(script(*DATES, ("a", "It still needs a test for leap years.")), closed=True)
    assert [r.outcome for r in remains] == ["open"]
    green = read(script(*DATES, ("a", "The suite remains green.")), closed=True)
    assert [r.outcome for r in green] == ["done"]
    worked_on = read(
        script(
            *DATES,
            ("a", "It still needs a test for leap years."),
            ("t", "write_file", '{"path": "tests/test_dates.py"}', "ok"),
        ),
        closed=True,
    )
    assert [r.outcome for r in worked_on] == ["done"]


def test_signing_off_for_today_keeps_unfinished_work_open_and_finished_work_done() -> None:
    """ "Ok, that's it for today." after a reply saying more is to do leaves the work open;
    after "Done, the tests pass." it is done, as any thanks would leave it."""
    unfinished = read(script(*DATES, ("u", "Ok, that's it for today."), ("a", "Bye!")), closed=True)
    assert [r.outcome for r in unfinished] == ["open"]
    finished = read(
        script(*DATES, ("a", "Done, the tests pass."), ("u", "Ok, that's it for today."), ("a", "Bye!")),
        closed=True,
    )
    assert [r.outcome for r in finished] == ["done"]

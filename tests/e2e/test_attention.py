"""Behavior records and the attention state, through a real daemon on a real socket:
exactly-once records across kill -9, threads resolved by later sessions, the first pack
of a new session, one owner per fact, the privacy gates, and corrections and deletions
that never come back."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from maka.errors import RemoteError
from makad.core import behaviors
from makad.core.types import Event
from tests.support import DaemonProcess, daemon_in_tmp

IDLE = {"MAKAD_BEHAVIOR_IDLE_MS": "1"}
DAY = 86_400_000
OPEN_SECTIONS = ("Active threads", "Recently abandoned")


@pytest.fixture(scope="module")
def d() -> Iterator[DaemonProcess]:
    """One daemon for the module: each test works in workspaces of its own (``fresh``)."""
    yield from daemon_in_tmp(env=IDLE)


@pytest.fixture
def own_d() -> Iterator[DaemonProcess]:
    """A daemon of the test's own, for a test that reads every workspace ledger it has."""
    yield from daemon_in_tmp(env=IDLE)


_COUNTER = iter(range(10_000))


def fresh(d: DaemonProcess, *, reads: bool = True) -> str:
    """A new workspace of its own (agent reads on unless told)."""
    path = d.root / f"w{next(_COUNTER)}"
    (path / "memory").mkdir(parents=True)
    if reads:
        d.call("set_settings", {"workspace": str(path), "agentReadEnabled": True})
    return str(path)


def session(
    d: DaemonProcess,
    w: str,
    events: list[dict[str, Any]],
    *,
    working: dict[str, Any] | None = None,
    **open_params: Any,
) -> str:
    """A session with ``events``, its working state (``working``) set before they go in: a
    session's records are made once its events are idle (at once for events stamped in the
    past) from the working state as it is then, so a state set after them may come too late."""
    sid = str(d.call("open_session", {"workspace": w, **open_params})["sessionId"])
    if working is not None:
        d.call("set_working_state", {"workspace": w, "sessionId": sid, **working})
    if events:
        d.call("append_events", {"workspace": w, "sessionId": sid, "events": events})
    return sid


def failing_run(
    at: int, *, request: str = "Fix the failing date test in src/dates.py"
) -> list[dict[str, Any]]:
    """A request, a pytest call that fails, and a reply: a failure left standing."""
    return [
        {"type": "user_message", "text": request, "ts": at},
        {
            "type": "tool_call",
            "text": "pytest tests/test_dates.py",
            "toolCallId": "c1",
            "toolName": "bash",
            "ts": at + 1,
        },
        {
            "type": "tool_result",
            "text": "FAILED tests/test_dates.py::test_tz - AssertionError: offset lost",
            "toolCallId": "c1",
            "toolName": "bash",
            "meta": {"exit_code": "1"},
            "ts": at + 2,
        },
        {"type": "assistant_message", "text": "The parser drops the offset in src/dates.py.", "ts": at + 3},
    ]


def passing_run(at: int) -> list[dict[str, Any]]:
    """The same call passing, and the user saying it is done."""
    return [
        {"type": "user_message", "text": "Try the date test again", "ts": at},
        {
            "type": "tool_call",
            "text": "pytest tests/test_dates.py",
            "toolCallId": "c9",
            "toolName": "bash",
            "ts": at + 1,
        },
        {
            "type": "tool_result",
            "text": "1 passed in 0.2s",
            "toolCallId": "c9",
            "toolName": "bash",
            "ts": at + 2,
        },
        {"type": "assistant_message", "text": "It passes now.", "ts": at + 3},
        {"type": "user_message", "text": "Thanks, that works", "ts": at + 4},
        {"type": "assistant_message", "text": "Glad to help.", "ts": at + 5},
    ]


def attention(d: DaemonProcess, w: str) -> dict[str, Any]:
    return dict(d.call("get_attention", {"workspace": w}))


def section_lines(state: dict[str, Any], *names: str) -> list[dict[str, Any]]:
    return [line for s in state["sections"] if s["name"] in names for line in s["lines"]]


def wait_for(d: DaemonProcess, w: str, ok: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The attention state once ``ok`` holds (the keeper works in the background)."""
    deadline = time.monotonic() + 30
    while True:
        state = attention(d, w)
        if ok(state) or time.monotonic() > deadline:
            return state
        time.sleep(0.1)


def mentions(state: dict[str, Any], text: str, *names: str) -> bool:
    wanted = names or tuple(s["name"] for s in state["sections"])
    return any(text in line["text"] for line in section_lines(state, *wanted))


def ledger_rows(d: DaemonProcess, sql: str, *args: object) -> list[tuple[Any, ...]]:
    """Rows of every workspace ledger of the daemon, read with a connection of the test's own."""
    found = []
    for folder in (d.data_dir / "workspaces").iterdir():
        conn = sqlite3.connect(f"file:{folder / 'ledger.sqlite3'}?mode=ro", uri=True)
        try:
            found.append(conn.execute(sql, args).fetchall())
        finally:
            conn.close()
    return [row for rows in found for row in rows]


# ----------------------------------------------------------------- exactly once ---


# Generous: on a loaded machine the keeper's first step can take a while to reach its fault point.
KILL_WAIT_S = 180


def long_session(now: int) -> list[dict[str, Any]]:
    """1,200 events: 120 requests (six segments of 20), each with a call and its result,
    stamped two minutes ago: not yet idle for a daemon on the default idle time."""
    events: list[dict[str, Any]] = []
    for turn in range(120):
        at = now - 120_000 + turn * 10
        events += [
            {"type": "user_message", "text": f"step {turn}: update src/mod{turn % 7}.py", "ts": at},
            {
                "type": "tool_call",
                "text": f"edit src/mod{turn % 7}.py",
                "toolCallId": f"t{turn}",
                "toolName": "edit",
                "ts": at + 1,
            },
            {"type": "tool_result", "text": "ok", "toolCallId": f"t{turn}", "toolName": "edit", "ts": at + 2},
            *[{"type": "assistant_message", "text": f"note {turn}.{i}", "ts": at + 3 + i} for i in range(7)],
        ]
    return events


def session_records(d: DaemonProcess, sid: str) -> int:
    """How many behavior records of session ``sid`` the daemon's ledgers hold, all told."""
    counts = ledger_rows(d, "SELECT count(*) FROM behaviors WHERE session_id = ?", sid)
    assert counts, "the daemon has no workspace ledger to look in"
    return sum(int(n) for (n,) in counts)


def records_of(d: DaemonProcess, sid: str) -> list[tuple[int, int]]:
    rows = ledger_rows(
        d, "SELECT from_seq, to_seq FROM behaviors WHERE session_id = ? ORDER BY from_seq", sid
    )
    return [(int(a), int(b)) for a, b in rows]


def uninterrupted(sid: str, events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """The (from, to) seqs of the records one uninterrupted read of ``events`` gives: one a
    thread of each segment."""
    read = [
        Event(
            session_id=sid,
            seq=i + 1,
            ts=e["ts"],
            type=e["type"],
            text=e["text"],
            tool_call_id=e.get("toolCallId"),
            tool_name=e.get("toolName"),
        )
        for i, e in enumerate(events)
    ]
    closed, carry = behaviors.gather(sid, behaviors.Carry(), read)
    found = [r for c in [*closed, carry] for r in behaviors.records(sid, c, closed=False, working=None)]
    return sorted((r.from_seq, r.to_seq) for r in found)


def dead(d: DaemonProcess) -> None:
    """Wait for a daemon that killed itself, and tidy up after it."""
    assert d.proc is not None
    d.proc.wait(timeout=KILL_WAIT_S)
    d.stop()


@pytest.mark.slow
@pytest.mark.parametrize(
    "point",
    ["behaviors_after_read", "behaviors_before_commit", "behaviors_after_commit", "attention_before_commit"],
)
def test_records_exactly_once_across_kill9_at_every_step(short_tmp: Path, point: str) -> None:
    """Killed at each step of extraction (at every step boundary, again and again, for the
    after-commit point): the records are those an uninterrupted run writes (one a thread
    of each segment), and the attention state is there in the end."""
    d = DaemonProcess(short_tmp)
    d.start()  # the default idle time: nothing is extracted while the events go in
    try:
        w = fresh(d)
        now = int(time.time() * 1000)
        events = long_session(now)
        sid = session(d, w, events)
        last = int(d.call("read_events", {"workspace": w, "sessionId": sid, "limit": 1})["lastSeq"])
        assert last == 1200
        d.stop()
        assert records_of(d, sid) == []  # each step below is left to the daemons that crash
        kills = 0
        while True:
            d.start({**IDLE, "MAKAD_FAULT_POINT": point})
            assert d.proc is not None
            opened_by = time.monotonic() + KILL_WAIT_S
            while d.proc.poll() is None and time.monotonic() < opened_by:
                try:  # opening the workspace wakes the keeper (a loaded machine may time out)
                    d.call("read_state", {"workspace": w}, timeout=10)
                    break
                except Exception:
                    time.sleep(0.2)
            try:
                d.proc.wait(timeout=KILL_WAIT_S)
            except Exception:
                pytest.fail(f"the daemon was not killed at {point}")
            d.stop()
            kills += 1
            covered = records_of(d, sid)
            if point != "behaviors_after_commit" or (covered and max(b for _, b in covered) == last):
                break
            assert kills < 10
        d.start(IDLE)
        d.call("read_state", {"workspace": w})
        # get_attention derives from the records stored so far: wait for the last step's first
        deadline = time.monotonic() + KILL_WAIT_S
        while not ((covered := records_of(d, sid)) and max(b for _, b in covered) == last):
            assert time.monotonic() < deadline, "extraction did not reach the session's last event"
            time.sleep(0.1)
        state = wait_for(d, w, lambda s: s["computedAt"] > 0 and bool(section_lines(s, "Rhythm")))
        assert covered == uninterrupted(sid, events)
        assert len(covered) == 6 * 7  # six segments of 20 requests, each on seven files
        assert section_lines(state, "Currently focused")
        if point == "behaviors_after_commit":
            assert kills >= 3  # one kill after each of the three 500-event steps
    finally:
        d.stop()


# ------------------------------------------- a close or working state after the cut ---


def export_run(at: int) -> list[dict[str, Any]]:
    """A request, an edit, and a reply that reports no verdict: an open thread while the
    session is open, finished once it is closed with no open thread in its working state."""
    return [
        {"type": "user_message", "text": "Add a CSV export to src/export.py", "ts": at},
        {
            "type": "tool_call",
            "text": "edit src/export.py",
            "toolCallId": "e1",
            "toolName": "edit",
            "ts": at + 1,
        },
        {"type": "tool_result", "text": "ok", "toolCallId": "e1", "toolName": "edit", "ts": at + 2},
        {"type": "assistant_message", "text": "I added the CSV writer in src/export.py.", "ts": at + 3},
    ]


def records_read(d: DaemonProcess, sid: str) -> list[dict[str, Any]]:
    """The session's behavior records as stored, in seq order."""
    rows = ledger_rows(d, "SELECT record FROM behaviors WHERE session_id = ? ORDER BY from_seq", sid)
    return [msgspec.json.decode(bytes(row[0])) for row in rows]


def records_once(
    d: DaemonProcess, sid: str, ok: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """The session's records once ``ok`` holds (the keeper writes them in the background)."""
    deadline = time.monotonic() + 30
    while True:
        found = records_read(d, sid)
        if (found and ok(found)) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def outcomes(found: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(r["outcome"], r["thread"]) for r in found]


def offered(d: DaemonProcess, w: str, text: str) -> bool:
    """Whether ``suggest`` weighs a line saying ``text``, offered or not (``explain``)."""
    reply = d.call("suggest", {"workspace": w, "explain": True})
    return any(text in c["text"] for c in [*reply["suggestions"], *reply["candidates"]])


def test_a_session_closed_after_its_idle_cut_is_recorded_done(d: DaemonProcess) -> None:
    """A session recorded open when it went idle, then closed with no new event, has its
    record made again as done (still one record), and leaves the open sections."""
    w = fresh(d)
    sid = session(d, w, export_run(int(time.time() * 1000) - 3_600_000))
    found = records_once(d, sid, lambda rs: True)
    assert outcomes(found) == [("open", "Add a CSV export to src/export.py")]
    assert mentions(wait_for(d, w, lambda s: mentions(s, "CSV export")), "CSV export", "Active threads")
    assert offered(d, w, "CSV export")

    d.call("close_session", {"workspace": w, "sessionId": sid})
    found = records_once(d, sid, lambda rs: rs[0]["outcome"] == "done")
    assert outcomes(found) == [("done", "Add a CSV export to src/export.py")]
    assert (found[0]["fromSeq"], found[0]["toSeq"]) == (1, 4)
    state = wait_for(d, w, lambda s: not mentions(s, "CSV export", *OPEN_SECTIONS))
    assert not mentions(state, "CSV export", *OPEN_SECTIONS)
    assert not offered(d, w, "CSV export")


def test_a_working_state_set_after_the_idle_cut_remakes_the_record(d: DaemonProcess) -> None:
    """The open thread the working state names after the session went idle is the one its
    record and the active threads carry; emptied after the close, the record is done."""
    w = fresh(d)
    working = {"openThreads": ["wire the CSV export into the CLI"]}
    sid = session(d, w, export_run(int(time.time() * 1000) - 3_600_000), working=working)
    found = records_once(d, sid, lambda rs: True)
    assert outcomes(found) == [("open", "wire the CSV export into the CLI")]

    d.call(
        "set_working_state", {"workspace": w, "sessionId": sid, "openThreads": ["add a --csv flag to report"]}
    )
    found = records_once(d, sid, lambda rs: rs[0]["thread"] != "wire the CSV export into the CLI")
    assert outcomes(found) == [("open", "add a --csv flag to report")]
    state = wait_for(d, w, lambda s: mentions(s, "--csv flag", "Active threads"))
    assert mentions(state, "--csv flag", "Active threads")
    assert not mentions(state, "wire the CSV export", *OPEN_SECTIONS)

    d.call("close_session", {"workspace": w, "sessionId": sid})
    d.call("set_working_state", {"workspace": w, "sessionId": sid, "openThreads": []})
    found = records_once(d, sid, lambda rs: rs[0]["outcome"] == "done")
    assert outcomes(found) == [("done", "Add a CSV export to src/export.py")]
    state = wait_for(d, w, lambda s: not mentions(s, "CSV", *OPEN_SECTIONS))
    assert not mentions(state, "CSV", *OPEN_SECTIONS)


def test_a_later_segment_keeps_the_earlier_record_as_it_was(d: DaemonProcess) -> None:
    """Once the session went on to new work after the cut, a close speaks for that work:
    the earlier segment's record stays as it was made."""
    w = fresh(d)
    now = int(time.time() * 1000)
    sid = session(d, w, export_run(now - 3_600_000))
    records_once(d, sid, lambda rs: True)
    more = [
        {"type": "user_message", "text": "Now rename the tests in tests/test_report.py", "ts": now - 60_000},
        {"type": "assistant_message", "text": "Which names do you want?", "ts": now - 59_000},
    ]
    d.call("append_events", {"workspace": w, "sessionId": sid, "events": more})
    records_once(d, sid, lambda rs: len(rs) == 2)
    d.call("close_session", {"workspace": w, "sessionId": sid})
    state = wait_for(d, w, lambda s: not mentions(s, "rename the tests", *OPEN_SECTIONS))
    assert not mentions(state, "rename the tests", *OPEN_SECTIONS)
    assert [r["outcome"] for r in records_read(d, sid)] == ["open", "done"]


@pytest.mark.parametrize("point", ["behaviors_before_remake", "behaviors_after_remake"])
def test_a_close_after_the_idle_cut_is_recorded_across_kill9(short_tmp: Path, point: str) -> None:
    """Killed right before or right after the record of a session closed after its idle cut
    is made again: the next daemon ends with the one record, done."""
    d = DaemonProcess(short_tmp)
    d.start(IDLE)
    try:
        w = fresh(d)
        sid = session(d, w, export_run(int(time.time() * 1000) - 3_600_000))
        assert outcomes(records_once(d, sid, lambda rs: True))[0][0] == "open"
        d.stop()
        d.start({**IDLE, "MAKAD_FAULT_POINT": point})
        assert d.proc is not None
        with contextlib.suppress(Exception):  # the keeper may kill the daemon before the reply
            d.call("close_session", {"workspace": w, "sessionId": sid}, timeout=10)
        try:
            d.proc.wait(timeout=KILL_WAIT_S)
        except Exception:
            pytest.fail(f"the daemon was not killed at {point}")
        d.stop()
        made = "open" if point == "behaviors_before_remake" else "done"
        assert [r["outcome"] for r in records_read(d, sid)] == [made]
        d.start(IDLE)
        assert d.call("list_sessions", {"workspace": w})["sessions"][0]["closedAt"] is not None
        found = records_once(d, sid, lambda rs: rs[0]["outcome"] == "done")
        assert outcomes(found) == [("done", "Add a CSV export to src/export.py")]
        state = wait_for(
            d, w, lambda s: s["computedAt"] > 0 and not mentions(s, "CSV export", *OPEN_SECTIONS)
        )
        assert not mentions(state, "CSV export", *OPEN_SECTIONS)
        assert len(records_read(d, sid)) == 1
    finally:
        d.stop()


# -------------------------------------------------------------- resolution ---


def test_a_resolved_thread_leaves_the_open_sections(d: DaemonProcess) -> None:
    """A failure left standing is an active thread; a later session where the same call
    passes and the user says it works takes it out of every open section."""
    w = fresh(d)
    now = int(time.time() * 1000)
    first = session(d, w, failing_run(now - 3_600_000))
    d.call("close_session", {"workspace": w, "sessionId": first})
    state = wait_for(d, w, lambda s: mentions(s, "offset lost", "Active threads"))
    line = section_lines(state, "Active threads")[0]
    assert "offset lost" in line["text"] and line["refs"] == [f"event:{first}:3"]

    second = session(d, w, passing_run(now - 60_000))
    d.call("close_session", {"workspace": w, "sessionId": second})
    state = wait_for(d, w, lambda s: not mentions(s, "offset lost", *OPEN_SECTIONS))
    assert not mentions(state, "offset lost", *OPEN_SECTIONS)
    assert not mentions(state, "Fix the failing date test", *OPEN_SECTIONS)


def test_a_folder_only_read_gets_no_memory_folder(d: DaemonProcess) -> None:
    """A folder only read (read_state, get_attention) is left as it was, also once a change
    elsewhere woke the background keeper and get_attention had it look: no memory/ folder
    appears."""
    read_only = d.root / f"w{next(_COUNTER)}"
    read_only.mkdir()
    assert d.call("read_state", {"workspace": str(read_only)})["status"] == "ok"
    w = fresh(d)
    first = session(d, w, failing_run(int(time.time() * 1000) - 3_600_000))
    d.call("close_session", {"workspace": w, "sessionId": first})
    # Once this one's records are in its state, the keeper's round woken by the change
    # is over.
    assert mentions(wait_for(d, w, lambda s: mentions(s, "offset lost")), "offset lost")
    state = attention(d, str(read_only))
    assert state["enabled"] and not section_lines(state, *OPEN_SECTIONS)
    assert not state.get("warnings")
    assert sorted(p.name for p in read_only.iterdir()) == []


def test_an_idle_thread_moves_to_recently_abandoned(d: DaemonProcess) -> None:
    """A thread idle for days is listed as recently abandoned, with how long, not as active."""
    w = fresh(d)
    now = int(time.time() * 1000)
    sid = session(
        d, w, [{"type": "user_message", "text": "Port the exporter to the v2 API", "ts": now - 3 * DAY}]
    )
    state = wait_for(d, w, lambda s: mentions(s, "Port the exporter", "Recently abandoned"))
    [line] = section_lines(state, "Recently abandoned")
    assert line["text"] == "Unanswered (idle 3 days): Port the exporter to the v2 API"
    assert line["refs"] == [f"event:{sid}:1"]
    assert not mentions(state, "Port the exporter", "Active threads")


# ------------------------------------------------------- reaching the agent ---


def previous_session(d: DaemonProcess, w: str) -> str:
    """A session two days back: an open thread in its working state and a failure unfixed."""
    now = int(time.time() * 1000)
    sid = session(
        d,
        w,
        failing_run(now - 2 * DAY - 3_600_000),
        working={"openThreads": ["wire the new date parser into the CLI"]},
    )
    wait_for(d, w, lambda s: mentions(s, "wire the new date parser") and mentions(s, "offset lost"))
    return sid


def attention_segment(pack: dict[str, Any]) -> dict[str, Any] | None:
    return next((s for s in pack["segments"] if s["kind"] == "attention"), None)


def test_a_retry_of_the_first_pack_shows_what_it_showed_after_the_session_is_derived() -> None:
    """A retry of a session's first pack shows the attention lines that pack showed, though
    the asking session's own events were turned into records in between (the rhythm line
    then counts one more session)."""
    for d in daemon_in_tmp(env={"MAKAD_BEHAVIOR_IDLE_MS": "1500"}):
        w = fresh(d)
        previous_session(d, w)
        sid = session(d, w, [{"type": "user_message", "text": "Where were we?"}])
        pack = d.call("build_context", {"workspace": w, "sessionId": sid, "budgetTokens": 4000})
        assert attention_segment(pack) is not None
        derived = wait_for(d, w, lambda s: mentions(s, "2 sessions", "Rhythm"))
        assert mentions(derived, "2 sessions", "Rhythm")
        retried = d.call("build_context", {"workspace": w, "sessionId": sid, "budgetTokens": 4000})
        assert retried == pack


def test_first_pack_of_a_new_session_carries_the_open_thread_and_failure(d: DaemonProcess) -> None:
    """The first pack of the next session shows the previous session's open thread and its
    failure with their refs (a retry of that call too); the next turn's pack does not
    repeat them; include asks again."""
    w = fresh(d)
    old = previous_session(d, w)
    sid = session(d, w, [{"type": "user_message", "text": "Where were we?"}])
    pack = d.call("build_context", {"workspace": w, "sessionId": sid, "budgetTokens": 4000})
    segment = attention_segment(pack)
    assert segment is not None
    assert "wire the new date parser into the CLI" in segment["text"]
    assert "offset lost" in segment["text"] and f"event:{old}:3" in segment["text"]
    assert f"event:{old}:3" in segment["sourceIds"]
    assert any(c["kind"] == "attention" and c["included"] for c in pack["trace"]["candidates"])
    assert pack["totalTokens"] <= 4000
    retried = d.call("build_context", {"workspace": w, "sessionId": sid, "budgetTokens": 4000})
    assert retried == pack  # a retry of the first call is that call
    d.call(
        "append_events",
        {"workspace": w, "sessionId": sid, "events": [{"type": "assistant_message", "text": "Resuming."}]},
    )
    again = d.call("build_context", {"workspace": w, "sessionId": sid, "budgetTokens": 4000})
    assert attention_segment(again) is None
    asked = d.call(
        "build_context",
        {"workspace": w, "sessionId": sid, "budgetTokens": 4000, "include": ["attention", "memory"]},
    )
    assert attention_segment(asked) is not None


def test_a_pack_asked_without_a_session_carries_the_open_thread_and_failure(d: DaemonProcess) -> None:
    """A build_context call with no optional params (no session, no query, no include) shows
    the last session's open thread and unfixed failure, every time it is asked; include
    without attention leaves them out; a failure fixed since is gone from it."""
    w = fresh(d)
    old = previous_session(d, w)
    for _ in range(2):
        pack = d.call("build_context", {"workspace": w, "budgetTokens": 4000})
        segment = attention_segment(pack)
        assert segment is not None
        assert "wire the new date parser into the CLI" in segment["text"]
        assert "offset lost" in segment["text"] and f"event:{old}:3" in segment["sourceIds"]
        assert pack["trace"]["emptyReason"] is None
    memory_only = d.call("build_context", {"workspace": w, "budgetTokens": 4000, "include": ["memory"]})
    assert attention_segment(memory_only) is None
    now = int(time.time() * 1000)
    fixed = session(d, w, passing_run(now - 60_000))
    d.call("close_session", {"workspace": w, "sessionId": fixed})
    wait_for(d, w, lambda s: not mentions(s, "offset lost", *OPEN_SECTIONS))
    segment = attention_segment(d.call("build_context", {"workspace": w, "budgetTokens": 4000}))
    assert segment is None or "offset lost" not in segment["text"]


def test_a_line_the_working_state_carries_is_owned_elsewhere(d: DaemonProcess) -> None:
    """A thread the session's working state already shows is not repeated through attention:
    the trace lists it as owned_elsewhere, owned by the working state."""
    w = fresh(d)
    previous_session(d, w)
    sid = session(d, w, [{"type": "user_message", "text": "Go on"}])
    d.call(
        "set_working_state",
        {"workspace": w, "sessionId": sid, "openThreads": ["wire the new date parser into the CLI"]},
    )
    # The pack reads the stored state: once the keeper has derived it with this session too
    # (its own lines are then owned by its history), whatever the machine's load.
    wait_for(d, w, lambda s: mentions(s, "2 sessions", "Rhythm"))
    pack = d.call("build_context", {"workspace": w, "sessionId": sid, "budgetTokens": 4000})
    segment = attention_segment(pack)
    assert segment is not None and "offset lost" in segment["text"]
    assert "wire the new date parser" not in segment["text"]
    owned = [o for o in pack["trace"]["ownedElsewhere"] if o["segment"] == "attention"]
    assert ("working_state", "Recently abandoned") in [(o["owner"], o["section"]) for o in owned]
    assert {o["owner"] for o in owned} == {"working_state", "history"}
    assert pack["trace"]["dropped"]["owned_elsewhere"] >= 1
    rows = [c for c in pack["trace"]["candidates"] if c["kind"] == "attention" and not c["included"]]
    assert rows and {c["reason"] for c in rows} == {"owned_elsewhere"}
    assert "Open (idle 2 days): wire the new date parser into the CLI" in [c["title"] for c in rows]


# ---------------------------------------------------------------- privacy ---


def test_incognito_and_agent_reads_off_are_silent(d: DaemonProcess) -> None:
    """An incognito session leaves no record; without agent reads, in an incognito session
    or an incognito workspace no pack shows attention, and get_attention says disabled."""
    w = fresh(d)
    now = int(time.time() * 1000)
    hidden = session(
        d, w, failing_run(now - 3_600_000, request="Rotate the secret ledger keys"), incognito=True
    )
    d.call("close_session", {"workspace": w, "sessionId": hidden})
    visible = session(d, w, failing_run(now - 1_800_000))
    d.call("close_session", {"workspace": w, "sessionId": visible})
    state = wait_for(d, w, lambda s: mentions(s, "offset lost"))
    assert not mentions(state, "Rotate the secret")
    assert session_records(d, hidden) == 0

    incognito = session(d, w, [{"type": "user_message", "text": "hi"}], incognito=True)
    pack = d.call("build_context", {"workspace": w, "sessionId": incognito, "budgetTokens": 4000})
    assert attention_segment(pack) is None

    d.call("set_settings", {"workspace": w, "agentReadEnabled": False})
    sid = session(d, w, [{"type": "user_message", "text": "hi"}])
    pack = d.call(
        "build_context", {"workspace": w, "sessionId": sid, "budgetTokens": 4000, "include": ["attention"]}
    )
    assert attention_segment(pack) is None

    d.call("set_settings", {"workspace": w, "agentReadEnabled": True, "incognito": True})
    assert attention(d, w) == {"enabled": False, "computedAt": 0, "sections": [], "warnings": []}


def test_switched_off_nothing_derived_is_kept(own_d: DaemonProcess) -> None:
    """attentionEnabled off: every record, offset and the state are dropped, and nothing is
    derived from sessions closed afterwards."""
    d = own_d
    w = fresh(d)
    now = int(time.time() * 1000)
    first = session(d, w, failing_run(now - 3_600_000))
    d.call("close_session", {"workspace": w, "sessionId": first})
    wait_for(d, w, lambda s: mentions(s, "offset lost"))
    d.call("set_settings", {"workspace": w, "attentionEnabled": False})
    assert attention(d, w)["enabled"] is False
    second = session(d, w, failing_run(now - 60_000))
    d.call("close_session", {"workspace": w, "sessionId": second})
    deadline = time.monotonic() + 10
    counts: list[tuple[Any, ...]] = []
    while time.monotonic() < deadline:
        counts = ledger_rows(
            d,
            "SELECT (SELECT count(*) FROM behaviors), (SELECT count(*) FROM behavior_offsets),"
            " (SELECT count(*) FROM attention_state)",
        )
        if all(row == (0, 0, 0) for row in counts):
            break
        time.sleep(0.1)
    assert counts and all(row == (0, 0, 0) for row in counts)
    sid = session(d, w, [{"type": "user_message", "text": "hi"}])
    pack = d.call("build_context", {"workspace": w, "sessionId": sid, "budgetTokens": 4000})
    assert attention_segment(pack) is None


# ------------------------------------------------------ corrections and deletions ---


def test_a_forgotten_session_never_comes_back(d: DaemonProcess) -> None:
    """Deleting a session drops its records and every attention line citing it at once;
    the next session's first pack says nothing of it."""
    w = fresh(d)
    old = previous_session(d, w)
    d.call("delete_session", {"workspace": w, "sessionId": old})
    state = attention(d, w)
    assert not any(
        old in ref
        for line in section_lines(state, *[s["name"] for s in state["sections"]])
        for ref in line["refs"]
    )
    assert not mentions(state, "offset lost") and not mentions(state, "wire the new date parser")
    assert session_records(d, old) == 0
    sid = session(d, w, [{"type": "user_message", "text": "Where were we?"}])
    pack = d.call("build_context", {"workspace": w, "sessionId": sid, "budgetTokens": 4000})
    segment = attention_segment(pack)
    assert segment is None or (old not in segment["text"] and "offset lost" not in segment["text"])


def editor_save(path: Path, text: str) -> None:
    """Save the file as an editor does (a temp file renamed over it)."""
    tmp = path.with_name(".MEMORY.md.swp~")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


FACT = "the deploy script lives in tools/ship.sh and needs the office VPN"


def episodes_repeating_the_fact(d: DaemonProcess, w: str, *, at: int | None = None) -> None:
    """Five sessions of a note each, each with an episode tagged deploy that says FACT again."""
    for i in range(5):
        stamp = {} if at is None else {"ts": at}
        other = session(d, w, [{"type": "user_message", "text": f"note {i}", **stamp}])
        d.call(
            "record_episode",
            {
                "workspace": w,
                "sessionId": other,
                "summary": f"Said again ({i}): {FACT}",
                "tags": ["deploy"],
                "sourceRefs": [f"event:{other}:1"],
            },
        )


@pytest.mark.parametrize("how", ["delete", "correct", "delete_by_hand", "approve_correction"])
def test_a_deleted_or_corrected_memory_entry_never_comes_back(d: DaemonProcess, how: str) -> None:
    """Memory text the user deletes or corrects (over RPC, by hand in MEMORY.md, or by
    approving a proposal that supersedes the entry) is left out of the attention state, of
    the episode a closing session records and of a consolidation digest written afterwards."""
    w = fresh(d)
    d.call("set_settings", {"workspace": w, "extractToolEnabled": True})
    path = Path(w) / "memory" / "MEMORY.md"
    if how == "delete_by_hand":  # typed into the file, as an editor saves it
        editor_save(path, f"# Maka Memory\n\n## Deploy\n{FACT}\n\n## Kept\nsomething else\n")
        [entry] = [
            e
            for e in d.call("read_state", {"workspace": w, "includeEntries": True})["entries"]
            if e["title"] == "Deploy"
        ]
    else:
        entry = d.call("add_entry", {"workspace": w, "title": "Deploy", "content": FACT})["entry"]
    now = int(time.time() * 1000)
    sid = session(d, w, [{"type": "user_message", "text": f"Remember: {FACT}", "ts": now - 3_600_000}])
    wait_for(d, w, lambda s: mentions(s, "tools/ship.sh"))
    episodes_repeating_the_fact(d, w, at=now - 3_600_000)
    if how == "delete":
        d.call("delete_entry", {"workspace": w, "id": entry["id"]})
    elif how == "delete_by_hand":
        editor_save(path, "# Maka Memory\n\n## Kept\nsomething else\n")
        assert d.call("read_state", {"workspace": w})["status"] == "ok"  # the save is taken in
        steps = d.call("memory_history", {"workspace": w, "id": entry["id"]})["events"]
        assert [(s["action"], s["actor"]) for s in steps][-1] == ("deleted", "user")
    elif how == "approve_correction":
        fix = {"title": "Deploy", "content": "deploys go through CI only", "supersedes": entry["id"]}
        proposal = d.call("propose", {"workspace": w, **fix})["proposal"]
        d.call("approve", {"workspace": w, "ids": [proposal["id"]]})
    else:
        d.call("update_entry", {"workspace": w, "id": entry["id"], "content": "deploys go through CI only"})
    state = attention(d, w)
    assert not mentions(state, "tools/ship.sh")
    state = wait_for(d, w, lambda s: s["computedAt"] > 0)
    assert not mentions(state, "tools/ship.sh")

    d.call("set_working_state", {"workspace": w, "sessionId": sid, "goals": [FACT], "decisions": [FACT]})
    d.call("close_session", {"workspace": w, "sessionId": sid})
    closing = d.call("list_episodes", {"workspace": w, "sessionId": sid})["episodes"]
    assert closing == []
    with pytest.raises(RemoteError) as refused:
        d.call("consolidate", {"workspace": w, "tag": "deploy"})
    assert refused.value.kind == "insufficient_evidence"
    pending = Path(w) / "memory" / "PENDING.md"
    assert not pending.exists() or "ship.sh" not in pending.read_text()


def test_proposals_waiting_and_rejections_cooling_down(d: DaemonProcess) -> None:
    """A proposal waiting in PENDING.md is listed with its age and ref; once rejected it
    leaves that section for Do not re-propose, with its title and the reason."""
    w = fresh(d)
    d.call("set_settings", {"workspace": w, "extractToolEnabled": True})
    proposal = d.call("propose", {"workspace": w, "title": "Use tabs", "content": "Indent with tabs."})
    pid = proposal["proposal"]["id"]
    state = wait_for(d, w, lambda s: bool(section_lines(s, "Waiting on the user")))
    [line] = section_lines(state, "Waiting on the user")
    assert line["text"].startswith('Proposal "Use tabs" waiting') and line["refs"] == [f"proposal:{pid}"]
    d.call("reject", {"workspace": w, "ids": [pid], "reason": "we use spaces"})
    state = wait_for(d, w, lambda s: bool(section_lines(s, "Do not re-propose")))
    assert section_lines(state, "Waiting on the user") == []
    [line] = section_lines(state, "Do not re-propose")
    assert line["text"].startswith('"Use tabs" rejected') and line["text"].endswith(": we use spaces")
    assert line["refs"] == [f"proposal:{pid}"]


def test_an_approved_proposal_stops_waiting_at_once(d: DaemonProcess) -> None:
    """Right after an approval, before the keeper derives again, neither get_attention nor a
    pack says the proposal still waits (the memory text is in the pack once)."""
    w = fresh(d)
    d.call("set_settings", {"workspace": w, "extractToolEnabled": True})
    kept = d.call("propose", {"workspace": w, "title": "Keeps bees", "content": "Keeps three hives of bees."})
    other = d.call("propose", {"workspace": w, "title": "Grows figs", "content": "Grows figs in pots."})
    wait_for(d, w, lambda s: len(section_lines(s, "Waiting on the user")) == 2)
    d.call("approve", {"workspace": w, "ids": [kept["proposal"]["id"]]})
    [line] = section_lines(attention(d, w), "Waiting on the user")
    assert line["refs"] == [f"proposal:{other['proposal']['id']}"]
    pack = d.call("build_context", {"workspace": w, "query": "bees", "budgetTokens": 2000})
    segment = attention_segment(pack)
    assert segment is not None and "Grows figs" in segment["text"] and "Keeps bees" not in segment["text"]
    assert "\n".join(s["text"] for s in pack["segments"]).count("Keeps three hives") == 1


def test_a_hand_deletion_is_left_out_of_a_read_right_after_the_save(d: DaemonProcess) -> None:
    """Memory text the user deletes by hand in MEMORY.md is out of get_attention and of
    suggest's candidates read right after the save, before the watcher takes the save in."""
    w = fresh(d)
    d.call("set_settings", {"workspace": w, "attentionEnabled": True})
    path = Path(w) / "memory" / "MEMORY.md"
    editor_save(path, f"# Maka Memory\n\n## Deploy\n{FACT}\n\n## Kept\nsomething else\n")
    assert d.call("read_state", {"workspace": w})["entryCount"] == 2  # the save is taken in
    now = int(time.time() * 1000)
    session(d, w, [{"type": "user_message", "text": f"Remember: {FACT}", "ts": now - 3_600_000}])
    wait_for(d, w, lambda s: mentions(s, "tools/ship.sh"))
    editor_save(path, "# Maka Memory\n\n## Kept\nsomething else\n")
    assert not mentions(attention(d, w), "tools/ship.sh")
    found = d.call("suggest", {"workspace": w, "explain": True})
    assert "tools/ship.sh" not in repr(found)


def pending_without(w: str, title: str) -> None:
    """PENDING.md saved by hand (as an editor does) without the proposal titled ``title``."""
    path = Path(w) / "memory" / "PENDING.md"
    head, *sections = path.read_text(encoding="utf-8").split("\n## ")
    kept = [s for s in sections if not s.startswith(title)]
    assert len(kept) == len(sections) - 1
    tmp = path.with_name(".PENDING.md.swp~")
    tmp.write_text("\n## ".join([head, *kept]), encoding="utf-8")
    os.replace(tmp, path)


def test_a_proposal_taken_out_of_pending_by_hand_stops_waiting_at_once(d: DaemonProcess) -> None:
    """A proposal the user deletes from PENDING.md in an editor no longer waits in a pack or
    in get_attention read right after the save, before the watcher takes the save in."""
    w = fresh(d)
    d.call("set_settings", {"workspace": w, "extractToolEnabled": True})
    for title, content in [
        ("Keeps bees", "Keeps three hives."),
        ("Grows figs", "Grows figs."),
        ("Brews mead", "Brews mead."),
    ]:
        d.call("propose", {"workspace": w, "title": title, "content": content})
    wait_for(d, w, lambda s: len(section_lines(s, "Waiting on the user")) == 3)
    pending_without(w, "Keeps bees")
    pack = d.call("build_context", {"workspace": w, "query": "bees", "budgetTokens": 2000})
    segment = attention_segment(pack)
    assert segment is not None and "Grows figs" in segment["text"] and "Keeps bees" not in segment["text"]
    pending_without(w, "Grows figs")
    [line] = section_lines(attention(d, w), "Waiting on the user")
    assert line["text"].startswith('Proposal "Brews mead"')


def test_a_proposal_still_waits_after_a_restart(own_d: DaemonProcess) -> None:
    """After a restart the first get_attention and the first pack still list the proposals
    PENDING.md holds (the file is read before the stored state is checked against it)."""
    w = fresh(own_d)
    own_d.call("set_settings", {"workspace": w, "extractToolEnabled": True})
    own_d.call("propose", {"workspace": w, "title": "Keeps bees", "content": "Keeps three hives of bees."})
    wait_for(own_d, w, lambda s: len(section_lines(s, "Waiting on the user")) == 1)
    own_d.restart(IDLE)
    [line] = section_lines(attention(own_d, w), "Waiting on the user")
    assert line["text"].startswith('Proposal "Keeps bees"')
    own_d.restart(IDLE)
    pack = own_d.call("build_context", {"workspace": w, "include": ["attention"], "budgetTokens": 2000})
    segment = attention_segment(pack)
    assert segment is not None and "Keeps bees" in segment["text"]


@pytest.mark.parametrize("read", ["consolidate", "close_session"])
def test_text_deleted_by_hand_is_no_evidence_right_after_the_save(d: DaemonProcess, read: str) -> None:
    """Memory text the user deletes by hand in MEMORY.md is, right after the save (before
    the watcher takes it in), neither a consolidation nor a closing session's episode."""
    w = fresh(d)
    d.call("set_settings", {"workspace": w, "extractToolEnabled": True})
    path = Path(w) / "memory" / "MEMORY.md"
    editor_save(path, f"# Maka Memory\n\n## Deploy\n{FACT}\n\n## Kept\nsomething else\n")
    assert d.call("read_state", {"workspace": w})["entryCount"] == 2  # the save is taken in
    sid = session(d, w, [{"type": "user_message", "text": f"Remember: {FACT}"}])
    d.call("set_working_state", {"workspace": w, "sessionId": sid, "goals": [FACT], "decisions": [FACT]})
    episodes_repeating_the_fact(d, w)
    editor_save(path, "# Maka Memory\n\n## Kept\nsomething else\n")
    if read == "consolidate":
        with pytest.raises(RemoteError) as refused:
            d.call("consolidate", {"workspace": w, "tag": "deploy"})
        assert refused.value.kind == "insufficient_evidence"
    else:
        d.call("close_session", {"workspace": w, "sessionId": sid})
        assert d.call("list_episodes", {"workspace": w, "sessionId": sid})["episodes"] == []


def test_an_unreadable_pending_file_leaves_the_pack_and_the_state_served(d: DaemonProcess) -> None:
    """A PENDING.md that cannot be read (a folder in its place) leaves a pack's memory and
    the attention state served, read against PENDING.md as last read."""
    w = fresh(d)
    d.call("add_entry", {"workspace": w, "title": "Bees", "content": "Keeps three hives of bees."})
    pending = Path(w) / "memory" / "PENDING.md"
    pending.unlink(missing_ok=True)
    pending.mkdir()
    pack = d.call("build_context", {"workspace": w, "query": "bees", "budgetTokens": 2000})
    assert "Keeps three hives" in "\n".join(s["text"] for s in pack["segments"])
    assert attention(d, w)["enabled"] is True


def test_the_state_derived_after_a_restart_lists_the_proposals_waiting(own_d: DaemonProcess) -> None:
    """After a restart, the state the keeper derives and stores for a workspace reached only by
    a session's events (nothing has read PENDING.md yet) lists the proposal waiting in it."""
    w = fresh(own_d)
    own_d.call("set_settings", {"workspace": w, "extractToolEnabled": True})
    own_d.call("propose", {"workspace": w, "title": "Use tabs", "content": "Indent with tabs."})
    own_d.stop()
    own_d.start(IDLE)
    started = int(time.time() * 1000)
    session(own_d, w, failing_run(started - 2 * DAY))
    deadline = time.monotonic() + 30
    while True:
        rows = ledger_rows(own_d, "SELECT state FROM attention_state")
        states = [msgspec.json.decode(bytes(row[0])) for row in rows]
        fresh_states = [s for s in states if s["computedAt"] >= started and "offset lost" in str(s)]
        if fresh_states or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    [state] = fresh_states
    assert any(
        'Proposal "Use tabs" waiting' in line["text"] for line in section_lines(state, "Waiting on the user")
    )


def test_a_session_of_an_earlier_run_reaches_the_first_get_attention(own_d: DaemonProcess) -> None:
    """A session whose events an earlier daemon left unread (not idle yet then) is in the
    first get_attention after a restart, the workspace only read before it."""
    own_d.restart({"MAKAD_BEHAVIOR_IDLE_MS": str(DAY)})
    w = fresh(own_d)
    session(own_d, w, failing_run(int(time.time() * 1000)))
    assert not mentions(attention(own_d, w), "offset lost")
    own_d.restart(IDLE)
    assert own_d.call("read_state", {"workspace": w})["status"] == "ok"
    assert mentions(attention(own_d, w), "offset lost")

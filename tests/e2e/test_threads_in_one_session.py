"""Several threads in one session, through a real daemon on a real socket: each thread
gets its own outcome from the turns that belong to it, so a closing word closes the
thread it answers (the latest), not an earlier one the user left unfinished."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_attention import DAY, OPEN_SECTIONS, fresh, section_lines, session, wait_for
from tests.support import DaemonProcess, daemon_in_tmp

HOUR = 3_600_000


@pytest.fixture(scope="module")
def d() -> Iterator[DaemonProcess]:
    yield from daemon_in_tmp(env={"MAKAD_BEHAVIOR_IDLE_MS": "1"})


def now_ms() -> int:
    return int(time.time() * 1000)


class Clock:
    """Event times one second apart from ``start``."""

    def __init__(self, start: int) -> None:
        self.at = start

    def __call__(self) -> int:
        self.at += 1_000
        return self.at


def said(t: Clock, who: str, text: str) -> dict[str, Any]:
    return {"type": "user_message" if who == "user" else "assistant_message", "text": text, "ts": t()}


def tool(
    t: Clock, call_id: str, name: str, call: str, result: str, exit_code: int = 0
) -> list[dict[str, Any]]:
    return [
        {"type": "tool_call", "text": call, "toolCallId": call_id, "toolName": name, "ts": t()},
        {
            "type": "tool_result",
            "text": result,
            "toolCallId": call_id,
            "toolName": name,
            "meta": {"exit_code": str(exit_code)},
            "ts": t(),
        },
    ]


def date_test_started(t: Clock) -> list[dict[str, Any]]:
    """The user asks to fix a failing test; the agent edits the code but does not finish."""
    return [
        said(t, "user", "The DST test in tests/test_dates.py fails since Monday, please fix it"),
        *tool(t, "r1", "read_file", '{"path": "src/dates.py"}', "src/dates.py\n(212 lines)"),
        *tool(t, "e1", "edit_file", '{"path": "src/dates.py", "edit": "keep the offset"}', '{"ok": true}'),
        said(t, "assistant", "I changed how src/dates.py keeps the UTC offset; I have not run the test yet."),
    ]


def migration_done(t: Clock) -> list[dict[str, Any]]:
    """Midway, the user asks for a migration; the agent writes and applies it."""
    return [
        said(t, "user", "Before I forget: add a migration for the new users.email column"),
        *tool(
            t,
            "w1",
            "write_file",
            '{"path": "migrations/0042_users_email.py"}',
            "migrations/0042_users_email.py\n(18 lines)",
        ),
        *tool(t, "a1", "bash", "alembic upgrade head", "INFO  Running upgrade 0041 -> 0042"),
        said(t, "assistant", "Migration 0042 adds users.email and is applied."),
    ]


def back_to_the_date_test(t: Clock) -> list[dict[str, Any]]:
    """The user goes back to the test, which now passes."""
    return [
        said(t, "user", "OK, back to the DST date test: does it pass now?"),
        *tool(t, "p1", "bash", "pytest tests/test_dates.py -q", "4 passed in 0.31s"),
        said(t, "assistant", "It passes now."),
    ]


def one_session(d: DaemonProcess, w: str, events: list[dict[str, Any]]) -> str:
    sid = session(d, w, events)
    d.call("close_session", {"workspace": w, "sessionId": sid})
    return sid


def derived(d: DaemonProcess, w: str) -> dict[str, Any]:
    """The attention state once the closed session is in it (its Rhythm line counts it)."""
    return wait_for(d, w, lambda s: bool(section_lines(s, "Rhythm")))


def open_lines(state: dict[str, Any]) -> list[str]:
    return [line["text"] for line in section_lines(state, *OPEN_SECTIONS)]


def suggested_to_a_new_session(d: DaemonProcess, w: str) -> list[str]:
    sid = session(d, w, [])
    reply = d.call("suggest", {"workspace": w, "sessionId": sid})
    return [s["text"] for s in reply["suggestions"]]


@pytest.mark.parametrize(
    "last_word",
    ["thanks!", "Thanks, that works", "perfect, thank you", "never mind, drop that"],
)
def test_a_closing_word_after_a_second_thread_leaves_the_first_open(d: DaemonProcess, last_word: str) -> None:
    """A test fix left half-way, then a migration finished and thanked for (or let go):
    the test fix stays open and is suggested to the next session; the migration is not."""
    w = fresh(d)
    t = Clock(now_ms() - DAY)
    one_session(
        d,
        w,
        [
            *date_test_started(t),
            *migration_done(t),
            said(t, "user", last_word),
            said(t, "assistant", "You're welcome."),
        ],
    )
    state = wait_for(d, w, lambda s: any("DST test" in line for line in open_lines(s)))
    lines = open_lines(state)
    assert len(lines) == 1 and "DST test" in lines[0]
    assert "migration" not in lines[0]
    suggestions = suggested_to_a_new_session(d, w)
    assert len(suggestions) == 1 and "DST test" in suggestions[0]


def test_a_closing_word_after_going_back_to_the_first_thread_closes_both(d: DaemonProcess) -> None:
    """The test fix, a migration in between that the user was pleased with, then back to
    the test until it passes and "thanks": nothing is left open, nothing is suggested."""
    w = fresh(d)
    t = Clock(now_ms() - DAY)
    one_session(
        d,
        w,
        [
            *date_test_started(t),
            *migration_done(t),
            said(t, "user", "perfect"),
            *back_to_the_date_test(t),
            said(t, "user", "thanks, that's all for today"),
            said(t, "assistant", "You're welcome."),
        ],
    )
    state = derived(d, w)
    assert open_lines(state) == []
    assert suggested_to_a_new_session(d, w) == []


def test_a_question_answered_in_words_is_no_thread_of_its_own(d: DaemonProcess) -> None:
    """A side question answered in words between the work and the thanks belongs to the
    work it interrupted: the thanks closes it all, nothing is suggested."""
    w = fresh(d)
    t = Clock(now_ms() - DAY)
    one_session(
        d,
        w,
        [
            *date_test_started(t),
            said(t, "user", "By the way, what does the zoneinfo module do differently from pytz?"),
            said(t, "assistant", "zoneinfo uses the system tz database and plain datetime arithmetic."),
            *back_to_the_date_test(t)[1:],
            said(t, "user", "great, thanks"),
            said(t, "assistant", "Glad to help."),
        ],
    )
    state = derived(d, w)
    assert open_lines(state) == []
    assert suggested_to_a_new_session(d, w) == []


def test_a_second_thread_left_open_is_the_one_suggested(d: DaemonProcess) -> None:
    """A test fixed and thanked for, then a migration started and left as the session went
    idle: the line names the migration (its request and events), not the finished test fix."""
    w = fresh(d)
    t = Clock(now_ms() - DAY)
    events = [
        *date_test_started(t),
        *back_to_the_date_test(t)[1:],
        said(t, "user", "thanks, that works"),
        said(t, "assistant", "Glad to help."),
        said(t, "user", "Now write a migration for the new users.email column"),
        *tool(
            t,
            "w2",
            "write_file",
            '{"path": "migrations/0042_users_email.py"}',
            "migrations/0042_users_email.py\n(18 lines)",
        ),
        said(t, "assistant", "The migration is written; I will apply it once you have reviewed it."),
    ]
    sid = session(d, w, events)
    state = wait_for(d, w, lambda s: any("migration" in line for line in open_lines(s)))
    lines = section_lines(state, *OPEN_SECTIONS)
    assert [line["text"] for line in lines] == ["Open: Now write a migration for the new users.email column"]
    migration_request = next(
        i + 1 for i, e in enumerate(events) if e["text"].startswith("Now write a migration")
    )
    assert f"event:{sid}:{migration_request}" in lines[0]["refs"]

"""Proactive suggestions through a real daemon on a real socket: what fires with its refs,
what does not (fixed, resolved, the asking session's own thread), dismissal and its
cooldown across a restart, the privacy gates, forgotten sessions and retracted memory."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from maka.errors import RemoteError
from tests.e2e.test_attention import (
    DAY,
    attention,
    failing_run,
    fresh,
    mentions,
    passing_run,
    session,
    wait_for,
)
from tests.support import DaemonProcess, daemon_in_tmp

COOLDOWN_MS = 1_500
ENV = {"MAKAD_BEHAVIOR_IDLE_MS": "1", "MAKAD_SUGGESTION_COOLDOWN_MS": str(COOLDOWN_MS)}


@pytest.fixture(scope="module")
def d() -> Iterator[DaemonProcess]:
    """One daemon for the module: each test works in workspaces of its own (``fresh``)."""
    yield from daemon_in_tmp(env=ENV)


def now_ms() -> int:
    return int(time.time() * 1000)


def suggest(d: DaemonProcess, w: str, **params: Any) -> dict[str, Any]:
    return dict(d.call("suggest", {"workspace": w, "explain": True, **params}))


def wait_suggest(
    d: DaemonProcess, w: str, ok: Callable[[dict[str, Any]], bool], **params: Any
) -> dict[str, Any]:
    """The suggest reply once ``ok`` holds (records and the state are derived in the background)."""
    deadline = time.monotonic() + 30
    while True:
        reply = suggest(d, w, **params)
        if ok(reply) or time.monotonic() > deadline:
            return reply
        time.sleep(0.1)


def texts(reply: dict[str, Any]) -> list[str]:
    return [s["text"] for s in reply["suggestions"]]


def fires(text: str) -> Callable[[dict[str, Any]], bool]:
    return lambda reply: any(text in t for t in texts(reply))


def thread_session(d: DaemonProcess, w: str, at: int, thread: str = "wire the exporter into the CLI") -> str:
    """A session of several turns on src/export.py, closed with an open thread in its working state."""
    sid = session(
        d,
        w,
        [
            {"type": "user_message", "text": "Add an exporter in src/export.py", "ts": at},
            {
                "type": "tool_call",
                "text": "cat src/export.py",
                "toolCallId": "e1",
                "toolName": "bash",
                "ts": at + 1,
            },
            {
                "type": "tool_result",
                "text": "def export(): ...",
                "toolCallId": "e1",
                "toolName": "bash",
                "ts": at + 2,
            },
            {"type": "assistant_message", "text": "The exporter is in place.", "ts": at + 3},
            {"type": "user_message", "text": "Now the CLI part", "ts": at + 4},
            {"type": "assistant_message", "text": "Next: the CLI.", "ts": at + 5},
        ],
        working={"openThreads": [thread]},
    )
    d.call("close_session", {"workspace": w, "sessionId": sid})
    return sid


def test_an_abandoned_thread_and_an_unfixed_failure_are_suggested_with_refs(d: DaemonProcess) -> None:
    """A failure left two days ago and a thread left a day ago are both suggested, each
    citing the events it came from, scoring at least the threshold."""
    w = fresh(d)
    now = now_ms()
    failed = session(d, w, failing_run(now - 2 * DAY - 3_600_000))
    d.call("close_session", {"workspace": w, "sessionId": failed})
    left = thread_session(d, w, now - DAY)
    reply = wait_suggest(d, w, lambda r: len(r["suggestions"]) == 2)
    kinds = {s["kind"]: s for s in reply["suggestions"]}
    assert set(kinds) == {"unfixed_failure", "resume_thread"}
    assert kinds["unfixed_failure"]["text"].startswith("Still failing since")
    assert "offset lost" in kinds["unfixed_failure"]["text"]
    assert kinds["unfixed_failure"]["refs"] == [f"event:{failed}:3"]
    assert kinds["resume_thread"]["text"].startswith("Resume: wire the exporter into the CLI")
    assert all(ref.startswith(f"event:{left}:") for ref in kinds["resume_thread"]["refs"])
    assert all(s["score"] >= reply["threshold"] and s["reason"] for s in reply["suggestions"])
    assert reply["enabled"] is True and reply["silenced"] is None


def test_a_fixed_failure_and_a_resolved_thread_are_not_suggested(d: DaemonProcess) -> None:
    """The same call passing in a later session that ends done: neither the failure nor its
    thread is suggested, and no candidate about it scores."""
    w = fresh(d)
    now = now_ms()
    failed = session(d, w, failing_run(now - 2 * DAY))
    d.call("close_session", {"workspace": w, "sessionId": failed})
    wait_suggest(d, w, fires("offset lost"))
    fixed = session(d, w, passing_run(now - DAY))
    d.call("close_session", {"workspace": w, "sessionId": fixed})
    wait_for(d, w, lambda s: not mentions(s, "offset lost") and s["computedAt"] > 0)
    reply = suggest(d, w)
    assert reply["suggestions"] == []
    assert not any("offset lost" in c["text"] and c["score"] > 0 for c in reply["candidates"])


def test_the_asking_session_is_not_suggested_its_own_thread(d: DaemonProcess) -> None:
    """The session that left the thread asks: not suggested to it (the reason says so); another
    session is offered it."""
    w = fresh(d)
    sid = thread_session(d, w, now_ms() - DAY)
    wait_suggest(d, w, fires("wire the exporter"))
    mine = suggest(d, w, sessionId=sid)
    assert not any("wire the exporter" in t for t in texts(mine))
    [skipped] = [c for c in mine["candidates"] if "wire the exporter" in c["text"]]
    assert skipped["score"] == 0 and "current session" in skipped["reason"]
    other = session(d, w, [{"type": "user_message", "text": "hello"}])
    assert fires("wire the exporter")(suggest(d, w, sessionId=other))


def test_a_live_session_on_the_same_paths_or_thread_is_not_offered_it(d: DaemonProcess) -> None:
    """A session just begun that reads src/export.py, or has the thread in its working
    state, is not offered the exporter thread another session left; one on other work is."""
    w = fresh(d)
    thread_session(d, w, now_ms() - DAY)
    wait_suggest(d, w, fires("wire the exporter"))
    on_paths = session(
        d,
        w,
        [
            {"type": "user_message", "text": "Let's go on"},
            {"type": "tool_call", "text": "cat src/export.py", "toolCallId": "r", "toolName": "bash"},
            {"type": "tool_result", "text": "def export(): ...", "toolCallId": "r", "toolName": "bash"},
        ],
    )
    reply = suggest(d, w, sessionId=on_paths)
    assert not fires("wire the exporter")(reply)
    assert any("touches its paths" in c["reason"] for c in reply["candidates"])
    on_thread = session(d, w, [{"type": "user_message", "text": "Next task"}])
    d.call(
        "set_working_state",
        {"workspace": w, "sessionId": on_thread, "openThreads": ["wire the exporter into the CLI"]},
    )
    reply = suggest(d, w, sessionId=on_thread)
    assert not fires("wire the exporter")(reply)
    assert any("same thread" in c["reason"] for c in reply["candidates"])
    elsewhere = session(d, w, [{"type": "user_message", "text": "Update the README"}])
    assert fires("wire the exporter")(suggest(d, w, sessionId=elsewhere))


def test_a_dismissed_suggestion_stays_away_for_the_cooldown(d: DaemonProcess) -> None:
    """Dismissed with the configured cooldown it is gone at once, and back once it ran out;
    forMs 0 brings a dismissed one back."""
    w = fresh(d)
    thread_session(d, w, now_ms() - DAY)
    reply = wait_suggest(d, w, fires("wire the exporter"))
    [item] = reply["suggestions"]
    assert reply["cooldownMs"] == COOLDOWN_MS
    before = now_ms()
    done = d.call("dismiss_suggestion", {"workspace": w, "id": item["id"]})
    assert done["id"] == item["id"] and done["until"] >= before + COOLDOWN_MS
    assert suggest(d, w)["suggestions"] == []
    back = wait_suggest(d, w, fires("wire the exporter"))
    assert [s["id"] for s in back["suggestions"]] == [item["id"]]
    d.call("dismiss_suggestion", {"workspace": w, "id": item["id"], "forMs": DAY})
    assert suggest(d, w)["suggestions"] == []
    d.call("dismiss_suggestion", {"workspace": w, "id": item["id"], "forMs": 0})
    assert [s["id"] for s in suggest(d, w)["suggestions"]] == [item["id"]]


def test_explain_says_why_a_candidate_over_the_threshold_is_not_offered(d: DaemonProcess) -> None:
    """With explain, a candidate scoring over the threshold but not offered says why in its
    reason: another suggestion from the same session is offered (named by id), or it was
    dismissed (until when); an offered one says neither."""
    w = fresh(d)
    now = now_ms()
    sid = session(
        d,
        w,
        failing_run(now - 5 * 3_600_000),
        working={"openThreads": ["tests/test_dates.py::test_tz still failing"]},
    )
    d.call("close_session", {"workspace": w, "sessionId": sid})
    reply = wait_suggest(d, w, lambda r: len(r["candidates"] or []) >= 2)
    [offered] = reply["suggestions"]
    assert "not offered" not in offered["reason"]
    [held] = [c for c in reply["candidates"] if c["id"] != offered["id"] and c["score"] >= reply["threshold"]]
    assert f"not offered: {offered['id']} from the same session is" in held["reason"]
    d.call("dismiss_suggestion", {"workspace": w, "id": offered["id"]})
    reply = suggest(d, w)
    [gone] = [c for c in reply["candidates"] if c["id"] == offered["id"]]
    assert "not offered: dismissed until" in gone["reason"]
    assert [s["id"] for s in reply["suggestions"]] == [held["id"]]
    assert "not offered" not in reply["suggestions"][0]["reason"]


def test_a_dismissal_survives_a_daemon_restart(short_tmp: Path) -> None:
    """Dismissed for a day, restarted: the id is still a candidate but not suggested."""
    d = DaemonProcess(short_tmp)
    d.start(ENV)
    try:
        w = fresh(d)
        thread_session(d, w, now_ms() - DAY)
        [item] = wait_suggest(d, w, fires("wire the exporter"))["suggestions"]
        d.call("dismiss_suggestion", {"workspace": w, "id": item["id"], "forMs": DAY})
        d.stop()
        d.start(ENV)
        reply = wait_suggest(d, w, lambda r: any(c["id"] == item["id"] for c in r["candidates"] or []))
        assert [c["id"] for c in reply["candidates"]] == [item["id"]]
        assert reply["suggestions"] == []
    finally:
        d.stop()


def test_incognito_and_agent_reads_off_suggest_nothing(d: DaemonProcess) -> None:
    """An incognito session, agent reads off, attention off and an incognito workspace each
    get an empty reply that says why."""
    w = fresh(d)
    thread_session(d, w, now_ms() - DAY)
    wait_suggest(d, w, fires("wire the exporter"))
    hidden = session(d, w, [{"type": "user_message", "text": "hi"}], incognito=True)
    reply = suggest(d, w, sessionId=hidden)
    assert (reply["enabled"], reply["silenced"], reply["suggestions"]) == (False, "session_incognito", [])
    assert reply["candidates"] is None
    for change, why in (
        ({"agentReadEnabled": False}, "agent_reads_off"),
        ({"agentReadEnabled": True, "attentionEnabled": False}, "attention_off"),
        ({"attentionEnabled": True, "incognito": True}, "incognito"),
    ):
        d.call("set_settings", {"workspace": w, **change})
        reply = suggest(d, w)
        assert (reply["enabled"], reply["silenced"], reply["suggestions"]) == (False, why, [])
    d.call("set_settings", {"workspace": w, "incognito": False})
    with_reads = fresh(d, reads=False)
    assert suggest(d, with_reads)["silenced"] == "agent_reads_off"


def test_an_incognito_sessions_work_is_never_suggested(d: DaemonProcess) -> None:
    """A thread left in an incognito session leaves no record: nothing of it is suggested."""
    w = fresh(d)
    now = now_ms()
    hidden = session(d, w, failing_run(now - DAY, request="Rotate the secret ledger keys"), incognito=True)
    d.call("close_session", {"workspace": w, "sessionId": hidden})
    thread_session(d, w, now - DAY)
    reply = wait_suggest(d, w, fires("wire the exporter"))
    assert not any("Rotate" in c["text"] or "offset lost" in c["text"] for c in reply["candidates"])


@pytest.mark.parametrize(
    "thanks", ["ok merci", "super, danke", "vale, gracias", "muito obrigado", "спасибо!"]
)
def test_work_the_user_thanked_for_in_another_language_is_not_suggested(
    d: DaemonProcess, thanks: str
) -> None:
    """A session left idle after the agent's reply and the user's "ok merci" is finished
    work: no Unanswered line, no resume suggestion cites it."""
    w = fresh(d)
    now = now_ms()
    thanked = session(
        d,
        w,
        [
            {"type": "user_message", "text": "Speed up the lookup in src/cache.py", "ts": now - DAY},
            {"type": "assistant_message", "text": "Done: src/cache.py uses a dict now.", "ts": now - DAY + 1},
            {"type": "user_message", "text": thanks, "ts": now - DAY + 2},
        ],
    )
    thread_session(d, w, now - DAY + 3_600_000)
    reply = wait_suggest(d, w, fires("wire the exporter"))
    assert not any(thanked in ref for c in reply["candidates"] or [] for ref in c["refs"])
    assert not mentions(attention(d, w), "src/cache.py", "Active threads", "Recently abandoned")


def test_thanks_with_a_further_ask_left_unanswered_is_suggested(d: DaemonProcess) -> None:
    """ "Thanks, but it still crashes — can you look?" with no reply is an unanswered request:
    it is listed in the attention state and offered back, naming that request."""
    w = fresh(d)
    now = now_ms()
    asked = session(
        d,
        w,
        [
            {"type": "user_message", "text": "Make src/export.py skip empty rows", "ts": now - DAY},
            {"type": "assistant_message", "text": "Empty rows are skipped now.", "ts": now - DAY + 1},
            {
                "type": "user_message",
                "text": "Thanks, but it still crashes on Windows paths, can you look?",
                "ts": now - DAY + 2,
            },
        ],
    )
    reply = wait_suggest(d, w, fires("Make src/export.py skip empty rows"))
    [item] = reply["suggestions"]
    assert item["kind"] == "resume_thread" and item["text"].startswith("Resume (unanswered)")
    assert "still crashes on Windows paths" in item["text"]
    assert all(ref.startswith(f"event:{asked}:") for ref in item["refs"])


def test_a_thread_let_go_in_a_later_session_in_other_words_is_not_suggested(d: DaemonProcess) -> None:
    """Left open in one session and let go in the next ("never mind the exporter wiring"):
    no resume suggestion, no open line in the attention state."""
    w = fresh(d)
    now = now_ms()
    thread_session(d, w, now - 2 * DAY)
    session(
        d,
        w,
        [
            {
                "type": "user_message",
                "text": "never mind the exporter for the CLI, not needed",
                "ts": now - DAY,
            },
            {"type": "assistant_message", "text": "OK, leaving it.", "ts": now - DAY + 1},
        ],
    )
    state = wait_for(d, w, lambda s: mentions(s, "2 sessions", "Rhythm"))
    assert mentions(state, "2 sessions", "Rhythm")
    assert not mentions(state, "wire the exporter", "Active threads", "Recently abandoned")
    reply = suggest(d, w)
    assert not any("wire the exporter" in c["text"] and c["score"] > 0 for c in reply["candidates"] or [])


def light_session(d: DaemonProcess, w: str, at: int) -> str:
    """A later session of one question answered in words and thanked for: nothing of the thread."""
    return session(
        d,
        w,
        [
            {"type": "user_message", "text": "What does the --retry flag of the uploader do?", "ts": at},
            {"type": "assistant_message", "text": "It retries a failed upload three times.", "ts": at + 1},
            {"type": "user_message", "text": "thanks", "ts": at + 2},
        ],
    )


def test_a_thread_passed_over_by_later_sessions_stops_being_suggested_but_stays_listed(
    d: DaemonProcess,
) -> None:
    """A thread left without a word is offered while fewer than 3 later sessions went by
    without taking it up; from the 3rd on it is not offered (the reason says so) and the
    attention state still lists it."""
    w = fresh(d)
    now = now_ms()
    thread_session(d, w, now - 2 * DAY)
    for k in range(2):
        light_session(d, w, now - 2 * DAY + (k + 1) * 3_600_000)
    reply = wait_suggest(d, w, fires("wire the exporter"))
    assert any("wire the exporter" in t for t in texts(reply))
    light_session(d, w, now - DAY)
    state = wait_for(d, w, lambda s: mentions(s, "4 sessions", "Rhythm"))
    assert mentions(state, "wire the exporter", "Active threads", "Recently abandoned")
    reply = suggest(d, w)
    assert not any("wire the exporter" in t for t in texts(reply))
    [candidate] = [c for c in reply["candidates"] if "wire the exporter" in c["text"]]
    assert candidate["score"] == 0 and "3 later sessions" in candidate["reason"]


def test_later_work_in_the_same_session_is_no_later_session(d: DaemonProcess) -> None:
    """A failure left in a session that then went on to other work, followed by 2 light
    sessions, is still offered (2 later sessions went by, not 3), and its reason counts no
    later session for the work done in its own session."""
    w = fresh(d)
    now = now_ms()
    at = now - 2 * DAY
    switch = [
        {"type": "user_message", "text": "Leave that. Add a CSV report in src/report.py", "ts": at + 10},
        {
            "type": "tool_call",
            "text": "cat src/report.py",
            "toolCallId": "r1",
            "toolName": "bash",
            "ts": at + 11,
        },
        {
            "type": "tool_result",
            "text": "def report(): ...",
            "toolCallId": "r1",
            "toolName": "bash",
            "ts": at + 12,
        },
        {"type": "assistant_message", "text": "The CSV report is written in src/report.py.", "ts": at + 13},
    ]
    sid = session(d, w, failing_run(at) + switch)
    d.call("close_session", {"workspace": w, "sessionId": sid})
    for k in range(2):
        light_session(d, w, at + (k + 1) * 3_600_000)
    state = wait_for(d, w, lambda s: mentions(s, "3 sessions", "Rhythm"))
    assert mentions(state, "offset lost")
    reply = suggest(d, w)
    [failure] = [c for c in reply["candidates"] if "offset lost" in c["text"]]
    assert "passed over" not in failure["reason"]
    assert "later session" not in failure["reason"]
    assert any("offset lost" in t for t in texts(reply))


def test_a_forgotten_sessions_suggestions_disappear(d: DaemonProcess) -> None:
    """delete_session: nothing suggested or listed cites it, at once and once derived again."""
    w = fresh(d)
    old = thread_session(d, w, now_ms() - DAY)
    wait_suggest(d, w, fires("wire the exporter"))
    d.call("delete_session", {"workspace": w, "sessionId": old})

    def cites_old(reply: dict[str, Any]) -> bool:
        return any(
            old in ref or "wire the exporter" in s["text"]
            for s in reply["candidates"] or []
            for ref in s["refs"]
        )

    assert not cites_old(suggest(d, w))
    reply = wait_suggest(d, w, lambda r: r["silenced"] is None)
    assert reply["silenced"] is None and not cites_old(reply)
    assert reply["suggestions"] == []


FACT = "the deploy script lives in tools/ship.sh and needs the office VPN"


@pytest.mark.parametrize("how", ["delete", "correct"])
def test_deleted_or_corrected_memory_never_comes_back_through_a_suggestion(
    d: DaemonProcess, how: str
) -> None:
    """A thread saying memory text the user then deletes or corrects is no candidate any more."""
    w = fresh(d)
    entry = d.call("add_entry", {"workspace": w, "title": "Deploy", "content": FACT})["entry"]
    at = now_ms() - DAY
    sid = session(
        d,
        w,
        [
            {"type": "user_message", "text": f"Remember: {FACT}", "ts": at},
            {
                "type": "tool_call",
                "text": "cat tools/ship.sh",
                "toolCallId": "x",
                "toolName": "bash",
                "ts": at + 1,
            },
            {"type": "tool_result", "text": "#!/bin/sh", "toolCallId": "x", "toolName": "bash", "ts": at + 2},
            {"type": "assistant_message", "text": "Noted.", "ts": at + 3},
        ],
        working={"openThreads": [f"Check that {FACT}"]},
    )
    d.call("close_session", {"workspace": w, "sessionId": sid})
    seen = wait_suggest(d, w, lambda r: any("tools/ship.sh" in c["text"] for c in r["candidates"] or []))
    assert any("tools/ship.sh" in c["text"] for c in seen["candidates"] or []), seen
    if how == "delete":
        d.call("delete_entry", {"workspace": w, "id": entry["id"]})
    else:
        d.call("update_entry", {"workspace": w, "id": entry["id"], "content": "deploys go through CI only"})

    def says_it(reply: dict[str, Any]) -> bool:
        return any("ship.sh" in c["text"] for c in [*reply["suggestions"], *(reply["candidates"] or [])])

    assert not says_it(suggest(d, w))
    attention(d, w)  # derived again
    reply = wait_suggest(d, w, lambda r: r["silenced"] is None)
    assert reply["silenced"] is None and not says_it(reply)


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"id": "not-an-id"}, "$.id"),
        ({"id": "sg_0123456789ABCDEF"}, "$.id"),
        ({"id": "sg_0123456789abcdef", "forMs": -1}, "$.forMs"),
        ({"id": "sg_0123456789abcdef", "forMs": 400 * DAY}, "$.forMs"),
        ({"id": 5}, "$.id"),
    ],
)
def test_bad_dismissals_are_invalid_params(d: DaemonProcess, params: dict[str, Any], path: str) -> None:
    """A malformed id or a forMs out of range is invalid_params naming the field; the daemon
    keeps serving."""
    w = fresh(d)
    with pytest.raises(RemoteError) as caught:
        d.call("dismiss_suggestion", {"workspace": w, **params})
    assert caught.value.kind == "invalid_params"
    assert caught.value.data.get("path") == path
    assert suggest(d, w)["enabled"] is True


def test_bad_suggest_params_and_incognito_dismissal_are_refused(d: DaemonProcess) -> None:
    """An unknown field or a non-string sessionId is invalid_params; dismissing in an
    incognito workspace writes nothing (incognito_blocked)."""
    w = fresh(d)
    for params in ({"sessionId": 7}, {"bogus": True}):
        with pytest.raises(RemoteError) as caught:
            d.call("suggest", {"workspace": w, **params})
        assert caught.value.kind == "invalid_params"
    d.call("set_settings", {"workspace": w, "incognito": True})
    with pytest.raises(RemoteError) as caught:
        d.call("dismiss_suggestion", {"workspace": w, "id": "sg_0123456789abcdef"})
    assert caught.value.kind == "incognito_blocked"


def test_an_unknown_or_other_workspaces_session_is_not_found_as_build_context_says(
    d: DaemonProcess,
) -> None:
    """suggest with a sessionId the workspace does not hold (made up, or another workspace's)
    is not_found naming the session, as build_context answers; the daemon keeps serving."""
    w, other = fresh(d), fresh(d)
    elsewhere = session(d, other, [{"type": "user_message", "text": "hi"}])
    for sid in ("s_unknown", elsewhere):
        for method, extra in (("suggest", {}), ("build_context", {"budgetTokens": 1000})):
            with pytest.raises(RemoteError) as caught:
                d.call(method, {"workspace": w, "sessionId": sid, **extra})
            assert caught.value.kind == "not_found", method
            assert caught.value.data.get("sessionId") == sid, method
    d.call("set_settings", {"workspace": w, "attentionEnabled": False})
    with pytest.raises(RemoteError) as caught:
        d.call("suggest", {"workspace": w, "sessionId": "s_unknown"})
    assert caught.value.kind == "not_found"
    assert suggest(d, other, sessionId=elsewhere)["enabled"] is True


def _since_label(reply: dict[str, Any], marker: str) -> str:
    """What "Still failing since …:" says for the candidate whose text holds ``marker``."""
    (text,) = [c["text"] for c in reply["candidates"] if marker in c["text"]]
    return text.removeprefix("Still failing since ").split(": ", 1)[0]


def test_still_failing_since_never_reads_as_today_for_an_earlier_day(d: DaemonProcess) -> None:
    """A failure from late yesterday is "since <yesterday's weekday>", not a clock time that
    reads as today; one from the same weekday last week is its date, not today's weekday."""
    now = now_ms()
    midnight = now - now % DAY
    cases = {"yesterday": midnight - 60_000, "last week": midnight - 6 * DAY - 60_000}
    labels = {}
    for name, at in cases.items():
        w = fresh(d)
        sid = session(d, w, failing_run(at))
        d.call("close_session", {"workspace": w, "sessionId": sid})
        labels[name] = _since_label(wait_suggest(d, w, lambda r: bool(r["candidates"])), "offset lost")
    weekdays = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
    yesterday = time.gmtime((midnight - 60_000) / 1000)
    assert labels["yesterday"] == weekdays[yesterday.tm_wday]
    assert labels["last week"] == time.strftime("%Y-%m-%d", time.gmtime((midnight - 6 * DAY - 60_000) / 1000))

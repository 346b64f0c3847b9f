"""compact over the socket: continuity, lossless retrieval, validation, crashes, breaker."""

from __future__ import annotations

from typing import Any

import pytest

from maka.errors import RemoteError
from tests.e2e.sessions_support import append, check_history_shape, open_session, scripted_turns
from tests.support import DaemonProcess

GOOD_SUMMARY = (
    "# Current Goal\nFix the modules.\n\n# Current State\nHalf done.\n\n"
    "# Next Step\nContinue with the next module.\n"
)


def ws(d: DaemonProcess) -> str:
    return str(d.workspace)


def compact(d: DaemonProcess, sid: str, **kw: Any) -> dict[str, Any]:
    result: dict[str, Any] = d.call(
        "compact", {"workspace": ws(d), "sessionId": sid, "mode": kw.pop("mode", "checkpoint"), **kw}
    )
    return result


def test_three_compactions_keep_continuity_and_lose_nothing(shared_daemon: DaemonProcess) -> None:
    """500 events, three compactions (mixed modes): context keeps goal, state and summary;
    every compacted event is retrievable byte-exact with its hash verified."""
    sid = open_session(shared_daemon, title="long")
    sent = scripted_turns(125)  # 500 events
    append(shared_daemon, sid, sent)
    shared_daemon.call(
        "set_working_state",
        {
            "workspace": ws(shared_daemon),
            "sessionId": sid,
            "goals": ["Fix every module"],
            "decisions": ["Use read_file before editing"],
        },
    )
    first = compact(shared_daemon, sid, mode="checkpoint", keepRecentTokens=4000)
    second = compact(shared_daemon, sid, mode="semantic", summary=GOOD_SUMMARY, keepRecentTokens=2000)
    append(shared_daemon, sid, scripted_turns(30, start=125))
    third = compact(shared_daemon, sid, mode="checkpoint", keepRecentTokens=1000)
    assert first["boundarySeq"] < second["boundarySeq"] < third["boundarySeq"]
    assert third["coverage"]["fromSeq"] == second["coverage"]["toSeq"] + 1

    pack = shared_daemon.call(
        "build_context", {"workspace": ws(shared_daemon), "sessionId": sid, "budgetTokens": 8000}
    )
    kinds = {s["kind"]: s for s in pack["segments"]}
    assert "Fix every module" in kinds["working_state"]["text"]
    assert "Current Goal" in kinds["summary"]["text"]
    assert pack["messages"][-1]["content"].startswith("contents of module_154.py")
    assert any(m["content"].startswith("Goal 154:") for m in pack["messages"])
    assert all(
        int(m["sourceId"].split(":")[2].split("-")[0]) > third["coverage"]["toSeq"] for m in pack["messages"]
    )
    check_history_shape(pack["messages"])

    covered = third["coverage"]["toSeq"]
    got = shared_daemon.call(
        "retrieve", {"workspace": ws(shared_daemon), "refs": [f"event:{sid}:1-{covered}"]}
    )["results"][0]
    assert got["ok"] is True
    texts = [e["text"] for e in got["events"]]
    assert texts == [e["text"] for e in (sent + scripted_turns(30, start=125))][:covered]
    checkpoints = shared_daemon.call("list_checkpoints", {"workspace": ws(shared_daemon), "sessionId": sid})
    assert [c["checkpointId"] for c in checkpoints["checkpoints"]] == [
        first["checkpointId"],
        second["checkpointId"],
        third["checkpointId"],
    ]


@pytest.mark.parametrize(
    ("summary", "problem"),
    [
        ("", "empty"),
        ("# Current Goal\n" + "word " * 60_000 + "\n# Current State\nx\n# Next Step\ny\n", "too_long"),
        ("# Current Goal\nOnly a goal\n", "missing_sections"),
        (GOOD_SUMMARY + "\nkey: AKIAIOSFODNN7EXAMPLE\n", "contains_secret"),
    ],
)
def test_invalid_summaries_change_nothing(shared_daemon: DaemonProcess, summary: str, problem: str) -> None:
    """Empty, oversized, section-less or secret-bearing summaries are rejected; nothing changes."""
    sid = open_session(shared_daemon)
    append(shared_daemon, sid, scripted_turns(40))
    before = shared_daemon.call("read_events", {"workspace": ws(shared_daemon), "sessionId": sid})
    with pytest.raises(RemoteError) as info:
        shared_daemon.call(
            "compact",
            {
                "workspace": ws(shared_daemon),
                "sessionId": sid,
                "mode": "semantic",
                "summary": summary,
                "keepRecentTokens": 1000,
            },
        )
    assert info.value.kind == "invalid_summary"
    assert problem in info.value.data["problems"]
    assert (
        shared_daemon.call("list_checkpoints", {"workspace": ws(shared_daemon), "sessionId": sid})[
            "checkpoints"
        ]
        == []
    )
    assert shared_daemon.call("read_events", {"workspace": ws(shared_daemon), "sessionId": sid}) == before


@pytest.mark.parametrize("point", ["compact_before_commit", "compact_after_commit"])
def test_kill_during_compaction_leaves_old_or_new(daemon: DaemonProcess, point: str) -> None:
    """kill -9 during compaction, then restart: the old or the new checkpoint is in force."""
    sid = open_session(daemon)
    append(daemon, sid, scripted_turns(60))
    old = compact(daemon, sid, keepRecentTokens=3000)
    append(daemon, sid, scripted_turns(20, start=60))
    daemon.restart({"MAKAD_FAULT_POINT": point})
    with pytest.raises(Exception):  # noqa: B017 - the daemon dies mid-call
        daemon.call(
            "compact",
            {"workspace": ws(daemon), "sessionId": sid, "mode": "checkpoint", "keepRecentTokens": 1000},
            timeout=10,
        )
    assert daemon.proc is not None
    daemon.proc.wait(timeout=10)
    daemon.restart({"MAKAD_FAULT_POINT": ""})
    listed = daemon.call("list_checkpoints", {"workspace": ws(daemon), "sessionId": sid})
    ids = [c["checkpointId"] for c in listed["checkpoints"]]
    assert ids[0] == old["checkpointId"] and len(ids) == (1 if point == "compact_before_commit" else 2)
    pack = daemon.call("build_context", {"workspace": ws(daemon), "sessionId": sid, "budgetTokens": 6000})
    assert any(s["kind"] == "summary" for s in pack["segments"])
    check_history_shape(pack["messages"])


def test_nothing_to_compact(shared_daemon: DaemonProcess) -> None:
    """A session that fits the keep window has nothing to compact: invalid_params."""
    sid = open_session(shared_daemon)
    append(shared_daemon, sid, scripted_turns(2))
    with pytest.raises(RemoteError) as info:
        shared_daemon.call(
            "compact", {"workspace": ws(shared_daemon), "sessionId": sid, "mode": "checkpoint"}
        )
    assert info.value.kind == "invalid_params"


def test_nothing_to_compact_names_the_session_not_an_omitted_param(shared_daemon: DaemonProcess) -> None:
    """With keepRecentTokens omitted, nothing to compact points at the session (data.path
    $.sessionId), with data.reason nothing_to_compact and the live and kept token figures."""
    sid = open_session(shared_daemon)
    append(shared_daemon, sid, scripted_turns(2))
    with pytest.raises(RemoteError) as info:
        shared_daemon.call(
            "compact", {"workspace": ws(shared_daemon), "sessionId": sid, "mode": "checkpoint"}
        )
    data = info.value.data
    assert info.value.kind == "invalid_params" and data["reason"] == "nothing_to_compact"
    assert data["path"] == "$.sessionId"
    assert 0 < data["liveTokens"] < data["keptTokens"] == 10_000
    assert info.value.message.startswith("nothing to compact yet: the session holds ")


def test_nothing_to_compact_with_a_given_window_points_at_it(shared_daemon: DaemonProcess) -> None:
    """A keepRecentTokens the caller gave that leaves nothing to cover keeps data.path
    $.keepRecentTokens, with the window as held (clamped) in data.keptTokens."""
    sid = open_session(shared_daemon)
    append(shared_daemon, sid, scripted_turns(2))
    params = {"workspace": ws(shared_daemon), "sessionId": sid, "mode": "checkpoint", "keepRecentTokens": 5}
    with pytest.raises(RemoteError) as info:
        shared_daemon.call("compact", params)
    data = info.value.data
    assert data["path"] == "$.keepRecentTokens" and data["reason"] == "nothing_to_compact"
    assert data["keptTokens"] == 1_000


def test_breaker_opens_after_three_failed_overflow_compactions(shared_daemon: DaemonProcess) -> None:
    """Three failed reactive compactions in a row give circuit_open instead of a fourth try."""
    sid = open_session(shared_daemon)
    append(shared_daemon, sid, scripted_turns(40))
    params = {
        "workspace": ws(shared_daemon),
        "sessionId": sid,
        "mode": "semantic",
        "summary": "no sections",
        "reason": "overflow",
    }
    for _ in range(3):
        with pytest.raises(RemoteError) as info:
            shared_daemon.call("compact", params)
        assert info.value.kind == "invalid_summary"
    with pytest.raises(RemoteError) as info:
        shared_daemon.call("compact", params)
    assert info.value.kind == "circuit_open"
    manual = compact(shared_daemon, sid, mode="semantic", summary=GOOD_SUMMARY, keepRecentTokens=1000)
    assert manual["reason"] == "manual"


def test_compact_recommended_when_history_is_large(shared_daemon: DaemonProcess) -> None:
    """build_context recommends compaction once live history passes 60% of the budget."""
    sid = open_session(shared_daemon)
    append(shared_daemon, sid, scripted_turns(2))
    small = shared_daemon.call(
        "build_context", {"workspace": ws(shared_daemon), "sessionId": sid, "budgetTokens": 8000}
    )
    assert small["compactRecommended"] is False
    append(shared_daemon, sid, scripted_turns(200, start=2))
    big = shared_daemon.call(
        "build_context", {"workspace": ws(shared_daemon), "sessionId": sid, "budgetTokens": 8000}
    )
    assert big["compactRecommended"] is True and big["totalTokens"] <= 8000

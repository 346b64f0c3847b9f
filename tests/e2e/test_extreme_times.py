"""Times at the ends of what the wire accepts — an event's `ts`, an episode's `at`, an entry's
`createdAt` from 1970 back to the smallest and up to the largest signed 64-bit integer of
milliseconds — are stored, and every call that later reads them still answers: recall,
date queries, attention, suggestions, consolidation digests, exports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from maka import Client
from tests.support import DaemonProcess

MAX_INT64 = 2**63 - 1
EXTREMES = [MAX_INT64, -MAX_INT64 - 1, 253_402_300_800_000, -62_135_596_800_001, -1]


def _session(c: Client, ws: str, ts: int) -> str:
    sid: str = c.call("open_session", {"workspace": ws})["sessionId"]
    events: list[dict[str, Any]] = [
        {"type": "user_message", "text": f"please deploy the billing service, take {n}", "ts": ts}
        for n in range(3)
    ]
    events += [
        {"type": "tool_call", "text": "deploy billing", "toolCallId": "c1", "toolName": "bash", "ts": ts},
        {
            "type": "tool_result",
            "text": "error: deploy failed",
            "toolCallId": "c1",
            "toolName": "bash",
            "ts": ts,
        },
    ]
    c.call("append_events", {"workspace": ws, "sessionId": sid, "events": events})
    return sid


@pytest.mark.parametrize("ts", EXTREMES)
def test_calls_reading_extreme_event_times_answer(shared_daemon: DaemonProcess, ts: int) -> None:
    """Events stamped with an extreme ts are recalled, dated and derived from without a -32603."""
    ws = str(shared_daemon.workspace)
    with shared_daemon.client() as c:
        c.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "historyRecallEnabled": True})
        old = _session(c, ws, ts)
        c.call("close_session", {"workspace": ws, "sessionId": old})
        now = c.call("open_session", {"workspace": ws})["sessionId"]
        for query in ("billing deploy", "what did we deploy last friday", "the deploy in March 2024"):
            pack = c.call(
                "build_context", {"workspace": ws, "budgetTokens": 4000, "sessionId": now, "query": query}
            )
            assert pack["totalTokens"] <= 4000
        assert any(seg["kind"] == "recall" for seg in pack["segments"])
        assert [
            event["ts"] for event in c.call("read_events", {"workspace": ws, "sessionId": old})["events"]
        ] == [ts] * 5
        assert c.call("get_attention", {"workspace": ws})["enabled"]
        c.call("suggest", {"workspace": ws, "sessionId": now, "explain": True})


@pytest.mark.parametrize("at", [MAX_INT64, 253_402_300_800_000])
def test_a_consolidation_digest_of_far_future_episodes_is_written(
    shared_daemon: DaemonProcess, at: int
) -> None:
    """Episodes recorded with the largest `at` still make a consolidation proposal (its digest dates them)."""
    ws = str(shared_daemon.workspace)
    with shared_daemon.client() as c:
        c.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "extractToolEnabled": True})
        for _ in range(2):
            sid = _session(c, ws, 1_796_000_000_000)
            for seq in (1, 2, 3):
                c.call(
                    "record_episode",
                    {
                        "workspace": ws,
                        "sessionId": sid,
                        "summary": f"deployed billing, take {seq}",
                        "sourceRefs": [f"event:{sid}:{seq}"],
                        "tags": ["deploy"],
                        "at": at,
                    },
                )
        proposed = c.call("consolidate", {"workspace": ws, "tag": "deploy"})
    assert proposed["proposal"]["content"].startswith("recurring: deploy")


def test_an_entry_dated_at_the_end_of_time_is_read_and_shown(shared_daemon: DaemonProcess) -> None:
    """A MEMORY.md entry whose createdAt and updatedAt are the largest int64 is read, packed and exported."""
    ws = shared_daemon.workspace
    memory = Path(ws) / "memory"
    memory.mkdir(mode=0o700, exist_ok=True)
    (memory / "MEMORY.md").write_text(
        "# Maka Memory\n\n## Billing\n"
        f"<!-- maka-memory: id=0123456789abcdef origin=manual createdAt={MAX_INT64} "
        f"updatedAt={MAX_INT64} status=active tags=ops -->\nBilling deploys on Fridays.\n",
        encoding="utf-8",
    )
    with shared_daemon.client() as c:
        c.call("set_settings", {"workspace": str(ws), "agentReadEnabled": True})
        state = c.call(
            "read_state", {"workspace": str(ws), "includeEntries": True, "includeConfidence": True}
        )
        assert [entry["createdAt"] for entry in state["entries"]] == [MAX_INT64]
        pack = c.call("build_context", {"workspace": str(ws), "budgetTokens": 2000, "query": "billing"})
        assert "Billing deploys on Fridays." in "".join(seg["text"] for seg in pack["segments"])
        for fmt in ("json", "markdown"):
            c.call("export_memories", {"workspace": str(ws), "format": fmt})

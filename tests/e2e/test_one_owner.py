"""Over the socket: after a checkpoint compaction each goal, decision and error is shown by
one segment only, the working state; the summary's copies are traced as owned_elsewhere."""

from __future__ import annotations

from tests.e2e.sessions_support import append, open_session, scripted_turns
from tests.support import DaemonProcess

GOALS = ["Migrate the payments service to the new queue"]
DECISIONS = ["Retry failed jobs three times before alerting", "Keep the old queue for a week"]
ERROR = "The consumer crashed on empty payloads; fixed by skipping them."


def test_compacted_session_shows_each_fact_once(shared_daemon: DaemonProcess) -> None:
    """Working state set, checkpoint compaction, build_context: every goal, decision and error
    appears in exactly one segment, and the trace names each summary line left out."""
    ws = str(shared_daemon.workspace)
    sid = open_session(shared_daemon, title="owners")
    append(shared_daemon, sid, scripted_turns(40))
    shared_daemon.call(
        "set_working_state",
        {
            "workspace": ws,
            "sessionId": sid,
            "goals": GOALS,
            "decisions": DECISIONS,
            "notes": {"Errors & Corrections": ERROR},
        },
    )
    shared_daemon.call(
        "compact", {"workspace": ws, "sessionId": sid, "mode": "checkpoint", "keepRecentTokens": 1000}
    )
    pack = shared_daemon.call("build_context", {"workspace": ws, "sessionId": sid, "budgetTokens": 16_000})
    texts = {s["kind"]: s["text"] for s in pack["segments"]}
    assert "summary" in texts and "working_state" in texts
    for fact in [*GOALS, *DECISIONS, ERROR]:
        assert sum(fact in text for text in texts.values()) == 1, fact
        assert fact in texts["working_state"]
    owned = pack["trace"]["ownedElsewhere"]
    assert {o["text"].lstrip("- ") for o in owned} >= {*GOALS, *DECISIONS, ERROR}
    assert all(o["reason"] == "owned_elsewhere" and o["owner"] == "working_state" for o in owned)
    assert pack["trace"]["dropped"]["owned_elsewhere"] == len(owned)
    assert "## Current Goal" in texts["summary"] and "## User Messages" in texts["summary"]

    # The goal changes after the compaction: the summary's old goal is its own again.
    shared_daemon.call(
        "set_working_state", {"workspace": ws, "sessionId": sid, "goals": ["Write the runbook"]}
    )
    pack = shared_daemon.call("build_context", {"workspace": ws, "sessionId": sid, "budgetTokens": 16_000})
    texts = {s["kind"]: s["text"] for s in pack["segments"]}
    assert GOALS[0] in texts["summary"] and DECISIONS[0] not in texts["summary"]

"""kill -9 under a mixed workload (the short CI version of `scripts/soak --crash N`), and
what a client's retry with the same requestId gets after the crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from maka.errors import ProtocolError
from soaklib.crash import CrashLoop
from tests.support import DaemonProcess


@pytest.mark.slow
def test_crash_loop_loses_and_corrupts_nothing(short_tmp: Path) -> None:
    """Four kill -9s at random moments while clients add, edit, propose, approve, reject,
    append, compact and build context and the user edits both files: after each restart
    every acknowledged write is there exactly once, every file parses, every session's
    chain verifies and every checkpoint is whole."""
    required = frozenset({"add_entry", "approve", "reject", "append_events", "compact"})
    loop = CrashLoop(
        cycles=4, seed=11, max_uptime_s=1.0, root=short_tmp, required_methods=required, max_extra_cycles=12
    )
    report = loop.execute()["crash"]
    assert [f"{p.category} {p.key}: {p.detail}" for p in loop.problems.values()] == []
    assert report["unexpected"] == {}
    assert report["lost"] == report["duplicated"] == report["corrupt"] == 0
    assert report["acknowledged"] > 50 and report["events"] > 0
    assert required <= set(report["acknowledged_by_method"])


@pytest.mark.slow
def test_approve_retried_after_a_crash_gets_its_result(daemon: DaemonProcess) -> None:
    """The daemon dies mid-approval (after MEMORY.md was written); recovery finishes the
    approval at restart, and the client's retry with the same requestId is answered with
    the approval, not not_found."""
    w = str(daemon.workspace)
    daemon.call("set_settings", {"workspace": w, "agentReadEnabled": True, "extractToolEnabled": True})
    proposal = daemon.call("propose", {"workspace": w, "title": "T", "content": "approve me"})["proposal"][
        "id"
    ]
    daemon.restart({"MAKAD_FAULT_POINT": "approve_after_memory"})
    params = {"workspace": w, "ids": [proposal], "requestId": "approve-1"}
    with pytest.raises(ProtocolError):
        daemon.call("approve", params)
    daemon.proc.wait(timeout=10)  # type: ignore[union-attr]
    daemon.restart({"MAKAD_FAULT_POINT": ""})
    result = daemon.call("approve", params)
    text = (daemon.workspace / "memory" / "MEMORY.md").read_text()
    assert text.count("approve me") == 1
    assert result["approved"][0]["entry"]["id"] in text

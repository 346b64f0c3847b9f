"""`maka mcp` tools given the id of a session that is not the connection's own, while the
user has not allowed history recall: nothing of that session reaches the agent."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cli.helpers import call
from tests.cli.mcp_session import mcp_host
from tests.support import DaemonProcess

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:resources/subscribe is removed")]


def host(d: DaemonProcess, **kw: Any) -> Any:
    return mcp_host(d.socket, workspace=d.workspace, **kw)


def other_session(d: DaemonProcess) -> str:
    """A session of another agent holding a session-scoped entry and a turn."""
    sid = str(call(d, "open_session")["sessionId"])
    call(
        d,
        "append_events",
        sessionId=sid,
        events=[{"type": "user_message", "text": "The vault code is 4471."}],
    )
    call(
        d,
        "add_entry",
        title="Vault",
        content="Vault code 4471 for this session only.",
        scope="session",
        sessionId=sid,
    )
    return sid


async def test_memory_context_with_another_session_needs_history_recall(shared_daemon: DaemonProcess) -> None:
    """memory_context with another session's id (whole or a prefix) while history recall is
    off says so and returns nothing of that session."""
    call(shared_daemon, "set_settings", agentReadEnabled=True)
    sid = other_session(shared_daemon)
    async with host(shared_daemon) as h:
        for given in (sid, sid[:12]):
            is_error, text = await h.tool("memory_context", query="vault code", session_id=given)
            assert not is_error, text
            assert "4471" not in text
            assert "History recall is off" in text


async def test_memory_context_with_another_session_once_history_recall_is_on(
    shared_daemon: DaemonProcess,
) -> None:
    """With history recall on, memory_context with another session's id brings that
    session along (the switch is what allows it)."""
    call(shared_daemon, "set_settings", agentReadEnabled=True, historyRecallEnabled=True)
    sid = other_session(shared_daemon)
    async with host(shared_daemon) as h:
        is_error, text = await h.tool("memory_context", query="vault code", session_id=sid)
    assert not is_error and "4471" in text, text


async def test_memory_resolve_leaves_out_a_proposal_scoped_to_another_session(
    shared_daemon: DaemonProcess,
) -> None:
    """memory_resolve of the id of a proposal scoped to another session finds nothing, as
    memory_list leaves out entries scoped to another session."""
    call(shared_daemon, "set_settings", agentReadEnabled=True, extractToolEnabled=True)
    sid = str(call(shared_daemon, "open_session")["sessionId"])
    proposed = call(
        shared_daemon,
        "propose",
        title="Vault",
        content="Vault code 4471 for that session only.",
        scope="session",
        sessionId=sid,
    )
    proposal_id = proposed["proposal"]["id"]
    async with host(shared_daemon) as h:
        for given in (proposal_id, proposal_id[:12]):
            is_error, text = await h.tool("memory_resolve", refs=[f"memory:{given}"])
            assert not is_error, text
            assert "4471" not in text and "Not found" in text

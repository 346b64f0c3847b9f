"""`maka mcp`: the MCP SDK's own client over stdio, against a real daemon."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.cli.helpers import call, methods
from tests.support import DaemonProcess

pytestmark = pytest.mark.anyio
TOOLS = {"memory_search", "memory_propose", "memory_context", "history_search"}


@asynccontextmanager
async def bridge(d: DaemonProcess) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "maka.cli", "--socket", str(d.socket), "mcp", "-w", str(d.workspace)],
        env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def tool(session: ClientSession, name: str, **arguments: Any) -> tuple[bool, str]:
    """(is_error, text) of a tool call."""
    result = await session.call_tool(name, arguments)
    is_error = bool(getattr(result, "is_error", None) or getattr(result, "isError", False))
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    return is_error, text


def open_gates(d: DaemonProcess, **extra: bool) -> None:
    call(d, "set_settings", agentReadEnabled=True, extractToolEnabled=True, **extra)


async def test_propose_lands_in_pending_not_memory(daemon: DaemonProcess) -> None:
    """The tools are listed; memory_propose queues a proposal in PENDING.md, never MEMORY.md."""
    open_gates(daemon)
    async with bridge(daemon) as session:
        listed = await session.list_tools()
        assert {t.name for t in listed.tools} == TOOLS
        is_error, text = await tool(session, "memory_propose", title="Deploy day",
                                    content="The team deploys on Tuesdays.", tags=["ops"])
    assert not is_error, text
    assert "queued in PENDING.md" in text
    memory_dir = daemon.workspace / "memory"
    assert "The team deploys on Tuesdays." in (memory_dir / "PENDING.md").read_text()
    memory = memory_dir / "MEMORY.md"
    assert not memory.exists() or "Tuesdays" not in memory.read_text()
    (view,) = call(daemon, "list_proposals")["proposals"]
    assert view["proposal"]["origin"] == "extracted" and view["proposal"]["tags"] == ["ops"]


async def test_gates_closed_by_default(daemon: DaemonProcess) -> None:
    """With agent read off, reads say so and return nothing; a proposal fails with gate_closed."""
    call(daemon, "add_entry", title="Deploys", content="The team deploys on Tuesdays.")
    async with bridge(daemon) as session:
        for name, args in (("memory_search", {"query": "deploys"}),
                           ("memory_context", {"query": "deploys"}),
                           ("history_search", {"query": "deploys"})):
            is_error, text = await tool(session, name, **args)
            assert not is_error and text.startswith("Agent read is off"), (name, text)
            assert "Tuesdays" not in text
        is_error, text = await tool(session, "memory_propose", title="T", content="c")
    assert is_error and "gate_closed" in text
    assert not (daemon.workspace / "memory" / "PENDING.md").exists()


async def test_incognito_blocks_everything(daemon: DaemonProcess) -> None:
    """Incognito on: reads return nothing and proposals fail with incognito_blocked."""
    call(daemon, "add_entry", title="Deploys", content="The team deploys on Tuesdays.")
    open_gates(daemon, incognito=True)
    async with bridge(daemon) as session:
        is_error, text = await tool(session, "memory_search", query="deploys")
        assert not is_error and text.startswith("Incognito is on") and "Tuesdays" not in text
        is_error, text = await tool(session, "memory_propose", title="T", content="c")
    assert is_error and "incognito_blocked" in text


async def test_search_and_context_with_read_on(daemon: DaemonProcess) -> None:
    """With agent read on, memory_search finds an entry and cites its ref."""
    if "build_context" not in methods(daemon):
        pytest.skip("this makad has no build_context yet")
    entry = call(daemon, "add_entry", title="Deploys", content="The team deploys on Tuesdays.")
    open_gates(daemon)
    async with bridge(daemon) as session:
        is_error, found = await tool(session, "memory_search", query="when does the team deploy")
        _, context = await tool(session, "memory_context", query="deploy", budget_tokens=1000)
        _, history = await tool(session, "history_search", query="deploy")
    assert not is_error and "Tuesdays" in found and f"memory:{entry['entry']['id']}" in found
    assert "Tuesdays" in context and context.startswith("Context pack:")
    assert history.startswith("History recall is off")


async def test_history_search_with_recall_on(daemon: DaemonProcess) -> None:
    """With history recall on, history_search returns matching events with their refs."""
    if "search_history" not in methods(daemon):
        pytest.skip("this makad has no search_history yet")
    sid = call(daemon, "open_session")["sessionId"]
    call(daemon, "append_events", sessionId=sid,
         events=[{"type": "user_message", "text": "remember the staging password rotation"}])
    open_gates(daemon, historyRecallEnabled=True)
    async with bridge(daemon) as session:
        is_error, text = await tool(session, "history_search", query="rotation")
    assert not is_error and f"[event:{sid}:1] user_message:" in text

"""`maka mcp`: the MCP SDK's own client over stdio, against a real daemon."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator
from mcp import types

from makad import __version__
from tests.cli.helpers import Pty, call
from tests.cli.mcp_session import Host, bridge_env, mcp_host
from tests.support import DaemonProcess, SharedDaemon

pytestmark = [
    pytest.mark.anyio,
    # Hosts of today speak the handshake era, where resources/subscribe is how it works.
    pytest.mark.filterwarnings("ignore:resources/subscribe is removed"),
]
READ_TOOLS = {
    "memory_search",
    "memory_context",
    "memory_attention",
    "memory_suggestions",
    "memory_dismiss_suggestion",
    "memory_list",
    "memory_resolve",
    "history_search",
    "session_record",
}
MEMORY_URI = "maka://memory/MEMORY.md"
PENDING_URI = "maka://memory/PENDING.md"
ATTENTION_URI = "maka://attention"


def host(d: DaemonProcess, **kw: Any) -> Any:
    return mcp_host(d.socket, workspace=d.workspace, **kw)


def mcp_command(d: DaemonProcess, workspace: Path) -> list[str]:
    """The command line a host runs to serve ``workspace`` over MCP through ``d``."""
    return [sys.executable, "-m", "maka.cli", "--socket", str(d.socket), "mcp", "-w", str(workspace)]


def open_gates(d: DaemonProcess, **extra: bool) -> None:
    call(d, "set_settings", agentReadEnabled=True, extractToolEnabled=True, **extra)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio, for the whole module: the shared bridge below lives as long as it."""
    return "asyncio"


@pytest.fixture(scope="module")
async def shared_host(module_daemon: DaemonProcess) -> AsyncIterator[tuple[Host, Path]]:
    """One `maka mcp` (and its workspace) for the tests that read what the server says of
    itself or call tools that change nothing: each bridge pays ~2.5 s of CPU importing the
    MCP SDK. Agent read and propose are on. A test that needs its own bridge or workspace
    starts one with ``host``."""
    workspace = module_daemon.root / "bridged"
    workspace.mkdir()
    open_gates(SharedDaemon(module_daemon, workspace))
    async with mcp_host(module_daemon.socket, workspace=workspace) as h:
        yield h, workspace


def described(schema: dict[str, Any]) -> list[str]:
    """Paths of the properties (nested ones included) that carry no description."""
    missing = []
    for name, prop in (schema.get("properties") or {}).items():
        if not str(prop.get("description", "")).strip():
            missing.append(name)
        items = prop.get("items") or {}
        missing += [f"{name}[].{inner}" for inner in described(items)]
    return missing


async def test_server_info_and_schemas(shared_host: tuple[Host, Path]) -> None:
    """serverInfo carries makad's version; every tool's inputSchema is a valid JSON Schema
    object whose every parameter has a description."""
    h, _ = shared_host
    assert h.init.server_info.name == "maka"
    assert h.init.server_info.version == __version__
    assert h.init.capabilities.tools is not None and h.init.capabilities.tools.list_changed
    assert h.init.capabilities.resources is not None and h.init.capabilities.resources.subscribe
    tools = (await h.session.list_tools()).tools
    assert {t.name for t in tools} == READ_TOOLS | {"memory_propose"}
    for tool in tools:
        assert tool.description and described(tool.input_schema) == [], tool.name
        assert tool.input_schema["properties"], tool.name
        Draft202012Validator.check_schema(tool.input_schema)  # the MCP default dialect
        assert tool.input_schema["type"] == "object", tool.name
        assert set(tool.input_schema["required"]) <= set(tool.input_schema["properties"]), tool.name


async def test_propose_lands_in_pending_not_memory(shared_daemon: DaemonProcess) -> None:
    """memory_propose queues a proposal in PENDING.md, never MEMORY.md."""
    open_gates(shared_daemon)
    async with host(shared_daemon) as h:
        is_error, text = await h.tool(
            "memory_propose", title="Deploy day", content="The team deploys on Tuesdays.", tags=["ops"]
        )
    assert not is_error, text
    assert "queued in PENDING.md" in text
    memory_dir = shared_daemon.workspace / "memory"
    assert "The team deploys on Tuesdays." in (memory_dir / "PENDING.md").read_text()
    memory = memory_dir / "MEMORY.md"
    assert not memory.exists() or "Tuesdays" not in memory.read_text()
    (view,) = call(shared_daemon, "list_proposals")["proposals"]
    assert view["proposal"]["origin"] == "extracted" and view["proposal"]["tags"] == ["ops"]


async def test_propose_cites_recorded_turns_and_not_invented_ones(shared_daemon: DaemonProcess) -> None:
    """memory_propose keeps a ref session_record returned; a ref naming no recorded event is
    a tool error saying so, and PENDING.md is not written."""
    open_gates(shared_daemon)
    pending = shared_daemon.workspace / "memory" / "PENDING.md"
    async with host(shared_daemon) as h:
        is_error, text = await h.tool("memory_propose", title="T", content="c", source_refs=["event:x:1"])
        assert is_error and "source ref" in text, text
        assert not pending.exists()
        _, recorded = await h.tool(
            "session_record", turns=[{"role": "user", "text": "We deploy on Tuesdays."}]
        )
        ref = recorded.split(" as ")[1].split(".")[0]
        is_error, text = await h.tool(
            "memory_propose", title="Deploy day", content="The team deploys on Tuesdays.", source_refs=[ref]
        )
    assert not is_error, text
    (view,) = call(shared_daemon, "list_proposals")["proposals"]
    assert view["proposal"]["sourceRefs"] == [ref]


async def test_gates_closed_by_default(shared_daemon: DaemonProcess) -> None:
    """With agent read off, every read (tools and resources) says so and returns nothing;
    memory_propose is not listed, and calling it anyway fails with gate_closed."""
    entry = call(shared_daemon, "add_entry", title="Deploys", content="The team deploys on Tuesdays.")
    async with host(shared_daemon) as h:
        assert await h.tool_names() == READ_TOOLS
        for name, args in (
            ("memory_search", {"query": "deploys"}),
            ("memory_context", {"query": "deploys"}),
            ("memory_list", {}),
            ("memory_attention", {}),
            ("memory_suggestions", {}),
            ("memory_dismiss_suggestion", {"id": "sg_0123456789abcdef"}),
            ("memory_resolve", {"refs": [f"memory:{entry['entry']['id']}"]}),
            ("history_search", {"query": "deploys"}),
        ):
            is_error, text = await h.tool(name, **args)
            assert not is_error and "Agent read is off" in text, (name, text)
            assert "Tuesdays" not in text
        for uri in (MEMORY_URI, PENDING_URI, ATTENTION_URI):
            text = await h.read(uri)
            assert text.startswith("Agent read is off") and "Tuesdays" not in text
        is_error, text = await h.tool("memory_propose", title="T", content="c")
    assert is_error and "gate_closed" in text
    assert not (shared_daemon.workspace / "memory" / "PENDING.md").exists()


async def test_incognito_blocks_everything(shared_daemon: DaemonProcess) -> None:
    """Incognito on: reads return nothing, propose is unlisted and fails with incognito_blocked."""
    call(shared_daemon, "add_entry", title="Deploys", content="The team deploys on Tuesdays.")
    open_gates(shared_daemon, incognito=True)
    async with host(shared_daemon) as h:
        assert "memory_propose" not in await h.tool_names()
        is_error, text = await h.tool("memory_search", query="deploys")
        assert not is_error and text.startswith("Incognito is on") and "Tuesdays" not in text
        assert (await h.read(MEMORY_URI)).startswith("Incognito is on")
        is_error, text = await h.tool("memory_propose", title="T", content="c")
    assert is_error and "incognito_blocked" in text


async def test_search_and_plain_context_with_read_on(shared_daemon: DaemonProcess) -> None:
    """memory_search cites the entry's ref; memory_context is the pack's own text, no CLI chrome."""
    entry = call(shared_daemon, "add_entry", title="Deploys", content="The team deploys on Tuesdays.")
    ref = f"memory:{entry['entry']['id']}"
    open_gates(shared_daemon)
    async with host(shared_daemon) as h:
        is_error, found = await h.tool("memory_search", query="when does the team deploy")
        _, context = await h.tool("memory_context", query="deploy", budget_tokens=1000)
        _, history = await h.tool("history_search", query="deploy")
    assert not is_error and "Tuesdays" in found and ref in found
    assert context.startswith("<memory>") and context.rstrip().endswith("</memory>")
    assert "Tuesdays" in context and ref in context
    assert "Context pack" not in context and "━━" not in context and "tokens ·" not in context
    assert history.startswith("History recall is off")


async def test_bad_arguments_are_a_tool_error(shared_host: tuple[Host, Path]) -> None:
    """A wrong type or a missing argument is a tool error naming the field (a value outside a
    choice lists the choices, and the closest one); the server carries on."""
    h, _ = shared_host
    is_error, text = await h.tool("memory_search", query=["not", "text"])
    assert is_error and text.startswith("invalid_params") and "query" in text
    is_error, text = await h.tool("session_record", turns=[{"role": "robot", "text": "x"}])
    assert is_error and "invalid_params" in text and "role" in text
    assert "one of: assistant, note, system, tool_call, tool_result, user" in text  # what to send
    is_error, text = await h.tool("session_record", turns=[{"role": "asistant", "text": "x"}])
    assert is_error and text.endswith("user; did you mean 'assistant'?)")
    is_error, text = await h.tool("session_record", turns=[])
    assert is_error and "invalid_params" in text
    is_error, text = await h.tool("memory_search", query="still serving")
    assert not is_error, text


async def test_list_tool(shared_daemon: DaemonProcess) -> None:
    """memory_list shows each entry's ref, title and tags, newest first, filtered by tag;
    an entry scoped to another session is not shown."""
    first = call(shared_daemon, "add_entry", title="Deploys", content="Tuesdays.", tags=["ops"])
    second = call(shared_daemon, "add_entry", title="Editor", content="Uses vim.", tags=["tools"])
    other = call(shared_daemon, "open_session")["sessionId"]
    call(
        shared_daemon,
        "add_entry",
        title="Scoped",
        content="Only for one session.",
        scope="session",
        sessionId=other,
    )
    open_gates(shared_daemon)
    async with host(shared_daemon) as h:
        _, everything = await h.tool("memory_list")
        _, ops = await h.tool("memory_list", tag="ops")
    lines = everything.splitlines()
    assert lines[0] == "2 entries:"
    assert lines[1].startswith(f"memory:{second['entry']['id']}  Editor [tools]")
    assert lines[2].startswith(f"memory:{first['entry']['id']}  Deploys [ops]")
    assert "Scoped" not in everything
    assert "Deploys" in ops and "Editor" not in ops


async def test_record_then_find_then_resolve(shared_daemon: DaemonProcess) -> None:
    """session_record opens one ledger session for the connection and appends to it;
    history_search finds the turns, memory_resolve quotes them verified, and the session
    is closed when the host disconnects."""
    open_gates(shared_daemon, historyRecallEnabled=True)
    async with host(shared_daemon) as h:
        is_error, first = await h.tool(
            "session_record",
            turns=[
                {"role": "user", "text": "Our staging database is called heron."},
                {"role": "assistant", "text": "Noted: staging is heron."},
            ],
        )
        assert not is_error, first
        _, second = await h.tool(
            "session_record",
            turns=[
                {"role": "tool_call", "text": '{"q": 1}', "tool_name": "lookup", "tool_call_id": "c1"},
                {"role": "tool_result", "text": "ok", "tool_name": "lookup", "tool_call_id": "c1"},
            ],
        )
        sessions = call(shared_daemon, "list_sessions")["sessions"]
        assert len(sessions) == 1
        sid = sessions[0]["sessionId"]
        assert f"as event:{sid}:1-2." in first and f"as event:{sid}:3-4." in second
        _, found = await h.tool("history_search", query="heron staging")
        _, quoted = await h.tool("memory_resolve", refs=[f"event:{sid}:1-2", f"event:{sid}:3"])
    assert f"[event:{sid}:1] user_message:" in found
    assert "1 user_message: Our staging database is called heron." in quoted
    assert "2 assistant_message: Noted: staging is heron." in quoted
    assert "3 tool_call lookup:" in quoted
    assert quoted.count("(verified against the session's hash chain)") == 2
    (closed,) = call(shared_daemon, "list_sessions", includeClosed=True)["sessions"]
    assert closed["sessionId"] == sid and closed["closedAt"] is not None
    assert [e["type"] for e in call(shared_daemon, "read_events", sessionId=sid)["events"]] == [
        "user_message",
        "assistant_message",
        "tool_call",
        "tool_result",
    ]


async def test_each_connection_records_its_own_session(shared_daemon: DaemonProcess) -> None:
    """Two MCP connections record into two sessions; a connection that records nothing
    opens none."""
    async with host(shared_daemon) as h:
        await h.tool("session_record", turns=[{"role": "user", "text": "one"}])
    async with host(shared_daemon) as h:
        await h.tool("session_record", turns=[{"role": "user", "text": "two"}])
    async with host(shared_daemon) as h:
        await h.tool("memory_list")
    sessions = call(shared_daemon, "list_sessions", includeClosed=True)["sessions"]
    assert len(sessions) == 2 and len({s["sessionId"] for s in sessions}) == 2


async def test_resolve_every_kind_of_ref(shared_daemon: DaemonProcess) -> None:
    """memory:, event:, checkpoint: and unknown refs resolve to text or say why not; refs
    into another session need history recall, the connection's own ones do not."""
    entry = call(shared_daemon, "add_entry", title="Deploys", content="The team deploys on Tuesdays.")
    other = call(shared_daemon, "open_session")["sessionId"]
    call(
        shared_daemon,
        "append_events",
        sessionId=other,
        events=[
            {
                "type": ("user_message", "assistant_message")[i % 2],
                "text": f"older turn {i} " + "words of the conversation " * 40,
            }
            for i in range(8)
        ],
    )
    checkpoint = call(shared_daemon, "compact", sessionId=other, mode="checkpoint", keepRecentTokens=300)
    open_gates(shared_daemon)
    async with host(shared_daemon) as h:
        _, mine = await h.tool("session_record", turns=[{"role": "user", "text": "my own turn"}])
        own_ref = mine.split(" as ")[1].rstrip(".")
        _, text = await h.tool(
            "memory_resolve",
            refs=[
                f"memory:{entry['entry']['id']}",
                "memory:0000000000000000",
                own_ref,
                f"event:{other}:1",
                f"checkpoint:{checkpoint['checkpointId']}",
                "http://x",
            ],
        )
        call(shared_daemon, "set_settings", historyRecallEnabled=True)
        _, allowed = await h.tool(
            "memory_resolve", refs=[f"event:{other}:1-2", f"checkpoint:{checkpoint['checkpointId']}"]
        )
    blocks = dict(b.split("\n", 1) for b in text.split("\n\n[") if "\n" in b)
    assert "The team deploys on Tuesdays." in blocks[f"[memory:{entry['entry']['id']}]"]
    assert blocks["memory:0000000000000000]"].startswith("Not found")
    assert "user_message: my own turn" in blocks[f"{own_ref}]"]
    assert blocks[f"event:{other}:1]"].startswith("History recall is off")
    assert blocks[f"checkpoint:{checkpoint['checkpointId']}]"].startswith("History recall is off")
    assert blocks["http://x]"].startswith("Not a ref this server knows")
    assert "1 user_message: older turn 0 words" in allowed
    assert "2 assistant_message: older turn 1 words" in allowed
    assert f"Summary of event:{other}:" in allowed


async def test_history_search_with_recall_on(shared_daemon: DaemonProcess) -> None:
    """With history recall on, history_search returns matching events with their refs."""
    sid = call(shared_daemon, "open_session")["sessionId"]
    call(
        shared_daemon,
        "append_events",
        sessionId=sid,
        events=[{"type": "user_message", "text": "remember the staging password rotation"}],
    )
    open_gates(shared_daemon, historyRecallEnabled=True)
    async with host(shared_daemon) as h:
        is_error, text = await h.tool("history_search", query="rotation")
    assert not is_error and f"[event:{sid}:1] user_message:" in text


async def test_resources_show_the_files(shared_daemon: DaemonProcess) -> None:
    """MEMORY.md is served as the user's file; PENDING.md lists what waits for review."""
    call(shared_daemon, "add_entry", title="Deploys", content="The team deploys on Tuesdays.")
    open_gates(shared_daemon)
    call(shared_daemon, "propose", title="Editor", content="The user edits with vim.", origin="extracted")
    async with host(shared_daemon) as h:
        listed = (await h.session.list_resources()).resources
        memory = await h.read(MEMORY_URI)
        pending = await h.read(PENDING_URI)
    assert {str(r.uri) for r in listed} == {MEMORY_URI, PENDING_URI, ATTENTION_URI}
    assert memory == (shared_daemon.workspace / "memory" / "MEMORY.md").read_text()
    assert "# Pending proposals (1)" in pending and "The user edits with vim." in pending
    assert "Tuesdays" not in pending


async def test_subscribed_resource_is_notified(shared_daemon: DaemonProcess) -> None:
    """A subscribed resource gets notifications/resources/updated when its file changes;
    an unsubscribed one does not."""
    call(shared_daemon, "add_entry", title="Deploys", content="The team deploys on Tuesdays.")
    open_gates(shared_daemon)
    memory = shared_daemon.workspace / "memory" / "MEMORY.md"
    async with host(shared_daemon) as h:
        await h.session.subscribe_resource(MEMORY_URI)
        call(shared_daemon, "propose", title="Editor", content="The user edits with vim.", origin="extracted")
        saved = memory.with_name(".MEMORY.md.swp")  # an editor's save: write, then rename
        saved.write_text(memory.read_text() + "\n## Edited by hand\nThe user wrote this.\n")
        saved.replace(memory)
        await h.wait_for(types.ResourceUpdatedNotification, MEMORY_URI)
        assert "The user wrote this." in await h.read(MEMORY_URI)
    updated = [str(n.params.uri) for n in h.seen if isinstance(n, types.ResourceUpdatedNotification)]
    assert PENDING_URI not in updated


async def test_propose_listed_only_while_the_gate_is_open(shared_daemon: DaemonProcess) -> None:
    """Contract test 4: memory_propose is registered only while extractToolEnabled &&
    agentReadEnabled (and not incognito); each change of a switch sends tools/list_changed."""
    async with host(shared_daemon) as h:
        assert "memory_propose" not in await h.tool_names()
        steps: list[tuple[dict[str, bool], bool]] = [
            ({"extractToolEnabled": True}, False),  # no change: agent read still off
            ({"agentReadEnabled": True}, True),
            ({"incognito": True}, False),
            ({"incognito": False}, True),
            ({"extractToolEnabled": False}, False),
        ]
        listed = False
        for change, expected in steps:
            call(shared_daemon, "set_settings", **change)
            if expected != listed:
                await h.wait_for(types.ToolListChangedNotification)
            assert ("memory_propose" in await h.tool_names()) is expected, change
            listed = expected
    changes = [n for n in h.seen if isinstance(n, types.ToolListChangedNotification)]
    assert len(changes) == 4


async def test_workspace_is_found_from_a_subdirectory(shared_daemon: DaemonProcess) -> None:
    """Started in a subdirectory without --workspace, maka mcp serves the enclosing workspace."""
    call(shared_daemon, "add_entry", title="Deploys", content="The team deploys on Tuesdays.")
    open_gates(shared_daemon)
    nested = shared_daemon.workspace / "src" / "deep"
    nested.mkdir(parents=True)
    env = bridge_env(drop=("MAKA_WORKSPACE",))
    async with mcp_host(shared_daemon.socket, env=env, cwd=nested) as h:
        _, text = await h.tool("memory_list")
    assert "Deploys" in text
    assert not (nested / "memory").exists() and not (shared_daemon.workspace / "src" / "memory").exists()


async def test_session_survives_a_daemon_restart(daemon: DaemonProcess) -> None:
    """After the daemon restarts, the bridge is subscribed again (a switch change still
    reaches the host as tools/list_changed) and recording goes on in the same session."""
    async with host(daemon) as h:
        _, first = await h.tool("session_record", turns=[{"role": "user", "text": "before"}])
        await anyio.to_thread.run_sync(daemon.restart)
        assert "memory_propose" not in await h.tool_names()  # a request reconnects at the latest
        open_gates(daemon)
        await h.wait_for(types.ToolListChangedNotification)
        assert "memory_propose" in await h.tool_names()
        _, second = await h.tool("session_record", turns=[{"role": "user", "text": "after"}])
    sid = first.split("session ")[1].split(" ")[0]
    assert f"as event:{sid}:1." in first and f"as event:{sid}:2." in second


def test_sigterm_closes_the_session(shared_daemon: DaemonProcess) -> None:
    """A host that stops the server with SIGTERM still gets its ledger session closed."""
    proc = subprocess.Popen(
        mcp_command(shared_daemon, shared_daemon.workspace),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()

    def reply(request_id: int) -> dict[str, Any]:
        assert proc.stdout is not None
        while True:
            message: dict[str, Any] = json.loads(proc.stdout.readline())
            if message.get("id") == request_id:
                return message

    send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
    )
    assert reply(1)["result"]["serverInfo"]["version"] == __version__
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "session_record", "arguments": {"turns": [{"role": "user", "text": "hello"}]}},
        }
    )
    assert not reply(2)["result"].get("isError")
    (session,) = call(shared_daemon, "list_sessions")["sessions"]
    assert session["closedAt"] is None
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    proc.stdin.close()
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()
    (closed,) = call(shared_daemon, "list_sessions", includeClosed=True)["sessions"]
    assert closed["closedAt"] is not None


async def test_propose_everywhere_queues_at_user_level(daemon: DaemonProcess) -> None:
    """memory_propose with everywhere=true queues in the user level's PENDING.md only."""
    open_gates(daemon)
    daemon.call("set_settings", {"workspace": "@user", "enabled": True})
    async with host(daemon) as h:
        is_error, text = await h.tool(
            "memory_propose", title="Spelling", content="The user writes British English.", everywhere=True
        )
    assert not is_error, text
    assert "user-level PENDING.md" in text
    assert call(daemon, "list_proposals")["proposals"] == []
    (view,) = daemon.call("list_proposals", {"workspace": "@user"})["proposals"]
    assert view["proposal"]["scope"] == "global"


async def test_memory_context_shows_a_small_memory_whole(shared_daemon: DaemonProcess) -> None:
    """24 hand-typed entries, a question sharing no word with any of them: memory_context at
    its default 4,000 tokens shows all 24, with or without a long session behind it."""
    d = shared_daemon
    topics = [f"Habit {chr(65 + i)}" for i in range(24)]
    sections = [
        f"## {t}\nKeeps routine {chr(65 + i)}{i} in the ledger at {i + 6}:15." for i, t in enumerate(topics)
    ]
    (d.workspace / "memory").mkdir(exist_ok=True)
    (d.workspace / "memory" / "MEMORY.md").write_text("# Maka Memory\n\n" + "\n\n".join(sections) + "\n")
    open_gates(d, historyRecallEnabled=True)  # the session is not the connection's own
    sid = d.call("open_session", {"workspace": str(d.workspace)})["sessionId"]
    turns = [{"type": "user_message", "text": "rebase the feature branch " * 40} for _ in range(60)]
    d.call("append_events", {"workspace": str(d.workspace), "sessionId": sid, "events": turns})
    async with host(d) as h:
        _, alone = await h.tool("memory_context", query="which package manager for the frontend?")
        _, beside = await h.tool(
            "memory_context", query="which package manager for the frontend?", session_id=sid
        )
    for context in (alone, beside):
        assert [t for t in topics if f"## {t}\n" not in context] == []


async def test_an_empty_pack_for_a_small_budget_says_to_raise_it(shared_daemon: DaemonProcess) -> None:
    """memory_context and memory_search with a budget too small for the one relevant entry say
    the budget is the cause and to call again with a larger budget_tokens, not that nothing
    bears on the question."""
    d = shared_daemon
    call(d, "add_entry", title="Staging DB port", content="The staging database listens on 5433. " * 8)
    open_gates(d)
    async with host(d) as h:
        for tool in ("memory_context", "memory_search"):
            is_error, text = await h.tool(tool, query="staging database port", budget_tokens=50)
            assert not is_error, text
            assert "budget_tokens" in text and "larger" in text, (tool, text)
            assert "Nothing in memory bears" not in text and "No memory entries" not in text


async def test_instructions_say_when_to_search_record_and_propose(shared_host: tuple[Host, Path]) -> None:
    """The server's instructions tell the agent to search before asking, to record every
    exchange with session_record (and why), what to propose — queued, not saved — and to
    correct a changed fact with supersedes rather than a second entry."""
    h, workspace = shared_host
    said = h.init.instructions or ""
    assert str(workspace) in said
    _, search, record, propose, correct, refused = said.split("\n- ")
    assert "memory_search" in search and "before asking" in search
    assert "session_record" in record and "after each exchange" in record and "history_search" in record
    assert "memory_propose" in propose and "source_refs" in propose and "PENDING.md" in propose
    assert "supersedes" in correct and "memory:<id>" in correct and "superseded by" in correct
    assert "command" in refused


async def test_refusals_name_the_command_that_allows_them(shared_daemon: DaemonProcess) -> None:
    """With a switch off, the tool's message names the user's own `maka settings` command
    for this workspace (quoted for the shell), as a sentence of its own after the daemon's
    reason; run as given, it opens the gate."""
    ws = shared_daemon.workspace / "my notes"
    ws.mkdir()
    call(shared_daemon, "add_entry", workspace=str(ws), title="Deploys", content="We deploy on Tuesdays.")
    env = {**bridge_env(), "MAKAD_SOCKET": str(shared_daemon.socket), "MAKA_WORKSPACE": ""}
    async with mcp_host(shared_daemon.socket, workspace=ws) as h:
        _, refused = await h.tool("memory_search", query="deploy")
        command = refused.split("they run: ", 1)[1].strip()
        assert command == f"maka settings -w '{ws}' agentReadEnabled=on"
        is_error, proposed = await h.tool("memory_propose", title="T", content="c")
        assert is_error and proposed.startswith("gate_closed")
        assert f"maka settings -w '{ws}' agentReadEnabled=on extractToolEnabled=on" in proposed
        assert "agentReadEnabled. Proposals need" in proposed  # two sentences, not run together
        ran = await anyio.to_thread.run_sync(
            lambda: subprocess.run(
                ["bash", "-c", command.replace("maka ", f"{sys.executable} -m maka.cli ", 1)],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
        )
        assert ran.returncode == 0, ran.stderr
        _, found = await h.tool("memory_search", query="deploy")
        assert "We deploy on Tuesdays." in found
        _, history = await h.tool("history_search", query="deploy")
        assert history.split("they run: ", 1)[1].strip() == (
            f"maka settings -w '{ws}' historyRecallEnabled=on"
        )


async def test_resolve_takes_the_short_ids_people_see(shared_daemon: DaemonProcess) -> None:
    """memory_resolve takes an entry's 12-character prefix, lists the candidates of an
    ambiguous one, says when an id is a waiting proposal, and says plainly when nothing
    starts with it; event refs take a session id prefix too."""
    ids: list[str] = []
    while True:  # entries until two ids share their first character (17 at most)
        added = call(shared_daemon, "add_entry", title=f"Fact {len(ids)}", content=f"fact number {len(ids)}")
        ids.append(added["entry"]["id"])
        if len({i[0] for i in ids}) < len(ids):
            break
    shared = ids[-1][0]
    twins = [i for i in ids if i.startswith(shared)]
    open_gates(shared_daemon)
    proposal = call(shared_daemon, "propose", title="Waiting", content="A proposal, not memory yet.")
    async with host(shared_daemon) as h:
        _, mine = await h.tool("session_record", turns=[{"role": "user", "text": "short refs please"}])
        sid = mine.split("in session ")[1].split(" ")[0]
        _, text = await h.tool(
            "memory_resolve",
            refs=[
                f"memory:{ids[0][:12]}",
                f"memory:{shared}",
                f"memory:{proposal['proposal']['id'][:10]}",
                "memory:zzzzzzzzzzzz",
                f"event:{sid[:12]}:1",
            ],
        )
    blocks = dict(b.split("\n", 1) for b in text.split("\n\n[") if "\n" in b)
    assert blocks[f"[memory:{ids[0][:12]}]"].startswith(f"memory:{ids[0]}  Fact 0")
    assert "fact number 0" in blocks[f"[memory:{ids[0][:12]}]"]
    listed = blocks[f"memory:{shared}]"]
    assert listed.startswith(f"Ambiguous: {len(twins)} entries start with '{shared}'")
    assert all(f"memory:{i}" in listed for i in twins)
    waiting = blocks[f"memory:{proposal['proposal']['id'][:10]}]"]
    assert waiting.startswith("Not memory yet") and "A proposal, not memory yet." in waiting
    assert blocks["memory:zzzzzzzzzzzz]"].startswith("Not found: no entry or proposal id starts with")
    assert "may have been deleted" not in text
    assert "1 user_message: short refs please" in blocks[f"event:{sid[:12]}:1]"]


async def test_resource_templates_are_answered(shared_host: tuple[Host, Path]) -> None:
    """resources/templates/list is answered (an empty list: the resources have fixed URIs)."""
    h, _ = shared_host
    templates = await h.session.list_resource_templates()
    assert templates.resource_templates == []


async def test_attention_tool_and_resource(shared_daemon: DaemonProcess) -> None:
    """With agent read on, memory_attention and maka://attention give the attention state
    with refs; `section` narrows it to one section."""
    open_gates(shared_daemon)
    sid = call(shared_daemon, "open_session")["sessionId"]
    call(
        shared_daemon,
        "append_events",
        sessionId=sid,
        events=[{"type": "user_message", "text": "Port the exporter to the v2 API"}],
    )
    call(shared_daemon, "close_session", sessionId=sid)

    def derived() -> None:  # the daemon derives it in the background
        for _ in range(300):
            if call(shared_daemon, "get_attention")["sections"][0]["lines"]:
                return
            time.sleep(0.1)

    await anyio.to_thread.run_sync(derived)
    async with host(shared_daemon) as h:
        is_error, whole = await h.tool("memory_attention")
        _, only = await h.tool("memory_attention", section="rhythm")
        resource = await h.read(ATTENTION_URI)
    assert not is_error and "Unanswered: Port the exporter to the v2 API" in whole
    assert f"event:{sid}:1" in whole and "## Rhythm" in whole
    assert "## Rhythm" in only and "Port the exporter" not in only
    assert resource == whole


async def test_attention_section_nobody_has_is_a_tool_error(shared_host: tuple[Host, Path]) -> None:
    """memory_attention with a section name that is none of the sections is a tool error
    listing the names, not an empty answer that reads as "nothing going on"."""
    h, _ = shared_host
    is_error, text = await h.tool("memory_attention", section="threads")
    assert is_error and text.startswith("invalid_params: no attention section named 'threads'"), text
    assert "Active threads" in text and "Rhythm" in text
    is_error, text = await h.tool("memory_attention", section=" ACTIVE THREADS ")
    assert not is_error and "## Active threads" in text and "## Rhythm" not in text


async def test_suggestions_tool_and_dismissal(shared_daemon: DaemonProcess) -> None:
    """With agent read on, memory_suggestions offers a thread left a day ago with its id and
    refs; memory_dismiss_suggestion hides it; a malformed id is a tool error."""
    open_gates(shared_daemon)
    at = int(time.time() * 1000) - 86_400_000
    sid = call(shared_daemon, "open_session")["sessionId"]
    call(
        shared_daemon,
        "append_events",
        sessionId=sid,
        events=[
            {"type": "user_message", "text": "Move the scheduler in src/sched.py to asyncio", "ts": at},
            {
                "type": "tool_call",
                "text": "cat src/sched.py",
                "toolCallId": "a",
                "toolName": "bash",
                "ts": at,
            },
            {
                "type": "tool_result",
                "text": "class Scheduler",
                "toolCallId": "a",
                "toolName": "bash",
                "ts": at,
            },
            {"type": "assistant_message", "text": "Started.", "ts": at},
        ],
    )
    call(shared_daemon, "set_working_state", sessionId=sid, openThreads=["move the scheduler to asyncio"])
    call(shared_daemon, "close_session", sessionId=sid)

    def suggested() -> list[dict[str, Any]]:
        for _ in range(300):
            found: list[dict[str, Any]] = call(shared_daemon, "suggest")["suggestions"]
            if any(sid in ref for s in found for ref in s["refs"]):
                return found
            time.sleep(0.1)
        return []

    found = await anyio.to_thread.run_sync(suggested)
    [item] = [s for s in found if any(sid in ref for ref in s["refs"])]
    async with host(shared_daemon) as h:
        is_error, text = await h.tool("memory_suggestions")
        assert not is_error and "Resume" in text and item["id"] in text and f"event:{sid}:1" in text
        is_error, done = await h.tool("memory_dismiss_suggestion", id=item["id"])
        assert not is_error and done.startswith(f"Dismissed {item['id']}")
        _, after = await h.tool("memory_suggestions")
        assert item["id"] not in after
        is_error, bad = await h.tool("memory_dismiss_suggestion", id="nope")
        assert is_error and "invalid_params" in bad


# Prose, not one letter repeated: the secret scan an append runs reads words several times
# faster than a single 3 MiB run of one character.
PROSE_3_MIB = ("lorem ipsum dolor sit amet " * (3 * 1024 * 1024 // 27 + 1))[: 3 * 1024 * 1024]


async def test_large_events_left_out_of_a_reply_are_named(shared_daemon: DaemonProcess) -> None:
    """Three events of 3 MiB: history_search shows the two that fit in one reply and says
    one more was left out; memory_resolve of the three names the rest to resolve next."""
    sid = call(shared_daemon, "open_session")["sessionId"]
    for letter in "abc":
        shared_daemon.call(
            "append_events",
            {
                "workspace": str(shared_daemon.workspace),
                "sessionId": sid,
                "events": [{"type": "note", "text": f"heron {letter} {PROSE_3_MIB}"}],
            },
            timeout=120,
        )
    open_gates(shared_daemon, historyRecallEnabled=True)
    async with host(shared_daemon) as h:
        _, found = await h.tool("history_search", query="heron")
        _, resolved = await h.tool("memory_resolve", refs=[f"event:{sid}:1-3"])
    assert found.count(f"[event:{sid}:") == 2 and "(1 more matching events left out" in found
    assert "1 note: heron a" in resolved and "2 note: heron b" in resolved
    assert f"the rest, event:{sid}:3, did not fit in one reply" in resolved


async def test_suggestions_go_on_after_the_connections_session_is_deleted(
    shared_daemon: DaemonProcess,
) -> None:
    """When the connection's own session is deleted under it, memory_suggestions still
    answers (asking without it) instead of failing not_found."""
    open_gates(shared_daemon)
    async with host(shared_daemon) as h:
        _, recorded = await h.tool("session_record", turns=[{"role": "user", "text": "hello"}])
        sid = recorded.split("session ")[1].split(" ")[0]
        call(shared_daemon, "close_session", sessionId=sid)
        call(shared_daemon, "delete_session", sessionId=sid)
        is_error, text = await h.tool("memory_suggestions")
        assert not is_error and text.startswith("# Suggestions"), text


async def test_a_found_folder_that_is_the_user_level_says_how_to_go_on(short_tmp: Path) -> None:
    """With the user level in the home folder (--user-memory ~), `maka mcp` started in a home
    subfolder without a workspace of its own finds the home folder, refused as reserved:
    each tool error says how it got there and names `maka mcp --user` and `-w` with the folder."""
    home = short_tmp / "home"
    proc = DaemonProcess(short_tmp, env={"MAKAD_USER_MEMORY": str(home)})
    proc.start()
    try:
        proc.call("add_entry", {"workspace": "@user", "title": "Tabs", "content": "Indent with tabs."})
        notes = home / "notes"
        notes.mkdir()
        env = bridge_env(drop=("MAKA_WORKSPACE",), HOME=str(home))
        async with mcp_host(proc.socket, env=env, cwd=notes) as h:
            is_error, text = await h.tool("memory_list")
        assert is_error and "invalid_workspace" in text, text
        assert f"found {home} by walking up" in text, text
        assert "maka mcp --user" in text and f"maka mcp -w {notes}" in text, text
        async with mcp_host(proc.socket, workspace=notes) as h:
            is_error, text = await h.tool("memory_list")
        assert not is_error, text
    finally:
        proc.stop()


def test_a_workspace_folder_that_does_not_exist_is_named_at_start(shared_daemon: DaemonProcess) -> None:
    """`maka mcp -w` naming a folder that does not exist says so on stderr (the host's MCP
    log) when it starts, with what fails until it exists; an existing folder warns nothing."""

    def start(workspace: Path) -> str:
        ran = subprocess.run(
            mcp_command(shared_daemon, workspace),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return ran.stderr

    missing = shared_daemon.workspace / "no-such-project"
    said = start(missing)
    assert f"maka mcp: serving {missing}" in said
    assert f"{missing} does not exist" in said and "--workspace" in said
    assert "does not exist" not in start(shared_daemon.workspace)


async def test_started_in_the_root_without_a_workspace_names_the_flag(
    shared_daemon: DaemonProcess, tmp_path: Path
) -> None:
    """`maka mcp` started in / with no workspace (a host such as Claude Desktop starts servers
    there) warns on stderr at start, and each tool error names the --workspace to add to the
    host's settings."""
    errlog = tmp_path / "stderr"
    with errlog.open("w") as err:
        env = bridge_env(drop=("MAKA_WORKSPACE",))
        async with mcp_host(shared_daemon.socket, env=env, cwd=Path("/"), errlog=err) as h:
            is_error, text = await h.tool("memory_list")
    assert is_error and text.startswith("invalid_workspace"), text
    assert "--workspace" in text and "host" in text, text
    said = errlog.read_text()
    assert "maka mcp: serving /" in said
    assert "warning: / is no workspace" in said and "--workspace" in said, said


def test_started_on_a_terminal_it_says_it_waits_for_a_host(shared_daemon: DaemonProcess) -> None:
    """`maka mcp` typed at a terminal says, under `serving`, that it is a server for an agent
    host to start, where to read how, and that Ctrl-C stops it, which it then does.
    A host's pipe gets no such line."""
    pty = Pty(mcp_command(shared_daemon, shared_daemon.workspace), {**os.environ, "TERM": "dumb"})
    pty.expect(f"maka mcp: serving {shared_daemon.workspace}")
    said = pty.expect("Ctrl-C")
    assert "MCP host" in said and "docs/MCP.md" in said
    pty.proc.send_signal(signal.SIGINT)  # what Ctrl-C sends (this pty is no controlling terminal)
    code, _ = pty.wait()
    assert code in (0, 130)  # closed at once, or interrupted before the handler was in place
    piped = subprocess.run(
        mcp_command(shared_daemon, shared_daemon.workspace),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Ctrl-C" not in piped.stderr

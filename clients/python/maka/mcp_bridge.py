"""`maka mcp`: a stdio MCP server giving an agent gated access to one workspace's memory.

Built on the official SDK's low-level server (mcp 2.x), which lets the tool list change
while connected and carries resource subscriptions. What it serves:

- tools: ``memory_search``, ``memory_context``, ``memory_attention``, ``memory_suggestions``,
  ``memory_dismiss_suggestion``, ``memory_list``, ``memory_resolve``,
  ``history_search``, ``session_record`` and — only while the user allows agents to propose
  (``extractToolEnabled && agentReadEnabled``, memory on, not incognito) — ``memory_propose``.
  When a switch changes, the host gets ``notifications/tools/list_changed``.
- resources: ``maka://memory/MEMORY.md``, ``maka://memory/PENDING.md`` and
  ``maka://attention`` (the attention state), with
  ``notifications/resources/updated`` for the ones the host subscribed to, driven by the
  daemon's own change notifications.
- one ledger session per MCP connection, opened at the first ``session_record`` and
  closed when the host disconnects.

The logic (and every privacy gate) is in ``maka.mcp_tools``; this module is the wiring.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import msgspec
from mcp import types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from maka import mcp_args as a
from maka.mcp_gates import USER_LEVEL, ToolFailure, propose_open
from maka.mcp_text import echoed
from maka.mcp_tools import CLOSE_TIMEOUT_S, Bridge
from maka.mcp_wire import HostInput, read_host
from maka.server_check import ServerUid
from makad import __version__

MEMORY_URI = "maka://memory/MEMORY.md"
PENDING_URI = "maka://memory/PENDING.md"
ATTENTION_URI = "maka://attention"
PROPOSE = "memory_propose"
# "Resource not found": -32002 up to the 2025-11-25 specification, Invalid Params since.
RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602
log = logging.getLogger("maka.mcp")


@dataclass(frozen=True)
class ToolSpec:
    name: str
    args: type[msgspec.Struct]
    run: Callable[[Bridge, Any], Awaitable[str]]
    description: str
    read_only: bool = True

    def tool(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=a.input_schema(self.args),
            annotations=types.ToolAnnotations(read_only_hint=self.read_only, open_world_hint=False),
        )


TOOLS = (
    ToolSpec(
        "memory_search",
        a.SearchArgs,
        Bridge.memory_search,
        "Find the saved memory entries relevant to `query`, within `budget_tokens`: the "
        "user's pinned entries and those matching the query first, then, while there is room, "
        "the other entries most trusted first (a memory that fits is returned whole, since the "
        "user's words may differ from the query's). Each entry is cited as memory:<id>. "
        "Search before asking the user something they may have said before. Returns nothing "
        "while the user has not allowed agents to read memory.",
    ),
    ToolSpec(
        "memory_context",
        a.ContextArgs,
        Bridge.memory_context,
        "The context pack for the current turn, as plain text to read: the relevant "
        "memory, and with `session_id` that session's working state and summary, plus "
        "recall of earlier sessions when the user allows it. Every quoted item names "
        "its ref.",
    ),
    ToolSpec(
        "memory_attention",
        a.AttentionArgs,
        Bridge.attention,
        "What the user is in the middle of in this workspace, from past sessions: active and "
        "recently abandoned threads (open work, failures not fixed yet), what was touched most, "
        "proposals waiting for review, rejected proposals not to suggest again, and when the "
        "workspace is worked on. Each line names its refs (resolve them with memory_resolve). "
        "Read it when a session starts. Returns nothing while the user has not allowed agents "
        "to read memory.",
    ),
    ToolSpec(
        "memory_suggestions",
        a.SuggestionsArgs,
        Bridge.suggestions,
        "What is worth offering the user unasked, from past sessions — a thread left open to "
        "resume, a failure still standing, proposals waiting for review — or, most of the time, "
        "nothing. Each has an id, a score, the reason and its refs. Offer one in a sentence when "
        "it fits the moment; do not insist. Returns nothing while the user has not allowed agents "
        "to read memory.",
    ),
    ToolSpec(
        "memory_dismiss_suggestion",
        a.DismissSuggestionArgs,
        Bridge.dismiss_suggestion,
        "When the user declines a suggestion, dismiss it by its id: it is not suggested again "
        "for a few days (the daemon's cooldown).",
        read_only=False,
    ),
    ToolSpec(
        "memory_list",
        a.ListArgs,
        Bridge.memory_list,
        "List the entries in memory (newest first): ref, title, tags and date. Read one with memory_resolve.",
    ),
    ToolSpec(
        "memory_resolve",
        a.ResolveArgs,
        Bridge.memory_resolve,
        "Show what refs name: memory:<id> → the entry; event:<session>:<seq> or "
        "event:<session>:<from>-<to> → the events, verified against the session's hash "
        "chain; checkpoint:<id> → its summary; episode:<id> → the episode. Ids may be cut "
        "to a unique prefix (the 10–12 characters the user's `maka` shows); an ambiguous "
        "one lists its candidates. Use it to quote a source exactly instead of from "
        "recollection.",
    ),
    ToolSpec(
        "history_search",
        a.HistoryArgs,
        Bridge.history_search,
        "Full-text search of past sessions' events; each hit is cited as "
        "event:<session>:<seq>. Needs the user's history-recall permission.",
    ),
    ToolSpec(
        "session_record",
        a.RecordArgs,
        Bridge.session_record,
        "Record this conversation's turns (since the last call) in the workspace's "
        "ledger, so later sessions can find them (history_search, recall). Call it after "
        "each exchange with the user. Returns the refs of the recorded events (cite them "
        "in memory_propose's source_refs). Secrets are redacted; in incognito nothing is "
        "kept after the daemon stops.",
        read_only=False,
    ),
    ToolSpec(
        PROPOSE,
        a.ProposeArgs,
        Bridge.memory_propose,
        "Propose a durable memory: a stable fact, preference or decision worth keeping "
        "across sessions. It is queued for the user's approval (PENDING.md) and never "
        "written to memory directly. Cite supporting events in `source_refs`. When a fact "
        'in memory changed ("I changed the code to 7720") or was wrong, propose the '
        "corrected fact with `supersedes` naming the old entry's ref: the user reviews it "
        "as a replacement, and approving it archives the old entry.",
        read_only=False,
    ),
)
BY_NAME = {spec.name: spec for spec in TOOLS}
RESOURCES = {
    MEMORY_URI: (
        "MEMORY.md",
        "The workspace's memory file as the user keeps it (Markdown).",
        Bridge.memory_file,
    ),
    PENDING_URI: (
        "PENDING.md",
        "Proposals waiting for the user's review; none of them is memory yet.",
        Bridge.pending_file,
    ),
    ATTENTION_URI: (
        "Attention",
        "What the user is in the middle of here, derived from past sessions (each line with refs).",
        Bridge.attention,
    ),
}


class Host:
    """The connected MCP client, as far as pushing notifications to it goes."""

    def __init__(self) -> None:
        self.session: Any = None  # the SDK's ServerSession of a handshake-era connection
        self.subscribed: set[str] = set()
        self.bus = InMemorySubscriptionBus()  # for 2026-era clients (subscriptions/listen)

    def saw(self, ctx: Any) -> None:
        if self.session is None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self.session = ctx.session

    async def changed(self, what: str) -> None:
        if what == "tools":
            await self.bus.publish(ToolsListChanged())
            if self.session is not None:
                await self.session.send_tool_list_changed()
            return
        uri = MEMORY_URI if what == "memory" else PENDING_URI
        await self.bus.publish(ResourceUpdated(uri=uri))
        if self.session is not None and uri in self.subscribed:
            await self.session.send_resource_updated(uri)


def instructions(workspace: str) -> str:
    """What the server tells the agent up front: when to search, record and propose."""
    return (
        f"Long-term memory of the workspace {workspace}, kept by makad in files the user owns "
        "and reviews.\n"
        "- Search first: at the start of a task, and before asking the user anything they may "
        "have told you before, call memory_search (memory_context gives the whole pack for the "
        "turn). Cite what you use by its ref (memory:<id>, event:<session>:<seq>); "
        "memory_resolve quotes a ref exactly and takes the short ids the user's `maka` shows.\n"
        "- Record the conversation: after each exchange with the user, call session_record "
        "with the turns since your last call (the user's message, your answer, tool calls that "
        "mattered). Without it later sessions find nothing: history_search, recall and the "
        "source refs of proposals stay empty.\n"
        "- Propose what lasts: when the user states or confirms a stable fact, preference or "
        "decision worth keeping across sessions (not task progress, not a guess), call "
        "memory_propose with source_refs naming the recorded turns. It only queues the "
        "proposal in PENDING.md: the user decides what is kept, so never claim it is saved.\n"
        "- Correct what changed: when the user says a remembered fact no longer holds, call "
        "memory_propose with the corrected fact and supersedes naming the old entry's ref "
        "(memory:<id>), not a second entry beside it. A pack may mark a line `superseded by` "
        "a newer ref or an entry `possibly outdated`: trust the newer source.\n"
        "- When a tool says a permission is off, tell the user the command it names; do not "
        "retry, and do not work around it."
    )


def served(ctx: Any, uri: str) -> None:
    """Raise the specification's "Resource not found" for a URI this server does not serve."""
    if uri not in RESOURCES:
        code = INVALID_PARAMS if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS else RESOURCE_NOT_FOUND
        shown = echoed(uri)
        raise MCPError(
            code, f"Resource not found: {shown} (this server serves {', '.join(RESOURCES)})", {"uri": shown}
        )


def text_result(text: str, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def build_server(bridge: Bridge) -> tuple[Server[Any], Host]:
    host = Host()
    bridge.listeners.append(host.changed)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        host.saw(ctx)
        with contextlib.suppress(ToolFailure):  # no daemon: list what needs no permission
            await bridge.connect()
        listed = [s.tool() for s in TOOLS if s.name != PROPOSE or propose_open(bridge.settings)]
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        host.saw(ctx)
        spec = BY_NAME.get(params.name)
        if spec is None:
            return text_result(f"unknown_tool: no tool named {echoed(params.name)!r}", is_error=True)
        try:
            args = msgspec.convert(params.arguments or {}, spec.args, strict=False)
        except msgspec.ValidationError as exc:
            return text_result(
                f"invalid_params: {a.choices_at(str(exc), spec.tool().input_schema)}", is_error=True
            )
        try:
            # memory_propose runs even while unlisted: the daemon's gate then refuses it
            # with its own kind, which tells the agent more than "unknown tool".
            return text_result(await spec.run(bridge, args))
        except ToolFailure as exc:
            return text_result(str(exc), is_error=True)
        except Exception as exc:  # never the SDK's bare {"code": 0, "message": ""}
            log.warning("tool %s failed", params.name, exc_info=True)
            return text_result(f"internal: the tool failed ({type(exc).__name__})", is_error=True)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        host.saw(ctx)
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=uri,
                    name=name,
                    description=f"{about} Workspace: {bridge.workspace}",
                    mime_type="text/markdown",
                )
                for uri, (name, about, _) in RESOURCES.items()
            ]
        )

    async def list_resource_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        host.saw(ctx)
        return types.ListResourceTemplatesResult(resource_templates=[])  # fixed URIs only

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        host.saw(ctx)
        uri = str(params.uri)
        served(ctx, uri)
        try:
            body = await RESOURCES[uri][2](bridge)
        except ToolFailure as exc:
            body = str(exc)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/markdown", text=body)]
        )

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        host.saw(ctx)
        served(ctx, str(params.uri))
        host.subscribed.add(str(params.uri))
        with contextlib.suppress(ToolFailure):
            await bridge.connect()
        return types.EmptyResult()

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        host.subscribed.discard(str(params.uri))
        return types.EmptyResult()

    server: Server[Any] = Server(
        "maka",
        version=__version__,
        title="makad memory",
        instructions=instructions(bridge.workspace),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_subscriptions_listen=ListenHandler(host.bus),
    )
    return server, host


async def serve_async(bridge: Bridge) -> None:
    """Serve on stdin/stdout until the host disconnects (or stops the server with a signal);
    then close the ledger session."""
    server, _ = build_server(bridge)
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    host_input = HostInput().host_lines()
    no_input = anyio.AsyncFile(io.StringIO(""))  # the host's lines are read by read_host
    messages, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    async with bridge, stdio_server(stdin=no_input) as (_, write), anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signals, bridge)
        tg.start_soon(read_host, host_input, messages, write)
        await server.run(read, write, options)
        tg.cancel_scope.cancel()


async def _stop_on_signals(bridge: Bridge) -> None:
    """SIGTERM, SIGHUP or SIGINT: close the session, then exit at once. Cancelling is not
    enough, since the SDK reads stdin in a thread that only a closed pipe ends."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP, signal.SIGINT) as signals:
        async for _ in signals:
            with anyio.move_on_after(CLOSE_TIMEOUT_S):
                await bridge.close_session()
            os._exit(0)


def serve(
    socket_path: str | None,
    workspace: str,
    autostart: bool = True,
    server_uid: ServerUid | None = None,
    timeout: float = 30.0,
    reserved_hint: str | None = None,
) -> None:
    """Run the MCP server on stdin/stdout (blocking); ``timeout``: how long a tool call waits
    for makad's answer; ``reserved_hint``: added to an error refusing the workspace as
    reserved (how the folder was found and what to start instead)."""
    print(f"maka mcp: serving {workspace}", file=sys.stderr, flush=True)
    if sys.stdin.isatty():
        print(
            "maka mcp: this is a server an MCP host (Claude Code, Cursor …) starts and talks to on "
            "stdin; it waits for one here. To connect a host: makad's docs/MCP.md. Ctrl-C stops it.",
            file=sys.stderr,
            flush=True,
        )
    if workspace == "/":
        print(
            "maka mcp: warning: / is no workspace: every tool call fails (invalid_workspace); "
            "start maka mcp with --workspace /path/to/the/project in the host's MCP settings",
            file=sys.stderr,
            flush=True,
        )
    elif workspace != USER_LEVEL and not os.path.isdir(workspace):
        print(
            f"maka mcp: warning: {workspace} does not exist (or is no folder): every tool call fails "
            "(invalid_workspace) until it does; check the --workspace the host starts this with",
            file=sys.stderr,
            flush=True,
        )
    bridge = Bridge(
        socket_path,
        workspace,
        autostart=autostart,
        server_uid=server_uid,
        timeout=timeout,
        reserved_hint=reserved_hint,
    )
    anyio.run(serve_async, bridge, backend="asyncio")

"""`maka mcp`: a stdio MCP server giving an agent gated access to one workspace's memory.

Tools: ``memory_search`` (bounded recall with refs), ``memory_context`` (a build_context
pack), ``history_search`` (past sessions) and ``memory_propose`` (a proposal for the user to
approve — it never writes MEMORY.md). Every gate holds: with agent read off, memory disabled
or incognito on, the read tools say so and return nothing; history also needs
historyRecallEnabled; proposals pass the daemon's extract gate, and its refusals come back
as tool errors carrying the error kind (``gate_closed``, ``incognito_blocked``, ``disabled``).

Needs the optional extra: ``pip install 'makad[mcp]'`` (works with mcp 1.x and 2.x).
"""

from __future__ import annotations

from typing import Any

from maka.aclient import AsyncClient
from maka.cli.context import render_pack
from maka.errors import DaemonUnavailable, MakaError, MethodNotFound, RemoteError

MAX_BUDGET_TOKENS = 16_000
MAX_HISTORY_HITS = 50
HIT_TEXT_CHARS = 400


class ToolFailure(Exception):
    """A tool call that failed; ``kind`` is the daemon's error kind (or the bridge's own)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, int(value)))


class Bridge:
    """The tools' logic, free of the MCP SDK: each returns text or raises ToolFailure."""

    def __init__(self, socket_path: str | None, workspace: str, timeout: float = 30.0) -> None:
        self.socket_path = socket_path
        self.workspace = workspace
        self.timeout = timeout

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        try:
            async with AsyncClient(self.socket_path, timeout=self.timeout) as client:
                return await client.call(method, {"workspace": self.workspace, **params})
        except MethodNotFound:
            raise ToolFailure("method_not_found",
                              f"this makad does not offer {method} (it may be older than "
                              f"this client)") from None
        except RemoteError as exc:
            raise ToolFailure(exc.kind, exc.message) from None
        except DaemonUnavailable:
            raise ToolFailure("daemon_unavailable", "no makad is running; the user can start "
                              "it with `makad`") from None
        except (MakaError, TimeoutError) as exc:
            raise ToolFailure("connection", str(exc) or "timed out") from None

    async def refusal(self, history: bool = False) -> str | None:
        """Why reading is not allowed in this workspace right now, or None when it is."""
        s = await self.call("get_settings", {})
        if s.get("incognito"):
            return "Incognito is on for this workspace: nothing is read or written."
        if not s.get("enabled", True):
            return "Memory is disabled for this workspace: nothing is returned."
        if not s.get("agentReadEnabled"):
            return ("Agent read is off for this workspace: the user has not allowed agents to "
                    "read memory, so nothing is returned.")
        if history and not s.get("historyRecallEnabled"):
            return ("History recall is off for this workspace: the user has not allowed "
                    "searching past sessions, so nothing is returned.")
        return None

    async def memory_search(self, query: str, budget_tokens: int = 2000) -> str:
        refusal = await self.refusal()
        if refusal:
            return refusal
        pack = await self.call("build_context", {
            "query": query, "include": ["memory"],
            "budgetTokens": _clamp(budget_tokens, 50, MAX_BUDGET_TOKENS)})
        segments = [s for s in pack.get("segments") or [] if s.get("kind") == "memory"]
        if not segments:
            return f"No memory entries match {query!r}."
        refs = [ref for s in segments for ref in s.get("sourceIds") or []]
        text = "\n\n".join(str(s.get("text", "")).strip() for s in segments)
        return f"{text}\n\nRefs: {', '.join(refs) if refs else '(none)'}"

    async def memory_context(self, query: str, budget_tokens: int = 4000,
                             session_id: str | None = None) -> str:
        refusal = await self.refusal()
        if refusal:
            return refusal
        params: dict[str, Any] = {"query": query,
                                  "budgetTokens": _clamp(budget_tokens, 50, MAX_BUDGET_TOKENS)}
        if session_id:
            params["sessionId"] = session_id
        pack = await self.call("build_context", params)
        return "\n".join(render_pack(pack, trace=False))

    async def history_search(self, query: str, limit: int = 10,
                             session_id: str | None = None) -> str:
        refusal = await self.refusal(history=True)
        if refusal:
            return refusal
        params: dict[str, Any] = {"query": query, "limit": _clamp(limit, 1, MAX_HISTORY_HITS)}
        if session_id:
            params["sessionId"] = session_id
        result = await self.call("search_history", params)
        hits = result.get("hits", []) if isinstance(result, dict) else result
        if not hits:
            return f"No past events match {query!r}."
        return "\n".join(render_hit(hit) for hit in hits)

    async def memory_propose(self, title: str, content: str, tags: list[str] | None = None,
                             session_id: str | None = None,
                             source_refs: list[str] | None = None) -> str:
        params: dict[str, Any] = {"title": title, "content": content, "origin": "extracted"}
        if tags:
            params["tags"] = tags
        if session_id:
            params["sessionId"] = session_id
        if source_refs:
            params["sourceRefs"] = source_refs
        result = await self.call("propose", params)
        notes = []
        if result.get("redactions"):
            notes.append(f"{result['redactions']} secret(s) were redacted.")
        if result.get("queued"):
            proposal = result["proposal"]
            if result.get("similarTo"):
                notes.append("Similar entries already exist: " + ", ".join(result["similarTo"]))
            return " ".join([f"Proposed {proposal['id']}: queued in PENDING.md for the user's "
                             "review. It is not part of memory until the user approves it.",
                             *notes])
        if result.get("duplicateOf"):
            known = result.get("proposal") or {}
            where = ("is already waiting for the user's review" if known.get("status") in
                     ("review_required", "draft") else "is already in memory")
            return f"Not queued: the same memory {where} ({result['duplicateOf']})."
        rejected = result.get("previouslyRejected") or {}
        reason = f" (reason: {rejected['reason']})" if rejected.get("reason") else ""
        return f"Not queued: the user rejected this memory before{reason}."


def render_hit(hit: dict[str, Any]) -> str:
    event = hit.get("event", hit)
    text = " ".join(str(event.get("text", "")).split())
    if len(text) > HIT_TEXT_CHARS:
        text = text[: HIT_TEXT_CHARS - 1] + "…"
    ref = hit.get("ref") or f"event:{event.get('sessionId')}:{event.get('seq')}"
    return f"[{ref}] {event.get('type', '?')}: {text}"


def build_server(bridge: Bridge) -> Any:
    """The MCP server (mcp 2.x MCPServer, or mcp 1.x FastMCP) with the four tools."""
    try:
        from mcp.server.mcpserver import MCPServer as Server
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:  # mcp 1.x
        from mcp.server.fastmcp import (  # type: ignore[no-redef,attr-defined,unused-ignore]
            FastMCP as Server,
        )
        from mcp.server.fastmcp.exceptions import (  # type: ignore[no-redef,import-not-found,unused-ignore]
            ToolError,
        )

    server = Server(
        name="maka",
        instructions=(f"Memory of the workspace {bridge.workspace}, kept by makad. Search it "
                      "before asking the user something they may have said before. "
                      "memory_propose only queues a proposal: the user decides what is kept."),
        log_level="WARNING",
    )

    async def run(coro: Any) -> str:
        try:
            text: str = await coro
        except ToolFailure as exc:
            raise ToolError(str(exc)) from None
        return text

    @server.tool(description=(
        "Find saved memory entries relevant to `query`, within `budget_tokens` (default "
        "2000). Each entry is cited as memory:<id>. Returns nothing when the user has not "
        "allowed agents to read memory."))
    async def memory_search(query: str, budget_tokens: int = 2000) -> str:
        return await run(bridge.memory_search(query, budget_tokens))

    @server.tool(description=(
        "The context pack for the current turn within `budget_tokens`: relevant memory, and "
        "for `session_id` its working state, summary and recall of earlier sessions."))
    async def memory_context(query: str, budget_tokens: int = 4000,
                             session_id: str | None = None) -> str:
        return await run(bridge.memory_context(query, budget_tokens, session_id))

    @server.tool(description=(
        "Full-text search of past sessions' events (at most `limit`); each hit is cited as "
        "event:<session>:<seq>. Needs the user's history-recall permission."))
    async def history_search(query: str, limit: int = 10, session_id: str | None = None) -> str:
        return await run(bridge.history_search(query, limit, session_id))

    @server.tool(description=(
        "Propose a durable memory: a stable fact, preference or decision worth keeping across "
        "sessions. It is queued for the user's approval and never written to memory directly. "
        "`source_refs` may cite the event refs (event:<session>:<seq>) that support it."))
    async def memory_propose(title: str, content: str, tags: list[str] | None = None,
                             session_id: str | None = None,
                             source_refs: list[str] | None = None) -> str:
        return await run(bridge.memory_propose(title, content, tags, session_id, source_refs))

    return server


def serve(socket_path: str | None, workspace: str) -> None:
    """Run the MCP server on stdin/stdout until the client disconnects."""
    build_server(Bridge(socket_path, workspace)).run()

"""What the MCP bridge does, free of the MCP SDK: one workspace, one daemon connection
(subscribed to the workspace's changes), one ledger session per MCP connection.

Every tool returns text or raises ToolFailure (``kind: message``, the kind being the
daemon's error kind or the bridge's own). The gates are read fresh for every read, because
a stale "agent read is on" must never leak memory: with agent read off, memory disabled or
incognito on, the read tools say so and return nothing; past sessions (history_search and
refs into other sessions) also need ``historyRecallEnabled``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from maka import mcp_text as text
from maka.aclient import AsyncClient
from maka.errors import (
    AppendPartlyDone,
    DaemonUnavailable,
    MakaError,
    MethodNotFound,
    RemoteError,
    UntrustedServer,
)
from maka.ids import matching_ids
from maka.mcp_args import (
    MAX_BUDGET_TOKENS,
    MAX_HISTORY_HITS,
    MAX_LIST,
    MAX_REFS,
    MAX_TURNS,
    AttentionArgs,
    ContextArgs,
    DismissSuggestionArgs,
    HistoryArgs,
    ListArgs,
    ProposeArgs,
    RecordArgs,
    ResolveArgs,
    SearchArgs,
    SuggestionsArgs,
)
from maka.mcp_gates import USER_LEVEL, ToolFailure, propose_hint, propose_open, refusal
from maka.mcp_resolve import USER_PREFIX, Resolver
from maka.notifications import RECONNECTED, SUBSCRIPTION_LOST
from maka.server_check import ServerUid
from maka.words import counted, redacted

log = logging.getLogger("maka.mcp")
ROLE_TO_TYPE = {
    "user": "user_message",
    "assistant": "assistant_message",
    "tool_call": "tool_call",
    "tool_result": "tool_result",
    "note": "note",
    "system": "system",
}
CLOSE_TIMEOUT_S = 5.0
Listener = Callable[[str], Awaitable[None]]  # called with "tools", "memory" or "pending"


def clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, int(value)))


class Bridge:
    """Use as ``async with Bridge(...) as bridge``; on exit its ledger session is closed."""

    def __init__(
        self,
        socket_path: str | None,
        workspace: str,
        *,
        autostart: bool = True,
        timeout: float = 30.0,
        server_uid: ServerUid | None = None,
        reserved_hint: str | None = None,
    ) -> None:
        self.workspace = workspace
        self.reserved_hint = reserved_hint
        self.timeout = timeout
        self.client = AsyncClient(socket_path, timeout=timeout, autostart=autostart, server_uid=server_uid)
        self.settings: dict[str, Any] | None = None
        self.session_id: str | None = None
        self.session_title = "MCP session"
        self.listeners: list[Listener] = []
        self._subscribed = False
        # The reason of the last DaemonUnavailable said on stderr: each is said once.
        self._unavailable_said: str | None = None
        self._connect_lock = anyio.Lock()
        self._session_lock = anyio.Lock()
        self._tg: TaskGroup | None = None
        self.resolver = Resolver(self)

    async def __aenter__(self) -> Bridge:
        await self.client.__aenter__()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._pump)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT_S):
            await self.close_session()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            self._tg = None
        await self.client.__aexit__(None, None, None)

    # ------------------------------------------------------------ daemon ---

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        try:
            result = await self.client.call(method, {"workspace": self.workspace, **params})
        except MethodNotFound:
            raise ToolFailure(
                "method_not_found", f"this makad does not offer {method} (it may be older than this client)"
            ) from None
        except RemoteError as exc:
            if exc.kind == "too_large" and exc.code == -32600:  # the message itself, not a field
                reason = exc.data.get("reason", "")
                message = f"this call is over the daemon's message size cap ({reason}): send less per call"
                raise ToolFailure("too_large", message) from None
            message = exc.message
            if (
                exc.kind == "invalid_workspace"
                and exc.data.get("reason") == "reserved"
                and self.reserved_hint
            ):
                message = f"{message}. {self.reserved_hint}"
            raise ToolFailure(exc.kind, message) from None
        except DaemonUnavailable as exc:
            if exc.reason != self._unavailable_said:
                # Every call answers with the error; stderr (the host's log) gets it once.
                self._unavailable_said = exc.reason
                log.warning("maka mcp: %s", exc)
            raise ToolFailure("daemon_unavailable", str(exc)) from None
        except UntrustedServer as exc:
            raise ToolFailure("untrusted_server", str(exc)) from None
        except TimeoutError:
            raise ToolFailure(
                "timeout",
                f"makad did not answer within {self.timeout:g} s: it may be busy or stuck; "
                "try again in a moment, and if it keeps happening tell the user (`maka status` "
                "shows whether it answers)",
            ) from None
        except AppendPartlyDone as exc:
            # Some turns were recorded, in order, and the rest not: the message says which.
            raise ToolFailure("partly_recorded", str(exc)) from None
        except MakaError as exc:
            raise ToolFailure("connection", str(exc)) from None
        self._unavailable_said = None
        return result

    async def connect(self) -> None:
        """Subscribe to the workspace's changes (starting makad if need be) and read its
        settings; once per connection to the daemon."""
        async with self._connect_lock:
            if self._subscribed:
                return
            await self.call("subscribe", {})
            self._subscribed = True
            await self._settings_changed(await self.call("get_settings", {}))

    async def fresh_settings(self) -> dict[str, Any]:
        await self.connect()
        settings: dict[str, Any] = await self.call("get_settings", {})
        await self._settings_changed(settings)
        return settings

    async def _settings_changed(self, settings: dict[str, Any]) -> None:
        before, self.settings = self.settings, settings
        if before is not None and propose_open(before) != propose_open(settings):
            await self._announce("tools")

    async def _announce(self, what: str) -> None:
        for listener in list(self.listeners):
            try:
                await listener(what)
            except Exception:  # a host that went away must not stop the bridge
                log.debug("listener failed for %s", what, exc_info=True)

    async def _pump(self) -> None:
        """Turn the daemon's notifications into tools/resources changes for the host."""
        while True:
            try:
                async for note in self.client.notifications():
                    await self._on_notification(note.get("method", ""), note.get("params") or {})
            except (DaemonUnavailable, UntrustedServer):
                self._subscribed = False  # the next request subscribes again

    async def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == SUBSCRIPTION_LOST:
            self._subscribed = False
            return
        if params.get("workspace") not in (None, self.workspace) and method != RECONNECTED:
            return
        if method in ("settings_changed", RECONNECTED):
            with contextlib.suppress(ToolFailure):
                await self._settings_changed(await self.call("get_settings", {}))
        # Settings change what the resources show; after a reconnect anything may have.
        if method in ("memory_changed", "settings_changed", RECONNECTED):
            await self._announce("memory")
        if method in ("proposals_changed", "settings_changed", RECONNECTED):
            await self._announce("pending")

    # ----------------------------------------------------------- session ---

    async def ensure_session(self) -> str:
        async with self._session_lock:
            if self.session_id is None:
                opened = await self.call("open_session", {"title": self.session_title})
                self.session_id = str(opened["sessionId"])
            return self.session_id

    async def close_session(self) -> None:
        session, self.session_id = self.session_id, None
        if session is not None:
            with contextlib.suppress(ToolFailure):
                await self.call("close_session", {"sessionId": session})

    def own(self, session_id: str | None) -> bool:
        return session_id is not None and session_id == self.session_id

    # ------------------------------------------------------------- tools ---

    async def read_refusal(self, history: bool = False) -> str | None:
        return refusal(await self.fresh_settings(), self.workspace, history)

    async def memory_search(self, args: SearchArgs) -> str:
        if why := await self.read_refusal():
            return why
        pack = await self.call(
            "build_context",
            {
                "query": args.query,
                "include": ["memory"],
                "budgetTokens": clamp(args.budget_tokens, 50, MAX_BUDGET_TOKENS),
            },
        )
        segments = [s for s in pack.get("segments") or [] if s.get("kind") == "memory"]
        if not segments:
            nothing = f"No memory entries for {text.echoed(args.query)!r}."
            return _too_small(pack, args.budget_tokens) or nothing
        refs = [ref for s in segments for ref in s.get("sourceIds") or []]
        body = "\n\n".join(str(s.get("text", "")).strip() for s in segments)
        return f"{body}\n\nRefs: {', '.join(refs) if refs else '(none)'}"

    async def memory_context(self, args: ContextArgs) -> str:
        if why := await self.read_refusal():
            return why
        params: dict[str, Any] = {
            "query": args.query,
            "budgetTokens": clamp(args.budget_tokens, 50, MAX_BUDGET_TOKENS),
        }
        if args.session_id:
            # That session's entries, working state and summary come along: another
            # session's need history recall, as every read of past sessions does.
            session, why = await self.resolver.readable_session(args.session_id)
            if why is not None:
                return why
            params["sessionId"] = session
        pack = await self.call("build_context", params)
        return (
            text.pack_text(pack)
            or _too_small(pack, args.budget_tokens)
            or "Nothing in memory bears on this turn."
        )

    async def memory_list(self, args: ListArgs) -> str:
        if why := await self.read_refusal():
            return why
        state = await self.call(
            "read_state", {"includeEntries": True, "includeArchived": args.include_archived}
        )
        if state.get("status") != "ok":
            return f"MEMORY.md cannot be read now ({state.get('status')}): {state.get('reason') or ''}"
        entries = [
            e
            for e in self.visible(state.get("entries") or [])
            if args.tag is None or args.tag in (e.get("tags") or [])
        ]
        entries.sort(key=lambda e: e.get("updatedAt") or e.get("createdAt") or 0, reverse=True)
        shown = entries[: clamp(args.limit, 1, MAX_LIST)]
        if not shown:
            return "No entries" + (f" tagged {text.echoed(args.tag)!r}." if args.tag else " in memory.")
        head = f"{len(entries)} entries" + (
            f", the newest {len(shown)}:" if len(shown) < len(entries) else ":"
        )
        return "\n".join([head, *(text.entry_line(e) for e in shown)])

    def visible(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Entries scoped to another session never reach this one (invariant 7)."""
        return [e for e in entries if e.get("scope") != "session" or self.own(e.get("sessionId"))]

    async def history_search(self, args: HistoryArgs) -> str:
        if why := await self.read_refusal(history=True):
            return why
        params: dict[str, Any] = {"query": args.query, "limit": clamp(args.limit, 1, MAX_HISTORY_HITS)}
        if args.session_id:
            params["sessionId"] = await self.resolver.session_arg(args.session_id)
        found = await self.call("search_history", params)
        hits = found.get("hits") or []
        if not hits:
            return f"No past events match {text.echoed(args.query)!r}."
        return "\n".join([*(text.render_hit(hit) for hit in hits), *text.omitted_hits(found.get("omitted"))])

    async def session_record(self, args: RecordArgs) -> str:
        if not 1 <= len(args.turns) <= MAX_TURNS:
            raise ToolFailure(
                "too_large" if args.turns else "invalid_params",
                f"send between 1 and {MAX_TURNS} turns per call",
            )
        events = []
        for turn in args.turns:
            event: dict[str, Any] = {"type": ROLE_TO_TYPE[turn.role], "text": turn.text}
            if turn.tool_name:
                event["toolName"] = turn.tool_name
            if turn.tool_call_id:
                event["toolCallId"] = turn.tool_call_id
            events.append(event)
        session = await self.ensure_session()
        try:
            result = await self.call("append_events", {"sessionId": session, "events": events})
        except ToolFailure as exc:
            if exc.kind != "not_found":
                raise
            # An incognito session vanishes with a daemon restart: start a new one.
            self.session_id = None
            session = await self.ensure_session()
            result = await self.call("append_events", {"sessionId": session, "events": events})
        ref = text.event_ref(session, int(result["firstSeq"]), int(result["lastSeq"]))
        note = f" {redacted(result['redactions'])}." if result.get("redactions") else ""
        return f"Recorded {counted(len(events), 'turn')} in session {session} as {ref}.{note}"

    async def memory_resolve(self, args: ResolveArgs) -> str:
        refs = list(dict.fromkeys(r.strip() for r in args.refs if r.strip()))
        if not refs:
            raise ToolFailure("invalid_params", "give at least one ref")
        if len(refs) > MAX_REFS:
            raise ToolFailure("too_large", f"at most {MAX_REFS} refs per call")
        return text.join_blocks(await self.resolver.refs(refs, await self.fresh_settings()))

    async def memory_propose(self, args: ProposeArgs) -> str:
        params: dict[str, Any] = {"title": args.title, "content": args.content, "origin": "extracted"}
        if args.tags:
            params["tags"] = args.tags
        session = await self.resolver.session_arg(args.session_id) or self.session_id
        if session:
            params["sessionId"] = session
        if args.source_refs:
            params["sourceRefs"] = args.source_refs
        if args.everywhere:
            params["scope"] = "global"
        if args.supersedes:
            params["supersedes"] = await self.replaced_id(args.supersedes, args.everywhere)
        try:
            result = await self.call("propose", params)
        except ToolFailure as exc:
            hint = propose_hint(exc.kind, self.workspace)
            if not hint:
                raise
            reason = str(exc).split(": ", 1)[1].rstrip()
            if not reason.endswith((".", "!", "?")):
                reason += "."
            raise ToolFailure(exc.kind, reason + hint) from None
        notes = []
        if result.get("redactions"):
            notes.append(f"{redacted(result['redactions'])}.")
        if result.get("queued"):
            proposal = result["proposal"]
            if proposal.get("supersedes"):
                notes.append(
                    f"It replaces memory:{params['supersedes']}, which stays in memory until the "
                    "user approves the replacement."
                )
            if result.get("similarTo"):
                notes.append("Similar entries already exist: " + ", ".join(result["similarTo"]))
            return " ".join(
                [
                    f"Proposed {proposal['id']}: queued in "
                    f"{'the user-level PENDING.md' if args.everywhere else 'PENDING.md'} for the "
                    "user's review. It is not part of memory until the user approves it.",
                    *notes,
                ]
            )
        if result.get("duplicateOf"):
            known = result.get("proposal") or {}
            where = (
                "is already waiting for the user's review"
                if known.get("status") in ("review_required", "draft")
                else "is already in memory"
            )
            return f"Not queued: the same memory {where} ({result['duplicateOf']})."
        rejected = result.get("previouslyRejected") or {}
        reason = f" (reason: {rejected['reason']})" if rejected.get("reason") else ""
        return f"Not queued: the user rejected this memory before{reason}."

    async def replaced_id(self, given: str, everywhere: bool) -> str:
        """The entry id ``supersedes`` names: a ref or id whole, or a unique prefix of a
        visible entry's id (completed here; what names nothing goes to the daemon, which
        says so). ``@user/<id>`` names a user-level entry; for a proposal ``everywhere``
        the user level is where every id is looked up."""
        wanted = given.strip().removeprefix("memory:")
        user = wanted.startswith(USER_PREFIX)
        bare = wanted.removeprefix(USER_PREFIX)
        workspace = USER_LEVEL if user or everywhere else self.workspace
        try:
            state = await self.call("read_state", {"workspace": workspace, "includeEntries": True})
        except ToolFailure:
            return wanted  # the daemon's own answer is the clearer one
        entries = {e["id"]: e for e in self.visible(state.get("entries") or [])}
        found = matching_ids(entries, bare)
        if len(found) > 1:
            level = USER_PREFIX if workspace == USER_LEVEL else ""
            lines = [text.entry_line(entries[i], level) for i in found]
            raise ToolFailure("invalid_params", text.ambiguous("entries", given, lines))
        if not found:
            return wanted
        return f"{USER_PREFIX}{found[0]}" if user and not everywhere else found[0]

    # --------------------------------------------------------- resources ---

    async def memory_file(self) -> str:
        if why := await self.read_refusal():
            return why
        state = await self.call("read_state", {})
        if state.get("status") != "ok":
            return f"MEMORY.md cannot be read now ({state.get('status')}): {state.get('reason') or ''}"
        return str(state.get("content", ""))

    async def attention(self, args: AttentionArgs | None = None) -> str:
        """The workspace's attention state (get_attention), behind the read gate; with
        ``args.section``, that section only."""
        if why := await self.read_refusal():
            return why
        result = await self.call("get_attention", {})
        asked = (args.section or "").strip() if args is not None else ""
        if asked:
            sections = result.get("sections") or []
            key = asked.casefold()
            result["sections"] = [s for s in sections if str(s.get("name", "")).casefold() == key]
            if not result["sections"]:
                names = ", ".join(str(s.get("name")) for s in sections)
                raise ToolFailure(
                    "invalid_params",
                    f"no attention section named {text.echoed(asked)!r}: section is one of {names} "
                    "(or leave it out for all of them)",
                )
        return text.attention_markdown(result)

    async def suggestions(self, args: SuggestionsArgs | None = None) -> str:
        """What is worth offering the user now (suggest), behind the read gate; this
        connection's own session is not suggested back to it."""
        if why := await self.read_refusal():
            return why
        params: dict[str, Any] = {"explain": bool(args and args.explain)}
        if self.session_id is not None:
            params["sessionId"] = self.session_id
        try:
            result = await self.call("suggest", params)
        except ToolFailure as exc:
            if exc.kind != "not_found" or "sessionId" not in params:
                raise
            # This connection's session is gone (deleted, or incognito across a restart):
            # the next record opens a new one; ask without it meanwhile.
            self.session_id = None
            del params["sessionId"]
            result = await self.call("suggest", params)
        return text.suggestions_markdown(result)

    async def dismiss_suggestion(self, args: DismissSuggestionArgs) -> str:
        """Hide a suggestion for the daemon's cooldown (dismiss_suggestion), behind the read gate."""
        if why := await self.read_refusal():
            return why
        result = await self.call("dismiss_suggestion", {"id": args.id.strip()})
        return f"Dismissed {result.get('id')} until {result.get('until')} (ms since the epoch)."

    async def pending_file(self) -> str:
        if why := await self.read_refusal():
            return why
        proposals = (await self.call("list_proposals", {})).get("proposals") or []
        for view in proposals:  # an entry scoped to another session is not this one's to see
            if view.get("replaces") and not self.visible([view["replaces"]]):
                del view["replaces"]
        return text.pending_markdown(proposals)


def _too_small(pack: dict[str, Any], budget: int) -> str | None:
    """What an empty pack says when the budget, not the question, left everything out."""
    if (pack.get("trace") or {}).get("emptyReason") != "budget_too_small":
        return None
    return (
        f"Nothing fits in budget_tokens={budget}: what bears on this turn needs more. Call again "
        "with a larger budget_tokens."
    )

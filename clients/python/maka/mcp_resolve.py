"""``memory_resolve`` and the session ids the tools take: refs to text, ids whole or as a
unique prefix (the CLI shows 10–12 characters; ``maka.ids``), every gate read fresh.

An ambiguous prefix lists its candidates; one that names a proposal says it is waiting
in PENDING.md; one that names nothing says so, never "it may have been deleted".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from maka import mcp_text as text
from maka.ids import matching_ids
from maka.mcp_gates import USER_LEVEL, ToolFailure, refusal

if TYPE_CHECKING:
    from maka.mcp_tools import Bridge

USER_PREFIX = f"{USER_LEVEL}/"
EPISODES_SCANNED = 1_000
UNKNOWN_REF = (
    "Not a ref this server knows: use memory:<id>, event:<session>:<seq>[-<seq>], "
    "checkpoint:<id> or episode:<id>."
)


class AmbiguousId(Exception):
    """A prefix that starts several ids; the message lists them."""


class Resolver:
    """Resolves refs for one bridge (its workspace, its own session, its daemon)."""

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge

    async def refs(self, refs: list[str], settings: dict[str, Any]) -> list[tuple[str, str]]:
        """(ref, text) for each ref."""
        return [(ref, await self.one(ref, settings)) for ref in refs]

    async def one(self, ref: str, settings: dict[str, Any]) -> str:
        kind, _, rest = ref.partition(":")
        resolvers: dict[str, Callable[[str, dict[str, Any]], Awaitable[str]]] = {
            "memory": self.memory,
            "event": self.events,
            "checkpoint": self.checkpoint,
            "episode": self.episode,
        }
        resolve = resolvers.get(kind)
        if resolve is None or not rest.strip():
            return UNKNOWN_REF
        try:
            return await resolve(rest.strip(), settings)
        except AmbiguousId as exc:
            return str(exc)
        except ToolFailure as exc:
            return "Not found." if exc.kind == "not_found" else f"Not resolved ({exc})."

    # ------------------------------------------------------------ memory ---

    async def memory(self, wanted: str, settings: dict[str, Any]) -> str:
        bridge = self.bridge
        if why := refusal(settings, bridge.workspace):
            return why
        workspace, level = bridge.workspace, ""
        if wanted.startswith(USER_PREFIX):
            workspace, level, wanted = USER_LEVEL, USER_PREFIX, wanted[len(USER_PREFIX) :]
            user_settings = await bridge.call("get_settings", {"workspace": USER_LEVEL})
            if why := refusal(user_settings, USER_LEVEL):
                return why
        state = await bridge.call(
            "read_state", {"workspace": workspace, "includeEntries": True, "includeArchived": True}
        )
        if state.get("status") != "ok":
            return f"MEMORY.md cannot be read now ({state.get('status')}): {state.get('reason') or ''}"
        entries = {e["id"]: e for e in bridge.visible(state.get("entries") or [])}
        found = matching_ids(entries, wanted)
        if len(found) == 1:
            return text.entry_block(entries[found[0]], level)
        if found:
            raise AmbiguousId(
                text.ambiguous("entries", wanted, [text.entry_line(entries[i], level) for i in found])
            )
        proposals = (await bridge.call("list_proposals", {"workspace": workspace})).get("proposals") or []
        waiting = {p["id"]: p for p in bridge.visible([v["proposal"] for v in proposals])}
        queued = matching_ids(waiting, wanted)
        if len(queued) == 1:
            return (
                "Not memory yet: a proposal waiting in PENDING.md for the user's review.\n"
                + text.entry_block(waiting[queued[0]], level)
            )
        if queued:
            lines = [text.entry_line(waiting[i], level) for i in queued]
            raise AmbiguousId(text.ambiguous("proposals in PENDING.md", wanted, lines))
        return (
            f"Not found: no entry or proposal id starts with {text.echoed(wanted)!r} ({len(entries)} entries "
            "in memory; memory_list shows their ids)."
        )

    # ----------------------------------------------------------- sessions ---

    async def session(self, given: str, settings: dict[str, Any]) -> tuple[str, str | None]:
        """(session id, refusal): ``given`` whole or as a unique prefix. The connection's own
        session is always open to it; others need history recall, listing them too."""
        own = self.bridge.session_id
        if given == own:
            return given, None
        why = refusal(settings, self.bridge.workspace, history=True)
        if why is not None:
            return (own, None) if own and own.startswith(given) else (given, why)
        listing = await self.bridge.call("list_sessions", {"includeClosed": True})
        sessions = {s["sessionId"]: s for s in listing.get("sessions") or []}
        if own:
            sessions.setdefault(own, {"sessionId": own, "title": "this connection's session"})
        found = matching_ids(sessions, given)
        if len(found) > 1:
            lines = [f"{i}  {sessions[i].get('title') or ''}".rstrip() for i in found]
            raise AmbiguousId(text.ambiguous("sessions", given, lines))
        return (found[0] if found else given), None

    async def session_arg(self, given: str | None) -> str | None:
        """A tool's ``session_id`` argument, completed when it is a unique prefix."""
        session, _ = await self.readable_session(given)
        return session

    async def readable_session(self, given: str | None) -> tuple[str | None, str | None]:
        """(``session_arg``, refusal): the refusal says why what that session holds may not
        be read (another session while history recall is off), else None."""
        if not given:
            return given, None
        try:
            return await self.session(given, await self.bridge.fresh_settings())
        except AmbiguousId as exc:
            raise ToolFailure("invalid_params", str(exc)) from None

    async def events(self, rest: str, settings: dict[str, Any]) -> str:
        given, sep, span = rest.partition(":")
        session, why = await self.session(given, settings)
        if why is not None:
            return why
        ref = f"event:{session}{sep}{span}"
        params: dict[str, Any] = {"refs": [ref]}
        if self.bridge.session_id:
            params["sessionId"] = self.bridge.session_id  # so refs into an incognito session resolve
        found = await self.bridge.call("retrieve", params)
        results = found.get("results") or []
        if not results or not results[0].get("events"):
            return "Not found."
        block = text.events_block(results[0], found.get("omitted") or [])
        return block if session == given else f"({text.echoed(ref)})\n{block}"

    # ------------------------------------------------- checkpoints, episodes ---

    async def checkpoint(self, wanted: str, settings: dict[str, Any]) -> str:
        found = await self.bridge.call("get_checkpoint", {"checkpointId": wanted})
        own = self.bridge.own(found.get("sessionId"))
        return refusal(settings, self.bridge.workspace, history=not own) or text.checkpoint_block(found)

    async def episode(self, wanted: str, settings: dict[str, Any]) -> str:
        if why := refusal(settings, self.bridge.workspace, history=True):
            return why
        exact = (await self.bridge.call("list_episodes", {"ids": [wanted]})).get("episodes") or []
        if exact:
            return text.episode_block(exact[0])
        listing = await self.bridge.call("list_episodes", {"limit": EPISODES_SCANNED})
        episodes = {e["episodeId"]: e for e in listing.get("episodes") or []}
        found = matching_ids(episodes, wanted)
        if len(found) > 1:
            lines = [f"episode:{i}  {text.one_line(episodes[i].get('summary', ''), 100)}" for i in found]
            raise AmbiguousId(text.ambiguous("episodes", wanted, lines))
        return text.episode_block(episodes[found[0]]) if found else "Not found."

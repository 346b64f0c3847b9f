"""What the MCP tools tell the agent when something is refused or fails: the user's
privacy switches (whether a read or a proposal is allowed, and when not, the command the
user runs to allow it: an agent cannot change a switch, it can only ask the user), and
the tools' failure type."""

from __future__ import annotations

import shlex
from typing import Any

from makad.core.switches import agent_proposes
from makad.core.types import Settings

USER_LEVEL = "@user"


class ToolFailure(Exception):
    """A tool call that failed; ``kind`` is the daemon's error kind (or the bridge's own)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def settings_command(workspace: str, *pairs: str) -> str:
    """``maka settings -w WS KEY=VALUE…`` for this workspace (``--user`` for the user level)."""
    where = "--user" if workspace == USER_LEVEL else f"-w {shlex.quote(workspace)}"
    return f"maka settings {where} {' '.join(pairs)}"


def propose_open(settings: dict[str, Any] | None) -> bool:
    """Contract test 4: agents may propose only while extractToolEnabled && agentReadEnabled
    (memory enabled, incognito off) — the daemon's own gate (``makad.core.switches``)."""
    s = settings or {}
    return agent_proposes(
        Settings(
            enabled=bool(s.get("enabled", True)),
            agent_read_enabled=bool(s.get("agentReadEnabled")),
            extract_tool_enabled=bool(s.get("extractToolEnabled")),
            incognito=bool(s.get("incognito")),
        )
    )


def refusal(settings: dict[str, Any], workspace: str, history: bool = False) -> str | None:
    """Why reading is not allowed in this workspace right now (with the command that
    allows it), or None when it is."""
    if settings.get("incognito"):
        return (
            "Incognito is on for this workspace: nothing is read or written. The user turns it "
            f"off with: {settings_command(workspace, 'incognito=off')}"
        )
    if not settings.get("enabled", True):
        return (
            "Memory is disabled for this workspace: nothing is returned. The user turns it on "
            f"with: {settings_command(workspace, 'enabled=on')}"
        )
    if not settings.get("agentReadEnabled"):
        return (
            "Agent read is off for this workspace: the user has not allowed agents to read "
            "memory, so nothing is returned. Ask the user to allow it; they run: "
            f"{settings_command(workspace, 'agentReadEnabled=on')}"
        )
    if history and not settings.get("historyRecallEnabled"):
        return (
            "History recall is off for this workspace: the user has not allowed searching "
            "past sessions, so nothing is returned. Ask the user to allow it; they run: "
            f"{settings_command(workspace, 'historyRecallEnabled=on')}"
        )
    return None


# What the user runs when the daemon refuses a proposal, by the refusal's kind.
_PROPOSE_FIX = {
    "gate_closed": ("agentReadEnabled=on", "extractToolEnabled=on"),
    "incognito_blocked": ("incognito=off",),
    "disabled": ("enabled=on",),
}


def propose_hint(kind: str, workspace: str) -> str:
    """The sentence a refused ``memory_propose`` ends with, naming the user's command."""
    pairs = _PROPOSE_FIX.get(kind)
    if pairs is None:
        return ""
    return f" Proposals need the user's permission; they run: {settings_command(workspace, *pairs)}"

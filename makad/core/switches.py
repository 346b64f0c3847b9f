"""The rules behind a workspace's switches (``Settings``): what derives from them, what
they let an agent do, and the decay a new entry gets.

Every path that lets an agent read or propose asks here: build_context (the workspace's
memory and the user level's), ``propose``, and the MCP bridge's tool list.
"""

from __future__ import annotations

from typing import Final

import msgspec

from makad.core.context_types import AttentionReason
from makad.core.types import Settings

DAY_MS: Final = 86_400_000


def derive(settings: Settings) -> Settings:
    """``settings`` with ``extract_tool_effective`` set: extractToolEnabled only counts while
    agentReadEnabled is on."""
    effective = settings.extract_tool_enabled and settings.agent_read_enabled
    if settings.extract_tool_effective == effective:
        return settings
    return msgspec.structs.replace(settings, extract_tool_effective=effective)


def agent_reads(settings: Settings, *, incognito_session: bool = False) -> bool:
    """Whether an agent may read the workspace's memory: memory on, agentReadEnabled, and
    incognito off for the workspace and for the session asking."""
    return (
        settings.enabled and settings.agent_read_enabled and not settings.incognito and not incognito_session
    )


def attention_reason(
    settings: Settings, *, incognito_session: bool, included: bool, session: bool, asked: bool
) -> AttentionReason:
    """Why a pack may carry the attention segment, or why it may not (``Trace.attention``):
    the switches first, then ``include`` (``included``: it names attention, or is not
    given), then who asks — a call without a session, one whose ``include`` names it
    (``asked``), else the session's first pack (``first_pack``; the caller knows whether
    this call is that one, else ``later_pack``)."""
    if not (settings.enabled and settings.agent_read_enabled):
        return "reads_off"
    if settings.incognito or incognito_session:
        return "incognito"
    if not settings.attention_enabled:
        return "attention_off"
    if not included:
        return "not_included"
    if not session:
        return "no_session"
    return "asked" if asked else "first_pack"


def agent_proposes(settings: Settings) -> bool:
    """Whether an agent may propose a memory: it may read, and extractToolEnabled is on."""
    return agent_reads(settings) and settings.extract_tool_enabled


def default_decay_ms(settings: Settings) -> int | None:
    """The decay a new active entry without its own gets: the workspace's defaultDecayDays."""
    if settings.default_decay_days is None:
        return None
    return int(settings.default_decay_days * DAY_MS)

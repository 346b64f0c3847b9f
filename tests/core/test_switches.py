"""The switches' rules: the derived extract flag, the agent gates, the default decay, the level's scope."""

from __future__ import annotations

import pytest

from makad.core.levels import level_scope
from makad.core.switches import DAY_MS, agent_proposes, agent_reads, default_decay_ms, derive
from makad.core.types import Settings
from makad.errors import InvalidParams

OPEN = Settings(agent_read_enabled=True, extract_tool_enabled=True)


def test_extract_counts_only_while_agent_read_is_on() -> None:
    """extract_tool_effective is extractToolEnabled and agentReadEnabled, nothing else."""
    assert derive(OPEN).extract_tool_effective
    assert not derive(Settings(extract_tool_enabled=True)).extract_tool_effective
    stale = Settings(extract_tool_effective=True)
    assert not derive(stale).extract_tool_effective
    settled = derive(OPEN)
    assert derive(settled) is settled  # nothing to change: the same object


@pytest.mark.parametrize(
    ("settings", "incognito_session", "reads"),
    [
        (OPEN, False, True),
        (OPEN, True, False),
        (Settings(), False, False),
        (Settings(agent_read_enabled=True, enabled=False), False, False),
        (Settings(agent_read_enabled=True, incognito=True), False, False),
    ],
)
def test_agent_reads_needs_memory_on_agent_read_and_no_incognito(
    settings: Settings, incognito_session: bool, reads: bool
) -> None:
    """An agent reads only with memory on, agentReadEnabled, and incognito off for workspace and session."""
    assert agent_reads(settings, incognito_session=incognito_session) is reads


@pytest.mark.parametrize(
    ("settings", "proposes"),
    [
        (OPEN, True),
        (Settings(extract_tool_enabled=True), False),
        (Settings(agent_read_enabled=True), False),
        (Settings(agent_read_enabled=True, extract_tool_enabled=True, incognito=True), False),
        (Settings(agent_read_enabled=True, extract_tool_enabled=True, enabled=False), False),
    ],
)
def test_agent_proposes_needs_the_read_gate_and_extract(settings: Settings, proposes: bool) -> None:
    """Proposing needs everything reading needs, and extractToolEnabled."""
    assert agent_proposes(settings) is proposes


def test_default_decay_is_the_workspace_days_in_ms() -> None:
    """No defaultDecayDays: no decay; else the days in milliseconds (fractions kept)."""
    assert default_decay_ms(Settings()) is None
    assert default_decay_ms(Settings(default_decay_days=1.5)) == int(1.5 * DAY_MS)


def test_the_user_level_makes_every_entry_global_and_refuses_sessions() -> None:
    """A workspace keeps the scope asked for; the user level makes it global and refuses a session."""
    assert level_scope("workspace", "session", "s1") == "session"
    assert level_scope("user", "workspace", None) == "global"
    with pytest.raises(InvalidParams) as scoped:
        level_scope("user", "session", None)
    assert scoped.value.details.get("path") == "$.scope"
    with pytest.raises(InvalidParams) as in_session:
        level_scope("user", "global", "s1")
    assert in_session.value.details.get("path") == "$.sessionId"

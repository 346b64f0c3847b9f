"""The settings shell (get_settings / set_settings) in process."""

from __future__ import annotations

from pathlib import Path

import pytest

from maka.errors import InvalidParams
from tests.service.conftest import InProcessDaemon, serving

pytestmark = pytest.mark.anyio


async def test_defaults_keep_the_agent_out(served: InProcessDaemon) -> None:
    """A new workspace's settings: memory on, agent reads and incognito off."""
    async with served.client() as c:
        settings = await c.call("get_settings", workspace=str(served.workspace))
    assert (settings["enabled"], settings["agentReadEnabled"], settings["incognito"]) == (True, False, False)


async def test_a_patch_changes_only_what_it_names_and_outlives_a_restart(short_tmp: Path) -> None:
    """set_settings changes the fields given, keeps the others, and the ledger keeps them."""
    async with serving(short_tmp) as daemon, daemon.client() as c:
        ws = str(daemon.workspace)
        await c.call("set_settings", workspace=ws, agentReadEnabled=True)
        await c.call("set_settings", workspace=ws, historyRecallEnabled=False)
    async with serving(short_tmp) as daemon, daemon.client() as c:
        settings = await c.call("get_settings", workspace=ws)
    assert (settings["agentReadEnabled"], settings["historyRecallEnabled"]) == (True, False)


async def test_an_unknown_setting_is_refused_and_changes_nothing(served: InProcessDaemon) -> None:
    """A field set_settings does not know is invalid_params, and nothing is written."""
    async with served.client() as c:
        ws = str(served.workspace)
        with pytest.raises(InvalidParams):
            await c.call("set_settings", workspace=ws, agentReadEnabled=True, telemetry=True)
        settings = await c.call("get_settings", workspace=ws)
    assert settings["agentReadEnabled"] is False

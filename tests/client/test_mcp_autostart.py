"""`maka mcp` with no daemon running: the MCP client's first call starts one."""

from __future__ import annotations

import pytest

from tests.cli.mcp_session import mcp_host
from tests.client.autostart_support import AutostartHome, wait_gone

pytestmark = pytest.mark.anyio


async def test_first_call_starts_the_daemon(autostart_home: AutostartHome) -> None:
    """No daemon: the first MCP call starts one, which serves the call, outlives the bridge
    and stops cleanly on shutdown."""
    ws = autostart_home.root / "ws"
    assert not autostart_home.running()
    async with mcp_host(autostart_home.socket, workspace=ws) as h:
        is_error, text = await h.tool("memory_list")
        assert not is_error and text.startswith("Agent read is off"), text
        is_error, recorded = await h.tool("session_record", turns=[{"role": "user", "text": "hi"}])
        assert not is_error, recorded
    status = autostart_home.status()
    assert status["socket"] == str(autostart_home.socket)
    assert status["dataDir"] == str(autostart_home.data_dir)
    assert "listening on" in autostart_home.log.read_text()
    pid = int(str(status["pid"]))
    autostart_home.stop()
    wait_gone(pid)
    assert not autostart_home.socket.exists()


async def test_no_autostart_refuses(autostart_home: AutostartHome) -> None:
    """maka --no-autostart mcp: tools fail with daemon_unavailable and nothing is started."""
    ws = autostart_home.root / "ws"
    async with mcp_host(autostart_home.socket, "--no-autostart", workspace=ws) as h:
        assert "session_record" in await h.tool_names()
        is_error, text = await h.tool("memory_search", query="anything")
    assert is_error and text.startswith("daemon_unavailable") and "start one" in text
    assert not autostart_home.socket.exists() and not autostart_home.log.exists()

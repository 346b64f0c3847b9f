"""`maka mcp` with no daemon running: the MCP client's first call starts one."""

from __future__ import annotations

import pytest

from tests.cli.mcp_session import bridge_env, mcp_host
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


async def test_a_failing_daemon_is_said_once_and_not_restarted_per_call(
    autostart_home: AutostartHome,
) -> None:
    """When the makad started for the bridge exits at once, every tool call answers with
    the failure (why, and the log), stderr says it once, and calls within
    RETRY_AFTER_FAILURE_S start no other daemon."""
    ws = autostart_home.root / "ws"
    blocker = autostart_home.root / "file"
    blocker.write_text("not a directory")
    env = bridge_env(MAKAD_DATA_DIR=str(blocker / "data"))
    errors = autostart_home.root / "bridge.err"
    with errors.open("w") as errlog:
        async with mcp_host(autostart_home.socket, workspace=ws, env=env, errlog=errlog) as h:
            answers = [await h.tool("memory_search", query="anything") for _ in range(3)]
    for is_error, text in answers:
        assert is_error and text.startswith("daemon_unavailable"), text
        assert "exited at once" in text and f"{blocker} is not a folder" in text
        assert str(autostart_home.log) in text
    assert "starts another in" in answers[-1][1]
    said = errors.read_text()
    assert "started one" not in said
    assert said.count("could not start makad") == 1, said
    # One daemon was started (and failed), not one per call.
    assert autostart_home.log.read_text().count(f"{blocker} is not a folder") == 1

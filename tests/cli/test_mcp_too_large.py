"""A call over the daemon's message size cap is a tool error saying ``too_large``.

Through the real bridge (`maka mcp` under the MCP SDK's client) and the Python clients,
against a daemon with a small cap: a call just over it (sent whole before the daemon
closes) and one far over it (the daemon closes while it is still being sent). Never the
SDK's empty ``{"code": 0, "message": ""}``, and the next call works.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest

from maka import AsyncClient, Client
from maka.errors import TooLarge
from tests.cli.helpers import call
from tests.cli.mcp_session import Host, mcp_host
from tests.support import DaemonProcess, daemon_in_tmp, ping_ok

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:resources/subscribe is removed")]
CAP = 64 * 1024
# Just over the cap (the daemon reads it all), and far over (it closes mid-send).
SIZES = [CAP + 1024, 8 * 1024 * 1024]


@pytest.fixture(scope="module")
def small_cap() -> Iterator[DaemonProcess]:
    """A daemon whose messages may be at most 64 KiB."""
    yield from daemon_in_tmp({"MAKAD_MAX_MESSAGE_BYTES": str(CAP)})


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio, for the whole module: the bridge below lives as long as it."""
    return "asyncio"


@pytest.fixture(scope="module")
async def bridge(small_cap: DaemonProcess) -> AsyncIterator[Host]:
    """One `maka mcp` on the small-cap daemon, agent read and propose on, for every size:
    that it goes on after each refusal is part of what is tested."""
    call(small_cap, "set_settings", agentReadEnabled=True, extractToolEnabled=True)
    async with mcp_host(small_cap.socket, workspace=small_cap.workspace) as h:
        yield h


def oversized_calls(size: int) -> list[tuple[str, dict[str, Any]]]:
    text = "x" * size
    return [
        ("session_record", {"turns": [{"role": "user", "text": text}]}),
        ("memory_propose", {"title": "Big", "content": text}),
        ("memory_search", {"query": text}),
        ("memory_context", {"query": text}),
    ]


@pytest.mark.parametrize("size", SIZES)
async def test_an_oversized_tool_call_is_a_too_large_tool_error(
    small_cap: DaemonProcess, bridge: Host, size: int
) -> None:
    """Each tool that carries the agent's text answers too_large over the cap; the bridge
    goes on (a small call right after works) and the daemon keeps serving."""
    for name, arguments in oversized_calls(size):
        is_error, text = await bridge.tool(name, **arguments)
        assert is_error, (name, text[:200])
        assert text.startswith("too_large:"), (name, text[:200])
        # the daemon's message cap, or the client's event cap an 8 MB turn is over first
        assert f"{CAP} bytes" in text or "an event is at most" in text, text
        is_error, text = await bridge.tool("memory_list")
        assert not is_error, text
    assert ping_ok(small_cap.socket)


@pytest.mark.parametrize("size", SIZES)
def test_the_client_raises_too_large_and_goes_on(small_cap: DaemonProcess, size: int) -> None:
    """maka.Client: an oversized call raises TooLarge (not a broken pipe, not a hang)."""
    with Client(str(small_cap.socket), timeout=20) as c:
        with pytest.raises(TooLarge) as info:
            c.call("read_state", {"workspace": str(small_cap.workspace), "pad": "y" * size})
        assert info.value.code == -32600
        assert c.call("ping") == "pong"


@pytest.mark.parametrize("size", SIZES)
async def test_the_async_client_raises_too_large_and_goes_on(small_cap: DaemonProcess, size: int) -> None:
    """maka.AsyncClient: the same, with another call waiting on the connection meanwhile."""
    async with AsyncClient(str(small_cap.socket), timeout=20) as c:
        with pytest.raises(TooLarge):
            await c.call("read_state", {"workspace": str(small_cap.workspace), "pad": "y" * size})
        with anyio.fail_after(10):
            assert await c.call("ping") == "pong"

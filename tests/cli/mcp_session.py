"""Driving `maka mcp` with the official SDK's stdio client, as an MCP host would."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

NOTE_TIMEOUT_S = 20.0


@dataclass
class Host:
    """An MCP client session plus every notification the server sent it."""

    session: ClientSession
    init: types.InitializeResult
    notes: MemoryObjectReceiveStream[Any]
    seen: list[Any] = field(default_factory=list)

    async def tool(self, name: str, **arguments: Any) -> tuple[bool, str]:
        """(is_error, text) of a tool call."""
        result = await self.session.call_tool(name, arguments)
        text = "\n".join(getattr(block, "text", "") for block in result.content)
        return bool(result.is_error), text

    async def tool_names(self) -> set[str]:
        return {t.name for t in (await self.session.list_tools()).tools}

    async def read(self, uri: str) -> str:
        result = await self.session.read_resource(uri)
        return "".join(getattr(c, "text", "") for c in result.contents)

    async def wait_for(self, kind: type[Any], uri: str | None = None) -> Any:
        """The next notification of ``kind`` (for ``uri``), within NOTE_TIMEOUT_S."""
        with anyio.fail_after(NOTE_TIMEOUT_S):
            while True:
                note = await self.notes.receive()
                self.seen.append(note)
                if isinstance(note, kind) and (uri is None or str(note.params.uri) == uri):
                    return note


def bridge_env(drop: tuple[str, ...] = (), **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(extra)
    return env


@asynccontextmanager
async def mcp_host(
    socket: Path,
    *args: str,
    workspace: Path | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    errlog: TextIO | None = None,
) -> AsyncIterator[Host]:
    """`maka --socket S ARGS… mcp [-w WS]` as a stdio MCP server, initialized; its stderr
    goes to ``errlog`` (a real file) when given, else to this process's. Anything but
    JSON-RPC on its stdout fails the test when the session ends."""
    ws = ["-w", str(workspace)] if workspace is not None else []
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "maka.cli", "--socket", str(socket), *args, "mcp", *ws],
        env=env if env is not None else bridge_env(),
        cwd=cwd,
    )
    pair: tuple[MemoryObjectSendStream[Any], MemoryObjectReceiveStream[Any]] = (
        anyio.create_memory_object_stream[Any](math.inf)
    )
    send, receive = pair
    garbled: list[Exception] = []  # lines on the server's stdout that are not JSON-RPC

    async def keep(message: Any) -> None:
        if isinstance(message, Exception):
            garbled.append(message)
        else:
            send.send_nowait(message)

    async with (
        stdio_client(params, errlog=errlog or sys.stderr) as (read, write),
        ClientSession(read, write, message_handler=keep) as session,
    ):
        with send, receive:
            init = await session.initialize()
            yield Host(session, init, receive)
    assert not garbled, f"the server wrote what is not JSON-RPC on its stdout: {garbled!r}"

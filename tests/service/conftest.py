"""The in-process tier: the daemon's app (``build_app``) and ``Server`` on a real Unix socket
in a short temp dir, inside the test's own event loop — no subprocess, so a test costs
milliseconds. The real stores (SQLite ledger, memory files) and the real wire are used;
only the process boundary and signal handling of ``makad.daemon.run`` are left out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketListener

from maka import AsyncClient
from makad.app import App, build_app
from makad.daemon import bind_socket
from makad.rpc.dispatch import Dispatcher
from makad.rpc.server import Limits, Server
from makad.service.system import DaemonInfo
from makad.settings import load
from makad.wire.catalogue import CATALOGUE


@dataclass
class InProcessDaemon:
    """A served app: its socket, data directory and a workspace folder (and the app, for
    tests that look at a service's state)."""

    root: Path
    socket: Path
    data_dir: Path
    workspace: Path
    app: App

    def client(self) -> AsyncClient:
        return AsyncClient(str(self.socket), timeout=10.0)


@asynccontextmanager
async def serving(root: Path, env: dict[str, str] | None = None) -> AsyncIterator[InProcessDaemon]:
    """Serve ``build_app`` on ``<root>/s.sock`` with data in ``<root>/data`` until the block
    ends; the same ``root`` served again is a daemon restart (same data, fresh memory).
    ``env``: the daemon's environment variables (none by default)."""
    settings = load(["--socket", str(root / "s.sock"), "--data-dir", str(root / "data")], env=env or {})
    settings.data_dir.mkdir(mode=0o700, exist_ok=True)
    workspace = root / "ws"
    workspace.mkdir(exist_ok=True)
    app = build_app(DaemonInfo(settings=settings))
    limits = Limits(  # the daemon's limits, no fault point armed
        max_message_bytes=settings.max_message_bytes,
        max_connections=settings.max_connections,
        idle_timeout_s=settings.idle_timeout_s,
        shutdown_grace_s=settings.shutdown_grace_s,
    )
    server = Server(Dispatcher(CATALOGUE, app.handlers, settings.max_reply_bytes), limits)
    listener: SocketListener = await SocketListener.from_socket(bind_socket(settings.socket_path))
    stopped = anyio.Event()

    async def serve() -> None:
        await server.run(listener)
        stopped.set()

    try:
        async with anyio.create_task_group() as tg:
            app.watcher.start(tg)
            app.notes.start(tg)
            tg.start_soon(serve)
            try:
                yield InProcessDaemon(root, settings.socket_path, settings.data_dir, workspace, app)
            finally:
                server.request_stop()  # as on SIGTERM: in-flight requests finish first
                with anyio.move_on_after(5):
                    await stopped.wait()
                app.watcher.stop()
                tg.cancel_scope.cancel()
    finally:
        app.semantic.stop()
        app.registry.close()
        settings.socket_path.unlink(missing_ok=True)


@pytest.fixture
async def served(short_tmp: Path) -> AsyncIterator[InProcessDaemon]:
    """An in-process daemon for one test, in its own short temp dir."""
    async with serving(short_tmp) as daemon:
        yield daemon

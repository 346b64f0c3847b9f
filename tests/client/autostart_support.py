"""A private home for autostarted daemons: data, logs and socket in a short temp dir."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from maka import Client
from maka.autostart import process_gone
from maka.errors import MakaError

GONE_TIMEOUT_S = 30.0


@dataclass
class AutostartHome:
    root: Path
    socket: Path
    data_dir: Path
    log: Path

    def status(self) -> dict[str, object]:
        with Client(str(self.socket), timeout=10) as c:
            result: dict[str, object] = c.call("status")
            return result

    def running(self) -> bool:
        try:
            self.status()
        except MakaError:
            return False
        return True

    def stop(self) -> None:
        """Shut the autostarted daemon down and wait until its process is gone."""
        try:
            pid = int(str(self.status()["pid"]))
        except MakaError:
            return
        with contextlib.suppress(MakaError), Client(str(self.socket), timeout=10) as c:
            c.call("shutdown")
        wait_gone(pid)


def wait_gone(pid: int) -> None:
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while not process_gone(pid):
        if time.monotonic() > deadline:
            raise TimeoutError(f"makad pid {pid} is still running")
        time.sleep(0.05)


@pytest.fixture
def autostart_home(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AutostartHome]:
    """Autostart allowed, every path of the daemon it starts inside ``short_tmp``."""
    monkeypatch.delenv("MAKA_NO_AUTOSTART", raising=False)
    monkeypatch.delenv("MAKAD_SOCKET", raising=False)
    monkeypatch.setenv("MAKAD_DATA_DIR", str(short_tmp / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(short_tmp / "state"))
    home = AutostartHome(
        short_tmp,
        short_tmp / "run" / "m.sock",
        short_tmp / "data",
        short_tmp / "state" / "maka" / "log" / "makad.log",
    )
    (short_tmp / "ws").mkdir()
    try:
        yield home
    finally:
        home.stop()

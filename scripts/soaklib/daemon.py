"""A makad subprocess for soak runs: start, kill -9, stop, and what it holds (RSS, fds)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

STARTUP_TIMEOUT_S = 30.0


class Daemon:
    """makad on ``<root>/s.sock`` with its data in ``<root>/data`` and logs in ``<root>/makad.log``."""

    def __init__(
        self, root: Path, env: dict[str, str] | None = None, log_level: str = "info", module: str = "makad"
    ) -> None:
        self.root = root
        self.module = module
        self.socket = root / "s.sock"
        self.data_dir = root / "data"
        self.log_path = root / "makad.log"
        self.env = env or {}
        self.log_level = log_level
        self.proc: subprocess.Popen[str] | None = None
        self._log: IO[str] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None, "the daemon is not running"
        return self.proc.pid

    def start(self) -> None:
        self._log = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in _reap
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                self.module,
                "--socket",
                str(self.socket),
                "--data-dir",
                str(self.data_dir),
                "--log-format",
                "json",
                "--log-level",
                self.log_level,
            ],
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env={**os.environ, **self.env},
        )
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if "listening on" in line:
                return
            if not line and self.proc.poll() is not None:
                self._reap()
                raise RuntimeError("makad exited before listening (see its log)")
        raise TimeoutError("makad did not start in time")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._reap()

    def stop(self) -> int | None:
        """SIGTERM and wait; returns the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        self._reap()
        return code

    def _reap(self) -> None:
        assert self.proc is not None
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None
        self.proc = None

    def rss_kib(self) -> int:
        """Resident memory of the daemon process in KiB (VmRSS)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS in /proc status")

    def fd_count(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

"""Shared benchmark plumbing: a daemon in a temp dir, a closed-loop load generator."""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(samples_s: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples_s]
    return {
        "p50_ms": round(percentile(ms, 0.50), 3),
        "p95_ms": round(percentile(ms, 0.95), 3),
        "p99_ms": round(percentile(ms, 0.99), 3),
        "mean_ms": round(statistics.fmean(ms), 3) if ms else 0.0,
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (steadier than throughput when
    the machine is shared: it does not count the time it waited for a core)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Daemon:
    """A makad subprocess in its own short temp dir."""

    def __init__(self, env: dict[str, str] | None = None, root: Path | None = None) -> None:
        # ``root``: an existing directory to run in, kept afterwards (the caller owns it).
        self.keep = root is not None
        self.root = root if root is not None else Path(tempfile.mkdtemp(prefix="mkb", dir="/tmp"))
        self.socket = self.root / "s.sock"
        self.data_dir = self.root / "data"
        self.workspace = self.root / "ws"
        self.workspace.mkdir(exist_ok=True)
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[str] | None = None
        self.start_s = 0.0

    def __enter__(self) -> Daemon:
        self.start_s = self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if exc[0] is not None:
            log = self.root / "makad.log"
            if log.exists():
                sys.stderr.write(log.read_text(errors="replace")[-4000:])
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def start(self) -> float:
        """Start the daemon; returns seconds from exec to the first pong."""
        from maka import Client
        from maka.errors import DaemonUnavailable

        started = time.perf_counter()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "makad",
                "--socket",
                str(self.socket),
                "--data-dir",
                str(self.data_dir),
                "--log-level",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(self.root / "makad.log", "ab"),  # noqa: SIM115
            text=True,
            env=self.env,
        )
        while True:
            try:
                with Client(str(self.socket), timeout=5) as c:
                    if c.call("ping") == "pong":
                        took = time.perf_counter() - started
                        # Answered once the services are loaded (after the first pong,
                        # makad.daemon): what follows measures the whole daemon.
                        c.call("rpc.discover")
                        return took
            except (DaemonUnavailable, OSError):
                if self.proc.poll() is not None:
                    raise RuntimeError("makad exited during start-up") from None
                time.sleep(0.002)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        self.proc = None

    def rss_mib(self) -> float:
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
        return 0.0


async def closed_loop(
    socket_path: str, conns: int, seconds: float, make_request: Callable[[int], bytes]
) -> dict[str, Any]:
    """Each connection sends one NDJSON request, waits for its line, repeats."""
    latencies: list[float] = []
    count = 0
    deadline = time.perf_counter() + seconds

    async def worker(index: int) -> None:
        nonlocal count
        reader, writer = await asyncio.open_unix_connection(socket_path, limit=64 << 20)
        n = 0
        while time.perf_counter() < deadline:
            payload = make_request(index * 1_000_000 + n)
            t0 = time.perf_counter()
            writer.write(payload)
            await reader.readline()
            latencies.append(time.perf_counter() - t0)
            n += 1
        count += n
        writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(conns)))
    elapsed = time.perf_counter() - t0
    return {"rps": round(count / elapsed, 1), **summary_ms(latencies), "n": count}


def measured(
    pid: int, socket_path: str, conns: int, seconds: float, make_request: Callable[[int], bytes]
) -> tuple[dict[str, Any], float]:
    """``closed_loop``'s figures, and the server's CPU microseconds per request."""
    cpu_before = cpu_seconds(pid)
    result = asyncio.run(closed_loop(socket_path, conns, seconds, make_request))
    cpu = cpu_seconds(pid) - cpu_before
    return result, round(cpu / result["n"] * 1e6, 2) if result["n"] else 0.0

"""rpc: ping over makad vs a bare anyio NDJSON echo server, same client load."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import Daemon, measured

ECHO_SERVER = r"""
import anyio, sys
async def handle(stream):
    async with stream:
        buf = b""
        try:
            while True:
                buf += await stream.receive(65536)
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    await stream.send(line + b"\n")
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            pass
async def main():
    listener = await anyio.create_unix_listener(sys.argv[1])
    print("ready", flush=True)
    await listener.serve(handle)
anyio.run(main)
"""


def _ping(i: int) -> bytes:
    return b'{"jsonrpc":"2.0","method":"ping","id":%d}\n' % i


def _measured(pid: int, socket_path: str, conns: int, seconds: float) -> tuple[dict[str, Any], float]:
    """The closed loop's figures, and the server's CPU microseconds per request."""
    return measured(pid, socket_path, conns, seconds, _ping)


def run(quick: bool) -> dict[str, Any]:
    seconds = 0.5 if quick else 3.0
    out: dict[str, Any] = {}
    with Daemon() as daemon:
        echo_path = Path(tempfile.mkdtemp(prefix="mke", dir="/tmp")) / "e.sock"
        echo = subprocess.Popen(
            [sys.executable, "-c", ECHO_SERVER, str(echo_path)], stdout=subprocess.PIPE, text=True
        )
        assert echo.stdout is not None
        echo.stdout.readline()
        try:
            assert daemon.proc is not None
            for conns in (1, 16):
                # Interleave to spread machine noise evenly over both sides.
                echo_r, echo_cpu = _measured(echo.pid, str(echo_path), conns, seconds)
                ping_r, ping_cpu = _measured(daemon.proc.pid, str(daemon.socket), conns, seconds)
                out[str(conns)] = {
                    "echo_rps": echo_r["rps"],
                    "ping_rps": ping_r["rps"],
                    "ratio": round(ping_r["rps"] / echo_r["rps"], 3) if echo_r["rps"] else 0,
                    "p50_ms": ping_r["p50_ms"],
                    "p99_ms": ping_r["p99_ms"],
                    "echo_p50_ms": echo_r["p50_ms"],
                    "echo_p99_ms": echo_r["p99_ms"],
                    # Server CPU per request: the ratio that survives a busy machine.
                    "echo_cpu_us": echo_cpu,
                    "ping_cpu_us": ping_cpu,
                    "cpu_ratio": round(echo_cpu / ping_cpu, 3) if ping_cpu else 0,
                }
        finally:
            echo.terminate()
            echo.wait()
    return {"rpc": {"conns": out}}

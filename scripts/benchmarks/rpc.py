"""rpc: ping over makad vs a bare anyio NDJSON echo server, same client load."""

from __future__ import annotations

import statistics
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
    # Echo and ping alternate in rounds (3 s each side in all): a single window each
    # let the machine's drift decide the ratio (0.73-1.12 for the same tree on a quiet
    # VM). The ratio is the median of the rounds' ratios; the rounds are shown.
    rounds, seconds = (1, 0.2) if quick else (3, 1.0)
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
                echos: list[tuple[dict[str, Any], float]] = []
                pings: list[tuple[dict[str, Any], float]] = []
                for _ in range(rounds):
                    echos.append(_measured(echo.pid, str(echo_path), conns, seconds))
                    pings.append(_measured(daemon.proc.pid, str(daemon.socket), conns, seconds))
                out[str(conns)] = _combined(echos, pings)
        finally:
            echo.terminate()
            echo.wait()
    return {"rpc": {"conns": out}}


def _combined(
    echos: list[tuple[dict[str, Any], float]], pings: list[tuple[dict[str, Any], float]]
) -> dict[str, Any]:
    """One connection count's figures over its rounds: rates and CPU as means, the ratio as
    the median of the rounds' ratios, latencies from the middle ping round."""
    ratios = [p["rps"] / e["rps"] for (e, _), (p, _) in zip(echos, pings, strict=True) if e["rps"]]
    echo_cpu = statistics.fmean(cpu for _, cpu in echos)
    ping_cpu = statistics.fmean(cpu for _, cpu in pings)
    middle_ping = sorted(pings, key=lambda pair: pair[0]["rps"])[len(pings) // 2][0]
    middle_echo = sorted(echos, key=lambda pair: pair[0]["rps"])[len(echos) // 2][0]
    return {
        "echo_rps": round(statistics.fmean(e["rps"] for e, _ in echos), 1),
        "ping_rps": round(statistics.fmean(p["rps"] for p, _ in pings), 1),
        "ratio": round(statistics.median(ratios), 3) if ratios else 0,
        "round_ratios": [round(r, 3) for r in ratios],
        "p50_ms": middle_ping["p50_ms"],
        "p99_ms": middle_ping["p99_ms"],
        "echo_p50_ms": middle_echo["p50_ms"],
        "echo_p99_ms": middle_echo["p99_ms"],
        # Server CPU per request: the ratio that survives a busy machine.
        "echo_cpu_us": round(echo_cpu, 2),
        "ping_cpu_us": round(ping_cpu, 2),
        "cpu_ratio": round(echo_cpu / ping_cpu, 3) if ping_cpu else 0,
    }

"""import_ping: how long a ping from a second connection waits while the heaviest import
the tests build runs (``tests/worst_imports.py``), against pings with nothing else
running, measured in the same run. Each ping is one round trip on its own connection,
sent as soon as the previous one is answered; the import runs on another connection."""

from __future__ import annotations

import json
import select
import socket
import time
from typing import Any

from benchmarks.common import Daemon, summary_ms
from tests.worst_imports import worst_json, worst_markdown

PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'


class Line:
    """A blocking NDJSON connection."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(600)
        self.sock.connect(path)
        self.buffer = b""

    def send(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def ready(self) -> bool:
        return bool(self.buffer) or bool(select.select([self.sock], [], [], 0)[0])

    def reply(self) -> Any:
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError("closed")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def close(self) -> None:
        self.sock.close()


def ping_once(pinger: Line) -> float:
    started = time.perf_counter()
    pinger.send(PING)
    assert pinger.reply()["result"] == "pong"
    return time.perf_counter() - started


def idle_pings(pinger: Line, count: int) -> list[float]:
    return [ping_once(pinger) for _ in range(count)]


def pings_during(daemon: Daemon, pinger: Line, data: str, workspace: str) -> tuple[list[float], float, bool]:
    """Ping until the import's reply arrives: the round trips, the import's duration,
    and whether it succeeded."""
    importer = Line(str(daemon.socket))
    params = {"workspace": workspace, "data": data}
    request = {"jsonrpc": "2.0", "id": 2, "method": "import_memories", "params": params}
    started = time.perf_counter()
    importer.send(json.dumps(request).encode() + b"\n")
    samples: list[float] = []
    try:
        while not importer.ready():
            samples.append(ping_once(pinger))
        reply = importer.reply()
    finally:
        importer.close()
    return samples, time.perf_counter() - started, "result" in reply


def run(quick: bool) -> dict[str, Any]:
    imports = {
        "markdown": worst_markdown(4 if quick else 120),
        "json": worst_json(3_000 if quick else 150_000),
    }
    report: dict[str, Any] = {}
    with Daemon() as daemon:
        pinger = Line(str(daemon.socket))
        try:
            idle = idle_pings(pinger, 100 if quick else 2000)
            worst_p99 = 0.0
            for name, data in imports.items():
                workspace = daemon.root / f"w-{name}"
                workspace.mkdir()
                idle += idle_pings(pinger, 50 if quick else 500)  # idle again, in between
                samples, took, ok = pings_during(daemon, pinger, data, str(workspace))
                busy = summary_ms(samples)
                worst_p99 = max(worst_p99, busy["p99_ms"])
                report[name] = {
                    "mib": round(len(data.encode()) / 2**20, 1),
                    "import_s": round(took, 2),
                    "imported": ok,
                    "pings": len(samples),
                    "p50_ms": busy["p50_ms"],
                    "p99_ms": busy["p99_ms"],
                    "max_ms": round(max(samples, default=0.0) * 1000, 3),
                }
        finally:
            pinger.close()
    rest = summary_ms(idle)
    return {
        "import_ping": {
            **report,
            "idle_p50_ms": rest["p50_ms"],
            "idle_p99_ms": rest["p99_ms"],
            "worst_p99_ms": worst_p99,
            "p99_ratio": round(worst_p99 / rest["p99_ms"], 2) if rest["p99_ms"] else None,
            "goal_p99_ms": 100,
        }
    }

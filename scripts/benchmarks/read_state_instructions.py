"""Instructions (callgrind) per request of ``read_state``'s figure, by kind, 4 connections:
ping, ``get_settings`` (cached, no IO), the conditional read of an unchanged ~128 KiB
MEMORY.md (``ifRevision``: answered notModified) and the summary (``includeContent:
false``). One daemon under callgrind; each kind is counted alone after a warm-up of all,
in ``ROUNDS`` interleaved windows of which the least is kept.

``read_state``'s wall-clock ratio moves with the machine's load; these counts do not (a
few per cent run to run, from how many requests one wake-up finds). ``*_over_ping`` is a
kind's instructions per request over ping's: 2.0 means twice ping's cost, i.e. at best half
its rate on one core. Not part of the default run: it needs valgrind (about a minute).

    scripts/bench read_state_instructions
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.read_state import memory_text
from benchmarks.rpc_instructions import _control, _first_answer

CONNS = 4
# Each kind is counted this many times, interleaved, and the least count kept: the
# daemon's housekeeping tick (a collection every 10 s, makad.heap) lands in one window
# now and then and would add tens of thousands of instructions per request to it.
ROUNDS = 3


def _request(method: str, params: dict[str, Any] | None = None) -> Callable[[int], bytes]:
    def make(i: int) -> bytes:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": i}
        if params is not None:
            body["params"] = params
        return json.dumps(body).encode() + b"\n"

    return make


async def _load(path: str, total: int, make: Callable[[int], bytes]) -> None:
    async def worker() -> None:
        reader, writer = await asyncio.open_unix_connection(path, limit=64 << 20)
        for i in range(total // CONNS):
            writer.write(make(i))
            line = await reader.readline()
            assert b'"error"' not in line, line[:300]
        writer.close()

    await asyncio.gather(*(worker() for _ in range(CONNS)))


async def _call(path: str, make: Callable[[int], bytes]) -> Any:
    reader, writer = await asyncio.open_unix_connection(path, limit=64 << 20)
    writer.write(make(0))
    line = await reader.readline()
    writer.close()
    return json.loads(line)


def _dump_total(out: Path, seen: set[Path]) -> int:
    """The ``totals:`` of the dump written since ``seen`` (callgrind zeroes after a dump;
    a dump taken with instrumentation off has ``summary: 0`` and the part's ``totals:``)."""
    for _ in range(100):
        for part in out.parent.glob(out.name + ".*"):
            if part in seen:
                continue
            totals = [
                line for line in part.read_text(errors="replace").splitlines() if line.startswith("totals:")
            ]
            if totals:
                seen.add(part)
                return int(totals[-1].split()[1])
        time.sleep(0.1)
    raise RuntimeError("callgrind wrote no dump")


def run(quick: bool) -> dict[str, Any]:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        return {"read_state_instructions": {"skipped": "valgrind (callgrind) is not installed"}}
    per_kind = CONNS * (20 if quick else 60)
    root = Path(tempfile.mkdtemp(prefix="mkr", dir="/tmp"))
    sock = str(root / "s.sock")
    workspace = root / "ws"
    (workspace / "memory").mkdir(parents=True, mode=0o700)
    text = memory_text(500, 126 * 1024)
    (workspace / "memory" / "MEMORY.md").write_text(text)
    out = root / "cg.out"
    proc = subprocess.Popen(
        [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-m",
            "makad",
            "--socket",
            sock,
            "--data-dir",
            str(root / "data"),
            "--log-level",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=str(root),
    )
    try:
        _first_answer(sock)
        ws = {"workspace": str(workspace)}
        revision = asyncio.run(_call(sock, _request("read_state", ws)))["result"]["revision"]
        kinds = {
            "ping": _request("ping"),
            "get_settings": _request("get_settings", ws),
            "conditional": _request("read_state", {**ws, "ifRevision": revision}),
            "summary": _request("read_state", {**ws, "includeContent": False}),
        }
        assert asyncio.run(_call(sock, kinds["conditional"]))["result"].get("notModified") is True
        for make in kinds.values():  # warm-up, not counted
            asyncio.run(_load(sock, CONNS * 10, make))
        seen: set[Path] = set()
        _control("-d", str(proc.pid))  # what start-up counted (nothing: instr-atstart=no)
        _dump_total(out, seen)
        rounds: dict[str, list[float]] = {name: [] for name in kinds}
        for _ in range(ROUNDS):
            for name, make in kinds.items():
                _control("-i", "on", str(proc.pid))
                asyncio.run(_load(sock, per_kind, make))
                _control("-i", "off", str(proc.pid))
                _control("-d", str(proc.pid))
                rounds[name].append(_dump_total(out, seen) / per_kind)
        counts = {name: min(values) for name, values in rounds.items()}
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        shutil.rmtree(root, ignore_errors=True)
    ping = counts["ping"]
    return {
        "read_state_instructions": {
            **{f"{name}_k": round(value / 1e3, 1) for name, value in counts.items()},
            **{
                f"{name}_over_ping": round(value / ping, 2)
                for name, value in counts.items()
                if name != "ping" and ping
            },
            "requests_per_window": per_kind,
            "rounds": ROUNDS,
            "conns": CONNS,
            "file_bytes": len(text.encode()),
        }
    }

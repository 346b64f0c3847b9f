"""Instructions (callgrind) of makad and of the bare anyio echo server (``benchmarks.rpc``):
from exec to the first pong, and per ping under 16 connections.

The ratios of ``rpc`` and ``startup`` are wall-clock figures, which a shared machine's
load moves by more than the effects measured; the instructions a process executes it does
not (a few per cent run to run, from scheduling: how many requests one wake-up finds).
Both servers run under callgrind the same way, on the same client load. ``start_ratio``
is makad's instructions to its first pong over the echo server's to its first echo;
``ping_ratio`` is the echo server's instructions per request over makad's (like ``rpc``'s
ratios: 1.0 is as cheap as the echo server). Not part of the default run: it needs
valgrind (about a minute).

    scripts/bench rpc_instructions
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.rpc import ECHO_SERVER

CONNS = 16


def _ping(i: int) -> bytes:
    return b'{"jsonrpc":"2.0","method":"ping","id":%d}\n' % i


def _command(which: str, root: Path) -> list[str]:
    sock = str(root / "s.sock")
    if which == "echo":
        return [sys.executable, "-c", ECHO_SERVER, sock]
    data = str(root / "data")
    return [sys.executable, "-m", "makad", "--socket", sock, "--data-dir", data, "--log-level", "warning"]


def _first_answer(path: str, request: bytes = _ping(0)) -> None:
    while True:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            s.sendall(request)
            if s.recv(4096):
                return
        except OSError:
            time.sleep(0.02)
        finally:
            s.close()


async def _pings(path: str, total: int) -> None:
    async def worker() -> None:
        reader, writer = await asyncio.open_unix_connection(path)
        for i in range(total // CONNS):
            writer.write(_ping(i))
            await reader.readline()
        writer.close()

    await asyncio.gather(*(worker() for _ in range(CONNS)))


def _control(*args: str) -> None:
    subprocess.run(
        ["callgrind_control", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )


def _total(out: Path) -> int:
    """The largest ``totals:`` line of the dumps (each dump holds one part)."""
    best = 0
    for part in out.parent.glob(out.name + "*"):
        for line in part.read_text(errors="replace").splitlines():
            if line.startswith(("totals:", "summary:")):
                best = max(best, int(line.split()[1]))
    return best


def _counted(which: str, instr_at_start: bool, pings: int) -> int:
    """Instructions from exec to the first answer (``instr_at_start``), or of ``pings``
    requests after a warm-up."""
    root = Path(tempfile.mkdtemp(prefix="mkr", dir="/tmp"))
    out = root / "cg.out"
    proc = subprocess.Popen(
        [
            "valgrind",
            "--tool=callgrind",
            f"--instr-atstart={'yes' if instr_at_start else 'no'}",
            f"--callgrind-out-file={out}",
            *_command(which, root),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=str(root),  # `-m makad` finds the interpreter's install, not a tree in cwd
    )
    try:
        _first_answer(str(root / "s.sock"))
        if not instr_at_start:
            # makad loads its services after the first pong: count pings once it has.
            _first_answer(str(root / "s.sock"), b'{"jsonrpc":"2.0","method":"rpc.discover","id":0}\n')
            asyncio.run(_pings(str(root / "s.sock"), CONNS * 20))  # warm-up, not counted
            _control("-i", "on", str(proc.pid))
            asyncio.run(_pings(str(root / "s.sock"), pings))
            _control("-i", "off", str(proc.pid))
        _control("-d", str(proc.pid))
        time.sleep(1)
        return _total(out)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        shutil.rmtree(root, ignore_errors=True)


def run(quick: bool) -> dict[str, Any]:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        return {"rpc_instructions": {"skipped": "valgrind (callgrind) is not installed"}}
    pings = CONNS * (20 if quick else 200)
    echo_start = _counted("echo", True, 0)
    makad_start = _counted("makad", True, 0)
    echo_ping = _counted("echo", False, pings) / pings
    makad_ping = _counted("makad", False, pings) / pings
    return {
        "rpc_instructions": {
            "start_echo_m": round(echo_start / 1e6, 1),
            "start_makad_m": round(makad_start / 1e6, 1),
            "start_ratio": round(makad_start / echo_start, 2) if echo_start else 0,
            "ping_echo_k": round(echo_ping / 1e3, 1),
            "ping_makad_k": round(makad_ping / 1e3, 1),
            "ping_ratio": round(echo_ping / makad_ping, 3) if makad_ping else 0,
            "pings": pings,
            "conns": CONNS,
        }
    }

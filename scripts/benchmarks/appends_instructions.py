"""Instructions (callgrind) per one-event ``append_events`` under 16 connections, and per
one-row transaction of ``appends``' bare sqlite3 loop.

``appends``' figures are wall-clock rates and the daemon's CPU time, which a shared
machine's load moves; the instructions a process executes it barely does. The daemon
runs under callgrind, 16 connections append one event a call, each to its own session
(as ``appends``), and only the measured calls are counted, after a warm-up: thousands
per call (``per_call_k``). Under callgrind the daemon is the slow side, so the calls
queue and commit in groups much as on a busy daemon; ``per_call_k`` depends on how many
share a commit (a few per cent run to run). The baseline is ``appends``' loop (WAL,
synchronous=FULL, one transaction a row) under callgrind too, its start-up taken out by
counting two lengths of it (``sqlite_per_row_k``). The two make no ratio to set beside
``appends``': the bare loop's time is its fsync, which instructions leave out (as they
leave out the kernel's work), while makad's is mostly CPU; ``per_call_k`` is the figure
to compare between two trees. Not part of the default run: it needs valgrind (about two
minutes).

    scripts/bench appends_instructions
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
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT
from benchmarks.ledger import Corpus, _append_payload
from benchmarks.rpc_instructions import _command, _control, _first_answer, _total

CONNS = 16

_BASELINE = """
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from benchmarks.ledger import Corpus, _sqlite_rows
_sqlite_rows(Path(sys.argv[2]), Corpus(), int(sys.argv[3]))
"""


async def _appends(path: str, payloads: list[list[bytes]], per_conn: int) -> None:
    async def worker(own: list[bytes]) -> None:
        reader, writer = await asyncio.open_unix_connection(path)
        for i in range(per_conn):
            writer.write(own[i % len(own)])
            line = await reader.readline()
            if b'"error"' in line:
                raise RuntimeError(line.decode()[:200])
        writer.close()

    await asyncio.gather(*(worker(own) for own in payloads))


def _makad_per_call(per_conn: int) -> float:
    from maka import Client

    root = Path(tempfile.mkdtemp(prefix="mka", dir="/tmp"))
    out = root / "cg.out"
    workspace = root / "ws"
    workspace.mkdir()
    proc = subprocess.Popen(
        [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            *_command("makad", root),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=str(root),  # `-m makad` finds the interpreter's install, not a tree in cwd
    )
    try:
        sock = str(root / "s.sock")
        _first_answer(sock)
        corpus = Corpus()
        with Client(sock, timeout=120) as c:
            sids = [c.call("open_session", {"workspace": str(workspace)})["sessionId"] for _ in range(CONNS)]
        payloads = [[_append_payload(sid, str(workspace), [corpus.text()]) for _ in range(8)] for sid in sids]
        asyncio.run(_appends(sock, payloads, 10))  # warm-up, not counted
        _control("-i", "on", str(proc.pid))
        asyncio.run(_appends(sock, payloads, per_conn))
        _control("-i", "off", str(proc.pid))
        _control("-d", str(proc.pid))
        time.sleep(1)
        return _total(out) / (CONNS * per_conn)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        shutil.rmtree(root, ignore_errors=True)


def _baseline_total(rows: int) -> int:
    root = Path(tempfile.mkdtemp(prefix="mka", dir="/tmp"))
    out = root / "cg.out"
    try:
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-c",
                _BASELINE,
                str(ROOT / "scripts"),
                str(root),
                str(rows),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
        )
        return _total(out)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(quick: bool) -> dict[str, Any]:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        return {"appends_instructions": {"skipped": "valgrind (callgrind) is not installed"}}
    per_conn = 10 if quick else 40
    short, long = (100, 300) if quick else (200, 1200)
    base = (_baseline_total(long) - _baseline_total(short)) / (long - short)
    makad = _makad_per_call(per_conn)
    return {
        "appends_instructions": {
            "per_call_k": round(makad / 1e3, 1),
            "sqlite_per_row_k": round(base / 1e3, 1),
            "calls": CONNS * per_conn,
            "conns": CONNS,
        }
    }


if __name__ == "__main__":
    print(json.dumps(run("--quick" in sys.argv), indent=2))

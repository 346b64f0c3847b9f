"""startup: exec to first pong, and resident memory idle and loaded."""

from __future__ import annotations

import compileall
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.build_context import Text, _memory_file
from benchmarks.common import ROOT, Daemon
from benchmarks.rpc import ECHO_SERVER
from maka import Client


def _echo_ready_s() -> float:
    path = Path(tempfile.mkdtemp(prefix="mke", dir="/tmp")) / "e.sock"
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", ECHO_SERVER, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()
    elapsed = time.perf_counter() - started
    proc.terminate()
    proc.wait()
    proc.stdout.close()
    return elapsed


def _load(daemon: Daemon, entries: int, events: int) -> None:
    """10,000 entries (written as one MEMORY.md, as a user's file would be) and 100,000
    events appended over the socket, then read through read_state and build_context."""
    ws = str(daemon.workspace)
    mem = daemon.workspace / "memory"
    mem.mkdir(mode=0o700, exist_ok=True)
    (mem / "MEMORY.md").write_text(_memory_file(Text(random.Random(3)), entries))
    with Client(str(daemon.socket), timeout=300) as c:
        c.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "historyRecallEnabled": True})
        sid = c.call("open_session", {"workspace": ws})["sessionId"]
        batch = [{"type": "user_message", "text": f"message {j} about topic {j % 89}"} for j in range(1000)]
        for _ in range(events // 1000):
            c.call("append_events", {"workspace": ws, "sessionId": sid, "events": batch})
        c.call("read_state", {"workspace": ws})
        c.call("build_context", {"workspace": ws, "sessionId": sid, "budgetTokens": 8000, "query": "topic 5"})


def run(quick: bool) -> dict[str, Any]:
    runs = 2 if quick else 7
    # An installed daemon starts from bytecode (pip compiles it), as the echo server's
    # anyio does; a tree run with PYTHONDONTWRITEBYTECODE would compile makad every time.
    compileall.compile_dir(str(ROOT / "makad"), quiet=1)
    ready = []
    baseline = []
    for _ in range(runs):
        baseline.append(_echo_ready_s())
        with Daemon() as daemon:
            ready.append(daemon.start_s)
    entries, events = (200, 2_000) if quick else (10_000, 100_000)
    # One MEMORY.md of 10,000 entries is over the 128 KiB cap: the benchmark raises the
    # cap (LOCAL_MEMORY_MAX_BYTES) rather than splitting the file.
    with Daemon(env={"LOCAL_MEMORY_MAX_BYTES": str(16 << 20)}) as daemon:
        idle = daemon.rss_mib()
        _load(daemon, entries, events)
        loaded = daemon.rss_mib()
    return {
        "startup": {
            "ready_ms": round(statistics.median(ready) * 1000, 1),
            "baseline_ready_ms": round(statistics.median(baseline) * 1000, 1),
            # Exec to first pong over the bare anyio echo server's exec to listening.
            "ratio": round(statistics.median(ready) / statistics.median(baseline), 2),
            "rss_mib_idle": idle,
            "rss_mib_loaded": loaded,
            "loaded_entries": entries,
            "loaded_events": events,
        }
    }

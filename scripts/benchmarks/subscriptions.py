"""subscriptions: what subscribing to many folders one after another costs the daemon.

One connection subscribes to N folders in turn, each with a ``memory/`` folder to watch,
then (the baseline, same run, a daemon of its own) to N folders without one, which are
opened but never watched. Reported for each N: the daemon's CPU seconds and the wall
time, the watching's CPU per folder (watched minus baseline, divided by N), and how that
grows from the smallest N to the largest: about 1 when each folder costs the same
whatever how many are watched, about largest/smallest when every folder added re-reads
all the others.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.common import Daemon, cpu_seconds


def _subscribe(folders: int, watched: bool) -> dict[str, float]:
    from maka import Client

    with Daemon() as d:
        assert d.proc is not None
        paths = [d.root / f"f{n}" for n in range(folders)]
        for path in paths:
            (path / "memory" if watched else path).mkdir(parents=True)
        cpu_before = cpu_seconds(d.proc.pid)
        started = time.perf_counter()
        with Client(str(d.socket), timeout=120) as c:
            for path in paths:
                c.call("subscribe", {"workspace": str(path)})
            wall = time.perf_counter() - started
            time.sleep(1.0)  # the last restart of the watch, if any, is counted
            cpu = cpu_seconds(d.proc.pid) - cpu_before
    return {"cpu_s": round(cpu, 2), "wall_s": round(wall, 2)}


def run(quick: bool) -> dict[str, Any]:
    sizes = (25, 100) if quick else (100, 400, 1000)
    rows = {}
    for n in sizes:
        watched, baseline = _subscribe(n, watched=True), _subscribe(n, watched=False)
        rows[str(n)] = {
            "watched": watched,
            "not_watched": baseline,
            "watch_cpu_ms_per_folder": round(max(0.0, watched["cpu_s"] - baseline["cpu_s"]) * 1000 / n, 2),
        }
    first, last = rows[str(sizes[0])], rows[str(sizes[-1])]
    growth = last["watch_cpu_ms_per_folder"] / max(first["watch_cpu_ms_per_folder"], 0.01)
    return {"subscriptions": {"sizes": rows, "per_folder_growth": round(growth, 2)}}

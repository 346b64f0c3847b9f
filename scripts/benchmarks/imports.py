"""imports: import_memories of N Markdown bullets into a fresh workspace, against the same
items parsed and redacted in-process (the pure work) measured in the same run."""

from __future__ import annotations

import time
from typing import Any

from benchmarks.common import Daemon, summary_ms
from maka import Client
from makad.core import importers
from makad.core.entries import clean_entry

CAP = str(8 * 1024 * 1024)  # room for every item: the cap is not what is measured


def bullets(n: int, run: int) -> str:
    return "".join(f"- Imported fact {i} of run {run}: the team prefers option {i % 7}\n" for i in range(n))


def pure(data: str) -> float:
    started = time.perf_counter()
    parsed = importers.parse(data, "markdown")
    for item in parsed.items:
        clean_entry(item.title, item.content)
    return time.perf_counter() - started


def run(quick: bool) -> dict[str, Any]:
    n, runs = (50, 2) if quick else (1000, 5)
    daemon_s: list[float] = []
    pure_s: list[float] = []
    with Daemon({"LOCAL_MEMORY_MAX_BYTES": CAP}) as daemon, Client(str(daemon.socket), timeout=300) as c:
        for r in range(runs):
            data = bullets(n, r)
            ws = daemon.root / f"w{r}"
            ws.mkdir()
            pure_s.append(pure(data))
            started = time.perf_counter()
            result = c.call("import_memories", {"workspace": str(ws), "data": data, "format": "markdown"})
            daemon_s.append(time.perf_counter() - started)
            assert len(result["imported"]) == n
    took, baseline = summary_ms(daemon_s), summary_ms(pure_s)
    return {
        "imports": {
            "items": n,
            "p50_ms": took["p50_ms"],
            "items_per_s": round(n / (took["p50_ms"] / 1000)) if took["p50_ms"] else None,
            "pure_p50_ms": baseline["p50_ms"],
            "ratio": round(took["p50_ms"] / baseline["p50_ms"], 2) if baseline["p50_ms"] else None,
        }
    }

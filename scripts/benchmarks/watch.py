"""watch: an editor-style save of MEMORY.md until memory_changed reaches a subscriber."""

from __future__ import annotations

import os
import time
from typing import Any

from benchmarks.common import Daemon, summary_ms
from maka import Client


def run(quick: bool) -> dict[str, Any]:
    n = 5 if quick else 40
    samples: list[float] = []
    with Daemon() as daemon:
        ws = str(daemon.workspace)
        with Client(str(daemon.socket), timeout=10) as c:
            c.call("add_entry", {"workspace": ws, "title": "seed", "content": "seed"})
            path = daemon.workspace / "memory" / "MEMORY.md"
            with Client(str(daemon.socket), timeout=10) as sub:
                sub.call("subscribe", {"workspace": ws})
                notes = sub.notifications()
                for i in range(n):
                    text = path.read_text() + f"\n## Edit {i}\nby hand {i}\n"
                    tmp = path.with_name(f".MEMORY.md.{i}.tmp")
                    tmp.write_text(text)
                    start = time.perf_counter()
                    os.replace(tmp, path)
                    while True:
                        note = next(notes)
                        if note["params"].get("cause") == "external_edit":
                            break
                    samples.append(time.perf_counter() - start)
                    time.sleep(0.05)
    stats = summary_ms(samples)
    return {"watch": {"p50_ms": stats["p50_ms"], "p99_ms": stats["p99_ms"], "n": n, "debounce_ms": 50}}

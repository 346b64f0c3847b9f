"""read_state on a ~128 KiB MEMORY.md of 500 entries, against ping under the same load.

``conditional``: ``read_state {ifRevision}`` of the unchanged file, answered
``{notModified: true, revision}`` (the daemon re-checks both files' stat signature
first): the goal is at least half of ping's rate. ``summary``: ``includeContent:
false``, status and counts without the text.

``get_settings`` under the same load shows the per-call cost of finding the
workspace (the spelling cache re-checked with a stat of the workspace's id
file, on a worker thread), which the 110 KB reply of read_state hides. ``cpu_us`` is the daemon's
CPU time per request for each: the figure to compare across commits on a busy
machine (throughput there swings with the neighbours' load).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from benchmarks.common import Daemon, closed_loop, measured
from makad.core import memory_format as fmt
from makad.core.types import Entry


def memory_text(entries: int, target_bytes: int) -> str:
    doc = fmt.new_document()
    filler = max(10, target_bytes // entries - 190)
    for i in range(entries):
        content = f"Fact {i}: " + ("lorem ipsum dolor sit amet " * 40)[:filler]
        doc = fmt.upsert(
            doc,
            Entry(
                id=f"{i:016x}",
                title=f"Entry {i}",
                content=content,
                origin="manual",
                created_at=1_700_000_000_000 + i,
                updated_at=1_700_000_000_000 + i,
                tags=["bench"],
            ),
        )
    return fmt.render(doc)


async def _one(path: str, request: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(path, limit=64 << 20)
    writer.write(request)
    line = await reader.readline()
    writer.close()
    return line


def run(quick: bool) -> dict[str, Any]:
    seconds = 0.2 if quick else 3.0
    conns = 4
    with Daemon() as daemon:
        mem = daemon.workspace / "memory"
        mem.mkdir(mode=0o700)
        text = memory_text(500, 126 * 1024)
        (mem / "MEMORY.md").write_text(text)
        request = json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "read_state",
                "id": 0,
                "params": {"workspace": str(daemon.workspace)},
            }
        ).encode()

        def read_state(i: int) -> bytes:
            return request + b"\n"

        def ping(i: int) -> bytes:
            return b'{"jsonrpc":"2.0","method":"ping","id":%d}\n' % i

        revision = json.loads(asyncio.run(_one(str(daemon.socket), request + b"\n")))["result"]["revision"]

        def conditional_request(params: dict[str, Any]) -> bytes:
            body = {"jsonrpc": "2.0", "method": "read_state", "id": 0, "params": params}
            return json.dumps(body).encode() + b"\n"

        conditional = conditional_request({"workspace": str(daemon.workspace), "ifRevision": revision})
        summary = conditional_request({"workspace": str(daemon.workspace), "includeContent": False})

        settings = (
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "get_settings",
                    "id": 0,
                    "params": {"workspace": str(daemon.workspace)},
                }
            ).encode()
            + b"\n"
        )

        asyncio.run(closed_loop(str(daemon.socket), 1, 0.2, read_state))  # warm the cache
        assert daemon.proc is not None
        pid, path = daemon.proc.pid, str(daemon.socket)
        ping_r, ping_cpu = measured(pid, path, conns, seconds, ping)
        cond_r, cond_cpu = measured(pid, path, conns, seconds, lambda i: conditional)
        state_r, state_cpu = measured(pid, path, conns, seconds, read_state)
        summary_r, summary_cpu = measured(pid, path, conns, seconds, lambda i: summary)
        settings_r, settings_cpu = measured(pid, path, conns, seconds, lambda i: settings)
        # ping once more after the others: the conditional ratio takes the mean of both.
        ping2_r, ping2_cpu = measured(pid, path, conns, seconds, ping)
        assert b"notModified" in asyncio.run(_one(path, conditional))
    ping_rps = (ping_r["rps"] + ping2_r["rps"]) / 2
    return {
        "read_state": {
            "entries": 500,
            "file_bytes": len(text.encode()),
            "conns": conns,
            "ping_rps": round(ping_rps, 1),
            "conditional": {
                "rps": cond_r["rps"],
                "ratio": round(cond_r["rps"] / ping_rps, 3) if ping_rps else 0,
                "p50_ms": cond_r["p50_ms"],
                "p99_ms": cond_r["p99_ms"],
            },
            "summary_rps": summary_r["rps"],
            "summary_ratio": round(summary_r["rps"] / ping_rps, 3) if ping_rps else 0,
            "rps": state_r["rps"],
            "ratio": round(state_r["rps"] / ping_rps, 3) if ping_rps else 0,
            "p50_ms": state_r["p50_ms"],
            "p99_ms": state_r["p99_ms"],
            "get_settings_rps": settings_r["rps"],
            "get_settings_ratio": round(settings_r["rps"] / ping_r["rps"], 3) if ping_r["rps"] else 0,
            "get_settings_p50_ms": settings_r["p50_ms"],
            "cpu_us": {
                "ping": round((ping_cpu + ping2_cpu) / 2, 2),
                "conditional": cond_cpu,
                "read_state": state_cpu,
                "summary": summary_cpu,
                "get_settings": settings_cpu,
            },
        }
    }

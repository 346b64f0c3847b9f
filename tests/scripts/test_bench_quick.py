"""scripts/bench --quick: every benchmark runs and prints its documented keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
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
    assert {"cjk_480", "cjk_20k", "marks_80k"} <= set(report["normal_form"])
    assert all({"us", "baseline_us", "ratio"} <= set(case) for case in report["normal_form"].values())
    assert {"items", "p50_ms", "items_per_s", "pure_p50_ms", "ratio"} <= set(report["imports"])
    assert {"records", "state_lines", "score_ms", "derive_ms", "ratio"} <= set(report["suggestions"])
    ping = report["import_ping"]
    assert {"idle_p50_ms", "idle_p99_ms", "worst_p99_ms", "p99_ratio", "markdown", "json"} <= set(ping)
    assert ping["markdown"]["imported"] and ping["json"]["imported"]
    data_dir = report["data_dir"]
    assert {"entries", "tight_ms", "os_walk_ms", "ratio", "first_start_ms"} <= set(data_dir)
    assert data_dir["modes_changed_first_start"] == data_dir["entries"] + 2  # root, workspaces/


@pytest.mark.slow
def test_bench_scale_quick_prints_both_scales_and_where_the_bytes_go() -> None:
    """scripts/bench --quick build_context_scale prints each scale's latency and CPU, the
    same-run ratios, ingest rates and each ledger's bytes per event by part."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "benchmarks" / "main.py"), "--quick", "build_context_scale"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    scale = json.loads(result.stdout)["build_context_scale"]
    assert set(scale["latency"]) == set(scale["cpu"]) == set(scale["disk"]) == {"500", "5000"}
    for figures in scale["latency"].values():
        assert 0 < figures["p50_ms"] <= figures["p95_ms"] <= figures["p99_ms"]
    assert {
        "p95_largest_over_smallest",
        "p99_largest_over_smallest",
        "p95_smallest_over_naive_p50",
        "cpu_p95_largest_over_smallest",
    } <= set(scale["ratios"])
    assert all(ingest["events_per_s"] > 0 for ingest in scale["ingest"].values())
    disk = scale["disk"]["5000"]
    assert disk["events"] == 5000
    parts = disk["by_part_per_event"]
    assert parts["event_rows"] > disk["event_rows_per_event"]["text"] > 0
    assert parts["events_fts"] > 0
    assert sum(parts.values()) <= disk["bytes_per_event"] + 1

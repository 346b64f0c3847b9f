"""Concurrent clients mixing every method (the short CI version of `scripts/soak --minutes M
--clients C`), and a daemon with many watched workspaces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soaklib.load import WARM_UP_CALLS_PER_CLIENT, run_load, warmed_up
from soaklib.memprobe import Probe
from tests.support import DaemonProcess, RawConnection


@pytest.mark.slow
def test_short_load_mixes_every_method_without_surprises() -> None:
    """Eight clients for a few seconds, each touring every method (shutdown aside) until
    it has called each one, however long the tour takes on a busy machine (coverage is
    counted, not timed): no unexpected error, the planned refusals are counted apart, no
    descriptor is left open once the clients have gone, and SIGTERM exits 0."""
    load = run_load(seconds=4, clients=8, seed=3)["load"]
    assert load["methods_not_called"] == []
    assert load["clients_missing_methods"] == 0
    assert load["unexpected"] == {}
    assert load["request_crashed_in_log"] == 0
    assert {
        "update_entry:conflict",
        "append_events:conflict",
        "archive_entry:not_found",
        "propose:gate_closed",
    } <= set(load["expected"])
    assert load["fds"]["idle_end"] <= load["fds"]["idle_start"]
    assert load["exit_code"] == 0
    assert all(m["n"] > 0 and m["p99_ms"] >= m["p50_ms"] for m in load["methods"].values())


def test_many_watched_workspaces_keep_the_daemon_responsive(daemon: DaemonProcess) -> None:
    """48 watched workspaces (past anyio's 40 worker threads, which per-workspace watchers
    once held for good): writes elsewhere still finish (~20 ms normally; a held pool never
    answers, so the client's 15 s timeout tells the two apart on a loaded machine too)."""
    dirs = []
    for i in range(48):
        (daemon.root / f"w{i}" / "memory").mkdir(parents=True)
        dirs.append(daemon.root / f"w{i}")
    with RawConnection(daemon.socket, timeout=120) as conn:
        conn.send_raw(
            b"".join(
                json.dumps(
                    {"jsonrpc": "2.0", "id": i, "method": "get_settings", "params": {"workspace": str(w)}}
                ).encode()
                + b"\n"
                for i, w in enumerate(dirs)
            )
        )
        for _ in dirs:
            conn.recv_message()
    with daemon.client(timeout=15) as client:
        for i in range(3):
            client.call(
                "add_entry",
                {"workspace": str(daemon.workspace), "title": f"T{i}", "content": f"still quick {i}"},
            )
    assert (Path(daemon.workspace) / "memory" / "MEMORY.md").read_text().count("still quick") == 3


def test_the_memory_baseline_waits_for_calls_not_only_time() -> None:
    """The load's resident-memory baseline is taken once a quarter of the run has passed
    and the clients made their warm-up calls; at half the run whatever the count."""
    enough = WARM_UP_CALLS_PER_CLIENT * 32
    assert not warmed_up(29.0, 120.0, enough, 32)  # calls made, but not a quarter in
    assert not warmed_up(45.0, 120.0, enough - 1, 32)  # a slow machine: still filling
    assert warmed_up(45.0, 120.0, enough, 32)
    assert warmed_up(60.0, 120.0, 0, 32)  # half the run: measure what is left


class _Grown:
    """An object the collector tracks (instances of plain classes are)."""


def test_the_memory_probe_attributes_resident_memory(tmp_path: Path) -> None:
    """One probe sample names the kernel's, glibc's, SQLite's and Python's share, and
    the second counts what grew since the first (types, modules)."""
    probe = Probe(tmp_path / "probe.jsonl", every=1.0, frames=0, base_s=0.0)
    first = probe.sample()
    kept = [_Grown() for _ in range(1000)]
    second = probe.sample()
    assert first["status"]["VmRSS"] >= first["status"]["RssAnon"] > 0
    assert {"in_use_kib", "free_kib", "arena_kib"} <= set(first["malloc"])
    assert {"used_kib", "connections"} <= set(first["sqlite"])
    assert first["pymalloc"]["arenas"] > 0
    assert second["types_grown"].get("_Grown", 0) >= len(kept)
    assert second["modules_added"] == []

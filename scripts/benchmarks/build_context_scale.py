"""build_context as the ledger grows: 10,000 memory entries, 100,000 and 1,000,000 events.

Both ledgers live in one daemon (two workspaces), built with ``build_context``'s generator
(sessions of 1,000 events, the 100k ledger's events are the 1M ledger's first 100k) and
asked ``build_context``'s 16 queries with an 8,000-token budget in the last session. The
calls alternate — 100k, 1M, then the naive fetch-everything-and-cut at 100k — so all
three see the same machine load, and the ratios are of figures from the same run:

- ``ratios.p95_1m_over_100k`` / ``p99_1m_over_100k``: how the tail grows with ten times
  the history (the goal: at most 1.5 and 2);
- ``ratios.p95_100k_over_naive_p50``: ``scripts/bench build_context``'s ratio at
  10k entries / 100k events (the goal: at most 0.35).

The ledgers are written through the real append path, over the socket, 1,000 events a
call (one durable commit each): that is what ingest costs a user, and ``ingest`` reports
it (events per second, and seconds). Then the daemon stops, so each ledger's file is
whole (its WAL checkpointed), and ``disk`` says what it holds per event, from SQLite's
``dbstat`` table: the event rows (their text, the hash chain, the rest), the
(session, seq) index, the event full-text index, the memory index, the rest, and free
pages. The daemon restarts on the same files (``reopen_s``: opening, migrating and
warming each ledger) before any call is timed.

``MAKA_BENCH_SCALE_CACHE=DIR`` keeps the built workspaces in ``DIR`` and, on the next
run, copies them instead of ingesting again (``ingest`` then says ``"cached"``): for
comparing two trees on the same ledgers. A tree with a newer schema migrates its copy
at the restart. ``MAKA_BENCH_SCALE_CALLS`` sets the calls per scale (default 300).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

from benchmarks.build_context import TOPICS, Text, _memory_file
from benchmarks.common import Daemon, summary_ms
from maka import Client
from makad.core.tokens import estimate_tokens

BUDGET = 8_000
SESSION_EVENTS = 1_000
LEDGER = "ledger.sqlite3"


def _ingest(c: Client, ws: Path, text: Text, entries: int, events: int) -> tuple[str, float]:
    """``build_context.prepare``'s workspace, the events appended a session (1,000) a call:
    the last session's id and the seconds spent appending."""
    mem = ws / "memory"
    mem.mkdir(mode=0o700)
    (mem / "MEMORY.md").write_text(_memory_file(text, entries))
    c.call("set_settings", {"workspace": str(ws), "agentReadEnabled": True, "historyRecallEnabled": True})
    appending = 0.0
    sid = ""
    for s in range(max(1, events // SESSION_EVENTS)):
        batch = []
        for j in range(min(SESSION_EVENTS, events)):
            topic = TOPICS[(s + j) % len(TOPICS)]
            kind = "user_message" if j % 2 == 0 else "assistant_message"
            batch.append({"type": kind, "text": text.sentence(topic, 20)})
        t0 = time.perf_counter()
        sid = c.call("open_session", {"workspace": str(ws)})["sessionId"]
        c.call("append_events", {"workspace": str(ws), "sessionId": sid, "events": batch})
        appending += time.perf_counter() - t0
    return sid, appending


def _ledger_file(data_dir: Path, ws: Path) -> Path:
    for marker in (data_dir / "workspaces").glob("*/workspace-path"):
        if marker.read_text(encoding="utf-8") == str(ws):
            return marker.parent / LEDGER
    raise FileNotFoundError(f"no ledger for {ws}")


def disk_usage(path: Path) -> dict[str, Any]:
    """What a ledger file holds, in bytes per event, by part (see module doc)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        events = conn.execute("SELECT count(*) FROM events").fetchone()[0] or 1
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0] * page_size
        by_table: dict[str, int] = {}
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            by_table[name] = int(size)
        text, chain, sid = conn.execute(
            "SELECT sum(length(CAST(text AS BLOB))), sum(length(hash)), sum(length(session_id)) FROM events"
        ).fetchone()
    finally:
        conn.close()
    parts = {"event_rows": 0, "session_seq_index": 0, "events_fts": 0, "memory_fts": 0, "other": 0}
    for name, size in by_table.items():
        if name == "events":
            parts["event_rows"] += size
        elif name == "sqlite_autoindex_events_1":
            parts["session_seq_index"] += size
        elif name.startswith("events_fts"):
            parts["events_fts"] += size
        elif name.startswith("memory_fts"):
            parts["memory_fts"] += size
        else:
            parts["other"] += size
    total = path.stat().st_size
    per = {key: round(value / events, 1) for key, value in parts.items()}
    per["free"] = round(free / events, 1)
    return {
        "events": events,
        "file_mb": round(total / 1e6, 1),
        "bytes_per_event": round(total / events, 1),
        "by_part_per_event": per,
        # Inside the event rows: the stored text, the hash chain (a hex SHA-256 an event),
        # the session id repeated on every row; the rest is seq, ts, type, tokens, row
        # headers and the b-tree's own overhead.
        "event_rows_per_event": {
            "text": round(text / events, 1),
            "hash_chain": round(chain / events, 1),
            "session_id": round(sid / events, 1),
        },
        # Every table or index over 1% of the file, largest first.
        "by_table_bytes": {
            name: size
            for name, size in sorted(by_table.items(), key=lambda kv: -kv[1])
            if size * 100 >= total
        },
    }


def cpu_seconds(pid: int) -> float:
    """CPU time the process's threads have run so far, to the nanosecond (the scheduler's
    ``schedstat``; ``/proc/PID/stat`` counts 10 ms ticks, too coarse for one call)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def _naive(c: Client, ws: str, sid: str) -> None:
    state = c.call("read_state", {"workspace": ws, "includeEntries": True})
    history = c.call("read_events", {"workspace": ws, "sessionId": sid})
    naive_text = "\n\n".join(f"## {e['title']}\n{e['content']}" for e in state["entries"])
    naive_text += "\n".join(e["text"] for e in history["events"])
    estimate_tokens(naive_text[: BUDGET * 4])


def _build(root: Path, scales: list[int], entries: int) -> dict[str, Any]:
    """Ingest every scale's workspace into ``root`` (a daemon there); what it took."""
    daemon = Daemon(env={"LOCAL_MEMORY_MAX_BYTES": str(32 << 20)}, root=root)
    built: dict[str, Any] = {"sessions": {}, "ingest": {}}
    with daemon, Client(str(daemon.socket), timeout=3600) as c:
        for events in scales:
            ws = root / f"ws{events}"
            ws.mkdir()
            text = Text(random.Random(7))
            sid, seconds = _ingest(c, ws, text, entries, events)
            built["sessions"][str(events)] = sid
            built["ingest"][str(events)] = {
                "events_per_s": round(events / seconds, 1),
                "seconds": round(seconds, 1),
                "path": "append_events over the socket, 1,000 events a call",
            }
    return built


def _scenario(scales: list[int], entries: int, calls: int) -> dict[str, Any]:
    cache = os.environ.get("MAKA_BENCH_SCALE_CACHE")
    key = f"{entries}-{'-'.join(map(str, scales))}"
    if cache:
        base = Path(cache) / key
        root = Path(cache) / f"{key}.run"
        shutil.rmtree(root, ignore_errors=True)
        if (base / "built.json").exists():
            shutil.copytree(base, root)
            built = json.loads((base / "built.json").read_text())
            built["ingest"] = {k: "cached" for k in built["ingest"]}
        else:
            root.mkdir(parents=True)
            built = _build(root, scales, entries)
            shutil.rmtree(base, ignore_errors=True)
            shutil.copytree(root, base)
            (base / "built.json").write_text(json.dumps(built))
    else:
        root = Path(f"/tmp/mkscale-{os.getpid()}")
        root.mkdir()
        built = _build(root, scales, entries)
    # The query words: build_context's at 10k / 100k (its generator after its workspace).
    qtext = Text(random.Random(7))
    _memory_file(qtext, entries)
    for s in range(max(1, min(scales) // SESSION_EVENTS)):
        for j in range(min(SESSION_EVENTS, min(scales))):
            qtext.sentence(TOPICS[(s + j) % len(TOPICS)], 20)
    queries = [qtext.query(t) for t in TOPICS]
    daemon = Daemon(env={"LOCAL_MEMORY_MAX_BYTES": str(32 << 20)}, root=root)
    disk = {str(n): disk_usage(_ledger_file(daemon.data_dir, root / f"ws{n}")) for n in scales}
    times: dict[str, list[float]] = {str(n): [] for n in scales}
    cpu: dict[str, list[float]] = {str(n): [] for n in scales}
    naive: list[float] = []
    naive_cpu: list[float] = []
    small = str(min(scales))
    try:
        with daemon, Client(str(daemon.socket), timeout=3600) as c:
            assert daemon.proc is not None
            pid = daemon.proc.pid
            reopen: dict[str, float] = {}
            for n in scales:
                t0 = time.perf_counter()
                params = {"workspace": str(root / f"ws{n}"), "sessionId": built["sessions"][str(n)]}
                c.call("build_context", {**params, "budgetTokens": BUDGET, "query": queries[0]})
                reopen[str(n)] = round(time.perf_counter() - t0, 2)
            for i in range(calls):
                query = queries[i % len(queries)]
                for n in scales:
                    ws, sid = str(root / f"ws{n}"), built["sessions"][str(n)]
                    c0 = cpu_seconds(pid) + time.thread_time()
                    t0 = time.perf_counter()
                    pack = c.call(
                        "build_context",
                        {"workspace": ws, "sessionId": sid, "budgetTokens": BUDGET, "query": query},
                    )
                    times[str(n)].append(time.perf_counter() - t0)
                    cpu[str(n)].append(cpu_seconds(pid) + time.thread_time() - c0)
                    assert pack["totalTokens"] <= BUDGET
                c0 = cpu_seconds(pid) + time.thread_time()
                t0 = time.perf_counter()
                _naive(c, str(root / f"ws{small}"), built["sessions"][small])
                naive.append(time.perf_counter() - t0)
                naive_cpu.append(cpu_seconds(pid) + time.thread_time() - c0)
            rss = daemon.rss_mib()
    finally:
        if not cache:
            shutil.rmtree(root, ignore_errors=True)
    by_scale = {n: summary_ms(samples) for n, samples in times.items()}
    cpu_by_scale = {n: summary_ms(samples) for n, samples in cpu.items()}
    naive_cpu_base = summary_ms(naive_cpu)
    base = summary_ms(naive)
    big = str(max(scales))
    return {
        "entries": entries,
        "budget_tokens": BUDGET,
        "calls_per_scale": calls,
        "latency": by_scale,
        # CPU time a call: the daemon's (all its threads) and the client's, which the
        # machine's other load moves much less than the wall clock.
        "cpu": cpu_by_scale,
        "naive_at_smallest": base,
        "naive_cpu_at_smallest": naive_cpu_base,
        "ratios": {
            "p50_largest_over_smallest": round(by_scale[big]["p50_ms"] / by_scale[small]["p50_ms"], 3),
            "p95_largest_over_smallest": round(by_scale[big]["p95_ms"] / by_scale[small]["p95_ms"], 3),
            "p99_largest_over_smallest": round(by_scale[big]["p99_ms"] / by_scale[small]["p99_ms"], 3),
            "p95_smallest_over_naive_p50": round(by_scale[small]["p95_ms"] / base["p50_ms"], 3),
            "cpu_p95_largest_over_smallest": round(
                cpu_by_scale[big]["p95_ms"] / max(cpu_by_scale[small]["p95_ms"], 1e-9), 3
            ),
            "cpu_p99_largest_over_smallest": round(
                cpu_by_scale[big]["p99_ms"] / max(cpu_by_scale[small]["p99_ms"], 1e-9), 3
            ),
            "cpu_p95_smallest_over_naive_p50": round(
                cpu_by_scale[small]["p95_ms"] / max(naive_cpu_base["p50_ms"], 1e-9), 3
            ),
        },
        "ingest": built["ingest"],
        "reopen_first_call_s": reopen,
        "disk": disk,
        "daemon_rss_mib": rss,
    }


def run(quick: bool) -> dict[str, Any]:
    if quick:
        return {"build_context_scale": _scenario([500, 5_000], 200, 5)}
    calls = int(os.environ.get("MAKA_BENCH_SCALE_CALLS", "300"))
    return {"build_context_scale": _scenario([100_000, 1_000_000], 10_000, calls)}

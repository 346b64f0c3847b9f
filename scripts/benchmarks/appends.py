"""appends: one-event append_events from many connections at once vs a bare sqlite3 loop.

``CONCURRENT`` connections each append one event a call to their own session, closed
loop (group commit lets concurrent calls share one transaction and its fsync). The
baseline is ``ledger``'s: a bare sqlite3 loop of one-row transactions with the
ledger's durability (WAL, synchronous=FULL), run just before and just after on the
same disk; ``sqlite_baseline_eps`` is their mean, ``sqlite_baseline_spread`` both.
``stored`` checks that the sessions hold exactly the calls answered (no error reply
is counted as an append). ``ratio`` = ``calls_per_s`` / ``sqlite_baseline_eps``.
``daemon_cpu_us_per_call`` (the daemon's CPU time per call) does not count waiting for
a core or the disk, so it is steadier than the rates on a shared machine.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import Daemon, measured
from benchmarks.ledger import Corpus, _append_payload, _sqlite_eps

CONCURRENT = 16


def _last_seq(c: Any, ws: str, sid: str) -> int:
    reply = c.call("read_events", {"workspace": ws, "sessionId": sid, "afterSeq": 1 << 40})
    return int(reply["lastSeq"])


def _concurrent_calls(
    daemon: Daemon, corpus: Corpus, conns: int, seconds: float
) -> tuple[dict[str, Any], bool]:
    from maka import Client

    ws = str(daemon.workspace)
    with Client(str(daemon.socket)) as c:
        sids = [c.call("open_session", {"workspace": ws})["sessionId"] for _ in range(conns)]
    payloads = [[_append_payload(sid, ws, [corpus.text()]) for _ in range(8)] for sid in sids]

    def request(i: int) -> bytes:
        own = payloads[i // 1_000_000]  # closed_loop numbers requests connection * 1e6 + n
        return own[i % len(own)]

    assert daemon.proc is not None
    result, cpu_us = measured(daemon.proc.pid, str(daemon.socket), conns, seconds, request)
    with Client(str(daemon.socket)) as c:
        stored = sum(_last_seq(c, ws, sid) for sid in sids)
    return {**result, "cpu_us": cpu_us}, stored == result["n"]


def _baseline(corpus: Corpus, seconds: float) -> float:
    """``ledger``'s one-row-transaction sqlite3 loop, on a fresh file beside the daemon's."""
    with tempfile.TemporaryDirectory(prefix="mka", dir="/tmp") as root:
        return _sqlite_eps(Path(root), corpus, 1, seconds)


def run(quick: bool) -> dict[str, Any]:
    seconds = 0.2 if quick else 3.0
    corpus = Corpus()
    with Daemon() as daemon:
        _concurrent_calls(daemon, corpus, CONCURRENT, 0.2)  # open the workspace, warm up
        before = _baseline(corpus, seconds)
        result, stored = _concurrent_calls(daemon, corpus, CONCURRENT, seconds)
        after = _baseline(corpus, seconds)
    base = (before + after) / 2
    return {
        "appends": {
            "durability": "WAL, synchronous=FULL",
            "conns": CONCURRENT,
            "events_per_call": 1,
            "calls_per_s": result["rps"],
            "p50_ms": result["p50_ms"],
            "p99_ms": result["p99_ms"],
            "daemon_cpu_us_per_call": result["cpu_us"],
            "sqlite_baseline_eps": round(base, 1),
            "sqlite_baseline_spread": [round(before, 1), round(after, 1)],
            "ratio": round(result["rps"] / base, 3) if base else 0.0,
            "stored": stored,
        }
    }

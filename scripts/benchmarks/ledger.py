"""ledger: append_events throughput over the socket vs a bare sqlite3 loop; search p95 at scale.

- ``batched_eps`` / ``single_eps``: events per second appended by one client over the
  socket, 100 events a call / one event a call (each call is one durable commit).
- ``sqlite_baseline_eps`` / ``sqlite_baseline_single_eps``: a bare sqlite3 loop inserting
  the same rows with the ledger's durability settings (WAL, synchronous=FULL) in
  100-row / one-row transactions, in the same run on the same disk. ``ratio`` and
  ``ratio_single`` divide the daemon's figure by its baseline.
- ``search_p95_ms_1m``: search_history latency over the socket on a workspace of
  1,000,000 events (``search_events`` says how many; --quick uses 4,000), written
  straight through the Ledger store before the daemon starts.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Daemon, closed_loop, percentile

BATCH = 100
VOCABULARY = 20_000
WORDS_PER_EVENT = 28
HANZI = (
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后"
    "小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长"
    "知民样现分将外但身些与高意进把法此实回二理美点月明"
)


def _words(rng: random.Random) -> list[str]:
    syllables = [
        "ka",
        "to",
        "ri",
        "mu",
        "sen",
        "lo",
        "pha",
        "dri",
        "qu",
        "ne",
        "vor",
        "tal",
        "is",
        "bel",
        "gu",
        "xe",
        "mon",
        "ya",
        "fre",
        "ost",
    ]
    seen: set[str] = set()
    while len(seen) < VOCABULARY:
        seen.add("".join(rng.choices(syllables, k=rng.randint(2, 4))))
    return sorted(seen)


class Corpus:
    """Deterministic event texts: Zipf-distributed pseudo-words, one event in ten Chinese."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.words = _words(self.rng)
        self.weights = list(itertools.accumulate(1 / (rank + 1) for rank in range(VOCABULARY)))

    def text(self) -> str:
        if self.rng.random() < 0.1:
            return "".join(self.rng.choices(HANZI, k=40))
        return " ".join(self.rng.choices(self.words, cum_weights=self.weights, k=WORDS_PER_EVENT))

    def query(self) -> str:
        if self.rng.random() < 0.1:
            start = self.rng.randrange(len(HANZI) - 4)
            return HANZI[start : start + 4]
        # Mid-frequency words: what a recall query looks like (rare enough to discriminate).
        return " ".join(self.rng.choice(self.words[50:5_000]) for _ in range(self.rng.randint(1, 3)))


def _append_payload(session_id: str, workspace: str, texts: list[str]) -> bytes:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "append_events",
        "params": {
            "workspace": workspace,
            "sessionId": session_id,
            "events": [{"type": "user_message", "text": t} for t in texts],
        },
    }
    return json.dumps(request).encode() + b"\n"


def _socket_eps(daemon: Daemon, corpus: Corpus, batch: int, seconds: float) -> float:
    from maka import Client

    with Client(str(daemon.socket)) as c:
        sid = c.call("open_session", {"workspace": str(daemon.workspace)})["sessionId"]
    # Pre-encode a few payloads; ids need not be unique on a closed loop.
    payloads = [
        _append_payload(sid, str(daemon.workspace), [corpus.text() for _ in range(batch)]) for _ in range(16)
    ]
    result = asyncio.run(closed_loop(str(daemon.socket), 1, seconds, lambda i: payloads[i % len(payloads)]))
    return float(result["rps"]) * batch


def _sqlite_eps(root: Path, corpus: Corpus, batch: int, seconds: float) -> float:
    """A bare insert loop with the ledger's durability settings, one commit per batch."""
    rows, elapsed = _sqlite_loop(root, corpus, batch, seconds=seconds)
    return rows / elapsed


def _sqlite_rows(root: Path, corpus: Corpus, rows: int) -> None:
    """``_sqlite_eps``'s one-row loop for a fixed number of rows (counted by callgrind)."""
    _sqlite_loop(root, corpus, 1, rows=rows)


def _sqlite_loop(
    root: Path, corpus: Corpus, batch: int, *, seconds: float = 0.0, rows: int = 0
) -> tuple[int, float]:
    """Insert ``batch`` rows a transaction for ``seconds``, or until ``rows`` are in; the
    rows inserted and the seconds it took (the set-up not counted)."""
    path = root / f"baseline-{batch}.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(
        "CREATE TABLE events (id INTEGER PRIMARY KEY, session_id TEXT, seq INTEGER,"
        " ts INTEGER, type TEXT, text TEXT, tokens INTEGER, hash TEXT)"
    )
    texts = [corpus.text() for _ in range(batch * 16)]
    seq = 0
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    while (seq < rows) if rows else (time.perf_counter() < deadline):
        batch_rows = []
        for _ in range(batch):
            seq += 1
            batch_rows.append(("s", seq, seq, "user_message", texts[seq % len(texts)], 50, "h" * 64))
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO events (session_id, seq, ts, type, text, tokens, hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
            batch_rows,
        )
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return seq, elapsed


def _build_workspace(daemon: Daemon, corpus: Corpus, events: int) -> list[str]:
    """Write ``events`` events into the daemon's (not yet started) data dir; the session ids."""
    from makad.core.types import EventInput
    from makad.store.ledger import Ledger
    from makad.store.workspaces import workspace_id

    path = daemon.workspace.resolve()
    data = daemon.data_dir / "workspaces" / workspace_id(path)
    data.mkdir(parents=True, mode=0o700)
    (data / "workspace-path").write_text(str(path), encoding="utf-8")
    ledger = Ledger(data / "ledger.sqlite3", synchronous="NORMAL")
    sessions: list[str] = []
    per_session = 2_000
    ts = 1_700_000_000_000
    try:
        for start in range(0, events, per_session):
            sid = ledger.open_session(now=ts).session_id
            sessions.append(sid)
            count = min(per_session, events - start)
            batch = [
                EventInput(
                    type="user_message" if i % 2 else "assistant_message", text=corpus.text(), ts=ts + i
                )
                for i in range(count)
            ]
            ledger.append_events(sid, batch)
            ts += count
    finally:
        ledger.close()
    return sessions


def _search_latencies(daemon: Daemon, corpus: Corpus, sessions: list[str], n: int) -> list[float]:
    from maka import Client

    samples: list[float] = []
    with Client(str(daemon.socket)) as c:
        for i in range(n):
            params: dict[str, Any] = {"workspace": str(daemon.workspace), "query": corpus.query()}
            if i % 4 == 3:
                params["sessionId"] = corpus.rng.choice(sessions)
            t0 = time.perf_counter()
            c.call("search_history", params)
            samples.append(time.perf_counter() - t0)
    return samples


def run(quick: bool) -> dict[str, Any]:
    seconds = 0.2 if quick else 3.0
    corpus = Corpus()
    out: dict[str, Any] = {"durability": "WAL, synchronous=FULL", "conns": 1, "batch_size": BATCH}
    root = Path(tempfile.mkdtemp(prefix="mkl", dir="/tmp"))
    try:
        with Daemon() as daemon:
            # Interleave daemon and baseline runs so disk noise hits both alike.
            base_batched = _sqlite_eps(root, corpus, BATCH, seconds)
            batched = _socket_eps(daemon, corpus, BATCH, seconds)
            base_single = _sqlite_eps(root, corpus, 1, seconds)
            single = _socket_eps(daemon, corpus, 1, seconds)
    finally:
        for path in root.iterdir():
            path.unlink()
        root.rmdir()
    out.update(
        {
            "batched_eps": round(batched, 1),
            "single_eps": round(single, 1),
            "sqlite_baseline_eps": round(base_batched, 1),
            "sqlite_baseline_single_eps": round(base_single, 1),
            "ratio": round(batched / base_batched, 3) if base_batched else 0.0,
            "ratio_single": round(single / base_single, 3) if base_single else 0.0,
        }
    )
    size = 4_000 if quick else 1_000_000
    daemon = Daemon()
    try:
        started = time.perf_counter()
        sessions = _build_workspace(daemon, corpus, size)
        out["search_build_s"] = round(time.perf_counter() - started, 1)
        daemon.start()
        _search_latencies(daemon, corpus, sessions, 10)  # open the workspace, warm the cache
        samples = [s * 1000 for s in _search_latencies(daemon, corpus, sessions, 50 if quick else 400)]
    finally:
        daemon.__exit__(None, None, None)
    out.update(
        {
            "search_events": size,
            "search_p50_ms": round(percentile(samples, 0.50), 3),
            "search_p95_ms_1m": round(percentile(samples, 0.95), 3),
        }
    )
    return {"ledger": out}

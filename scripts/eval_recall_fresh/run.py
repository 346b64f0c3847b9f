"""Fresh held-out check: do one-line notes typed into MEMORY.md reach the pack when the
question uses other words?

Entries come from ``eval_recall_fresh.data`` (everyday notes outside software work, written
without looking at the word bridge). Each is typed as a user types a one-liner: an empty
``## `` heading and the line. Workspaces hold the 60 entries plus 60 or 200 fillers (the
paraphrase set's made-up project facts, ``eval_recall.paraphrase``, with more made-up
project names to reach 200), targets spread among them in a fixed order. Every question
is asked in a fresh session with one ``build_context`` (no model: the default install).

Per tree and setting (``"120@1500"``: 120 entries, 1,500 tokens) it counts the targets
``shown`` in the memory segment and ``matched`` (trace ``bm25`` > 0, not room-filling). The
15 unrelated questions are asked of each workspace and the entries they match (junk) are
counted and listed. Prints JSON.

    PYTHONPATH=scripts:.:clients/python .venv/bin/python -m eval_recall_fresh.run \
        --tree old=/tmp/old_tree --tree new=. [--set second] [--missed]

``--set second`` runs ``eval_recall_fresh.second`` instead (30 notes, 10 unrelated questions).
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from eval_recall_holdout.run import Daemon, ask, memory_view, tally

from eval_recall.paraphrase import DATA, Entry, load
from maka import Client

FILLER_COUNTS = (60, 200)
BUDGETS = (1500, 4000)
MORE_PROJECTS = ("Heron", "Maple", "Onyx", "Sierra", "Topaz", "Wren", "Zephyr", "Cedar", "Lumen")


def fillers(count: int) -> list[Entry]:
    """The paraphrase set's filler facts, over more made-up projects when it runs short."""
    made = list(load().fillers)
    raw = json.loads(DATA.read_text(encoding="utf-8"))
    for i, project in enumerate(MORE_PROJECTS):
        for j, fact in enumerate(raw["fillers"]["facts"]):
            made.append(
                Entry(f"filler-x{i}-{j}", fact["title"].format(p=project), fact["content"].format(p=project))
            )
    if count > len(made):
        raise ValueError(f"only {len(made)} fillers")
    return made[:count]


def typed_file(lines: list[str]) -> str:
    """MEMORY.md with each note under an empty heading, as one-liners are typed."""
    parts = ["# Memory", ""]
    for line in lines:
        parts += ["## ", line, ""]
    return "\n".join(parts)


def layout(entries: dict[str, str], filler_count: int) -> list[tuple[str, str]]:
    """(key, text) per entry: the targets spread evenly among the fillers."""
    extra = [(f.key, f"{f.title}: {f.content}") for f in fillers(filler_count)]
    step = len(extra) // len(entries)
    rest = iter(extra)
    out: list[tuple[str, str]] = []
    for key, text in entries.items():
        out.append((key, text))
        out.extend(itertools.islice(rest, step))
    out.extend(rest)
    return out


def setup(client: Client, folder: Path, entries: list[tuple[str, str]]) -> dict[str, str]:
    (folder / "memory").mkdir(parents=True)
    (folder / "memory" / "MEMORY.md").write_text(typed_file([t for _, t in entries]), encoding="utf-8")
    ws = str(folder)
    client.call("set_settings", workspace=ws, agentReadEnabled=True, historyRecallEnabled=False)
    listed = client.call("read_state", workspace=ws, includeEntries=True)["entries"]
    by_text = {e["content"].strip(): e["id"] for e in listed}
    return {key: by_text[text] for key, text in entries}


def evaluate(client: Client, root: Path, data: Any) -> dict[str, Any]:
    found: dict[str, dict[str, int]] = {}
    missed: dict[str, list[str]] = {}
    junk: dict[str, dict[str, Any]] = {}
    for count in FILLER_COUNTS:
        entries = layout(data.ENTRIES, count)
        folder = root / f"f{count}"
        ids = setup(client, folder, entries)
        size = len(entries)
        key_of = {f"memory:{v}": k for k, v in ids.items()}
        for question, key in data.QUESTIONS:
            for budget in BUDGETS:
                shown, matched = memory_view(ask(client, str(folder), question, budget))
                ref = f"memory:{ids[key]}"
                setting = f"{size}@{budget}"
                tally(found, setting, ref, shown, matched)
                if ref not in shown:
                    missed.setdefault(setting, []).append(key)
        pulled: dict[str, list[str]] = {}
        shown_total = 0
        for query in data.UNRELATED:
            shown, matched = memory_view(ask(client, str(folder), query, 1500))
            shown_total += len(shown)
            hits = sorted(key_of[r] for r in matched if r in key_of)
            if hits:
                pulled[query] = hits
        junk[f"{size}@1500"] = {
            "matched": sum(len(v) for v in pulled.values()),
            "questionsWithJunk": len(pulled),
            "shownAll": shown_total,
            "byQuestion": pulled,
        }
    return {"found": found, "missed": missed, "unrelated": junk}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of a source tree")
    parser.add_argument("--missed", action="store_true", help="also list the entries each setting missed")
    parser.add_argument(
        "--set",
        choices=("data", "second"),
        default="data",
        help="data: the first set; second: the smaller later one",
    )
    args = parser.parse_args()
    data = importlib.import_module(f"eval_recall_fresh.{args.set}")
    report: dict[str, Any] = {}
    for spec in args.tree:
        name, _, path = spec.partition("=")
        root = Path(tempfile.mkdtemp(prefix="mkfr", dir="/tmp"))
        try:
            with (
                Daemon(Path(path).resolve(), root) as daemon,
                Client(str(daemon.socket), timeout=300) as client,
            ):
                report[name] = evaluate(client, root, data)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        if not args.missed:
            del report[name]["missed"]
            for row in report[name]["unrelated"].values():
                del row["byQuestion"]
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()

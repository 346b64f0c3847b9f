"""Memory recall on the paraphrase set: does the entry a question needs reach the pack when
the question shares no word with it?

``data/paraphrase_set.json`` holds hand-written entries of the kind people keep (tools,
preferences, conventions, people, deadlines), two or more questions per entry phrased
without the entry's words, and filler entries (a fact about each of twenty made-up
projects) that answer none of them. For each file size the entries are laid out in
workspaces of that many entries:

- 10: the target entries ten at a time (the last workspace topped up with fillers);
- 50: the targets in two halves, each topped up with fillers to 50;
- 200: every target and fillers to 200.

Each question is asked in every workspace holding its entry, as a new user's agent asks:
a fresh session, one ``build_context`` with the question and the budget, no ``include``
filter. It scores 1 when the entry is in the pack's memory segment. ``recall`` is the mean
over the questions, per size and budget (``"200@2000"``: 200 entries, 2,000 tokens).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maka import Client

DATA = Path(__file__).resolve().parent / "data" / "paraphrase_set.json"
SIZES = (10, 50, 200)
BUDGETS = (1000, 2000)
CATCH_UP_S = 600.0


@dataclass(frozen=True, slots=True)
class Entry:
    key: str
    title: str
    content: str


@dataclass(frozen=True, slots=True)
class Question:
    entry: str
    text: str


@dataclass(frozen=True, slots=True)
class ParaphraseSet:
    targets: list[Entry]
    questions: list[Question]
    fillers: list[Entry]


def load(path: Path = DATA) -> ParaphraseSet:
    raw = json.loads(path.read_text(encoding="utf-8"))
    targets = [Entry(e["key"], e["title"], e["content"]) for e in raw["entries"]]
    questions = [Question(q["entry"], q["q"]) for q in raw["questions"]]
    fillers = [
        Entry(f"filler-{i}-{j}", fact["title"].format(p=project), fact["content"].format(p=project))
        for i, project in enumerate(raw["fillers"]["projects"])
        for j, fact in enumerate(raw["fillers"]["facts"])
    ]
    known = {e.key for e in targets}
    missing = sorted({q.entry for q in questions} - known)
    if missing:
        raise ValueError(f"questions name entries that do not exist: {missing}")
    return ParaphraseSet(targets, questions, fillers)


def layouts(data: ParaphraseSet, size: int) -> list[list[Entry]]:
    """The workspaces' entries for one file size (see module doc)."""
    targets, fillers = data.targets, data.fillers
    if size <= 10:
        groups = [targets[i : i + size] for i in range(0, len(targets), size)]
    elif size < len(targets):
        half = (len(targets) + 1) // 2
        groups = [targets[:half], targets[half:]]
    else:
        groups = [list(targets)]
    out: list[list[Entry]] = []
    used = 0
    for group in groups:
        need = max(size - len(group), 0)
        if used + need > len(fillers):
            raise ValueError(f"not enough fillers for {size}-entry files")
        extra = fillers[used : used + need]
        used += need
        # Targets spread among the fillers, the same way every run.
        mixed: list[Entry] = []
        step = max(len(extra) // max(len(group), 1), 0)
        rest = iter(extra)
        for target in group:
            mixed.append(target)
            mixed.extend(itertools.islice(rest, step))
        mixed.extend(rest)
        out.append(mixed)
    return out


def wait_caught_up(client: Client) -> None:
    """With the semantic channel: until every entry written has its vector."""
    deadline = time.monotonic() + CATCH_UP_S
    while time.monotonic() < deadline:
        semantic = client.call("status").get("semantic")
        if semantic is None or semantic["state"] == "failed":
            return
        if semantic["caughtUp"]:
            return
        time.sleep(0.1)
    raise RuntimeError("the semantic channel did not catch up")


def evaluate(
    client: Client, root: Path, data: ParaphraseSet, progress: Callable[[str], None]
) -> dict[str, Any]:
    """Recall per ``"<size>@<budget>"`` over every question (see module doc)."""
    hits: dict[str, list[int]] = {}
    latencies: list[float] = []
    for size in SIZES:
        for n, entries in enumerate(layouts(data, size)):
            folder = root / f"para{size}-{n}"
            folder.mkdir(parents=True, exist_ok=True)
            ws = str(folder)
            client.call("set_settings", workspace=ws, agentReadEnabled=True)
            ids: dict[str, str] = {}
            for entry in entries:
                added = client.call("add_entry", workspace=ws, title=entry.title, content=entry.content)
                ids[entry.key] = added["entry"]["id"]
            client.call("build_context", workspace=ws, budgetTokens=500)
            wait_caught_up(client)
            for question in data.questions:
                if question.entry not in ids:
                    continue
                for budget in BUDGETS:
                    sid = client.call("open_session", workspace=ws, title="question")["sessionId"]
                    started = time.perf_counter()
                    pack = client.call(
                        "build_context", workspace=ws, sessionId=sid, query=question.text, budgetTokens=budget
                    )
                    latencies.append((time.perf_counter() - started) * 1000)
                    shown = {ref for s in pack["segments"] if s["kind"] == "memory" for ref in s["sourceIds"]}
                    hits.setdefault(f"{size}@{budget}", []).append(
                        int(f"memory:{ids[question.entry]}" in shown)
                    )
            progress(f"paraphrase: {size}-entry file {n + 1} done")
    latencies.sort()
    return {
        "entries": len(data.targets),
        "questions": len(data.questions),
        "recall": {key: round(sum(v) / len(v), 4) for key, v in hits.items()},
        "asked": {key: len(v) for key, v in hits.items()},
        "p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 3) if latencies else None,
    }


def summary_keys(sizes: Sequence[int] = SIZES, budgets: Sequence[int] = BUDGETS) -> list[str]:
    return [f"{size}@{budget}" for size in sizes for budget in budgets]

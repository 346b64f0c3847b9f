"""Near-duplicate proposals: does a rule flag the pairs that say the same thing, and only them?

``data/near_duplicate_set.json`` holds hand-written pairs (an existing entry, a new
proposal), each with a title and content. Split ``tuning``: 40 say the same thing
(reworded, shortened, or with a detail added) and 61 do not (the same topic, tool or
person, a different fact; a few negations); the candidates' thresholds were chosen on
it. Split ``check``: 10 and 10 more, written after that and before any rule was scored
on them (a threshold that only fits the tuning pairs shows here). Split ``short``: 8
and 8 texts of a few words (the others share one of their words, or negate), written
after the short-text rule was chosen on the tuning split. A rule "flags" a
pair when it would name the entry in the proposal's ``similarTo``. The shipped rule is
run through ``makad.core.canonical`` itself; the candidates are written out here, on
the same canonical form.

    PYTHONPATH=scripts:. .venv/bin/python -m eval_recall.near_duplicates [--pairs]

Prints one JSON object: per split and rule, precision, recall, the counts and (with
``--pairs``) the ids of the pairs it gets wrong.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz

from makad.core.canonical import SIMILARITY_THRESHOLD, canonical, similar_ids
from makad.core.types import Entry

DATA = Path(__file__).resolve().parent / "data" / "near_duplicate_set.json"

Side = dict[str, str]
Rule = Callable[[Side, Side], bool]


def shipped(existing: Side, proposal: Side) -> bool:
    """What the daemon does now (``similar_ids``)."""
    entry = Entry(id="e", title=existing["title"], content=existing["content"])
    return similar_ids(proposal["content"], [entry]) == ["e"]


def fuzzy_only(existing: Side, proposal: Side) -> bool:
    """The content's token_sort_ratio alone, without the short-text rule."""
    return _content(existing, proposal) >= SIMILARITY_THRESHOLD


def _content(existing: Side, proposal: Side) -> float:
    return fuzz.token_sort_ratio(canonical(existing["content"]), canonical(proposal["content"]))


def _title(existing: Side, proposal: Side) -> float:
    return fuzz.token_sort_ratio(canonical(existing["title"]), canonical(proposal["title"]))


def title_or_content(threshold: float) -> Rule:
    """The content as now, or the titles alone at ``threshold``."""
    return lambda e, p: _content(e, p) >= SIMILARITY_THRESHOLD or _title(e, p) >= threshold


def joined(threshold: float) -> Rule:
    """The content as now, or title and content as one text at ``threshold``."""

    def rule(e: Side, p: Side) -> bool:
        both = fuzz.token_sort_ratio(
            canonical(e["title"] + " " + e["content"]), canonical(p["title"] + " " + p["content"])
        )
        return _content(e, p) >= SIMILARITY_THRESHOLD or both >= threshold

    return rule


def title_and_content(title_threshold: float, content_threshold: float) -> Rule:
    """The content as now, or similar titles and content at a lower bar."""
    return lambda e, p: (
        _content(e, p) >= SIMILARITY_THRESHOLD
        or (_title(e, p) >= title_threshold and _content(e, p) >= content_threshold)
    )


RULES: dict[str, Rule] = {
    "shipped: content token_sort_ratio >= 85 or short texts sharing their words": shipped,
    "content token_sort_ratio >= 85 alone": fuzzy_only,
    "content or title >= 85": title_or_content(85),
    "content or title >= 70": title_or_content(70),
    "content or title == 100 (same canonical title)": title_or_content(100),
    "content or title+content >= 85": joined(85),
    "content or title+content >= 78": joined(78),
    "content or title+content >= 75": joined(75),
    "content or title+content >= 65": joined(65),
    "content or (title >= 70 and content >= 50)": title_and_content(70, 50),
    "content or (title >= 70 and content >= 60)": title_and_content(70, 60),
    "content or (title >= 85 and content >= 60)": title_and_content(85, 60),
}


def score(rule: Rule, pairs: list[dict[str, Any]], show: bool) -> dict[str, Any]:
    tp = fp = fn = 0
    missed: list[str] = []
    false_flags: list[str] = []
    for pair in pairs:
        flagged = rule(pair["existing"], pair["proposal"])
        if flagged and pair["duplicate"]:
            tp += 1
        elif flagged:
            fp += 1
            false_flags.append(pair["id"])
        elif pair["duplicate"]:
            fn += 1
            missed.append(pair["id"])
    result: dict[str, Any] = {
        "precision": round(tp / (tp + fp), 3) if tp + fp else None,
        "recall": round(tp / (tp + fn), 3) if tp + fn else None,
        "flagged_duplicates": tp,
        "false_flags": fp,
        "missed": fn,
    }
    if show:
        result["missed_ids"] = missed
        result["false_flag_ids"] = false_flags
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", action="store_true", help="name the pairs each rule gets wrong")
    args = parser.parse_args()
    pairs = json.loads(DATA.read_text(encoding="utf-8"))["pairs"]
    report: dict[str, Any] = {}
    for split in ("tuning", "check", "short"):
        mine = [p for p in pairs if p["split"] == split]
        report[split] = {
            "pairs": len(mine),
            "duplicates": sum(1 for p in mine if p["duplicate"]),
            "rules": {name: score(rule, mine, args.pairs) for name, rule in RULES.items()},
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

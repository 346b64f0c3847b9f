"""The near-duplicate evaluation set (scripts/eval_recall/data/near_duplicate_set.json)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[2] / "scripts")]
from eval_recall import near_duplicates  # noqa: E402


def test_the_set_has_its_splits_and_unique_ids() -> None:
    """Tuning holds 40 duplicates and 61 others, check 10 and 10, short 8 and 8; every id is unique."""
    pairs = json.loads(near_duplicates.DATA.read_text(encoding="utf-8"))["pairs"]
    assert len({p["id"] for p in pairs}) == len(pairs)
    counts = {(p["split"], p["duplicate"]) for p in pairs}
    assert counts == {(split, dup) for split in ("tuning", "check", "short") for dup in (True, False)}
    assert sum(1 for p in pairs if p["split"] == "tuning" and p["duplicate"]) == 40
    assert sum(1 for p in pairs if p["split"] == "tuning" and not p["duplicate"]) == 61
    assert sum(1 for p in pairs if p["split"] == "check") == 20
    assert sum(1 for p in pairs if p["split"] == "short" and p["duplicate"]) == 8
    assert sum(1 for p in pairs if p["split"] == "short") == 16


def test_scoring_counts_flags_and_misses() -> None:
    """The shipped rule flags a respelled duplicate and not an unrelated entry; the score
    counts a miss, a false flag and a hit where they are."""
    same = {"title": "Deploys", "content": "We deploy on Tuesdays."}
    pairs = [
        {
            "id": "a",
            "duplicate": True,
            "existing": same,
            "proposal": {"title": "x", "content": "we DEPLOY on tuesdays"},
        },
        {
            "id": "b",
            "duplicate": True,
            "existing": same,
            "proposal": {"title": "x", "content": "Backups run nightly."},
        },
        {
            "id": "c",
            "duplicate": False,
            "existing": same,
            "proposal": {"title": "x", "content": "We deploy on Tuesday."},
        },
    ]
    result = near_duplicates.score(near_duplicates.shipped, pairs, show=True)
    assert (result["flagged_duplicates"], result["missed"], result["false_flags"]) == (1, 1, 1)
    assert result["missed_ids"] == ["b"] and result["false_flag_ids"] == ["c"]

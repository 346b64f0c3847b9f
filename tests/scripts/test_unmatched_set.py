"""The unmatched-memory evaluation set (scripts/eval_recall/data/unmatched_set.json)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from makad.core.cjk import ENGLISH_STOP_WORDS

sys.path[:0] = [str(Path(__file__).resolve().parents[2] / "scripts")]
from eval_recall import unmatched  # noqa: E402


def test_no_question_shares_a_word_with_its_entry() -> None:
    """Each question names an entry of the set and shares no word (nor its first four
    letters, so no stemmed form) with it, stop words aside."""
    data = json.loads(unmatched.DATA.read_text(encoding="utf-8"))
    entries = {e["key"]: e for e in data["entries"]}
    assert len(entries) == 120 and len(data["questions"]) == 40

    def words(text: str) -> set[str]:
        return set(re.findall(r"\w+", text.lower())) - ENGLISH_STOP_WORDS

    for question in data["questions"]:
        entry = entries[question["entry"]]
        theirs = words(entry["title"] + " " + entry["content"])
        shared = {
            w for w in words(question["q"]) for t in theirs if w == t or (w[:4] == t[:4] and len(w) > 3)
        }
        assert not shared, (question, shared)


def test_the_typed_file_has_a_heading_per_entry_and_no_metadata() -> None:
    """The MEMORY.md the evaluation writes is hand-typed entries only."""
    text = unmatched.typed_file(
        [{"title": "Editor", "content": "Emacs."}, {"title": "Shell", "content": "fish"}]
    )
    assert text.count("\n## ") == 2 and "maka-memory" not in text

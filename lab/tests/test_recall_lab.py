"""lab/recall_lab.py: the semantic channel compares what lines say, not who says them."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "lab")]

from recall_lab import masked  # noqa: E402


def test_masking_drops_the_label_and_every_speaker_name() -> None:
    """The line's label and the speakers' names (possessive too) go; other capitalized words stay."""
    names = ["Ann Lee", "Ann", "Bob"]
    assert masked("Ann Lee: Bob's dog met Ann in Paris", names) == "dog met in Paris"
    assert masked("What does Ann enjoy in Annecy?", names) == "What does enjoy in Annecy?"

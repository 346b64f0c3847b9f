"""lab/dense_lab.py: contextual event texts put the end of the session's previous turn first."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "lab")]

from dense_lab import contextual  # noqa: E402


def test_contextual_text_is_the_previous_turns_tail_then_the_event_in_the_same_session_only() -> None:
    """The previous turn (label stripped, last N characters) leads; a session's first turn stands alone; names go."""
    flat = [
        SimpleNamespace(session_id="s1", text="Ann: We hiked the Dolomites in June"),
        SimpleNamespace(session_id="s1", text="Bob: Yes, Ann, we went twice!"),
        SimpleNamespace(session_id="s2", text="Bob: New session here"),
    ]
    assert contextual(flat, ["Ann", "Bob"], 12) == [
        "We hiked the Dolomites in June",
        "ites in June Yes, we went twice!",
        "New session here",
    ]
    assert contextual(flat, ["Ann", "Bob"], 0)[1] == "Yes, we went twice!"

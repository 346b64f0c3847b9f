"""docs/RUNNING.md lists every flag `makad --help` offers, in its usage block and its table."""

from __future__ import annotations

import re
from pathlib import Path

from makad.settings import build_parser

RUNNING = Path(__file__).resolve().parents[1] / "docs" / "RUNNING.md"


def test_every_makad_flag_is_in_running_md() -> None:
    """Each long option of makad's parser (but --help) appears in RUNNING.md's usage block
    and, settings only, in the settings table."""
    text = RUNNING.read_text(encoding="utf-8")
    usage = text.split("## The daemon", 1)[1].split("```", 2)[1]
    table = {row.split("|")[2].strip(" `") for row in text.splitlines() if row.startswith("| ")}
    flags = {
        option
        for action in build_parser()._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }
    assert "--socket" in flags
    assert sorted(f for f in flags if not re.search(rf"\[{re.escape(f)}[\] ]", usage)) == []
    assert sorted(f for f in flags - {"--version"} if f not in table) == []

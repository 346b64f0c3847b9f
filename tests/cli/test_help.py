"""Every `maka` command's --help, as the real CLI prints it."""

from __future__ import annotations

import argparse
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from maka.cli import build_parser

SECTION_HEADINGS = ("positional arguments:", "options:", "optional arguments:")


def command_paths(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and sub-command of ``parser``, as the words that name it."""
    found: list[tuple[str, ...]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((*path, name))
                found.extend(command_paths(sub, (*path, name)))
    return found


def description_of(help_text: str) -> str:
    """The paragraph between the usage and the first section of an argparse --help."""
    paragraphs = [p.strip() for p in help_text.split("\n\n") if p.strip()]
    assert paragraphs and paragraphs[0].startswith("usage: maka"), help_text
    second = paragraphs[1] if len(paragraphs) > 1 else ""
    return "" if second.startswith(SECTION_HEADINGS) else second


def run_help(path: tuple[str, ...]) -> tuple[tuple[str, ...], subprocess.CompletedProcess[str]]:
    result = subprocess.run(
        [sys.executable, "-m", "maka.cli", *path, "--help"], capture_output=True, text=True, timeout=60
    )
    return path, result


def test_every_command_help_has_a_description() -> None:
    """`maka CMD --help` shows a description under the usage line for every command and action."""
    paths = command_paths(build_parser())
    assert {("status",), ("ping",), ("memory", "pin"), ("mcp",)} <= set(paths)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(run_help, paths))
    missing = []
    for path, result in results:
        assert result.returncode == 0, (path, result.stderr)
        if len(description_of(result.stdout)) < 20:
            missing.append(" ".join(path))
    assert missing == [], f"commands whose --help has no description: {missing}"


def test_description_check_sees_a_missing_description() -> None:
    """The check above reports a help text that goes straight from usage to the options."""
    bare = "usage: maka ping [-h] [--json]\n\noptions:\n  -h, --help  show this help\n"
    assert description_of(bare) == ""
    assert description_of(bare.replace("\n\noptions", "\n\nChecks the daemon.\n\noptions")) == (
        "Checks the daemon."
    )

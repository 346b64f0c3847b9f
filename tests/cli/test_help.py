"""Every `maka` command's --help, as the real CLI prints it."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import subprocess
import sys

import pytest

from maka.cli import build_parser, main

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


def render_help(path: tuple[str, ...]) -> tuple[int, str]:
    """The exit code and stdout of ``maka PATH --help``, run through the CLI's own ``main``."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = main([*path, "--help"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue()


@pytest.mark.slow
def test_every_command_help_has_a_description(monkeypatch: pytest.MonkeyPatch) -> None:
    """`maka CMD --help` shows a description under the usage line for every command and action,
    quoting as the terminal shows it (`x`, never reStructuredText's ``x``)."""
    monkeypatch.setenv("COLUMNS", "100")
    paths = command_paths(build_parser())
    assert {("status",), ("ping",), ("memory", "pin"), ("mcp",)} <= set(paths)
    missing = []
    double_backticks = []
    for path in paths:
        code, text = render_help(path)
        assert code == 0, (path, text)
        if len(description_of(text)) < 20:
            missing.append(" ".join(path))
        if "``" in text:
            double_backticks.append(" ".join(path))
    assert missing == [], f"commands whose --help has no description: {missing}"
    assert double_backticks == [], f"commands whose --help quotes with ``: {double_backticks}"


def test_help_rendered_in_process_is_what_the_command_prints() -> None:
    """The help the check above reads is the text a `maka ... --help` process prints."""
    path = ("memory", "pin")
    env = {**os.environ, "COLUMNS": "100"}
    result = subprocess.run(
        [sys.executable, "-m", "maka.cli", *path, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", "100")
        assert render_help(path) == (0, result.stdout)


def test_description_check_sees_a_missing_description() -> None:
    """The check above reports a help text that goes straight from usage to the options."""
    bare = "usage: maka ping [-h] [--json]\n\noptions:\n  -h, --help  show this help\n"
    assert description_of(bare) == ""
    assert description_of(bare.replace("\n\noptions", "\n\nChecks the daemon.\n\noptions")) == (
        "Checks the daemon."
    )


def test_every_positional_argument_is_named_in_capitals() -> None:
    """Each command's positional arguments read as placeholders (METHOD, SHELL, QUERY …)
    in its usage line and errors, never as a lower-case name or a {choice,list}."""
    lower = []
    parsers = [(("maka",), build_parser())]
    while parsers:
        path, parser = parsers.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(((*path, name), sub) for name, sub in action.choices.items())
            elif not action.option_strings and not isinstance(action, argparse._SubParsersAction):
                shown = action.metavar or action.dest
                if not isinstance(shown, str) or shown != shown.upper():
                    lower.append((" ".join(path), shown))
    assert lower == []

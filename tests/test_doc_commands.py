"""The shell commands in the docs run on the machine the README asks for: Python 3.11+ as
python3, where no bare ``python`` need exist, and the project's own packages in .venv."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from maka.cli import build_parser
from maka.cli.common import parse_arguments
from tests.test_doc_links import DOCS, ROOT

_MD = MarkdownIt("commonmark")
# A command word `python` (after a line start, env assignments, `|`, `&&` or `;`).
_BARE_PYTHON = re.compile(r"(?:^|[|;&]\s*|^(?:\w+=\S*\s+)+)python(?=\s)")


def shell_lines(path: Path) -> list[str]:
    """The lines of the sh/bash/shell fenced blocks of ``path``."""
    found: list[str] = []
    for token in _MD.parse(path.read_text(encoding="utf-8")):
        if token.type == "fence" and token.info.strip() in ("sh", "bash", "shell", "console"):
            found.extend(line.strip() for line in token.content.splitlines())
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_shell_block_runs_a_bare_python(doc: Path) -> None:
    """A shell block names the interpreter as .venv/bin/python (or python3), never `python`,
    which a fresh Debian or Ubuntu does not have."""
    bare = [line for line in shell_lines(doc) if _BARE_PYTHON.search(line)]
    assert bare == [], f"{doc.relative_to(ROOT)}: {bare}"


# The changelog records past behaviour; it gives no instructions.
INSTRUCTING = [doc for doc in DOCS if doc.name != "CHANGELOG.md"]


@pytest.mark.parametrize("doc", INSTRUCTING, ids=lambda p: str(p.relative_to(ROOT)))
def test_npm_pack_comes_after_npm_ci(doc: Path) -> None:
    """Every `npm pack` the docs give for the Node client installs the dev dependencies it
    builds with first (`npm ci &&`): in a fresh clone it fails without them."""
    text = " ".join(doc.read_text(encoding="utf-8").split())
    alone = [m.start() for m in re.finditer(r"(?<!npm ci && )npm pack\b", text)]
    assert alone == [], f"{doc.relative_to(ROOT)}: npm pack without npm ci at {alone}"


_OPERATORS = {"|", "||", "&", "&&", ";", "(", ")", "<", ">", ">>", "2>", "&>"}


def maka_commands(path: Path) -> list[list[str]]:
    """Each `maka …` command of the shell blocks of ``path`` as its words (after a pipe, `&&`,
    `;` or `$(`; a line ending in a backslash joined to the next)."""
    text = "\n".join(shell_lines(path)).replace("\\\n", " ")
    found: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        line = re.sub(r"\s\d+>", " >", line.replace("$(", "; "))  # `2> log`: no word of the command
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        segment: list[str] = []
        for word in [*lexer, ";"]:
            if word in _OPERATORS or set(word) <= set("|&;()<>"):
                if segment[:1] == ["maka"]:
                    found.append(segment[1:])
                segment = []
            else:
                segment.append(word)
    return found


@pytest.mark.parametrize("doc", INSTRUCTING, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_maka_command_the_docs_show_parses(doc: Path) -> None:
    """Every `maka …` command in a shell block of the docs is one `maka` accepts as written: its
    command, action, options and choices exist (a renamed option or a typo in a doc is a usage
    error the reader would hit)."""
    refused = []
    for argv in maka_commands(doc):
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                parse_arguments(build_parser(), argv)
        except SystemExit as exc:
            if exc.code not in (0, None):
                refused.append(f"maka {shlex.join(argv)}: {err.getvalue().strip().splitlines()[-1:]}")
    assert refused == [], f"{doc.relative_to(ROOT)}: {refused}"


def test_the_maka_commands_of_the_readme_and_cli_doc_are_found() -> None:
    """The scan above sees the commands it is meant to check (in a pipe, after `&&`, inside
    `$(…)`), so an empty list is no silent pass."""
    readme = maka_commands(ROOT / "README.md")
    assert ["status"] in readme and ["--version"] in readme
    cli = maka_commands(ROOT / "docs" / "CLI.md")
    assert ["memory", "tidy", "--import", "-y"] in cli and ["sessions"] in cli

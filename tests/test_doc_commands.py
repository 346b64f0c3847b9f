"""The shell commands in the docs run on the machine the README asks for: Python 3.11+ as
python3, where no bare ``python`` need exist, and the project's own packages in .venv."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

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

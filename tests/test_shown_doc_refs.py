"""What users are shown without the repository at hand: a pip or pipx install ships no docs/,
so a text shown to them names a doc as makad's docs/X.md, after saying the essential itself."""

from __future__ import annotations

import argparse
import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

from maka.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
# A docs/ path not introduced as the project's own.
BARE_DOC = re.compile(r"(?<!makad's )(?<![\w/.])docs/[A-Z]+\.md")


def help_texts(parser: argparse.ArgumentParser) -> Iterator[str]:
    """Every subcommand's full --help text, the top level's included."""
    yield parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from help_texts(sub)


def shown_strings(path: Path) -> Iterator[str]:
    """The string constants of a module that are not docstrings (messages, help, settings)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.value


def test_help_texts_name_docs_as_the_projects() -> None:
    """No `maka … --help` points at a bare docs/X.md, which an installed package does not hold."""
    flat = [" ".join(text.split()) for text in help_texts(build_parser())]
    assert [m for text in flat for m in BARE_DOC.findall(text)] == []
    assert any("makad's docs/MCP.md" in text for text in flat)


def test_mcp_help_says_how_to_add_the_server_to_a_host() -> None:
    """`maka mcp --help` shows the command line a host runs, and Claude Code's one-liner."""
    mcp = next(t for t in help_texts(build_parser()) if t.startswith("usage: maka mcp"))
    flat = " ".join(mcp.split())
    assert "claude mcp add maka -- maka mcp --workspace" in flat
    assert '"command": "maka", "args": ["mcp", "--workspace"' in flat


def test_messages_and_settings_name_docs_as_the_projects() -> None:
    """Messages of the CLI, the bridge and the daemon (not docstrings) never point at a bare
    docs/X.md; neither does the OpenRPC document clients read."""
    sources = [*(ROOT / "makad").rglob("*.py"), *(ROOT / "clients" / "python" / "maka").rglob("*.py")]
    found = {
        f"{path.relative_to(ROOT)}: {m}"
        for path in sources
        for text in shown_strings(path)
        for m in BARE_DOC.findall(" ".join(text.split()))
    }
    openrpc = json.dumps(json.loads((ROOT / "protocol" / "openrpc.json").read_text(encoding="utf-8")))
    found |= {f"openrpc.json: {m}" for m in BARE_DOC.findall(openrpc)}
    assert found == set()

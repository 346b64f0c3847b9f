"""Every relative link in the repository's Markdown docs points at a file that exists, and
every ``#anchor`` into a Markdown file at one of its headings (GitHub's slugs)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        ROOT / "lab" / "README.md",
        ROOT / "protocol" / "PROTOCOL.md",
        ROOT / "clients" / "python" / "README.md",
        ROOT / "clients" / "node" / "README.md",
        *(ROOT / "docs").glob("*.md"),
    ]
)
_MD = MarkdownIt("commonmark").enable("table")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, https:, mailto: …


def _inline_text(children: list[Token]) -> str:
    return "".join(c.content for c in children if c.type in ("text", "code_inline"))


def anchors(path: Path) -> set[str]:
    """The ids GitHub gives the headings of ``path``: lowercased, punctuation dropped,
    spaces to hyphens, a repeated slug suffixed ``-1``, ``-2`` …"""
    tokens = _MD.parse(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found: set[str] = set()
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        text = _inline_text(tokens[i + 1].children or [])
        slug = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(path: Path) -> Iterator[str]:
    """Every link target in ``path`` outside code (inline links and images)."""
    for token in _MD.parse(path.read_text(encoding="utf-8")):
        for child in token.children or []:
            if child.type == "link_open":
                yield str(child.attrs["href"])
            elif child.type == "image":
                yield str(child.attrs["src"])


def broken(path: Path) -> list[str]:
    """The relative links of ``path`` that name a missing file or a missing heading."""
    problems = []
    for target in links(path):
        if _EXTERNAL.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / unquote(file_part)).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and unquote(anchor) not in anchors(dest):
            problems.append(f"{target}: no heading #{anchor} in {dest.name}")
    return problems


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path) -> None:
    """Each relative link of the doc names an existing file, and an existing heading when it has an anchor."""
    assert doc.exists()
    assert broken(doc) == []


def test_a_missing_file_and_a_missing_heading_are_both_reported(tmp_path: Path) -> None:
    """The checker itself: a link to a file that is not there and an anchor no heading has both fail."""
    (tmp_path / "other.md").write_text("# Other\n\n## The `@user` level (see)\n", encoding="utf-8")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Doc\n\n[ok](other.md#the-user-level-see) [gone](gone.md) [bad](other.md#nope) "
        "[self](#doc) [web](https://example.com/x.md) `[code](nowhere.md)`\n",
        encoding="utf-8",
    )
    assert broken(doc) == ["gone.md: no such file", "other.md#nope: no heading #nope in other.md"]


def test_repeated_headings_get_numbered_slugs(tmp_path: Path) -> None:
    """Two headings with the same text are ``#x`` and ``#x-1``, as GitHub numbers them."""
    doc = tmp_path / "doc.md"
    doc.write_text("# X\n\n## X\n\n## Y: z!\n", encoding="utf-8")
    assert anchors(doc) == {"x", "x-1", "y-z"}

"""Where sections start is found without parsing markdown where no parse can change the
answer: a chunk with no ``## `` line but its own anchored heading, or one made only of
headings, blank lines, metadata comments and paragraph text. The answer is the one
markdown-it gives on every chunk."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core import memory_format
from makad.core.entry_text import H2, block_tokens
from makad.core.memory_format import parse, render

_LINES = [
    "## a",
    "##",
    "## ",
    "   ## b",
    "    ## c",
    "\t## d",
    "\ufeff## e",
    "\ufeff\ufeff## f",
    "# h1",
    "### h3",
    "####### seven",
    "#tag",
    "text",
    "Ünïcode text",
    "1. item",
    "- item",
    "  - nested",
    "* star",
    "+ plus",
    "> quote",
    "```",
    "~~~",
    "    code",
    "<div>",
    "<!-- open",
    "-->",
    "<!-- maka-memory: id=0123456789abcdef -->",
    "<!-- maka-memory: id=",
    "---",
    "===",
    "",
    "   ",
    "\t",
    "\u00a0nbsp",
    "[ref]: /url",
    "| a | b |",
    "\x00nul",
]


def plain_heading_lines(bodies: list[str]) -> list[int]:
    """Every chunk between anchored headings parsed with markdown-it."""
    anchored = [
        i for i, body in enumerate(bodies) if H2.match(body) and memory_format._comment_follows(bodies, i)
    ]
    found = set(anchored)
    for start, end in pairwise(sorted({0, *anchored, len(bodies)})):
        found.update(start + line for line in memory_format._top_level_h2(bodies[start:end]))
    return sorted(found)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_LINES), max_size=40))
def test_section_starts_are_what_markdown_it_says(bodies: list[str]) -> None:
    """Whatever the lines, the sections start where parsing every chunk says."""
    assert memory_format._heading_lines(bodies) == plain_heading_lines(bodies)


def _count_parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    parses: list[int] = []

    def counting(lines: Any, env: Any = None) -> Any:
        parses.append(len(lines))
        return block_tokens(lines, env)

    monkeypatch.setattr(memory_format, "block_tokens", counting)
    return parses


def test_thirty_thousand_empty_headings_are_read_without_a_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of 32k ``## `` lines is 32k sections, found without markdown-it."""
    parses = _count_parses(monkeypatch)
    text = "## \n" * 32_768
    doc = parse(text)
    assert len(doc.sections) == 32_768
    assert render(doc) == text
    assert parses == []


def test_a_daemon_written_file_is_read_without_a_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries each anchored by their metadata comment, content with lists and fences
    included, need no parse: no other ``## `` line is there to classify."""
    parses = _count_parses(monkeypatch)
    text = "# Maka Memory\n\n" + "".join(
        f"## Entry {i}\n<!-- maka-memory: id={i:016x} -->\n- a list\n```\ncode\n```\n\n" for i in range(2_000)
    )
    assert [section.entry.id for section in parse(text).sections] == [f"{i:016x}" for i in range(2_000)]
    assert parses == []


def test_lines_of_dashes_are_read_without_a_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """100k lines of ``-`` (empty list items) hold no ``## `` line: nothing to parse."""
    parses = _count_parses(monkeypatch)
    doc = parse("-\n" * 100_000)
    assert doc.sections == ()
    assert parses == []


def test_a_heading_inside_a_fence_still_takes_a_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``## `` line that a fence may hide is still classified by markdown-it."""
    parses = _count_parses(monkeypatch)
    doc = parse("# Notes\n\n```\n## not an entry\n```\n\n## Entry\nbody\n")
    assert [section.entry.title for section in doc.sections] == ["Entry"]
    assert parses == [8]

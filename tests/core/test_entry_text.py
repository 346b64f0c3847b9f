"""Entry content in a memory file: closed so it never changes how the rest parses, escaped invisibly."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from makad.core.entry_text import escape, join_content, markdown, prepare, unescape
from makad.core.memory_format import entries, new_document, parse, render, upsert
from makad.core.types import Entry

# Every CommonMark block construct that can be left open, plus what interacts with them.
_BLOCK_PIECES = st.sampled_from(
    [
        "```",
        "````",
        "~~~",
        "~~~~~",
        "```py",
        "  ```",
        "<pre>",
        "</pre>",
        "<PRE class=x>",
        "<script>",
        "<style>",
        "<textarea>",
        "<!--",
        "-->",
        "<?php",
        "?>",
        "<!DOCTYPE html",
        "<![CDATA[",
        "]]>",
        "<details>",
        "</details>",
        "<div>",
        "<div class='x'>",
        "<custom-tag>",
        "</span>",
        "[foo]: /url",
        "[foo]:",
        "[foo]",
        " [bar]: <x> 't'",
        "> ",
        ">",
        "- ",
        "* ",
        "1. ",
        "    ",
        "\t",
        "## ",
        "##",
        "\\## ",
        "\\\\## ",
        "# ",
        "### ",
        "---",
        "===",
        "<!-- maka-memory: id=x -->",
        "<!-- maka-memory: ",
        "\n",
        "\n\n",
        "\r\n",
        " ",
        "text",
        "日本",
    ]
)
_CONTENT = st.lists(st.one_of(_BLOCK_PIECES, st.text(max_size=6)), max_size=30).map("".join)
_USER_SECTION = "## User note\nbody typed by the user\n"


def _written(content: str, *more: Entry) -> str:
    doc = upsert(new_document(), Entry(id="daemon", title="Agent", content=content))
    for entry in more:
        doc = upsert(doc, entry)
    return render(doc)


@settings(max_examples=400, deadline=None)
@given(_CONTENT, st.sampled_from(["", "\n", "\n\n"]))
@example("```python\nprint(1)", "")
@example("<pre>\nx", "")
@example("<details>\n<summary>s</summary>", "")
@example("<!-- never closed", "")
@example("~~~~\ncode\n~~~", "")
def test_a_users_section_after_daemon_content_is_its_own_entry(content: str, gap: str) -> None:
    """For any content the daemon writes, a `## ` section the user appends stays its own entry."""
    text = _written(content) + gap + _USER_SECTION
    parsed = entries(parse(text))
    assert [e.title for e in parsed] == ["Agent", "User note"]
    assert parsed[0].content == prepare(content).content
    assert parsed[1].content == "body typed by the user"


@settings(max_examples=200, deadline=None)
@given(_CONTENT)
def test_a_users_section_between_daemon_entries_is_its_own_entry(content: str) -> None:
    """A `## ` section typed between two daemon entries splits from the one above it."""
    text = _written(content, Entry(id="next", title="Next", content="after"))
    head, sep, tail = text.rpartition("## Next\n")
    parsed = entries(parse(head + _USER_SECTION + sep + tail))
    assert [e.title for e in parsed] == ["Agent", "User note", "Next"]


@settings(max_examples=300, deadline=None)
@given(_CONTENT)
def test_prepare_is_idempotent_and_defines_no_references(content: str) -> None:
    """Prepared content prepares to itself, and the written section defines no link references."""
    prepared = prepare(content)
    assert prepare(prepared.content) == prepared
    env: dict[str, object] = {}
    markdown().parse(_written(content), env)
    assert not env.get("references")


@settings(max_examples=300, deadline=None)
@given(_CONTENT)
def test_escaping_is_invisible_to_readers(content: str) -> None:
    """What the daemon escapes on disk, the reader unescapes: content reads back as stored."""
    prepared = prepare(content)
    assert unescape(prepared.lines) == (prepared.content.split("\n") if prepared.content else [])


_PLAIN_LINE = st.one_of(
    st.sampled_from(
        [
            "## heading",
            "##",
            "\\## escaped",
            "\\\\## twice",
            "   ## indented",
            "text",
            "- item",
            "> quote",
            "    code",
            "### three",
            "#",
            "",
        ]
    ),
    st.text(alphabet="abc #\\", max_size=10),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PLAIN_LINE, min_size=1, max_size=12))
def test_content_with_heading_lines_reads_back_exactly(lines: list[str]) -> None:
    """Content that leaves nothing open reads back exactly as given, `## ` lines included."""
    content = join_content(lines)
    assert prepare(content).content == content
    assert [e.content for e in entries(parse(_written(content)))] == [content]


@pytest.mark.parametrize(
    ("content", "closer"),
    [
        ("```py\ncode", "```"),
        ("````\n```\ncode", "````"),
        ("~~~~~\ncode\n~~~", "~~~~~"),
        ("<pre>\nx", "</pre>"),
        ("<SCRIPT>\nx", "</script>"),
        ("<style>\nx", "</style>"),
        ("<textarea>\nx", "</textarea>"),
        ("<!-- c", "-->"),
        ("<?php x", "?>"),
        ("<!DOCTYPE x", ">"),
        ("<![CDATA[ x", "]]>"),
    ],
)
def test_blocks_left_open_get_their_closer(content: str, closer: str) -> None:
    """Fences and marker-ended HTML blocks are closed with their own closing line."""
    prepared = prepare(content)
    assert prepared.content == f"{content}\n{closer}"
    assert not prepared.blank_after


@pytest.mark.parametrize(
    "content",
    ["<div>\nx", "<details>\n<summary>s</summary>", "</details>", "<custom-tag>", "text\n\n<div class='a'>"],
)
def test_blank_line_html_blocks_get_a_blank_line_after_the_section(content: str) -> None:
    """HTML blocks only a blank line ends keep their content; the section ends with a blank line."""
    prepared = prepare(content)
    assert prepared.content == content and prepared.blank_after
    assert _written(content).endswith("\n\n")


def test_link_reference_definitions_are_neutralized() -> None:
    """A definition in content would apply to the user's text: its `[` is escaped."""
    assert (
        prepare("[foo]: https://evil.example\nsee [foo]").content
        == "\\[foo]: https://evil.example\nsee [foo]"
    )
    assert prepare("> [a]: /x").content == "> \\[a]: /x"
    assert prepare("[a]: /1\n\n[a]: /2").content == "\\[a]: /1\n\n\\[a]: /2"


def test_heading_lines_are_escaped_on_disk_only() -> None:
    """`## ` and already-escaped `\\## ` lines get one more backslash; fenced ones are left alone."""
    lines = ["## a", "\\## b", "```", "## c", "```"]
    assert escape(lines) == ["\\## a", "\\\\## b", "```", "## c", "```"]
    assert unescape(["\\## a", "\\\\## b", "```", "## c", "```"]) == lines


def test_anchored_heading_inside_a_fence_is_escaped() -> None:
    """A fenced `## ` line followed by a metadata comment would start a section: it is escaped too."""
    content = "```\n## x\n<!-- maka-memory: id=z -->\n```"
    assert escape(content.split("\n")) == ["```", "\\## x", "<!-- maka-memory: id=z -->", "```"]
    assert [e.content for e in entries(parse(_written(content)))] == [content]


def test_plain_content_skips_the_parser() -> None:
    """Content with no markup character is stored as its normalised lines."""
    assert prepare("  \r\nline one\r\nline two  \n\n").content == "line one\nline two  "


def test_titles_ending_in_a_hash_read_back() -> None:
    """A title ending in `#` gets a closing sequence so the `#` is not taken as one."""
    for title in ("C#", "issue #", "#", "a # #"):
        doc = upsert(new_document(), Entry(id="t", title=title, content="x"))
        assert entries(parse(render(doc)))[0].title == title

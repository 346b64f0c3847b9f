"""Lines above MEMORY.md's first entry: which are stray, which can go, and taking them out."""

from __future__ import annotations

from makad.core.canonical import content_hash
from makad.core.outside_text import plan, stray_lines, without_lines


def digest(content: str) -> str:
    return content_hash(content)


def test_stray_lines_skip_title_blanks_and_comments() -> None:
    """The title, blank lines and comments (also over several lines) are expected there."""
    preamble = "# Title\n\n<!-- one\ntwo -->\n- a bullet\ntext <!-- c --> after\n<!-- only -->\n"
    assert stray_lines(preamble) == [5, 6]


def test_a_bullet_goes_with_its_continuation_lines_and_nothing_else() -> None:
    """A known bullet takes its indented continuation with it (a blank line between them
    too); an unknown bullet, prose and the lines of other bullets stay."""
    preamble = "# T\n\n- known fact\n\n  more of it\n- other fact\nprose\n"
    known = {digest("known fact\nmore of it"): ("memory", "e1")}
    planned = plan(preamble, known, digest)
    assert [(line.line, line.id) for line in planned.removable] == [(3, "e1"), (5, "e1")]
    assert [line.line for line in planned.kept] == [6, 7]


def test_matching_is_by_canonical_content() -> None:
    """Case and spacing do not hide a memory that is already there; a checkbox is no part of it."""
    planned = plan(
        "- [x]  Deploys ON   Tuesdays\n", {digest("deploys on tuesdays"): ("pending", "p")}, digest
    )
    assert [line.where for line in planned.removable] == ["pending"]


def test_without_lines_keeps_endings_and_merges_the_blank_lines_left_doubled() -> None:
    """Removed lines leave no run of blank lines behind; other lines keep their endings."""
    preamble = "# T\r\n\r\n- a\r\n- b\r\n\r\nkeep\r\n\r\n"
    assert without_lines(preamble, {3, 4}) == "# T\r\n\r\nkeep\r\n\r\n"
    assert without_lines("- a\n\n# T\n", {1}) == "# T\n"
    assert without_lines("# T\n\n- a\n", {3}) == "# T\n\n"

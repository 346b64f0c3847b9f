"""The memory-file warnings, as pure functions of the text read (no daemon)."""

from __future__ import annotations

from makad.core.file_warnings import MAX_LINE_WARNINGS, misplaced, not_utf8, outside_entries


def cp1252_lines(count: int) -> str:
    """A file whose first ``count`` lines hold a byte that is not UTF-8, read as the daemon reads it."""
    raw = b"".join(b"caf\xe9 %d\n" % n for n in range(count)) + b"fine\n"
    return raw.decode("utf-8", "surrogateescape")


def test_valid_utf8_warns_nothing() -> None:
    """Text that decoded as UTF-8 (or no text at all) gives no warning."""
    assert not_utf8("caf\u00e9\n", "MEMORY.md") == []
    assert not_utf8(None, "MEMORY.md") == []


def test_each_undecodable_line_is_named_then_the_rest_summed_up() -> None:
    """Up to the cap one warning per line, with its number; one more counts the rest."""
    found = not_utf8(cp1252_lines(MAX_LINE_WARNINGS + 3), "MEMORY.md")
    assert [w.line for w in found] == [*range(1, MAX_LINE_WARNINGS + 1), None]
    assert all(w.kind == "not_utf8" for w in found)
    assert "3 more lines" in found[-1].message


def test_another_file_gets_one_warning_naming_its_lines() -> None:
    """per_line=False: a single warning without a line, listing the lines in its message."""
    (only,) = not_utf8(cp1252_lines(2), "PENDING.md", per_line=False)
    assert only.line is None and "PENDING.md" in only.message and "at lines 1, 2:" in only.message


def test_counts_of_undecodable_lines_read_as_words() -> None:
    """One line is "line 1" and one more is "1 more line that is", never "line(s)"."""
    (only,) = not_utf8(cp1252_lines(1), "PENDING.md", per_line=False)
    assert "at line 1:" in only.message
    found = not_utf8(cp1252_lines(MAX_LINE_WARNINGS + 1), "MEMORY.md")
    assert "has 1 more line that is not valid UTF-8" in found[-1].message
    assert not any("(s)" in w.message for w in [only, *found])


def test_misplaced_names_each_root_file_found() -> None:
    """One misplaced_file warning per file found at the workspace's top, saying where it belongs."""
    found = misplaced(["MEMORY.md"])
    assert [w.kind for w in found] == ["misplaced_file"]
    assert "memory/MEMORY.md" in found[0].message
    assert misplaced([]) == []


def test_text_before_the_first_entry_is_flagged_by_line() -> None:
    """A bullet before the first entry is outside any entry; the title line is not."""
    found = outside_entries("# Memory\n\n- a loose bullet\n", "MEMORY.md")
    assert [(w.kind, w.line) for w in found] == [("text_outside_entries", 3)]

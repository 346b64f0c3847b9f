"""The CLI's pure helpers: widths, tables, ages, the entry form, id prefixes, settings."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from maka.cli.common import CliError, EntryEdit, entry_form, parse_entry_form, resolve_ids
from maka.cli.output import age, display_width, side_by_side, table, truncate, wrap
from maka.cli.system import parse_setting
from maka.mcp_text import date_of

DAY = 86_400_000


def test_cjk_takes_two_columns() -> None:
    """Wide characters count double and truncation respects that."""
    assert display_width("日本語") == 6
    cut = truncate("日本語のメモです", 7)
    assert cut.endswith("…") and display_width(cut) <= 7


@settings(max_examples=200, deadline=None)
@given(st.text(), st.integers(min_value=2, max_value=80))
def test_truncate_never_exceeds_width(text: str, width: int) -> None:
    """A truncated text fits the width, and an untouched one is returned as is."""
    cut = truncate(text, width)
    if display_width(text) <= width:
        assert cut == text
    else:
        assert display_width(cut) <= width and cut.endswith("…")


def test_colours_only_when_asked() -> None:
    """Off a terminal a table is plain text; with color, values that mean something are styled."""
    rows = [["abc", "active"], ["def", "archived"]]
    assert "\x1b[" not in table(["ID", "STATUS"], rows, width=40)
    coloured = table(["ID", "STATUS"], rows, width=40, color=True)
    assert "\x1b[32mactive" in coloured and "\x1b[2marchived" in coloured


def test_table_cuts_only_the_last_column() -> None:
    """Columns align; with a width the last column is cut, without one it is whole."""
    rows = [["a", "x" * 200], ["bbb", "short"]]
    assert table(["K", "V"], rows).splitlines()[1] == "a    " + "x" * 200
    cut = table(["K", "V"], rows, width=40).splitlines()
    assert all(display_width(line) <= 40 for line in cut) and cut[2] == "bbb  short"


def test_a_terminal_too_narrow_for_the_table_cuts_no_id() -> None:
    """On a terminal narrower than the columns before the last need, those columns are
    printed whole (the lines run past the edge) and only the last one is cut."""
    entry_id = "da452d07d6b9"
    rows = [[entry_id, "active", "hand-typed", "4 minutes ago", "Deploys happen on Tuesdays"]]
    lines = table(["ID", "STATUS", "ORIGIN", "UPDATED", "TITLE"], rows, width=40).splitlines()
    assert lines[1].split()[:4] == [entry_id, "active", "hand-typed", "4"]
    assert lines[1].endswith("…") and "Deploys" in lines[1]


def test_side_by_side_fits_the_width_and_loses_nothing() -> None:
    """Both columns fit the width, the gap is kept, and long lines wrap within their
    column instead of being cut: every word is still there."""
    lines = side_by_side(["left " * 30], ["right " * 30, "second"], 80)
    assert all(display_width(line) <= 80 for line in lines) and "│" in lines[0]
    left = " ".join(line.split("│")[0] for line in lines).split()
    right = " ".join(line.split("│")[1] for line in lines).split()
    assert left == ["left"] * 30 and right == ["right"] * 30 + ["second"]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.text(alphabet="ab日", min_size=1, max_size=12), min_size=1, max_size=12),
    st.integers(min_value=4, max_value=40),
    st.integers(min_value=0, max_value=3),
)
def test_wrap_breaks_between_words_and_keeps_every_word(words: list[str], width: int, indent: int) -> None:
    """Wrapped lines fit the width, keep the indentation (unless it would take half the
    width), and break inside a word only when that word alone is wider than the room."""
    line = " " * indent + " ".join(words)
    rows = wrap(line, width)
    assert all(display_width(row) <= width for row in rows)
    if len(rows) > 1:
        kept = indent if 2 * indent <= width else 0
        assert all(row.startswith(" " * kept) for row in rows)
        room = width - kept
        assert [w for row in rows for w in row.split()] == [
            piece for w in words for piece in ([w] if display_width(w) <= room else wrap(w, room))
        ]


def test_age_reads_like_a_person() -> None:
    """Ages are relative and coarse; very old ones are dates."""
    now = 1_700_000_000_000
    assert age(now - 5_000, now) == "just now"
    assert age(now - 3 * 60_000, now) == "3 minutes ago"
    assert age(now - DAY, now) == "a day ago" and age(now - 3 * DAY, now) == "3 days ago"
    assert age(now - 400 * DAY, now)[:2] == "20" and age(None, now) == "-"


@settings(max_examples=200, deadline=None)
@given(
    title=st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=40)
    .map(str.strip)
    .filter(bool),
    tags=st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True), max_size=4),
    content=st.text(max_size=200).map(lambda t: t.strip("\n")).filter(lambda t: t.strip()),
)
def test_entry_form_round_trips(title: str, tags: list[str], content: str) -> None:
    """What the editor form shows is what parsing it gives back, when nothing was edited."""
    content = content.replace("\r", "")
    parsed = parse_entry_form(entry_form(title, tags, content))
    assert parsed == EntryEdit(title=title, tags=tags, content=content.strip("\n"))


def test_entry_form_empty_content_cancels() -> None:
    """An emptied content means the user cancelled."""
    assert parse_entry_form(entry_form("T", [], "x").split("---")[0] + "---\n\n") is None


def test_entry_changes_only_what_differs() -> None:
    """changes() names only the fields the user changed."""
    entry = {"title": "T", "content": "c", "tags": ["a"]}
    assert EntryEdit("T", ["a"], "c2").changes(entry) == {"content": "c2"}
    assert EntryEdit("T2", [], "c").changes(entry) == {"title": "T2", "tags": []}


def test_resolve_ids_by_unique_prefix() -> None:
    """Exact ids and unique prefixes resolve; unknown ones pass through; ambiguous ones fail."""
    known = ["abc123", "abd456", "ffff00"]
    assert resolve_ids(known, ["abc", "ff", "abd456", "zzz"]) == ["abc123", "ffff00", "abd456", "zzz"]
    with pytest.raises(CliError, match="ambiguous"):
        resolve_ids(known, ["ab"])


def test_parse_setting_values() -> None:
    """Setting values are on/off or JSON."""
    assert parse_setting("incognito=on") == ("incognito", True)
    assert parse_setting("defaultDecayDays=null") == ("defaultDecayDays", None)
    assert parse_setting("defaultDecayDays=7.5") == ("defaultDecayDays", 7.5)
    with pytest.raises(CliError):
        parse_setting("incognito=maybe")


def test_a_setting_that_takes_a_name_takes_it_bare() -> None:
    """contextStrategy=curator is the name (JSON-quoted still works); a name it does not
    take is a usage error listing the names, with the closest one."""
    assert parse_setting("contextStrategy=curator") == ("contextStrategy", "curator")
    assert parse_setting('contextStrategy="curator_shadow"') == ("contextStrategy", "curator_shadow")
    with pytest.raises(CliError, match="did you mean 'curator'") as typo:
        parse_setting("contextStrategy=curatr")
    assert "deterministic" in str(typo.value)
    assert parse_setting("incognito=off") == ("incognito", False)


def test_the_mcp_text_dates_any_time() -> None:
    """The MCP bridge's `updated` date of an entry stamped at the end of int64 is the last day a date holds."""
    assert date_of(2**63 - 1) == "9999-12-31"
    assert date_of(1_796_000_000_000) == "2026-11-30"

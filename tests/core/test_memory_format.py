"""MEMORY.md / PENDING.md format: golden files, lossless rendering, minimal edits, merge."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.entry_text import prepare
from makad.core.memory_format import (
    MemoryDocument,
    apply_decay,
    derived_entry_id,
    entries,
    find,
    merge_by_id,
    new_document,
    new_entry_id,
    parse,
    remove,
    render,
    render_entries,
    render_entry,
    upsert,
)
from makad.core.types import Entry

GOLDEN = Path(__file__).parent / "golden"
GOLDEN_FILES = sorted(p.name for p in GOLDEN.glob("*.md"))


def _read(name: str) -> str:
    return (GOLDEN / name).read_bytes().decode("utf-8")


def _entry(entry_id: str, title: str = "Title", content: str = "Body.", **fields: object) -> Entry:
    return Entry(id=entry_id, title=title, content=content, **fields)  # type: ignore[arg-type]


def _doc(*items: Entry) -> MemoryDocument:
    doc = new_document()
    for item in items:
        doc = upsert(doc, item)
    return doc


# --- golden files --------------------------------------------------------------


def test_golden_set_is_complete() -> None:
    """The golden files cover every case the format promises to handle."""
    assert set(GOLDEN_FILES) >= {
        "v01.md",
        "v02.md",
        "malformed_comment.md",
        "no_comment.md",
        "cjk.md",
        "code_fence.md",
        "crlf.md",
        "bom.md",
        "pending.md",
    }


@pytest.mark.parametrize("name", GOLDEN_FILES)
def test_golden_file_round_trips_byte_for_byte(name: str) -> None:
    """Rendering an unchanged document gives back the exact bytes."""
    raw = (GOLDEN / name).read_bytes()
    assert render(parse(raw.decode("utf-8"))).encode("utf-8") == raw


@pytest.mark.parametrize("name", GOLDEN_FILES)
def test_golden_file_parses_to_expected_entries(name: str) -> None:
    """Each golden file yields exactly the entries and flags in its .json twin."""
    expected = json.loads((GOLDEN / name).with_suffix(".json").read_text(encoding="utf-8"))
    doc = parse(_read(name))
    assert doc.preamble == expected["preamble"]
    assert doc.newline == expected["newline"]
    assert doc.bom == expected["bom"]
    actual = [
        {
            "entry": msgspec.to_builtins(s.entry),
            "hasComment": s.has_comment,
            "commentMalformed": s.comment_malformed,
            "unknownFields": list(s.unknown_fields),
        }
        for s in doc.sections
    ]
    assert actual == expected["sections"]


def test_crlf_and_bom_files_are_detected() -> None:
    """CRLF line endings and a byte-order mark are recognised, not treated as content."""
    assert parse(_read("crlf.md")).newline == "\r\n"
    bom = parse(_read("bom.md"))
    assert bom.bom and not bom.preamble.startswith("\ufeff")


def test_entry_without_comment_gets_documented_derived_id() -> None:
    """An id-less entry's id is h- + sha256(title + newline + content)[:16]."""
    doc = parse(_read("no_comment.md"))
    digest = hashlib.sha256(b"Hand-written note\nRemember to water the plants.").hexdigest()
    assert doc.sections[0].entry.id == "h-" + digest[:16]
    assert derived_entry_id("a", "b") == "h-" + hashlib.sha256(b"a\nb").hexdigest()[:16]


def test_derived_id_is_stable_across_parses() -> None:
    """Parsing the same text twice (a daemon restart) gives the same derived ids."""
    text = _read("no_comment.md")
    assert [e.id for e in entries(parse(text))] == [e.id for e in entries(parse(text))]


def test_new_entry_id_is_sha256_of_content_and_created_at() -> None:
    """New ids are the first 16 hex chars of sha256(content + decimal createdAt)."""
    expected = hashlib.sha256(b"remember this1700000000000").hexdigest()[:16]
    assert new_entry_id("remember this", 1700000000000) == expected


# --- structure -----------------------------------------------------------------


def test_anchored_entries_survive_an_unclosed_fence() -> None:
    """A fence the user never closed does not hide later daemon-written entries."""
    doc = _doc(_entry("aaaa", content="start\n```python\nprint(1)"), _entry("bbbb"))
    assert [e.id for e in entries(parse(render(doc)))] == ["aaaa", "bbbb"]


def test_anchored_entries_survive_an_unclosed_html_comment() -> None:
    """A stray `<!--` in the user's prose does not swallow the following entries."""
    text = render(_doc(_entry("aaaa"), _entry("bbbb"))).replace("Body.", "<!-- todo", 1)
    assert [e.id for e in entries(parse(text))] == ["aaaa", "bbbb"]


def test_unclosed_maka_comment_does_not_swallow_headings() -> None:
    """A malformed metadata comment cannot hide an id-less heading after it."""
    text = "## A\n<!-- maka-memory: id=a\ntext\n## B\nmore\n"
    assert [e.title for e in entries(parse(text))] == ["A", "B"]


def test_only_top_level_atx_h2_starts_an_entry() -> None:
    """H1, H3, setext, quoted, listed and fenced headings stay inside their section."""
    text = (
        "# Title\nSetext\n---\n## One\n### Sub\n> ## quoted\n- ## listed\n"
        "```\n## fenced\n```\nTwo\n---\n## Two\n"
    )
    assert [e.title for e in entries(parse(text))] == ["One", "Two"]


def test_unusual_line_separators_do_not_split_lines() -> None:
    """Form feeds and Unicode line separators are content, as in markdown-it."""
    text = "## A\u2028## B\x0c\n## C\n"
    doc = parse(text)
    assert [e.title for e in entries(doc)] == ["A\u2028## B\x0c", "C"]
    assert render(doc) == text


def test_duplicate_ids_keep_both_sections_with_suffix() -> None:
    """Repeated ids are all kept; later ones report `<id>~2`, `<id>~3`."""
    block = "## T\n<!-- maka-memory: id=same origin=manual -->\nx\n"
    doc = parse(block * 3)
    assert [e.id for e in entries(doc)] == ["same", "same~2", "same~3"]
    changed = upsert(doc, msgspec.structs.replace(entries(doc)[1], content="changed"))
    assert changed.sections[0].raw == doc.sections[0].raw
    assert changed.sections[2].raw == doc.sections[2].raw
    assert "id=same~2" in changed.sections[1].raw


def test_suffixes_skip_ids_already_taken_in_any_order() -> None:
    """A section whose own id looks like a suffixed one (``same~2``) keeps it; the copies
    of ``same`` after it take the next free suffixes, in file order."""
    block = "## T\n<!-- maka-memory: id={} origin=manual -->\nx\n"
    text = "".join(block.format(i) for i in ["same", "same~3", "same", "same~2", "same", "same"])
    assert [e.id for e in entries(parse(text))] == [
        "same",
        "same~3",
        "same~2",
        "same~2~2",
        "same~4",
        "same~5",
    ]


def test_repeated_ids_are_given_their_suffix_without_copying_sections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reading sections that repeat one id builds each section and entry once, with its
    ``~n`` id, instead of copying it to rename it (a copy per section of a file of
    50,000 ``## a`` lines cost a quarter of reading it)."""
    from makad.core import memory_format

    copies: list[object] = []

    def counted(original: object) -> object:
        def copy(obj: object, /, **changes: object) -> object:
            copies.append(obj)
            return original(obj, **changes)  # type: ignore[operator]

        return copy

    monkeypatch.setattr(memory_format, "replace", counted(memory_format.replace))
    monkeypatch.setattr(msgspec.structs, "replace", counted(msgspec.structs.replace))
    doc = parse("## a\n" * 1_000)
    assert [e.id for e in entries(doc)][-1] == entries(doc)[0].id + "~1000"
    assert copies == []


def test_a_suffixed_section_keeps_everything_but_its_id() -> None:
    """A repeated id's later sections differ from a lone section of the same bytes only
    in their entry's ``~n`` id: the id the file declares, comment flags, unknown tokens
    and every other entry field are kept."""
    block = "## T\n<!-- maka-memory: id=same origin=manual tags=a,b odd=1 junk -->\nx\n"
    alone = parse(block).sections[0]
    later = parse(block * 3).sections[2]
    assert later.entry.id == "same~3"
    assert later.declared_id == alone.declared_id == "same"
    assert later.entry == msgspec.structs.replace(alone.entry, id="same~3")
    assert (later.raw, later.has_comment, later.comment_malformed, later.derived, later.unknown_fields) == (
        alone.raw,
        alone.has_comment,
        alone.comment_malformed,
        alone.derived,
        alone.unknown_fields,
    )
    hand_typed = parse("## a\nb\n" * 2).sections[1]
    assert hand_typed.derived and hand_typed.entry.id.endswith("~2")


def test_a_file_of_thirty_thousand_empty_headings_is_read_whole() -> None:
    """A 128 KB MEMORY.md of nothing but ``## `` lines (one id repeated 32,000 times):
    every line is an entry, each with its own suffix, the last ``~32000`` (giving the
    suffixes, and finding each heading's comment, were quadratic: minutes)."""
    doc = parse("## \n" * 32_000)
    ids = [e.id for e in entries(doc)]
    assert len(ids) == len(set(ids)) == 32_000
    assert ids[-1] == ids[0] + "~32000"
    assert render(doc) == "## \n" * 32_000


def test_unknown_fields_survive_a_rewrite() -> None:
    """Unknown key=value tokens are written back when their entry changes."""
    doc = parse(_read("v02.md"))
    entry = entries(doc)[0]
    changed = upsert(doc, msgspec.structs.replace(entry, content="New body."))
    section = changed.sections[0]
    assert section.unknown_fields == ("reviewer=alice", "x-future=1")
    assert "reviewer=alice x-future=1 -->" in section.raw
    assert section.entry == msgspec.structs.replace(entry, content="New body.")


# --- rendering and operations ----------------------------------------------------


def test_render_entry_writes_the_v01_field_order_and_encodes_values() -> None:
    """Known fields come in V0.1 order; spaces, commas and `>` are percent-encoded."""
    entry = _entry(
        "abc",
        title="T",
        content="c",
        origin="manual",
        created_at=1,
        updated_at=2,
        tags=["a b", "c,d", "日本"],
        decay_ttl_ms=5,
        scope="session",
        session_id="s 1",
        source_refs=["event:s1:3-9", "memory:x"],
        supersedes="old-->",
    )
    assert render_entry(entry, ("k=v",)) == (
        "## T\n<!-- maka-memory: id=abc origin=manual createdAt=1 updatedAt=2 status=active "
        "tags=a%20b,c%2Cd,日本 decayTtlMs=5 scope=session session=s%201 "
        "source=event:s1:3-9,memory:x supersedes=old--%3E k=v -->\nc\n"
    )


def test_content_heading_is_escaped_so_the_entry_stays_whole() -> None:
    """A `## ` line in content is backslash-escaped on disk, a fenced one is not; both read back as written."""
    entry = _entry("abc", content="intro\n## inner\n```\n## fenced\n```")
    doc = _doc(entry)
    assert [e.id for e in entries(doc)] == ["abc"]
    assert "\nintro\n\\## inner\n```\n## fenced\n```\n" in render(doc)
    assert entries(doc)[0].content == entry.content


def test_upsert_appends_with_one_blank_line() -> None:
    """New entries go at the end, separated by exactly one blank line."""
    doc = _doc(_entry("aaaa", title="A", content="a"), _entry("bbbb", title="B", content="b"))
    text = render(doc)
    assert text.startswith("# Maka Memory\n\n## A\n<!-- maka-memory: id=aaaa ")
    assert "-->\na\n\n## B\n<!-- maka-memory: id=bbbb " in text
    assert text.endswith("-->\nb\n")


def test_upsert_into_text_without_final_newline() -> None:
    """Appending after text with no trailing newline adds the newline and a blank line."""
    doc = upsert(parse("# Notes\nlast line"), _entry("aaaa", title="A", content="a"))
    assert render(doc).startswith("# Notes\nlast line\n\n## A\n")


def test_upsert_on_crlf_bom_document_keeps_its_style() -> None:
    """New and changed sections use CRLF in a CRLF file; the BOM stays."""
    doc = parse("\ufeff" + _read("crlf.md"))
    doc = upsert(doc, _entry("new", title="N", content="one\ntwo"))
    text = render(doc)
    assert text.startswith("\ufeff# Maka Memory\r\n")
    assert "\n" not in text.replace("\r\n", "")
    assert text.endswith("## N\r\n" + text.split("## N\r\n", 1)[1])


@pytest.mark.parametrize("newline", ["\r\n", "\r", "\n"])
def test_appended_entries_are_separated_by_a_blank_line_in_every_line_ending(newline: str) -> None:
    """In a CRLF (Windows) or CR (old Mac) file, as in an LF one, a new entry goes after
    one blank line, never right under the last line of the entry before it."""
    text = f"# Maka Memory{newline}{newline}## A{newline}last line{newline}"
    doc = upsert(parse(text), _entry("bbbb", title="B", content="b"))
    doc = upsert(doc, _entry("cccc", title="C", content="c"))
    out = render(doc)
    assert out.startswith(f"{text}{newline}## B{newline}<!-- maka-memory: id=bbbb ")
    assert f"-->{newline}b{newline}{newline}## C{newline}" in out
    assert [e.title for e in entries(parse(out))] == ["A", "B", "C"]


def test_upsert_replaces_in_place_and_keeps_spacing() -> None:
    """A changed entry is re-rendered where it was, with its trailing blank lines."""
    text = "# M\n\n## A\n<!-- maka-memory: id=a -->\nold\n\n\n\n## B\n<!-- maka-memory: id=b -->\nb\n"
    doc = parse(text)
    changed = upsert(doc, msgspec.structs.replace(entries(doc)[0], content="new"))
    out = render(changed)
    assert out == text.replace("\nold\n", "\nnew\n")


def test_upsert_of_equal_entry_returns_same_document() -> None:
    """Writing an entry that did not change leaves the bytes untouched."""
    doc = parse(_read("v01.md"))
    assert upsert(doc, entries(doc)[1]) is doc


def test_upsert_into_empty_text_writes_the_header() -> None:
    """The first entry of an empty file comes after `# Maka Memory`."""
    assert render(upsert(parse(""), _entry("a", title="A", content="x"))).startswith(
        "# Maka Memory\n\n## A\n"
    )


def test_remove_drops_only_that_section() -> None:
    """Removing an entry leaves every other byte as it was."""
    text = _read("v01.md")
    doc = parse(text)
    removed = remove(doc, "3f9a2c41d0b7e815")
    assert render(removed) == text.replace(doc.sections[1].raw, "")
    assert remove(doc, "no-such-id") is doc


def test_find_returns_the_section_or_none() -> None:
    """`find` looks an entry up by id."""
    doc = parse(_read("v01.md"))
    section = find(doc, "manual-1714300000000")
    assert section is not None and section.entry.title == "Code style"
    assert find(doc, "nope") is None


# --- decay -----------------------------------------------------------------------


def test_decay_rewrites_only_the_status_token() -> None:
    """An expired entry is archived by changing `status=active` and nothing else."""
    text = (
        "# M\n\n## A\n<!-- maka-memory: id=a createdAt=100 status=active decayTtlMs=50 x=1 -->\n"
        "a\n\n## B\n<!-- maka-memory: id=b createdAt=100 status=active decayTtlMs=500 -->\nb\n"
    )
    doc, archived = apply_decay(parse(text), now_ms=151)
    assert archived == ["a"]
    assert render(doc) == text.replace("status=active decayTtlMs=50 ", "status=archived decayTtlMs=50 ")
    assert entries(doc)[0].status == "archived"


def test_decay_at_the_exact_deadline_waits() -> None:
    """`now == createdAt + decayTtlMs` is not yet past the deadline."""
    doc = parse("## A\n<!-- maka-memory: id=a createdAt=100 decayTtlMs=50 -->\n")
    assert apply_decay(doc, now_ms=150)[1] == []


def test_decay_adds_a_missing_status_token() -> None:
    """A comment without `status=` gets one, inside the comment."""
    text = "## A\n<!-- maka-memory: id=a createdAt=1 decayTtlMs=1 -->\nx\n"
    doc, archived = apply_decay(parse(text), now_ms=10)
    assert archived == ["a"]
    assert render(doc) == "## A\n<!-- maka-memory: id=a createdAt=1 decayTtlMs=1 status=archived -->\nx\n"


def test_decay_skips_archived_and_ttl_free_entries() -> None:
    """Archived entries, entries with no TTL and a TTL of 0 never decay."""
    doc = parse(_read("v01.md"))
    assert apply_decay(doc, now_ms=10**15) == (doc, [])


# --- merge -----------------------------------------------------------------------


def _base() -> MemoryDocument:
    return _doc(_entry("aaaa", title="A", content="a"), _entry("bbbb", title="B", content="b"))


def _edit(doc: MemoryDocument, entry_id: str, content: str) -> MemoryDocument:
    section = find(doc, entry_id)
    assert section is not None
    return upsert(doc, msgspec.structs.replace(section.entry, content=content))


def test_merge_daemon_add_and_user_edit_both_survive() -> None:
    """The daemon's new entry is added to the file the user edited meanwhile."""
    base = _base()
    ours = upsert(base, _entry("cccc", title="C", content="c"))
    theirs = parse(render(base).replace("\nb\n", "\nb, edited by hand\n"))
    result = merge_by_id(base, ours, theirs)
    assert result.conflicts == []
    assert [(e.id, e.content) for e in entries(result.document)] == [
        ("aaaa", "a"),
        ("bbbb", "b, edited by hand"),
        ("cccc", "c"),
    ]


def test_merge_conflict_keeps_the_users_version() -> None:
    """When both sides changed an entry, the user's text wins and the id is reported."""
    base = _base()
    ours = _edit(base, "aaaa", "daemon")
    theirs = _edit(base, "aaaa", "user")
    result = merge_by_id(base, ours, theirs)
    assert result.conflicts == ["aaaa"]
    assert render(result.document) == render(theirs)


def test_merge_applies_daemon_bytes_where_user_did_not_touch() -> None:
    """An untouched section takes the daemon's exact bytes; the user's edit elsewhere stays."""
    text = "# M\n\n## A\n<!-- maka-memory: id=a createdAt=0 decayTtlMs=1 -->\na\n\n## B\nb\n"
    base = parse(text)
    ours, _ = apply_decay(base, now_ms=5)
    theirs = parse(text.replace("# M\n", "# M\n\nAn intro by the user.\n"))
    result = merge_by_id(base, ours, theirs)
    assert result.conflicts == []
    assert render(result.document) == render(ours).replace("# M\n", "# M\n\nAn intro by the user.\n")


def test_merge_same_change_on_both_sides_is_not_a_conflict() -> None:
    """Identical edits agree."""
    base = _base()
    ours = _edit(base, "bbbb", "same")
    assert merge_by_id(base, ours, ours).conflicts == []


def test_merge_removal() -> None:
    """The daemon's removal applies unless the user changed that entry, and vice versa."""
    base = _base()
    ours = remove(base, "aaaa")
    assert [e.id for e in entries(merge_by_id(base, ours, base).document)] == ["bbbb"]
    edited = _edit(base, "aaaa", "user")
    assert merge_by_id(base, ours, edited).conflicts == ["aaaa"]
    user_removed = remove(base, "bbbb")
    changed = _edit(base, "bbbb", "daemon")
    assert merge_by_id(base, changed, user_removed).conflicts == ["bbbb"]
    assert merge_by_id(base, ours, user_removed).document.sections == ()


# --- properties ------------------------------------------------------------------

_FRAGMENTS = st.sampled_from(
    [
        "## ",
        "##",
        "# ",
        "### ",
        "```",
        "~~~",
        "    ",
        "> ",
        "- ",
        "<!--",
        "-->",
        "<!-- maka-memory: id=junk origin=manual -->",
        "<!-- maka-memory: ",
        "id=",
        "=",
        "\n",
        "\r\n",
        "\r",
        "\n\n",
        "---",
        "text",
        "日本",
        "\ufeff",
        "\u2028",
        "\t",
        " ",
    ]
)
_MARKDOWNISH = st.lists(st.one_of(_FRAGMENTS, st.text(max_size=8)), max_size=40).map("".join)
_ANY_TEXT = st.one_of(st.text(), _MARKDOWNISH)


@settings(max_examples=300, deadline=None)
@given(_ANY_TEXT)
def test_parse_never_raises_and_round_trips(text: str) -> None:
    """Any text parses, and rendering it unchanged gives the same string."""
    assert render(parse(text)) == text


_LINE_TEXT = (
    st.text(
        alphabet=st.characters(blacklist_categories=["Cs", "Cc", "Zl", "Zp"], blacklist_characters="#"),
        min_size=1,
        max_size=30,
    )
    .map(str.strip)
    .filter(bool)
)
_ENTRIES = st.lists(
    st.builds(
        lambda title, lines, created, tags: Entry(
            id=new_entry_id("\n".join(lines), created),
            title=title,
            content="\n".join(lines),
            created_at=created,
            updated_at=created,
            tags=tags,
        ),
        _LINE_TEXT,
        st.lists(_LINE_TEXT, min_size=1, max_size=4),
        st.integers(min_value=0, max_value=2**53),
        st.lists(_LINE_TEXT, max_size=3),
    ),
    min_size=1,
    max_size=5,
    unique_by=lambda e: e.id,
)


@settings(max_examples=150, deadline=None)
@given(_ENTRIES)
def test_rendered_entries_parse_back_equal(items: list[Entry]) -> None:
    """What the daemon writes, it reads back as the same entries (content as ``prepare`` stores it)."""
    stored = [msgspec.structs.replace(e, content=prepare(e.content).content) for e in items]
    assert entries(parse(render(_doc(*items)))) == stored


@settings(max_examples=150, deadline=None)
@given(_ENTRIES, st.lists(_MARKDOWNISH, min_size=1, max_size=6))
def test_known_entries_survive_junk_between_them(items: list[Entry], junk: list[str]) -> None:
    """Arbitrary Markdown-ish junk between sections never loses a known entry."""
    doc = _doc(*items)
    pieces = [doc.preamble]
    for index, section in enumerate(doc.sections):
        pieces.append(section.raw)
        pieces.append(junk[index % len(junk)] + "\n")
    parsed = {e.id: e for e in entries(parse("".join(pieces)))}
    for item in items:
        assert item.id in parsed
        assert parsed[item.id].title == item.title
        assert parsed[item.id].content.startswith(item.content)


@settings(max_examples=150, deadline=None)
@given(_ENTRIES, st.data())
def test_upsert_changes_only_that_sections_bytes(items: list[Entry], data: st.DataObject) -> None:
    """Changing one entry leaves the preamble and every other section byte-identical."""
    doc = parse(render(_doc(*items)).replace("\n\n## ", "\n\nuser prose\n\n## "))
    index = data.draw(st.integers(min_value=0, max_value=len(items) - 1))
    target = entries(doc)[index]
    changed = upsert(doc, msgspec.structs.replace(target, content="changed", updated_at=1))
    assert changed.preamble == doc.preamble
    assert len(changed.sections) == len(doc.sections)
    for i, (before, after) in enumerate(zip(doc.sections, changed.sections, strict=True)):
        assert (before.raw == after.raw) == (i != index)
    assert entries(changed)[index].content == "changed"


@settings(max_examples=300, deadline=None)
@given(_ANY_TEXT, _ANY_TEXT)
def test_parsing_against_an_earlier_version_reads_the_same(before: str, after: str) -> None:
    """``parse(after, earlier=parse(before))`` is ``parse(after)``, section for section, for
    any two texts (sections in common, repeated ids, junk between them, any line endings)."""
    assert parse(after, parse(before)) == parse(after)


@settings(max_examples=150, deadline=None)
@given(_ENTRIES, st.data())
def test_parsing_a_write_against_the_version_it_changed_reads_the_same(
    items: list[Entry], data: st.DataObject
) -> None:
    """A version made from another by moving, repeating, dropping or changing sections (as
    writes and saves do) parses against it exactly as it parses alone, reusing its sections."""
    doc = parse(render(_doc(*items)) + "## Typed\nby hand\n\n## Typed\nby hand\n")
    picks = data.draw(st.lists(st.integers(min_value=0, max_value=len(doc.sections) - 1), max_size=12))
    changed = data.draw(st.lists(_MARKDOWNISH, max_size=3))
    text = doc.preamble + "".join(doc.sections[i].raw for i in picks) + "".join(changed)
    again = parse(text, doc)
    assert again == parse(text)
    shared = {section.raw: section for section in doc.sections}
    reused = [s for s in again.sections if s.raw in shared and s.entry.id == shared[s.raw].entry.id]
    assert all(section is shared[section.raw] for section in reused)


def test_blank_content_renders_no_body_lines() -> None:
    """An entry with only whitespace lines as content renders heading and comment only."""
    text = render_entry(_entry("a", title="A", content="\n  \n"))
    assert text.count("\n") == 2
    assert entries(parse(text))[0].content == ""


def test_render_entries_renders_what_upserting_each_entry_renders() -> None:
    """``render_entries`` (one pass) gives the very text of upserting the entries one by one
    into a new document: none, one, several, entries typed by hand with the same text (ids
    with ``~n``), content without a final newline, code blocks and archived entries."""
    typed = parse(
        "# Maka Memory\n\n## Same\nsame text\n\n## Same\nsame text\n## Code\n```\nx\n```\n"
        "## Last\n<!-- maka-memory: id=e1 status=archived tags=a,b -->\nno newline at the end"
    )
    made = [
        Entry(id=f"{i:016x}", title=f"T{i}", content=f"fact {i}", origin="manual", created_at=i, updated_at=i)
        for i in range(5)
    ]
    for chosen in ([], made[:1], made, entries(typed), [*entries(typed), *made]):
        doc = new_document()
        for entry in chosen:
            doc = upsert(doc, entry)
        assert render_entries(chosen) == render(doc), chosen

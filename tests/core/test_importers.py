"""Memory import: format sniffing, parsing of each format, per-item errors, idempotence keys."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.importers import (
    FORMATS,
    FormatName,
    ImportResult,
    binary_reason,
    collect,
    content_key,
    parse,
    sniff,
)
from makad.core.importers import makad as makad_importer
from makad.core.importers.records import INTERNAL_REASON, clean_title, headline, normalize_tags
from makad.core.importers.timestamps import to_epoch_ms
from makad.errors import InvalidParams

FIXTURES = Path(__file__).parent / "fixtures" / "import"


def _read(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _claude_dir() -> dict[str, str]:
    return {p.name: p.read_text("utf-8") for p in sorted((FIXTURES / "claude_code").iterdir())}


def _parse_fixture(name: str) -> ImportResult:
    data = _read(name)
    return parse(data, sniff(data, name))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("mem0_get_all.json", "mem0"),
        ("mem0_legacy_list.json", "mem0"),
        ("mem0_mixed_malformed.json", "mem0"),
        ("openmemory_memories.json", "openmemory"),
        ("openmemory_memories.jsonl", "openmemory"),
        ("chatgpt_memories.txt", "chatgpt"),
        ("CLAUDE.md", "claude_md"),
        ("mcp_memory.jsonl", "mcp_memory"),
        ("mcp_memory_mixed.jsonl", "mcp_memory"),
        ("letta_agent.af", "letta"),
        ("letta_v1.af", "letta"),
        ("notes.md", "markdown"),
        ("claude_code/MEMORY.md", "claude_code"),
        ("claude_code/feedback_testing.md", "claude_code"),
        ("makad_export.json", "makad"),
        ("makad_export.md", "makad"),
        ("chatgpt_plain.txt", "text"),
        ("mem0_metadata_categories.json", "mem0"),
        ("honcho_conclusions.json", "honcho"),
        ("honcho_peer_card.json", "honcho"),
        ("supermemory_documents.json", "supermemory"),
        ("supermemory_memory_entries.json", "supermemory"),
    ],
)
def test_sniff_recognises_each_fixture(name: str, expected: FormatName) -> None:
    """Each fixture is recognised by its structure and its file name."""
    assert sniff(_read(name), name) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("mem0_get_all.json", "mem0"),
        ("openmemory_memories.json", "openmemory"),
        ("openmemory_memories.jsonl", "openmemory"),
        ("chatgpt_memories.txt", "chatgpt"),
        ("mcp_memory.jsonl", "mcp_memory"),
        ("letta_agent.af", "letta"),
        ("letta_v1.af", "letta"),
        ("notes.md", "markdown"),
        ("claude_code/MEMORY.md", "claude_code"),
    ],
)
def test_sniff_needs_no_file_name_for_structured_formats(name: str, expected: FormatName) -> None:
    """Structure alone identifies every format but CLAUDE.md."""
    assert sniff(_read(name).decode("utf-8")) == expected


def test_plain_text_is_its_own_format_one_memory_a_line() -> None:
    """Plain lines sniff as ``text`` (not a tool's format) and each line is one memory."""
    assert sniff("I like tea\n\nI have two cats\n", "notes.txt") == "text"
    text = "I like tea\n\n- I have two cats\n3. Learning Rust\n"
    result = parse(text, "text")
    assert result.format == "text" and [i.content for i in result.items] == [
        "I like tea",
        "I have two cats",
        "Learning Rust",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "\x7fELF\x02\x01\x01\x00\x00\x00",
        "I\x00 \x00l\x00i\x00k\x00e\x00",  # UTF-16 text read as bytes
        "ab" + "".join(chr(1 + c % 8) for c in range(400)),  # control characters throughout, no NUL
    ],
)
def test_binary_input_is_named_not_text(text: str) -> None:
    """NUL bytes or control characters throughout make the input binary, with a reason."""
    reason = binary_reason(text)
    assert reason is not None and ("NUL" in reason or "control" in reason)


@pytest.mark.parametrize(
    "text",
    [
        "I like tea\nI have two cats\n",
        "Café, naïve, 日本語 — \tindented\r\n\x0cnext page\n",
        "colour \x1b[31mred\x1b[0m in a log line, one \x07 bell\n" * 3,
    ],
)
def test_text_with_a_stray_control_is_still_text(text: str) -> None:
    """Tabs, CRLF, form feed, escapes and one stray control character are text."""
    assert binary_reason(text) is None


def test_sniff_rejects_json_of_no_known_shape() -> None:
    """Unknown JSON is an invalid_params error naming no content, not a guess."""
    with pytest.raises(InvalidParams):
        sniff(json.dumps({"foo": [1, 2]}))
    with pytest.raises(InvalidParams):
        sniff('{"a": 1}\n{"b": 2}\n')


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.99])
def test_sniff_refuses_json_cut_short_rather_than_reading_its_lines_as_text(cut: float) -> None:
    """A JSON export cut short (a copy interrupted, a full disk) is refused as invalid JSON
    with where it breaks, never read as lines of plain text; text that merely opens with a
    bracket is still text."""
    export = json.dumps(
        {"level": "workspace", "entries": [{"title": f"T{i}", "content": "c"} for i in range(5)]}
    )
    for text in (json.dumps(json.loads(export), indent=2), export):
        with pytest.raises(InvalidParams) as refused:
            sniff(text[: int(len(text) * cut)])
        assert refused.value.details["reason"] == "invalid_json"
        assert "not valid JSON" in refused.value.message and refused.value.details["line"] >= 1
    assert sniff("[[Project]] notes\nuses pnpm\n") == "text"
    assert sniff("[link](https://example.com) is the wiki\n") == "text"
    assert sniff("Uses pnpm\n{braces} mark template fields\nTabs, not spaces\n") == "text"


def test_mem0_items_keep_ids_timestamps_and_categories() -> None:
    """mem0 get_all keeps each memory's id, created/updated times and categories."""
    result = _parse_fixture("mem0_get_all.json")
    assert not result.errors
    first = result.items[0]
    assert first.source_id == "7f3a2c1e-4b5d-4e6f-8a9b-0c1d2e3f4a5b"
    assert first.content == "Prefers pytest over unittest for new test suites"
    assert first.title == "Prefers pytest over unittest for new…"  # a headline, not the memory again
    assert first.created_at_ms == 1721463825123  # 2024-07-20T01:23:45.123-07:00
    assert first.updated_at_ms == 1721577600000
    assert first.tags == ["technology", "preferences"]
    assert first.source_format == "mem0"
    assert [i.locator for i in result.items] == ["results[0]", "results[1]", "results[2]"]


def test_mem0_bare_list_from_older_versions() -> None:
    """Older mem0 returned a bare list; it reads the same way."""
    result = _parse_fixture("mem0_legacy_list.json")
    assert [i.content for i in result.items] == ["Likes to hike on weekends", "Vegetarian"]
    assert result.items[1].source_id == "6f4922f4-5568-361a-8cdf-4ad2299f6d23"


def test_malformed_items_get_errors_while_good_ones_import() -> None:
    """Each malformed record has its own error; the valid records still import."""
    result = _parse_fixture("mem0_mixed_malformed.json")
    assert [i.source_id for i in result.items] == ["aaaa0001", "aaaa0006"]
    assert [(e.locator, e.reason) for e in result.errors] == [
        ("results[1]", "content is missing or not text"),
        ("results[2]", "content is missing or not text"),
        ("results[3]", "not a JSON object"),
        ("results[4]", "content is empty"),
    ]
    assert result.items[1].created_at_ms is None  # an unreadable date is dropped, not fatal


def test_malformed_jsonl_lines_get_errors_while_good_ones_import() -> None:
    """Broken lines, nameless entities and unknown types are per-line errors."""
    result = _parse_fixture("mcp_memory_mixed.jsonl")
    assert [i.source_id for i in result.items] == [
        "entity:Build_System",
        "relation:Build_System|runs_in|CI",
    ]
    assert [e.locator for e in result.errors] == ["line 2", "line 3", "line 5", "line 6", "line 7"]
    assert result.errors[0].reason == "not valid JSON"
    assert [(s.locator, s.reason) for s in result.skipped] == [("line 8", "entity has no observations")]


def test_openmemory_export_maps_categories_and_skips_deleted() -> None:
    """memories.json resolves category ids to names and leaves deleted memories out."""
    result = _parse_fixture("openmemory_memories.json")
    assert [i.source_id for i in result.items] == [
        "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d",
        "b2c3d4e5-f6a7-4b8c-9d0e-1f2a3b4c5d6e",
    ]
    assert result.items[0].tags == ["coding-preferences"]
    assert result.items[1].updated_at_ms == 1736755200000
    assert [(s.locator, s.reason) for s in result.skipped] == [("memories[2]", "deleted in the source")]


def test_openmemory_jsonl_uses_category_names() -> None:
    """The per-line export carries category names directly."""
    result = _parse_fixture("openmemory_memories.jsonl")
    assert [i.tags for i in result.items] == [["coding-preferences"], ["work"], []]
    assert result.items[2].created_at_ms == 1736841600000


def test_chatgpt_lines_keep_their_dates() -> None:
    """Each '[date] - text' line is one memory created on that date."""
    result = _parse_fixture("chatgpt_memories.txt")
    assert len(result.items) == 4
    assert result.items[2].content == "Has a dog named Biscuit."
    assert result.items[2].created_at_ms == 1718841600000  # 2024-06-20
    assert result.items[0].source_id.startswith("sha256:")


def test_chatgpt_tolerates_numbering_and_flags_stray_lines() -> None:
    """Numbered and bulleted variants parse; other lines are per-line errors."""
    text = "Here are your saved memories:\n1. [2024-01-02]. Likes tea\n- [Mar 5, 2024]: Has two cats\n"
    result = parse(text, "chatgpt")
    assert [i.content for i in result.items] == ["Likes tea", "Has two cats"]
    assert result.items[1].created_at_ms == to_epoch_ms("2024-03-05")
    assert [(e.locator, e.reason) for e in result.errors] == [("line 1", "not a '[date] - text' line")]


def test_claude_code_directory_reads_topic_files_through_the_index() -> None:
    """MEMORY.md links resolve to topic files; frontmatter gives titles and types."""
    files = _claude_dir()
    result = parse(files["MEMORY.md"], "claude_code", files)
    assert not result.errors
    assert [(i.title, i.tags, i.source_id) for i in result.items] == [
        ("User role", ["user"], "user_role.md"),
        ("Testing feedback", ["feedback"], "feedback_testing.md"),
        ("Release freeze", ["project"], "project_release_freeze.md"),
        ("Bug tracker", ["reference"], "reference_linear.md"),
    ]
    assert result.items[1].content.startswith("Integration tests must hit a real database")
    assert "**How to apply:**" in result.items[1].content


def test_claude_code_reports_missing_topics_and_keeps_unlinked_ones() -> None:
    """A link to an absent file is an error; files the index forgot still import."""
    files = _claude_dir()
    del files["user_role.md"]
    files["MEMORY.md"] += "- Always answer in British English\n"
    files["extra_note.md"] = "---\nname: Extra\ntype: user\n---\nLikes long walks.\n"
    result = parse("", "claude_code", files)
    assert [(e.locator, e.reason) for e in result.errors] == [
        ("MEMORY.md:1", "linked topic file was not provided")
    ]
    titles = [i.title for i in result.items]
    assert "Always answer in British English" in titles
    assert titles[-1] == "Extra"


def test_claude_code_single_topic_file_and_unclosed_frontmatter() -> None:
    """A lone topic file is one item; an unclosed frontmatter is that item's error."""
    single = parse(_read("claude_code/reference_linear.md"), "claude_code")
    assert [i.title for i in single.items] == ["Bug tracker"]
    broken = parse("- [Bad](bad.md) — x\n", "claude_code", {"bad.md": "---\nname: Bad\nbody\n"})
    assert [(e.locator, e.reason) for e in broken.errors] == [("bad.md", "frontmatter is not closed")]


def test_claude_md_bullets_are_tagged_by_section_and_skip_imports() -> None:
    """CLAUDE.md bullets become items tagged with their heading; @imports are not memories."""
    result = _parse_fixture("CLAUDE.md")
    assert [i.tags for i in result.items] == [["build"], ["build"], ["style"], ["style"]]
    assert result.items[3].content == (
        "Prefer early returns over nested conditionals.\nGuard clauses go at the top of the function."
    )
    assert all("@" not in i.content for i in result.items)


def test_mcp_memory_entities_and_relations() -> None:
    """An entity becomes its observations; a relation becomes a one-line fact."""
    result = _parse_fixture("mcp_memory.jsonl")
    entity, _, relation = result.items
    assert entity.title == "John_Smith"
    assert entity.content.splitlines() == [
        "- Speaks fluent Spanish",
        "- Graduated in 2019",
        "- Prefers morning meetings",
    ]
    assert entity.tags == ["person"]
    assert relation.content == "John_Smith works at Anthropic"
    assert relation.source_id == "relation:John_Smith|works_at|Anthropic"


def test_mcp_memory_legacy_json_graph() -> None:
    """The older single-document memory.json reads the same way."""
    graph = {
        "entities": [{"name": "Ada", "entityType": "person", "observations": ["Writes Ada"]}],
        "relations": [{"from": "Ada", "to": "Ada", "relationType": "knows"}],
    }
    data = json.dumps(graph)
    assert sniff(data) == "mcp_memory"
    assert [i.source_id for i in parse(data, "mcp_memory").items] == [
        "entity:Ada",
        "relation:Ada|knows|Ada",
    ]


def test_letta_blocks_from_both_schema_versions() -> None:
    """Current .af files keep blocks top-level, v1 under core_memory; empty blocks are skipped."""
    current = _parse_fixture("letta_agent.af")
    assert [(i.title, i.source_id) for i in current.items] == [
        ("Human", "letta:support_agent/human"),
        ("Persona", "letta:support_agent/persona"),
    ]
    assert current.items[0].content.startswith("First name: Chad")
    assert [s.reason for s in current.skipped] == ["empty memory block"]
    v1 = _parse_fixture("letta_v1.af")
    assert v1.items[0].source_id == "letta:chef/human"
    assert v1.items[0].created_at_ms == to_epoch_ms("2025-03-20T18:02:11Z")
    assert v1.items[0].updated_at_ms == to_epoch_ms("2025-03-21T09:30:00Z")


def test_markdown_bullets_with_nesting_checkboxes_and_fences() -> None:
    """Top-level bullets are items; nested lines join them; fenced bullets are ignored."""
    result = _parse_fixture("notes.md")
    assert [i.title for i in result.items] == [
        "Use uv to manage Python environments.",
        "The staging database is refreshed every…",
        "Rotate the deploy key every quarter",
        "Maria owns the billing service.",
        "Ask Tom before touching the search…",
    ]
    assert result.items[1].content.endswith("- Refreshes take about forty minutes.")
    assert result.items[3].tags == ["people"]


def test_markdown_without_bullets_says_so() -> None:
    """A file with no bullets imports nothing and says why."""
    result = parse("Just prose.\n", "markdown")
    assert not result.items
    assert [(e.locator, e.reason) for e in result.errors] == [("file", "no bullet items found")]


def test_whole_file_problems_are_one_error() -> None:
    """Undecodable bytes, non-JSON for a JSON format and unknown formats never raise."""
    assert parse(b"\xff\xfe\x00", "mem0").errors[0].reason == "not UTF-8 text"
    assert parse("hello", "letta").errors[0].locator == "file"
    assert parse("x", "nope").errors[0].reason == "unknown format"  # type: ignore[arg-type]


def test_reimport_yields_identical_content_keys() -> None:
    """Parsing the same file twice gives the same keys, so the service adds nothing new."""
    first = [content_key(i.title, i.content) for i in _parse_fixture("notes.md").items]
    again = [content_key(i.title, i.content) for i in _parse_fixture("notes.md").items]
    assert first == again and len(set(first)) == len(first)


def test_content_key_ignores_case_and_whitespace_only() -> None:
    """Keys collide across case and spacing, not across different words."""
    assert content_key("Tea", "Likes  green\ntea") == content_key("tea", "likes green tea")
    assert content_key("Tea", "Likes green tea") != content_key("Tea", "Likes black tea")


def test_titles_are_short_single_lines_without_markup() -> None:
    """Derived titles drop Markdown and stop at a word boundary within 80 characters."""
    title = clean_title("## **Bold** [link](http://x) " + "word " * 40)
    assert title.startswith("Bold link word")
    assert len(title) <= 80 and title.endswith("…") and "\n" not in title


def test_tags_are_safe_slugs() -> None:
    """Tags cannot break the metadata comment they are written into."""
    assert normalize_tags(["Coding Preferences", "a,b-->c", "", 3, "coding preferences"]) == [
        "coding-preferences",
        "a-b-c",
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-07-20T01:23:45.123456-07:00", 1721463825123),
        ("2024-06-20", 1718841600000),
        (1718841600, 1718841600000),
        (1718841600000, 1718841600000),
        ("1718841600", 1718841600000),
        ("June 20, 2024", 1718841600000),
        ("yesterday", None),
        (True, None),
        (10**400, None),
        (float("nan"), None),
    ],
)
def test_timestamps_become_unix_milliseconds(value: object, expected: int | None) -> None:
    """ISO strings, dates and epoch seconds or milliseconds all convert; junk is None."""
    assert to_epoch_ms(value) == expected


_KEY_LIST = (
    "results memories memory content id hash created_at updated_at categories category_ids "
    "state type name entityType observations from to relationType agents blocks block_ids "
    "core_memory memory_blocks label value entities relations"
)
_KEYS = _KEY_LIST.split()
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=6),
    max_leaves=25,
)
_inputs = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=200),
    _json.map(json.dumps),
    st.lists(_json, max_size=5).map(lambda rows: "\n".join(json.dumps(r) for r in rows)),
)


def _check(result: ImportResult) -> None:
    reasons = [e.reason for e in result.errors + result.skipped]
    assert INTERNAL_REASON not in reasons
    for item in result.items:
        assert item.content.strip() and item.title and "\n" not in item.title
        assert len(item.title) <= 80


@settings(max_examples=200, deadline=None)
@given(_inputs, st.sampled_from(FORMATS))
def test_parse_never_raises_on_arbitrary_input(data: Any, fmt: FormatName) -> None:
    """Any input gives items and errors, never an exception or an internal failure."""
    files = {"MEMORY.md": data} if isinstance(data, str) and fmt == "claude_code" else None
    _check(parse(data, fmt, files))


@settings(max_examples=200, deadline=None)
@given(_inputs, st.sampled_from([None, "x.json", "memory.jsonl", "a.af", "CLAUDE.md", "MEMORY.md"]))
def test_sniff_then_parse_never_fails_unexpectedly(data: Any, filename: str | None) -> None:
    """Sniffing picks a format or refuses with invalid_params; parsing what it picks never raises."""
    try:
        fmt = sniff(data, filename)
    except InvalidParams:
        return
    _check(parse(data, fmt))


def test_makad_markdown_export_reads_back_every_paragraph() -> None:
    """makad's Markdown export keeps each entry whole: paragraphs, lists, fences, escaped ## lines."""
    result = _parse_fixture("makad_export.md")
    assert not result.errors
    first, second = result.items
    assert first.title == "Release checklist" and first.tags == ["ops", "release"]
    assert first.content.startswith("Before tagging a release:\n\n1. Run `scripts/test`.")
    assert "```sh\ngit tag -s v1.2.3\n```" in first.content
    assert first.content.endswith("## Not a heading: this line was written by an agent.")
    assert first.source_id == "5f0c2a9e7b1d3c48" and first.created_at_ms == 1733050000000
    assert second.title == "The user edits in helix" and second.source_id.startswith("h-")


def test_makad_json_export_keeps_titles_content_and_tags_exactly() -> None:
    """makad's JSON export reads back with its title, content (indentation too) and tags as they are."""
    result = _parse_fixture("makad_export.json")
    (item,) = result.items
    document = json.loads(_read("makad_export.json"))["entries"][0]
    assert (item.title, item.content, item.tags) == (document["title"], document["content"], document["tags"])


def test_a_plain_pasted_chatgpt_list_imports_every_line() -> None:
    """Copied from "Manage memories" (no dates), every non-blank line is one memory."""
    result = _parse_fixture("chatgpt_plain.txt")
    assert not result.errors and len(result.items) == 4
    assert result.items[2].content == "Has a dog named Biscuit." and result.items[2].created_at_ms is None
    bulleted = parse("- Likes tea\n2. Has two cats\n", "chatgpt")
    assert [i.content for i in bulleted.items] == ["Likes tea", "Has two cats"]


def test_mem0_metadata_category_and_categories_become_tags() -> None:
    """mem0's metadata.category (a string) and metadata.categories (a list) are tags, with categories."""
    result = _parse_fixture("mem0_metadata_categories.json")
    assert [i.tags for i in result.items] == [["preferences"], ["professional_details", "work", "schedule"]]


def test_honcho_conclusions_and_peer_cards() -> None:
    """Honcho conclusions keep id, date and the peer they are about; a peer card's facts import."""
    result = _parse_fixture("honcho_conclusions.json")
    assert not result.errors
    first = result.items[0]
    assert first.content == "alice prefers written summaries over calls"
    assert first.source_id == "cn_01J9ZQ4T5K2M7B8N3R6W0XYZAB" and first.tags == ["alice"]
    assert first.created_at_ms == 1740820527512
    bare = parse(json.dumps(json.loads(_read("honcho_conclusions.json"))["items"]), "honcho")
    assert [i.content for i in bare.items] == [i.content for i in result.items]
    card = _parse_fixture("honcho_peer_card.json")
    assert [i.content for i in card.items] == [
        "Name: Alice",
        "Works as a backend engineer",
        "Lives in Lisbon",
    ]


def test_supermemory_documents_and_memory_entries() -> None:
    """Supermemory documents import their content (else summary); memory entries only the latest,
    not forgotten ones; container tags and metadata.category are tags."""
    docs = _parse_fixture("supermemory_documents.json")
    assert not docs.errors
    first, second = docs.items
    assert (
        first.content.startswith("This document introduces")
        and first.title == "Introduction to Machine Learning"
    )
    assert first.tags == ["user_123", "ai-research", "education"] and first.source_id == "ml-basics-001"
    assert second.content.startswith("Flights to Kyoto") and second.source_id == "def456"
    entries = _parse_fixture("supermemory_memory_entries.json")
    assert [i.content for i in entries.items] == [
        "The user edits code in Neovim with the LazyVim distribution"
    ]
    assert entries.items[0].tags == ["sm_project_default"]
    assert {s.reason for s in entries.skipped} == {
        "a newer version of this memory exists",
        "forgotten in Supermemory",
    }


@pytest.mark.parametrize(
    ("memory", "title"),
    [
        ("Prefers metric units.", "Prefers metric units."),
        ("Prefers metric units, except in recipes from the US.", "Prefers metric units"),
        (
            "Is building a Rust command-line tool that syncs notes between machines",
            "Is building a Rust command-line tool…",
        ),
        ("- **Bold** habit: runs every morning before work, rain or shine", "Bold habit"),
        ("用户喜欢喝绿茶，每天早上都会喝一杯。", "用户喜欢喝绿茶，每天早上都会喝一杯。"),
        ("x" * 500, "x" * 47 + "…"),
        ("   ", ""),
    ],
)
def test_headline_is_short_and_never_the_whole_long_memory(memory: str, title: str) -> None:
    """A title derived from a memory is the memory only when it is short; else its first
    clause or first words, at most 48 characters."""
    assert headline(memory) == title
    assert len(headline(memory)) <= 48


def test_a_chatgpt_line_gets_a_headline_title_and_keeps_its_date() -> None:
    """A dated ChatGPT line: a short title, the whole sentence as content, its date kept."""
    (item,) = parse(
        "[2024-05-12] - Works at a bakery in Lisbon and bakes sourdough every Friday.\n", "chatgpt"
    ).items
    assert (item.title, item.content) == (
        "Works at a bakery in Lisbon…",
        "Works at a bakery in Lisbon and bakes sourdough every Friday.",
    )
    assert item.created_at_ms == to_epoch_ms("2024-05-12")


@pytest.mark.parametrize(
    ("fmt", "data"),
    [
        ("text", "github token ghp_1234567890abcdefghijklmnopqrstuvwxyzAB\n"),
        ("text", "my aws key AKIAIOSFODNN7EXAMPLE is here and more words follow\n"),
        (
            "markdown",
            "# Notes\n\n- Title with ghp_1234567890abcdefghijklmnopqrstuvwxyzAB and a long long tail\n",
        ),
        ("chatgpt", "[2024-01-02] - the key ghp_1234567890abcdefghijklmnopqrstuvwxyzAB opens the deploy\n"),
    ],
)
def test_a_derived_title_never_holds_part_of_a_secret(fmt: str, data: str) -> None:
    """A title cut from a line with a secret is cut after redaction: no piece of the secret is left in it."""
    (item,) = parse(data, fmt).items
    assert "[REDACTED:" in item.title
    assert "ghp_" not in item.title and "AKIA" not in item.title


def test_a_colon_inside_a_word_ends_no_clause() -> None:
    """A headline's clause ends at a colon before a space, not one inside a word or a redaction marker."""
    assert headline("the key [REDACTED:aws_access_key] is here and more words follow") == (
        "the key [REDACTED:aws_access_key] is here and…"
    )
    assert headline("Deploy steps: build it first, then push everything") == "Deploy steps"


def test_a_tag_holding_a_secret_is_redacted_before_it_is_lower_cased_or_cut() -> None:
    """A secret as a tag (a Markdown heading) becomes a redaction slug, never its lower-cased or cut form."""
    assert normalize_tags(
        ["AKIAIOSFODNN7EXAMPLE", "xoxb-123456789012-1234567890123-" + "a" * 24, "Plain Tag"]
    ) == [
        "redacted-aws_access_key",
        "redacted-slack_token",
        "plain-tag",
    ]


def test_a_byte_order_mark_starting_a_later_line_hides_nothing() -> None:
    """Two files joined with `cat a.md b.md`, the second saved with a byte order mark: its
    heading still tags its bullets and its first bullet is still a memory (in markdown,
    text and makad's format alike), without the mark."""
    joined = "- First file's bullet\n\ufeff# Notes\n- Second file's bullet\n\ufeff- Third\n"
    found = parse(joined, "markdown")
    assert [(i.content, i.tags) for i in found.items] == [
        ("First file's bullet", []),
        ("Second file's bullet", ["notes"]),
        ("Third", ["notes"]),
    ]
    assert [i.content for i in parse("one\n\ufefftwo\n", "text").items] == ["one", "two"]
    entries = parse("## A\nx\n\ufeff## B\ny\n", "makad")
    assert [i.content for i in entries.items] == ["x", "y"]


def test_more_memories_than_an_import_reads_are_refused_as_they_are_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Plain lines, mem0 records and makad Markdown entries, one past ``MAX_IMPORT_ITEMS``:
    ``too_large`` with the limit; the Markdown's ``## `` lines are counted before any
    section is built (building them took minutes for a million), and exactly the cap is read."""
    cap = collect.MAX_IMPORT_ITEMS
    for text, fmt_name in (
        ("".join(f"w{i}\n" for i in range(cap + 1)), "text"),
        (json.dumps({"results": [{"memory": f"m{i}"} for i in range(cap + 1)]}), "mem0"),
    ):
        with pytest.raises(collect.TooManyItems) as refused:
            parse(text, fmt_name)
        assert refused.value.data() == {"kind": "too_large", "limit": cap}
    monkeypatch.setattr(makad_importer.fmt, "parse", _never_called)
    for newline in ("\n", "\r\n", "\r"):
        with pytest.raises(collect.TooManyItems):
            parse(f"## h{newline}x{newline}" * (cap + 1), "makad")
    monkeypatch.undo()
    assert len(parse("".join(f"w{i}\n" for i in range(cap)), "text").items) == cap


def _never_called(text: str) -> None:
    """Stands in for a step that must not run."""
    raise AssertionError("the sections were built")


def test_prose_beside_the_bullets_is_named_as_left_out() -> None:
    """A CLAUDE.md's prose lines (under a heading, not bullets) are not imported, and one
    skipped item names their lines and how to import one; code in a fence is not named."""
    text = (
        "# CLAUDE.md\n\n- Use pnpm\n\n## Testing\nRun pytest -q before pushing.\n"
        "Keep tests fast.\n\n```sh\nnpm ci\n```\n\n## Style\n- Tabs for Go\nAlso in C.\n"
    )
    result = parse(text, "claude_md")
    assert [i.content for i in result.items] == ["Use pnpm", "Tabs for Go"]
    (skipped,) = result.skipped
    assert skipped.locator == "lines 6-7, 15"
    assert "not a bullet" in skipped.reason and "- " in skipped.reason


def test_bullets_alone_skip_nothing() -> None:
    """A list of bullets under headings leaves nothing out, so nothing is named."""
    assert parse("# Notes\n\n- one\n  more of one\n- two\n", "markdown").skipped == []

"""Metadata comments: values this version does not understand survive every rewrite byte for byte."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.entry_comment import FIELDS, edit_tokens, read_comment
from makad.core.memory_format import Section, apply_decay, entries, find, parse, render, render_entry, upsert
from makad.core.types import Entry

_HELD = st.sampled_from(
    [
        "origin=robot",
        "status=frozen",
        "scope=planet",
        "createdAt=2024-01-01",
        "createdAt=99999999999999999999",
        "updatedAt=soon",
        "decayTtlMs=forever",
        "x-future=1",
        "stray",
        "origin=manual",
        "status=archived",
        "tags=a,b",
        "reviewer=alice",
        "supersedes=%E2%9C%93",
        "session=s%201",
        "id=dup",
    ]
)


def _section(tokens: list[str], content: str = "body") -> tuple[str, Section]:
    text = f"# M\n\n## Title\n<!-- maka-memory: id=a {' '.join(tokens)} -->\n{content}\n"
    doc = parse(text)
    return text, doc.sections[0]


def _ops(entry: Entry) -> dict[str, Entry]:
    """What the daemon's operations do to an entry (update, archive, restore, retag, approve-edit)."""
    replace = msgspec.structs.replace
    return {
        "update_content": replace(entry, content="changed", updated_at=5),
        "update_title": replace(entry, title="New title", updated_at=5),
        "retag": replace(entry, tags=["x"], updated_at=5),
        "archive": replace(entry, status="archived", updated_at=5),
        "restore": replace(entry, status="active", updated_at=5),
    }


def _changed_keys(before: Entry, after: Entry) -> set[str]:
    return {key for key, attr in FIELDS.items() if getattr(before, attr) != getattr(after, attr)}


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_HELD, max_size=6),
    st.sampled_from(["update_content", "update_title", "retag", "archive", "restore"]),
)
def test_touching_an_entry_keeps_what_it_did_not_change(tokens: list[str], op: str) -> None:
    """Every token whose field the operation did not change is written back byte for byte."""
    text, section = _section(tokens)
    after = _ops(section.entry)[op]
    doc = upsert(parse(text), after)
    written = find(doc, "a")
    assert written is not None
    new_tokens = read_comment(written.raw.split("maka-memory:", 1)[1].split("\n", 1)[0]).tokens
    changed = _changed_keys(section.entry, after)
    for token in ["id=a", *tokens]:
        key = token.partition("=")[0]
        if key not in changed:
            assert token in new_tokens, (token, new_tokens)
    reread = written.entry
    for key in changed:
        attr = FIELDS[key]
        assert getattr(reread, attr) == getattr(after, attr)


def test_future_created_at_and_unknown_origin_survive_update_archive_restore() -> None:
    """`createdAt` past int64, `origin=robot` and `status=frozen` are never rewritten to defaults."""
    text = (
        "## T\n<!-- maka-memory: id=a origin=robot createdAt=99999999999999999999 updatedAt=1 "
        "status=frozen scope=planet -->\nbody\n"
    )
    doc = parse(text)
    entry = entries(doc)[0]
    assert (entry.origin, entry.created_at, entry.status) == ("unknown", 0, "active")
    for after in (
        msgspec.structs.replace(entry, content="new body", updated_at=2),
        msgspec.structs.replace(entry, title="Renamed", updated_at=3),
    ):
        raw = upsert(doc, after).sections[0].raw
        assert "origin=robot createdAt=99999999999999999999" in raw
        assert "status=frozen scope=planet" in raw
    archived = upsert(doc, msgspec.structs.replace(entry, status="archived", updated_at=4))
    assert (
        "origin=robot createdAt=99999999999999999999 updatedAt=4 status=archived scope=planet"
        in archived.sections[0].raw
    )


def test_unchanged_heading_and_content_keep_their_bytes() -> None:
    """Archiving rewrites only the comment's changed tokens; heading and content lines stay as typed."""
    text = "##   Odd  heading ##\n\n<!-- maka-memory:   id=a   status=active   x=1 -->\ncontent  \n\n\n"
    doc = parse(text)
    after = upsert(doc, msgspec.structs.replace(entries(doc)[0], status="archived"))
    assert render(after) == (
        "##   Odd  heading ##\n\n<!-- maka-memory: id=a status=archived x=1 -->\ncontent  \n\n\n"
    )


def test_a_section_without_comment_gets_one_and_keeps_its_text() -> None:
    """A hand-written entry touched by the daemon gains a full comment; its lines are kept."""
    text = "## Note ##\nhand written\n"
    doc = parse(text)
    entry = entries(doc)[0]
    raw = upsert(doc, msgspec.structs.replace(entry, status="archived")).sections[0].raw
    assert raw.startswith("## Note ##\n<!-- maka-memory: id=" + entry.id + " origin=unknown")
    assert raw.endswith("status=archived -->\nhand written\n")


def test_no_tags_no_token_and_an_empty_one_still_reads() -> None:
    """An entry without tags is written without a ``tags=`` token; an empty ``tags=`` an older
    version wrote reads as no tags, stays while the tags do not change, and goes when they
    are cleared; tags written when set."""
    bare = render_entry(Entry(id="n", title="T", content="c", created_at=1, updated_at=1))
    assert "tags" not in bare
    old = "## T\n<!-- maka-memory: id=o origin=manual createdAt=1 updatedAt=1 status=active tags= -->\nc\n"
    doc = parse(old)
    (entry,) = entries(doc)
    assert entry.tags == [] and not doc.sections[0].comment_malformed
    archived = upsert(doc, msgspec.structs.replace(entry, status="archived"))
    assert "status=archived tags= -->" in render(archived)  # untouched field, kept as written
    tagged = upsert(doc, msgspec.structs.replace(entry, tags=["ops"]))
    assert "status=active tags=ops -->" in render(tagged)
    cleared = upsert(tagged, msgspec.structs.replace(entries(tagged)[0], tags=[]))
    assert "tags" not in render(cleared)


def test_edit_tokens_adds_missing_fields_after_the_last_known_one() -> None:
    """A changed field the comment lacked goes after the last known token, before unknown ones."""
    before = Entry(id="a", title="t", content="c")
    after = msgspec.structs.replace(before, decay_ttl_ms=5)
    assert edit_tokens(["id=a", "origin=robot", "k=v"], before, "a", after) == [
        "id=a",
        "origin=robot",
        "decayTtlMs=5",
        "k=v",
    ]


def test_decay_leaves_entries_with_held_clock_values_alone() -> None:
    """An entry whose createdAt, decayTtlMs or status is not understood is never decayed."""
    for token in ("createdAt=yesterday", "status=frozen", "decayTtlMs=1d"):
        text = f"## T\n<!-- maka-memory: id=a createdAt=1 decayTtlMs=1 {token} -->\nx\n"
        assert apply_decay(parse(text), now_ms=10**13)[1] == []

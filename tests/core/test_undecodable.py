"""Bytes that are not UTF-8: kept on disk, shown as cp1252, never a lone surrogate outside."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.memory_format import entries, parse, render, upsert
from makad.core.types import Entry
from makad.core.undecodable import display, undecodable_lines


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def test_display_reads_bad_bytes_as_cp1252() -> None:
    """Latin-1 é, cp1252 smart quotes and the five bytes cp1252 leaves undefined all show."""
    assert display(_decode(b"caf\xe9 \x93q\x94 \x81")) == "café “q” \x81"
    assert display("plain ascii") == "plain ascii"
    assert display("\ud800") == "\ufffd"


def test_undecodable_lines_are_numbered_from_one() -> None:
    """Each line holding bad bytes is named, whatever its line ending."""
    assert undecodable_lines(_decode(b"ok\n\xe9\r\nok\r\xff")) == [2, 4]
    assert undecodable_lines("é is valid UTF-8\n") == []


_LATIN = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, blacklist_characters="\x7f"), max_size=20
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(_LATIN, _LATIN), min_size=1, max_size=4),
    st.sampled_from(["latin-1", "cp1252"]),
    st.binary(max_size=30),
)
def test_non_utf8_file_reads_clean_and_untouched_sections_keep_their_bytes(
    items: list[tuple[str, str]], encoding: str, noise: bytes
) -> None:
    """Entries of a Latin-1/cp1252 file carry no surrogate; a daemon write keeps the other bytes."""
    body = "".join(
        f"## {t.strip() or 'x'}\n<!-- maka-memory: id=e{i} -->\n{c}\n\n" for i, (t, c) in enumerate(items)
    )
    data = ("# M\n\n" + body).encode(encoding, "replace") + noise.replace(b"#", b"")
    doc = parse(_decode(data))
    for entry in entries(doc):
        msgspec.json.encode(entry)  # no lone surrogate: encodable as JSON
        assert all(not 0xD800 <= ord(ch) <= 0xDFFF for ch in entry.title + entry.content + entry.id)
    added = upsert(doc, Entry(id="new", title="Nouveau", content="écrit par le démon"))
    written = render(added).encode("utf-8", "surrogateescape")
    assert written.startswith(data)
    first = entries(doc)[0]
    changed = upsert(doc, msgspec.structs.replace(first, status="archived"))
    out = render(changed).encode("utf-8", "surrogateescape")
    for section in doc.sections[1:]:
        assert section.raw.encode("utf-8", "surrogateescape") in out

"""Metadata warnings: what a hand-typed comment says that the daemon does not understand."""

from __future__ import annotations

from makad.core import memory_format as fmt
from makad.core.metadata_warnings import metadata
from makad.core.types import Entry


def warnings_of(text: str) -> list[tuple[str, int | None, str]]:
    return [(w.kind, w.line, w.message) for w in metadata(fmt.parse(text))]


def test_what_the_daemon_writes_warns_about_nothing() -> None:
    """Entries rendered by the daemon, every optional field set, give no warning."""
    doc = fmt.new_document()
    for i in range(3):
        entry = Entry(
            id=f"{i:016x}",
            title=f"T{i}",
            content="c",
            origin="manual",
            created_at=1,
            updated_at=2,
            tags=["a", "pinned"],
            decay_ttl_ms=5,
            scope="session",
            session_id="s 1",
            source_refs=["event:s:1"],
            supersedes="x",
        )
        doc = fmt.upsert(doc, entry)
    assert metadata(doc) == []


def test_own_keys_and_comments_without_an_id_warn_about_nothing() -> None:
    """A key close to no known one, a comment holding only tags=pinned and valid values are silent."""
    text = (
        "## A\n<!-- maka-memory: tags=pinned -->\na\n"
        "## B\n<!-- maka-memory: reviewer=ann kind=note confidence=0.7 status=archived -->\nb\n"
        "## C\nno comment at all\n"
    )
    assert warnings_of(text) == []


def test_lines_count_crlf_and_blank_lines_before_the_comment() -> None:
    """The warning's line is the comment's, past CRLF endings and blank lines under the heading."""
    text = "# Maka Memory\r\n\r\n## A\r\nx\r\n\r\n## B\r\n\r\n<!-- maka-memory: status=archvied -->\r\nb\r\n"
    ((kind, line, message),) = warnings_of(text)
    assert (kind, line) == ("unknown_value", 8) and "did you mean status=archived?" in message


def test_a_misspelt_key_keeps_its_value_in_the_guess() -> None:
    """tag=ops suggests tags=ops; a key differing only in case suggests the right case."""
    found = warnings_of("## A\n<!-- maka-memory: tag=ops Status=active -->\na\n")
    assert [m.rsplit("; ", 1)[1] for _, _, m in found] == [
        "did you mean tags=ops?",
        "did you mean status=active?",
    ]


def test_the_first_confidence_counts_even_when_unreadable() -> None:
    """confidence=hgh then confidence=high: the first is read (and ignored), the second is a repeat."""
    found = warnings_of("## A\n<!-- maka-memory: confidence=hgh confidence=high -->\na\n")
    assert [kind for kind, _, _ in found] == ["unknown_value", "duplicate_key"]
    assert "did you mean confidence=high?" in found[0][2]
    assert "confidence=hgh counts" in found[1][2]


def test_a_repeated_key_after_a_bad_value_is_the_one_read() -> None:
    """status=actve status=archived: the second is read, so only the first warns, naming what the entry reads as."""
    found = warnings_of("## A\n<!-- maka-memory: status=actve status=archived -->\na\n")
    assert [(kind, "reads as archived" in message) for kind, _, message in found] == [("unknown_value", True)]


def test_bytes_that_are_not_utf8_stay_out_of_the_message() -> None:
    """A token holding undecodable bytes is shown as cp1252 text, never as a lone surrogate."""
    text = b"## A\n<!-- maka-memory: status=act\xe9ve -->\na\n".decode("utf-8", "surrogateescape")
    ((_, _, message),) = warnings_of(text)
    message.encode("utf-8")  # raises on a surrogate
    assert "status=act\u00e9ve" in message


def test_old_mac_line_endings_count_as_lines() -> None:
    """A file with CR-only line endings names the comment's line as an editor shows it."""
    text = "# Maka Memory\r\r## A\rx\r\r## B\r<!-- maka-memory: origin=manul -->\rb\r"
    ((kind, line, message),) = warnings_of(text)
    assert (kind, line) == ("unknown_value", 7) and "did you mean origin=manual?" in message


def test_text_after_the_comment_is_named() -> None:
    """Text after --> on the comment line (read as content) is bad_metadata, on that line."""
    ((kind, line, message),) = warnings_of("## A\n<!-- maka-memory: tags=ops --> Deploy on Tuesdays.\n")
    assert (kind, line) == ("bad_metadata", 2) and "after -->" in message

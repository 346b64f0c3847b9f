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


def test_a_date_in_unix_seconds_is_an_unlikely_date() -> None:
    """createdAt= and updatedAt= given in Unix seconds (read as a day in January 1970) warn
    unlikely_date, naming the day they read as, milliseconds as the format makad reads and
    the value meant."""
    found = warnings_of("## A\n<!-- maka-memory: createdAt=1733500000 updatedAt=1733500000 -->\na\n")
    assert [(kind, line) for kind, line, _ in found] == [("unlikely_date", 2), ("unlikely_date", 2)]
    created, updated = (message for _, _, message in found)
    assert "createdAt=1733500000" in created and "1970-01-21" in created
    assert "Unix milliseconds" in created and "seconds" in created
    assert created.endswith("did you mean createdAt=1733500000000 (2024-12-06)?")
    assert "updated" in updated and updated.endswith("did you mean updatedAt=1733500000000 (2024-12-06)?")


def test_a_date_in_microseconds_is_an_unlikely_date() -> None:
    """A 16-digit createdAt (microseconds, read as a year past 5000) warns with the milliseconds meant."""
    ((kind, _, message),) = warnings_of("## A\n<!-- maka-memory: createdAt=1733500000000000 -->\na\n")
    assert kind == "unlikely_date" and "microseconds" in message
    assert message.endswith("did you mean createdAt=1733500000000 (2024-12-06)?")


def test_plausible_and_zero_dates_warn_about_nothing() -> None:
    """Milliseconds of this century, 0 (no date) and the small numbers tests write are silent."""
    assert warnings_of("## A\n<!-- maka-memory: createdAt=1764547200000 updatedAt=0 -->\na\n") == []
    assert warnings_of("## B\n<!-- maka-memory: createdAt=1 updatedAt=2 -->\nb\n") == []


def test_an_impossible_or_slashed_date_says_the_format_makad_reads() -> None:
    """2026-13-45 and 12/04/2026 warn unknown_value naming Unix milliseconds with an example;
    a slashed date gets both readings (day first, month first) as milliseconds."""
    found = warnings_of("## A\n<!-- maka-memory: createdAt=2026-13-45 updatedAt=12/04/2026 -->\na\n")
    assert [kind for kind, _, _ in found] == ["unknown_value", "unknown_value"]
    impossible, slashed = (message for _, _, message in found)
    assert "Unix milliseconds" in impossible and "1764547200000 is 2025-12-01" in impossible
    assert (
        "did you mean updatedAt=1775952000000 (2026-04-12) or updatedAt=1796342400000 (2026-12-04)?"
        in slashed
    )


def test_a_misspelt_date_key_gets_its_value_in_milliseconds() -> None:
    """updated=1733500000 (seconds) suggests updatedAt= with milliseconds, created=2024-01-01
    the ISO date's milliseconds, not the value as typed."""
    found = warnings_of("## A\n<!-- maka-memory: updated=1733500000 created=2024-01-01 -->\na\n")
    assert [m.rsplit("; ", 1)[1] for _, _, m in found] == [
        "did you mean updatedAt=1733500000000?",
        "did you mean createdAt=1704067200000?",
    ]


def test_each_line_warning_names_the_entry_it_is_about() -> None:
    """A metadata warning on a comment's line carries the id of its entry (the one the entry
    answers to: `aaaa~2` for a repeated id), so a client can show it with that entry."""
    text = (
        "## A\n<!-- maka-memory: id=aaaa status=actve -->\na\n"
        "## B\n<!-- maka-memory: id=aaaa createdAt=1733500000 -->\nb\n"
    )
    found = [(w.kind, w.entry_id) for w in metadata(fmt.parse(text))]
    assert found == [("unknown_value", "aaaa"), ("unlikely_date", "aaaa~2"), ("duplicate_id", "aaaa~2")]


def test_a_quoted_date_gets_its_milliseconds() -> None:
    """createdAt="2024-01-01" (quoted, as in YAML) suggests the ISO date's milliseconds."""
    ((kind, _, message),) = warnings_of('## A\n<!-- maka-memory: createdAt="2024-01-01" -->\na\n')
    assert kind == "unknown_value" and message.endswith("did you mean createdAt=1704067200000?")

"""UTF-16 and UTF-32 memory files without a byte-order mark are recognised by their NULs."""

from __future__ import annotations

from pathlib import Path

import pytest

from makad.errors import IOFailure
from makad.store.memory_files import looks_wide, read_memory_file

TEXT = "# Maka Memory\r\n\r\n## Wide entry\r\nsaved without a mark, café\r\n"


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_wide_text_without_a_mark_is_recognised(encoding: str) -> None:
    """Every other byte (or more) NUL at one parity: UTF-16/32 text, either byte order."""
    assert looks_wide(TEXT.encode(encoding))
    assert looks_wide("A".encode(encoding))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"A",
        TEXT.encode("utf-8"),
        "日本語のメモ — naïve".encode(),
        b"# Maka Memory\n\n## A\nbody with one stray \x00 byte and \x00 another\n",
        b"hi\x00",
        b"\x00" * 4096,
        TEXT.encode("utf-8") + b"\x00" * 2000,
        b"\x00" * 1024 + TEXT.encode("utf-8"),
    ],
)
def test_utf8_text_is_not_wide(data: bytes) -> None:
    """UTF-8 text, empty, with a stray NUL or two, of an odd length or with a zeroed block
    (as a crash leaves), is not taken for UTF-16."""
    assert not looks_wide(data)


def test_a_wide_file_is_refused_with_its_name(tmp_path: Path) -> None:
    """read_memory_file refuses a BOM-less UTF-16 MEMORY.md as utf16, naming it; the file keeps its bytes."""
    path = tmp_path / "MEMORY.md"
    path.write_bytes(TEXT.encode("utf-16-le"))
    with pytest.raises(IOFailure) as refused:
        read_memory_file(path, 128 * 1024)
    assert refused.value.details["reason"] == "utf16" and refused.value.details["file"] == "MEMORY.md"
    assert path.read_bytes() == TEXT.encode("utf-16-le")


def test_a_memory_file_with_a_zeroed_tail_is_read(tmp_path: Path) -> None:
    """A UTF-8 MEMORY.md whose end a crash zeroed is read as the text it is, not refused as UTF-16."""
    path = tmp_path / "MEMORY.md"
    path.write_bytes(TEXT.encode("utf-8") + b"\x00" * 2000)
    read = read_memory_file(path, 128 * 1024)
    assert read.text is not None and read.text.startswith("# Maka Memory\r\n\r\n## Wide entry")

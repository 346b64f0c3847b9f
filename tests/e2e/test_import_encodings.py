"""Importing Markdown files as editors save them: byte order marks, CRLF, UTF-16, Latin-1."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from maka.errors import InvalidParams
from tests.cli.helpers import run_maka
from tests.support import DaemonProcess

NOTES = "# Notes\r\n\r\n- Deploys happen on Tuesdays\r\n- Prefers pnpm over npm\r\n"


def imported(d: DaemonProcess, ws: Path, path: Path) -> list[tuple[str, list[str]]]:
    """The proposals an import of ``path`` queued: (content, tags) each."""
    d.call("import_memories", {"workspace": str(ws), "path": str(path)})
    listing: dict[str, Any] = d.call("list_proposals", {"workspace": str(ws)})
    return sorted((p["proposal"]["content"], p["proposal"]["tags"]) for p in listing["proposals"])


EXPECTED = [("Deploys happen on Tuesdays", ["notes"]), ("Prefers pnpm over npm", ["notes"])]


@pytest.mark.parametrize(
    ("saved_as", "data"),
    [
        ("UTF-8 with a byte order mark (Windows Notepad)", b"\xef\xbb\xbf" + NOTES.encode()),
        ("UTF-16 LE with its byte order mark (Notepad's Unicode)", NOTES.encode("utf-16")),
        ("UTF-16 BE with its byte order mark", b"\xfe\xff" + NOTES.encode("utf-16-be")),
        ("UTF-32 with its byte order mark", NOTES.encode("utf-32")),
    ],
)
def test_a_file_with_a_byte_order_mark_imports_its_bullets(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path, saved_as: str, data: bytes
) -> None:
    """A Markdown file with a byte order mark and CRLF line ends imports each bullet under
    its heading's tag, whatever Unicode encoding the mark names."""
    path = short_tmp / "notes.md"
    path.write_bytes(data)
    assert imported(module_daemon, new_ws, path) == EXPECTED, saved_as


def test_latin1_bytes_import_as_the_characters_meant(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path
) -> None:
    """A file saved as Latin-1 (not UTF-8) imports é as é, not as a replacement character."""
    path = short_tmp / "cafe.md"
    path.write_bytes("# Places\n\n- Café opens at nine\n".encode("latin-1"))
    assert imported(module_daemon, new_ws, path) == [("Café opens at nine", ["places"])]


def test_a_file_without_a_heading_imports_its_bullets_untagged(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path
) -> None:
    """Bullets with no heading above them import with no tag."""
    path = short_tmp / "plain.md"
    path.write_bytes(b"\xef\xbb\xbf- one thing\r\n- another\r\n")
    assert imported(module_daemon, new_ws, path) == [("another", []), ("one thing", [])]


@pytest.mark.parametrize("data", [b"", b"\xef\xbb\xbf", "\r\n".encode("utf-16")])
def test_an_empty_file_is_refused_as_empty(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path, data: bytes
) -> None:
    """An empty file, one holding only a byte order mark or only line ends in UTF-16 is
    invalid_params with reason empty, and nothing is queued."""
    path = short_tmp / "empty.md"
    path.write_bytes(data)
    with pytest.raises(InvalidParams) as raised:
        module_daemon.call("import_memories", {"workspace": str(new_ws), "path": str(path)})
    assert raised.value.data["reason"] == "empty"
    assert not (new_ws / "memory" / "PENDING.md").exists()


def test_utf16_without_a_byte_order_mark_is_refused_saying_how_to_save_it(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path
) -> None:
    """UTF-16 with no mark to tell its byte order is invalid_params (binary) saying to save it as UTF-8."""
    path = short_tmp / "nomark.md"
    path.write_bytes(NOTES.encode("utf-16-le"))
    with pytest.raises(InvalidParams) as raised:
        module_daemon.call("import_memories", {"workspace": str(new_ws), "path": str(path)})
    assert raised.value.data["reason"] == "binary" and "save that as UTF-8" in raised.value.message


def test_maka_import_dash_reads_stdin(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """`cat notes.md | maka import -` imports what is piped in, as `maka memory add T -` reads
    its content; an empty stdin is refused as empty."""
    result = run_maka(module_daemon, "import", "-", "-w", str(new_ws), workspace=False, input=NOTES)
    assert result.returncode == 0, result.stderr
    assert "Imported 2 memories from markdown" in result.stdout
    listing = module_daemon.call("list_proposals", {"workspace": str(new_ws)})
    assert sorted(p["proposal"]["content"] for p in listing["proposals"]) == [c for c, _ in EXPECTED]
    empty = run_maka(module_daemon, "import", "-", "-w", str(new_ws), workspace=False, input="")
    assert empty.returncode == 1 and "empty" in empty.stderr


def test_a_directory_with_file_names_that_are_not_utf8_imports_them(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path
) -> None:
    """A memory directory holding a topic file whose name is Latin-1 bytes (not UTF-8, as a
    zip or an old file system leaves them) imports its memories, the name read as cp1252;
    the daemon serves on."""
    folder = short_tmp / "claude"
    folder.mkdir()
    (folder / "MEMORY.md").write_text("# Memory\n\n- Deploys happen on Tuesdays\n")
    topic = os.path.join(os.fsencode(folder), "café.md".encode("latin-1"))
    with open(topic, "wb") as out:
        out.write(b"---\nname: cafe\ndescription: where\n---\n\nThe caf\xe9 opens at nine\n")
    module_daemon.call("import_memories", {"workspace": str(new_ws), "path": str(folder)})
    listing: dict[str, Any] = module_daemon.call("list_proposals", {"workspace": str(new_ws)})
    contents = [p["proposal"]["content"] for p in listing["proposals"]]
    assert any("Tuesdays" in c for c in contents), contents
    assert any("café opens at nine" in c for c in contents), contents
    assert module_daemon.call("ping") == "pong"

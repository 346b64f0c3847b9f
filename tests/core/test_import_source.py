"""Reading an import's files: a directory walk does not follow a file swapped for a symlink."""

from __future__ import annotations

from pathlib import Path

import pytest

from makad.errors import InvalidParams
from makad.service import import_source


def test_a_walked_file_swapped_for_a_symlink_is_refused_not_followed(tmp_path: Path) -> None:
    """A Markdown file the walk found, then replaced by a symlink out of the folder, is refused."""
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "MEMORY.md").write_text("- kept\n")
    (folder / "notes.md").write_text("- topic\n")
    secret = tmp_path / "elsewhere.md"
    secret.write_text("- not meant to be imported\n")
    found = import_source.markdown_files(folder)
    assert [p.name for p in found] == ["MEMORY.md", "notes.md"]
    (folder / "notes.md").unlink()
    (folder / "notes.md").symlink_to(secret)
    with pytest.raises(InvalidParams, match="became a symlink"):
        import_source._read_bounded(folder / "notes.md", import_source.MAX_IMPORT_BYTES, follow=False)


def test_a_file_import_may_name_a_symlink(tmp_path: Path) -> None:
    """A single file named by the user is read through a symlink, as the user asked."""
    target = tmp_path / "real.md"
    target.write_text("- one\n")
    (tmp_path / "link.md").symlink_to(target)
    text, files, name = import_source.read_import_source(str(tmp_path / "link.md"), None)
    assert (text, files, name) == ("- one\n", None, "link.md")

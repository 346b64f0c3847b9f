"""The README and docs/FORMAT.md show memory files that read as they say."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from makad.core import memory_format as fmt

ROOT = Path(__file__).resolve().parents[2]


def markdown_blocks(path: Path) -> list[str]:
    """Each ```markdown block, dedented (blocks inside a list item are indented)."""
    found = re.findall(r"^ *```markdown\n(.*?)^ *```", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    return [textwrap.dedent(block) for block in found]


def test_readme_example_is_six_lines_and_one_entry() -> None:
    """The README's MEMORY.md example is 6 lines, one entry with the metadata it shows."""
    (block,) = markdown_blocks(ROOT / "README.md")
    assert len(block.splitlines()) == 6
    (entry,) = fmt.entries(fmt.parse(block))
    assert entry.title == "Deploys happen on Tuesdays" and entry.tags == ["ops"]
    assert entry.content == "Releases go out on Tuesday mornings,\nnever on Fridays."


def test_readme_says_where_memory_lives_and_stands_alone() -> None:
    """The README names the file's place and links only into the repository for the design."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "<workspace>/memory/MEMORY.md" in text and "docs/FORMAT.md" in text
    assert "DESIGN.md" not in text and "shared folder" not in text


def test_format_doc_examples_parse_as_described() -> None:
    """docs/FORMAT.md's full entry has a comment; its hand-typed one gets a derived h- id."""
    blocks = markdown_blocks(ROOT / "docs" / "FORMAT.md")
    full, typed = (fmt.entries(fmt.parse(b)) for b in blocks[:2])
    assert full[0].origin == "manual" and full[0].id == "6c1f0e2a9b3d4c57"
    assert typed[0].origin == "unknown" and typed[0].id.startswith("h-")


def test_format_doc_names_every_metadata_key() -> None:
    """Every key the daemon reads from the comment is in docs/FORMAT.md's table."""
    from makad.core.entry_comment import FIELDS

    text = (ROOT / "docs" / "FORMAT.md").read_text(encoding="utf-8")
    for key in [*FIELDS, "confidence"]:
        assert f"`{key}`" in text, key

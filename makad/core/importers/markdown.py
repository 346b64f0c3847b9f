"""Plain Markdown: top-level bullets are memories, the nearest heading is their tag.

Nested bullets and indented lines belong to the bullet above them; fenced code,
HTML comments and prose paragraphs are not memories. Also the YAML-ish
frontmatter reader the Claude Code topic files need (flat ``key: value`` pairs,
one level of nesting, no YAML library).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

import msgspec

from makad.core.entry_text import text_lines
from makad.core.importers.collect import Collector
from makad.core.importers.records import FormatName, ImportResult, ItemProblem
from makad.core.markdown_lines import atx_heading, without_comments

BULLET: Final = re.compile(r"^ {0,3}(?:[-*+]|\d{1,9}[.)])(?:\s++(?P<text>.*))?$")
_CHECKBOX: Final = re.compile(r"^\[[ xX]\]\s+")
_FENCE: Final = re.compile(r"^\s*+(```|~~~)")


class Bullet(msgspec.Struct, frozen=True):
    line: int
    text: str
    heading: str | None


def bullets(text: str, prose: list[int] | None = None) -> Iterator[Bullet]:
    """Top-level bullets with their continuation lines, in order; the numbers of the other
    lines of text (not blank, no heading, outside fenced code) are appended to ``prose``."""
    heading: str | None = None
    current: list[str] | None = None
    start = 0
    in_fence = False
    for number, raw in enumerate(text_lines(text), start=1):
        if _FENCE.match(raw):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = without_comments(raw).rstrip()
        heading_match = atx_heading(line)
        bullet_match = BULLET.match(line)
        indented = line[:2] == "  " or line[:1] == "\t"
        if current is not None and line.strip() and indented:
            current.append(line.strip())
            continue
        if current is not None and (heading_match or bullet_match or line.strip()):
            yield Bullet(start, "\n".join(current).strip(), heading)
            current = None
        if heading_match:
            heading = (heading_match.text or "").strip() or None
        elif bullet_match:
            start = number
            current = [_CHECKBOX.sub("", (bullet_match.group("text") or "").strip())]
        elif prose is not None and line.strip():
            prose.append(number)
    if current is not None:
        yield Bullet(start, "\n".join(current).strip(), heading)


def line_ranges(numbers: list[int]) -> str:
    """``[6, 7, 15]`` as ``6-7, 15``."""
    spans: list[list[int]] = []
    for number in numbers:
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def parse_bullets(text: str, fmt: FormatName = "markdown", skip_imports: bool = False) -> ImportResult:
    """Each top-level bullet as an item tagged with its heading; no bullets is an error."""
    out = Collector(fmt)
    found = False
    prose: list[int] = []
    for bullet in bullets(text, prose):
        if skip_imports and bullet.text.startswith("@") and " " not in bullet.text:
            continue
        found = True
        out.read(f"line {bullet.line}", _bullet_item, out, bullet)
    if not found:
        out.error("file", "no bullet items found")
        return out.result()
    if skip_imports:  # a line that is one @path imports another file: no memory of its own
        lines = text_lines(text)
        prose = [n for n in prose if not _is_import_line(lines[n - 1])]
    if prose:
        out.skip(
            f"line{'s' if len(prose) > 1 else ''} {line_ranges(prose)}",
            "text, not a bullet: only top-level `- ` bullets are imported (start a line with `- ` "
            "to import it, then import the file again)",
        )
    return out.result()


def _is_import_line(line: str) -> bool:
    """``@path`` alone on its line: CLAUDE.md's import of another file."""
    word = line.strip()
    return word.startswith("@") and not any(c.isspace() for c in word)


def _bullet_item(out: Collector, bullet: Bullet) -> None:
    if not bullet.text:
        raise ItemProblem("empty bullet")
    tags = [bullet.heading] if bullet.heading else []
    out.item(f"line {bullet.line}", bullet.text, tags=tags)


class Frontmatter(msgspec.Struct, frozen=True):
    fields: dict[str, str]
    body: str


def split_frontmatter(text: str) -> Frontmatter | None:
    """The ``---`` block's fields (nested keys flattened as ``parent.key``) and the body.

    ``None`` when the text has no frontmatter; ``ItemProblem`` when it opens one
    and never closes it.
    """
    lines = text_lines(text)
    if not lines or lines[0].strip() != "---":
        return None
    fields: dict[str, str] = {}
    parent: str | None = None
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() in ("---", "..."):
            return Frontmatter(fields, "\n".join(lines[index + 1 :]))
        if not line.strip() or line.lstrip().startswith("#") or ":" not in line:
            continue
        key, _, value = line.partition(":")
        nested = line[:1] in (" ", "\t")
        name = key.strip()
        if nested and parent is not None:
            name = f"{parent}.{name}"
        elif not nested:
            parent = name if not value.strip() else None
        fields[name] = value.strip().strip("\"'")
    raise ItemProblem("frontmatter is not closed")

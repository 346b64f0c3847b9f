"""Claude Code memory: the auto-memory directory, and CLAUDE.md instruction files.

Auto memory lives in ``~/.claude/projects/<project>/memory/``: ``MEMORY.md`` is an
index of one-line pointers (``- [Title](file.md) — hook``), each topic file starts
with frontmatter ``name``, ``description`` and ``type`` (``user``, ``feedback``,
``project``, ``reference``; newer versions nest it as ``metadata.type``). The
service reads the directory and passes the topic files as ``files``
(relative path → text). Bullets written straight into ``MEMORY.md`` (older
versions) and topic files the index does not link are imported too.

``CLAUDE.md`` is instructions in Markdown; its bullets are the memories, and
``@path`` import lines are not.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Final

from makad.core.entry_text import text_lines
from makad.core.importers.collect import Collector
from makad.core.importers.markdown import BULLET, bullets, parse_bullets, split_frontmatter
from makad.core.importers.records import ImportResult, ItemProblem

INDEX_NAME: Final = "MEMORY.md"
INDEX_LINK: Final = re.compile(
    r"^\s*[-*+]\s+\[(?P<title>[^\]]+)\]\((?P<path>[^)\s]+\.md)\)\s*(?:[—–:-]+\s*(?P<hook>.*))?$"
)


def _normal_path(path: str) -> str:
    path = path.strip().replace("\\", "/")
    return posixpath.normpath(path) if path else path


def is_index(text: str) -> bool:
    """Most bullets of the text are links to ``.md`` topic files."""
    lines = [ln for ln in text_lines(text) if BULLET.match(ln)]
    links = [ln for ln in lines if INDEX_LINK.match(ln)]
    return bool(links) and 2 * len(links) >= len(lines)


def is_topic_file(text: str) -> bool:
    """The text opens with frontmatter carrying a ``name`` and a description or type."""
    try:
        front = split_frontmatter(text)
    except ItemProblem:
        return False
    if front is None or "name" not in front.fields:
        return False
    return any(key in front.fields for key in ("description", "type", "metadata.type"))


def parse_claude_code(text: str, files: Mapping[str, str] | None = None) -> ImportResult:
    out = Collector("claude_code")
    topics = {_normal_path(path): body for path, body in (files or {}).items()}
    index = text if text.strip() else topics.get(INDEX_NAME, "")
    if index.lstrip().startswith("---"):
        out.read("file", _topic_item, out, "file", index, None)
        return out.result()
    linked: set[str] = set()
    for number, line in enumerate(text_lines(index), start=1):
        link = INDEX_LINK.match(line)
        if link is None:
            continue
        path = _normal_path(link.group("path"))
        linked.add(path)
        if path not in topics:
            out.error(f"{INDEX_NAME}:{number}", "linked topic file was not provided")
            continue
        out.read(path, _topic_item, out, path, topics[path], link.group("title"))
    lines = text_lines(index)
    for bullet in bullets(index):
        if not INDEX_LINK.match(lines[bullet.line - 1]):
            out.read(f"{INDEX_NAME}:{bullet.line}", _index_bullet, out, bullet.line, bullet.text)
    for path in sorted(topics):
        if path not in linked and path != INDEX_NAME and path.endswith(".md"):
            out.read(path, _topic_item, out, path, topics[path], None)
    return out.result()


def _index_bullet(out: Collector, line: int, text: str) -> None:
    if not text:
        raise ItemProblem("empty bullet")
    out.item(f"{INDEX_NAME}:{line}", text)


def _topic_item(out: Collector, path: str, text: str, link_title: str | None) -> None:
    front = split_frontmatter(text)
    fields = front.fields if front is not None else {}
    body = (front.body if front is not None else text).strip()
    description = fields.get("description", "")
    kind = fields.get("type") or fields.get("metadata.type")
    stem = posixpath.splitext(posixpath.basename(path))[0].replace("_", " ")
    out.item(
        path,
        body or description,
        title=link_title or fields.get("name") or description or (stem if path != "file" else None),
        tags=[kind] if kind else [],
        source_id=path if path != "file" else None,
        created=fields.get("created") or fields.get("createdAt") or fields.get("date"),
        updated=fields.get("updated") or fields.get("updatedAt"),
    )


def parse_claude_md(text: str) -> ImportResult:
    return parse_bullets(text, "claude_md", skip_imports=True)

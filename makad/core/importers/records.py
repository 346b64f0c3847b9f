"""What an import yields: items, per-item errors, and the keys that make re-imports idempotent."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Final, Literal, get_args

import msgspec

from makad.core.normal_form import normalized
from makad.core.redaction import redact
from makad.core.types import Record

FormatName = Literal[
    "makad",
    "mem0",
    "openmemory",
    "chatgpt",
    "claude_code",
    "claude_md",
    "mcp_memory",
    "letta",
    "honcho",
    "supermemory",
    "markdown",
    "text",
]
FORMATS: Final[tuple[FormatName, ...]] = get_args(FormatName)
# What each format's reader looks for: named when a file yields no memory at all.
EXPECTED: Final[dict[FormatName, str]] = {
    "makad": 'a makad export: JSON {"entries": [...]} or MEMORY.md-style "## Title" sections',
    "mem0": 'mem0 get_all JSON: {"results": [{"memory": "..."}]} or a list of such records',
    "openmemory": 'an OpenMemory export: memories.json or memories.jsonl with "content" records',
    "chatgpt": 'ChatGPT saved memories: one memory per line ("[2024-05-12] - text" or plain lines)',
    "claude_code": "a Claude Code memory directory: MEMORY.md index and topic files with frontmatter",
    "claude_md": 'CLAUDE.md instructions with bullets ("- text")',
    "mcp_memory": 'the MCP memory server\'s JSONL: {"type": "entity", "observations": [...]} lines',
    "letta": "a Letta agent file (.af) with memory blocks",
    "honcho": 'Honcho conclusions or observations: {"items": [{"content": ..., "observer_id": ...}]}, '
    'a list of them, or a peer card {"peer_card": [...]}',
    "supermemory": 'a Supermemory document list {"memories": [...], "pagination": ...} or '
    '{"documents": [{"memoryEntries": [...]}]}',
    "markdown": 'Markdown with top-level bullets ("- text")',
    "text": "plain text: one memory per line",
}

TITLE_MAX_CHARS: Final = 80
MAX_TAGS: Final = 10
TAG_MAX_CHARS: Final = 40
FALLBACK_TITLE: Final = "Imported memory"
# A reason that means a parser bug, not bad input: tests assert it never appears.
INTERNAL_REASON: Final = "internal parser error"


class ImportItem(Record):
    """One memory found in a source, ready to be proposed with origin ``imported``."""

    title: str
    content: str
    source_id: str
    source_format: FormatName
    tags: list[str] = msgspec.field(default_factory=list)
    created_at_ms: int | None = None
    updated_at_ms: int | None = None
    locator: str = ""
    # Milliseconds after its creation when the memory archives itself (makad's own exports).
    decay_ttl_ms: int | None = None


class ItemError(Record):
    """Why one item (or the whole input, locator ``file``) was not imported; never its content."""

    locator: str
    reason: str


class ImportResult(Record):
    """Everything one parse found: what to import, what was wrong, what was left out on purpose."""

    format: FormatName
    items: list[ImportItem] = msgspec.field(default_factory=list)
    errors: list[ItemError] = msgspec.field(default_factory=list)
    skipped: list[ItemError] = msgspec.field(default_factory=list)


class ItemProblem(Exception):
    """Raised by a format's item reader: the item is malformed, for this reason."""


class ItemSkipped(Exception):
    """Raised by a format's item reader: the item is valid but not a memory to import."""


def _normalized(text: str) -> str:
    return " ".join(normalized(text).casefold().split())


def content_key(title: str, content: str) -> str:
    """sha256 of the casefolded, whitespace-collapsed title and content: equal memories collide."""
    return hashlib.sha256(f"{_normalized(title)}\n{_normalized(content)}".encode()).hexdigest()


def hash_id(content: str) -> str:
    """A source id for items whose source has none: stable across re-imports of the same text."""
    return "sha256:" + hashlib.sha256(_normalized(content).encode()).hexdigest()[:16]


# A title is made from the start of the first non-blank line only: room for the longest
# title, the Markdown around it and a link target. The rest of the line (an item may be
# megabytes long) never reaches a regular expression.
TITLE_SCAN_CHARS: Final = 1024
# How far one search for the first non-blank character reaches (an item may open with
# megabytes of blank lines).
_BLANK_BLOCK: Final = 64 * 1024
_NON_BLANK = re.compile(r"\S")
# Link text and target stop at the next bracket: each character is read by one attempt at
# most, where ``\[([^\]]*)\]`` read a run of ``[`` once per ``[`` (quadratic).
_LINK = re.compile(r"\[([^\[\]]*+)\]\([^)\[\]]*+\)")
_MARKUP = re.compile(r"^(?:#{1,6}\s+|[-*+]\s+(?:\[[ xX]\]\s+)?|\d+[.)]\s+|>\s*)+")
_EMPHASIS = re.compile(r"(\*\*|__|`)")


def first_line(text: str, limit: int = TITLE_SCAN_CHARS) -> str:
    """The first ``limit`` characters of the first non-blank line of ``text``, stripped."""
    for block in range(0, len(text), _BLANK_BLOCK):
        found = _NON_BLANK.search(text, block, block + _BLANK_BLOCK)
        if found is not None:
            window = text[found.start() : found.start() + limit]
            return window.splitlines()[0].strip()
    return ""


def clean_title(text: str, limit: int = TITLE_MAX_CHARS) -> str:
    """One line of at most ``limit`` characters, cut at a word boundary, Markdown removed."""
    line = _LINK.sub(r"\1", first_line(text))
    line = _MARKUP.sub("", line)
    line = " ".join(_EMPHASIS.sub("", line).split())
    if len(line) > limit:
        cut = line[: limit - 1]
        space = cut.rfind(" ")
        line = (cut[:space] if space >= limit // 2 else cut).rstrip(" ,;:-") + "…"
    return line


HEADLINE_WORDS: Final = 6
HEADLINE_MAX_CHARS: Final = 48
# Where a clause ends: punctuation inside the sentence, or a sentence's end.
# (A colon only before a space: the one in a redaction's ``[REDACTED:kind]`` ends nothing.)
_CLAUSE_END: Final = re.compile(r"[,;(\u2013\u2014\uff0c\u3002\uff1b\uff1a\uff01\uff1f\u3001]|[.!?:](?=\s|$)")


def headline(text: str) -> str:
    """A short title for a memory its source gave none (a ChatGPT line, a bullet): its
    first line when that is short, else the line's first clause, else its first words
    with an ellipsis — so that the title does not repeat the whole memory, which a
    context pack would then carry twice."""
    line = clean_title(text, limit=len(text) + 1)
    if len(line.split()) <= HEADLINE_WORDS and len(line) <= HEADLINE_MAX_CHARS:
        return line
    end = _CLAUSE_END.search(line)
    if end is not None:
        clause = line[: end.start()].strip()
        if 2 <= len(clause.split()) <= HEADLINE_WORDS and len(clause) <= HEADLINE_MAX_CHARS:
            return clause
    words = " ".join(line.split()[:HEADLINE_WORDS])
    if len(words) >= HEADLINE_MAX_CHARS:
        return clean_title(words, HEADLINE_MAX_CHARS)
    return words.rstrip(" ,;:-") + "…"


def derive_title(*candidates: str | None) -> str:
    """The first candidate that yields a usable title, else a fixed fallback."""
    for candidate in candidates:
        if candidate:
            title = clean_title(candidate)
            if title:
                return title
    return FALLBACK_TITLE


_TAG_JUNK = re.compile(r"[^\w.\-]+")
_DASHES = re.compile(r"-{2,}")
# A longer "tag" is not one: only its start is read (its slug is cut far shorter anyway).
_TAG_SCAN_CHARS: Final = 1024


def normalize_tags(tags: Iterable[object]) -> list[str]:
    """Lowercase slugs safe inside a MEMORY.md metadata comment, deduplicated, in order."""
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            continue
        # Redacted before it is lower-cased and cut: a secret either way is one the
        # redactor no longer recognises.
        slug = _TAG_JUNK.sub("-", redact(tag[:_TAG_SCAN_CHARS]).text.casefold()).strip("-.")
        slug = _DASHES.sub("-", slug)[:TAG_MAX_CHARS].strip("-.")
        if slug and slug not in out:
            out.append(slug)
            if len(out) == MAX_TAGS:  # the rest are never kept: not read (nor redacted)
                break
    return out

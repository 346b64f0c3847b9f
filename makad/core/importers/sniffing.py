"""Recognise an import's format from its structure (the file name only breaks ties)."""

from __future__ import annotations

import json
import posixpath
import re
from collections import Counter
from typing import Any, Final

from makad.core.bounded_json import loads
from makad.core.entry_text import text_lines
from makad.core.importers.chatgpt import dated_line
from makad.core.importers.claude import INDEX_NAME, is_index, is_topic_file
from makad.core.importers.collect import load_json
from makad.core.importers.honcho import is_conclusion
from makad.core.importers.markdown import BULLET
from makad.core.importers.records import FORMATS, FormatName
from makad.core.importers.supermemory import has_memory_entries, is_document
from makad.errors import InvalidParams

_SAMPLE_LINES: Final = 50
_CLAUDE_MD_NAMES: Final = frozenset({"claude.md", "claude.local.md"})
_MAKA_COMMENT: Final = "<!-- maka-memory:"
_ENTRY_HEADING: Final = re.compile(r"^ {0,3}## ")


def decode(data: str | bytes) -> str:
    """Text without a byte-order mark; undecodable bytes become U+FFFD (sniffing only)."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    return text.removeprefix("\ufeff")


# Characters no text export holds, beyond a stray one: C0 controls other than tab, line
# breaks, form feed and escape, and DEL.
_CONTROL: Final = re.compile(r"[\x01-\x08\x0e-\x1a\x1c-\x1f\x7f]")
_BINARY_SAMPLE_CHARS: Final = 64 * 1024
# More than one control character in this many of the sample's makes it binary.
_CONTROL_SHARE: Final = 20


# A ZIP archive's first bytes (local file header): ChatGPT's and Claude's data exports come as one.
_ZIP_MAGIC: Final = "PK\x03\x04"
# ChatGPT's data export: conversations.json, a list of conversations, each a tree of
# messages under "mapping". Chats, not the memories ChatGPT saved.
CHAT_HISTORY_REASON: Final = (
    "it is ChatGPT's conversation history (conversations.json from its data export), which "
    "holds chats, not saved memories: ChatGPT exports no memories, so copy them from "
    "Settings → Personalization → Manage memories into a text file, one a line, and import that"
)


def binary_reason(text: str) -> str | None:
    """Why ``text`` (a file read as text) is not text at all, or None: any NUL (an image,
    an archive, an executable — or UTF-16/UTF-32 text), or many control characters."""
    if text.startswith(_ZIP_MAGIC):
        return "it is a ZIP archive: unpack it and import the export file inside"
    if "\x00" in text:
        return "it holds NUL bytes (a binary file, or UTF-16/UTF-32 text: save that as UTF-8)"
    sample = text[:_BINARY_SAMPLE_CHARS]
    controls = sum(1 for _ in _CONTROL.finditer(sample))
    if controls * _CONTROL_SHARE > len(sample):
        return "it holds control characters throughout (a binary file)"
    return None


def sniff(data: str | bytes, filename: str | None = None) -> FormatName:
    """The format of ``data``; ``InvalidParams`` for JSON that matches no known format."""
    text = decode(data)
    name = posixpath.basename((filename or "").replace("\\", "/")).casefold()
    if name.endswith(".af"):
        return "letta"
    if name in _CLAUDE_MD_NAMES:
        return "claude_md"
    ok, document = load_json(text)
    if ok and isinstance(document, dict | list):
        found = _json_format(document)
        if found is None:
            raise _unrecognised("JSON")
        return found
    lines = [line for line in text_lines(text) if line.strip()]
    if lines and sum(line.lstrip().startswith("{") for line in lines) * 2 > len(lines):
        found = _jsonl_format(lines[:_SAMPLE_LINES])
        if found is None:
            raise _not_json(text) if _opens_json(text) and len(lines) == 1 else _unrecognised("JSON lines")
        return found
    if _opens_json(text):
        # A JSON export cut short: read as lines of text, each of its lines would be queued.
        raise _not_json(text)
    if is_topic_file(text) or is_index(text):
        return "claude_code"
    if name == INDEX_NAME.casefold() and text.lstrip().startswith("---"):
        return "claude_code"
    if _MAKA_COMMENT in text:
        return "makad"
    dated = sum(dated_line(line) is not None for line in lines[:_SAMPLE_LINES])
    if dated and dated * 2 >= min(len(lines), _SAMPLE_LINES):
        return "chatgpt"
    if not any(BULLET.match(line) for line in lines):
        if any(_ENTRY_HEADING.match(line) for line in lines):
            return "makad"  # "## Title" sections: a MEMORY.md typed by hand
        if not any(line.lstrip().startswith("#") for line in lines):
            return "text"  # plain lines: one memory per line
    return "markdown"


# How a JSON document of records opens: an object with a key, or a list of objects or
# strings. Text rarely does (``[[wiki links]]``, ``[a link](…)``, ``{braces}`` do not).
_JSON_OPENING: Final = re.compile(r'\A[ \t\r\n]*(?:\{[ \t\r\n]*["}]|\[[ \t\r\n]*[{"\]])')


def _opens_json(text: str) -> bool:
    return _JSON_OPENING.match(text) is not None


def _not_json(text: str) -> InvalidParams:
    """The error for text that opens as JSON but does not parse: where it breaks."""
    where: dict[str, int] = {}
    try:
        loads(text)
    except json.JSONDecodeError as exc:
        where = {"line": exc.lineno, "column": exc.colno}
    except (ValueError, RecursionError):
        pass
    at = f" at line {where['line']}, column {where['column']}" if where else ""
    return InvalidParams(
        f"it is not valid JSON{at}: cut short or damaged? Export it again, or name its format, "
        f"one of {', '.join(FORMATS)}",
        reason="invalid_json",
        formats=list(FORMATS),
        **where,
    )


def _unrecognised(kind: str) -> InvalidParams:
    return InvalidParams(
        f"unrecognised {kind} import: name its format, one of {', '.join(FORMATS)}",
        reason="unrecognised",
        formats=list(FORMATS),
    )


def _record_format(record: Any) -> FormatName | None:
    if not isinstance(record, dict):
        return None
    if record.get("type") in ("entity", "relation"):
        return "mcp_memory"
    if is_conclusion(record):
        return "honcho"
    if is_document(record) or has_memory_entries(record):
        return "supermemory"
    if isinstance(record.get("memory"), str):
        return "mem0"
    if isinstance(record.get("content"), str):
        return "openmemory"
    return None


def _is_entry(record: Any) -> bool:
    """A record of makad's JSON export (an Entry: id, title, content)."""
    return isinstance(record, dict) and all(
        isinstance(record.get(k), str) for k in ("id", "title", "content")
    )


def _vote(records: list[Any]) -> FormatName | None:
    votes = Counter(f for f in map(_record_format, records) if f is not None)
    return votes.most_common(1)[0][0] if votes else None


def _json_format(document: dict[str, Any] | list[Any]) -> FormatName | None:
    if isinstance(document, list):
        return _vote(document[:_SAMPLE_LINES]) if document else "mem0"
    if any(key in document for key in ("agents", "core_memory")) or (
        isinstance(document.get("blocks"), list)
    ):
        return "letta"
    if isinstance(document.get("results"), list):
        return "mem0"
    if "peer_card" in document:
        return "honcho"
    for key in ("items", "documents", "entries"):
        if isinstance(document.get(key), list):
            records = document[key][:_SAMPLE_LINES]
            if key == "entries" and records and all(_is_entry(r) for r in records):
                return "makad"
            found = _vote(records)
            if found in ("honcho", "supermemory"):
                return found
    if isinstance(document.get("memories"), list):
        if isinstance(document.get("pagination"), dict):
            return "supermemory"
        return _vote(document["memories"][:_SAMPLE_LINES]) or "openmemory"
    if isinstance(document.get("entities"), list) or isinstance(document.get("relations"), list):
        return "mcp_memory"
    return _record_format(document)


def _jsonl_format(lines: list[str]) -> FormatName | None:
    records = []
    for line in lines:
        ok, value = load_json(line)
        if ok:
            records.append(value)
    return _vote(records)


def is_chat_history(text: str) -> bool:
    """Whether ``text`` is ChatGPT's conversations.json: a JSON list of conversations, each
    with a ``mapping`` of messages (read from its first ones)."""
    if not text.lstrip("\ufeff \t\r\n").startswith("["):
        return False
    ok, document = load_json(decode(text))
    if not ok or not isinstance(document, list) or not document:
        return False
    sample = document[:_SAMPLE_LINES]
    return all(isinstance(c, dict) and isinstance(c.get("mapping"), dict) for c in sample)

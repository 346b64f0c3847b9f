"""Memory import: recognise a file's format and read its memories (pure; the service reads files).

Formats: ``makad`` (makad's own JSON and Markdown exports, a MEMORY.md), ``mem0``
(``get_all`` JSON), ``openmemory`` (``memories.json`` / ``.jsonl``), ``chatgpt``
(``[date] - text`` lines, or plain lines), ``claude_code`` (``MEMORY.md`` index + topic
files), ``claude_md`` (``CLAUDE.md`` bullets), ``mcp_memory`` (the MCP memory server's
JSONL graph), ``letta`` (``.af`` memory blocks), ``honcho`` (conclusions, peer cards),
``supermemory`` (document lists, memory entries), ``markdown`` (bullets), ``text``
(plain text, one memory per line).

Every item keeps its source id (or a content hash) and timestamps; a malformed
item becomes an ``ItemError`` and the rest still import. ``content_key`` is what
the service compares to make a re-import add nothing.
"""

from makad.core.importers.parsing import parse
from makad.core.importers.records import (
    EXPECTED,
    FORMATS,
    FormatName,
    ImportItem,
    ImportResult,
    ItemError,
    content_key,
)
from makad.core.importers.sniffing import CHAT_HISTORY_REASON, binary_reason, is_chat_history, sniff

__all__ = [
    "CHAT_HISTORY_REASON",
    "EXPECTED",
    "FORMATS",
    "FormatName",
    "ImportItem",
    "ImportResult",
    "ItemError",
    "binary_reason",
    "content_key",
    "is_chat_history",
    "parse",
    "sniff",
]

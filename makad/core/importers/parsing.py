"""Dispatch one import to its format's reader; never raise, whatever the input."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from makad.core.importers.chatgpt import parse_chatgpt, parse_text
from makad.core.importers.claude import parse_claude_code, parse_claude_md
from makad.core.importers.collect import FileProblem, TooManyItems
from makad.core.importers.honcho import parse_honcho
from makad.core.importers.letta import parse_letta
from makad.core.importers.makad import parse_makad
from makad.core.importers.markdown import parse_bullets
from makad.core.importers.mcp_memory import parse_mcp_memory
from makad.core.importers.mem0 import parse_mem0, parse_openmemory
from makad.core.importers.records import (
    FORMATS,
    INTERNAL_REASON,
    FormatName,
    ImportResult,
    ItemError,
)
from makad.core.importers.supermemory import parse_supermemory

_READERS: Final[dict[FormatName, Callable[[str], ImportResult]]] = {
    "makad": parse_makad,
    "honcho": parse_honcho,
    "supermemory": parse_supermemory,
    "mem0": parse_mem0,
    "openmemory": parse_openmemory,
    "chatgpt": parse_chatgpt,
    "claude_md": parse_claude_md,
    "mcp_memory": parse_mcp_memory,
    "letta": parse_letta,
    "markdown": parse_bullets,
    "text": parse_text,
}


def parse(data: str | bytes, format: FormatName, files: Mapping[str, str] | None = None) -> ImportResult:
    """Items and per-item errors of ``data`` read as ``format``.

    ``files`` (relative path → text) carries a Claude Code memory directory's topic
    files; other formats ignore it. A problem with the input as a whole is one
    error with locator ``file``.
    """
    if format not in FORMATS:
        return _failed("markdown", "unknown format")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            return _failed(format, "not UTF-8 text")
    # A mark starting any line, not only the first: files joined with ``cat a.md b.md``.
    text = data.removeprefix("\ufeff")
    if "\ufeff" in text:  # rare; the search is cheap, rewriting 16 MiB of text is not
        text = text.replace("\n\ufeff", "\n").replace("\r\ufeff", "\r")
    try:
        if format == "claude_code":
            return parse_claude_code(text, files)
        return _READERS[format](text)
    except FileProblem as problem:
        return _failed(format, str(problem))
    except TooManyItems:
        raise
    except Exception:
        return _failed(format, INTERNAL_REASON)


def _failed(format: FormatName, reason: str) -> ImportResult:
    return ImportResult(format=format, errors=[ItemError(locator="file", reason=reason)])

"""What `maka mcp` reads from the host, line by line, before the SDK parses it.

A JSON string may hold a lone UTF-16 surrogate escape (``"\\ud83d"``): valid JSON, and
what a JavaScript host writes for a string cut in the middle of an emoji, but not
Unicode, so the SDK's parser rejects the line and the request is never answered (the
host waits for ever). Each such line is rewritten with the lone surrogates replaced by
U+FFFD, as an invalid UTF-8 byte on stdin already is.

A JSON-RPC batch (an array of messages on one line, which the 2025-03-26 revision lets a
host send) is handed to the SDK, which takes one message a line, message by message: each
request in it is answered on its own line, by its id.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections import deque
from typing import IO, Any, BinaryIO, cast

import anyio

# A \uD800–\uDFFF escape (JSON hex digits are case-insensitive); a cheap test that lets
# every other line through untouched.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def _repaired(node: Any) -> Any:
    if isinstance(node, str):
        return _LONE_SURROGATE.sub(REPLACEMENT, node)
    if isinstance(node, list):
        return [_repaired(item) for item in node]
    if isinstance(node, dict):
        return {_repaired(key): _repaired(value) for key, value in node.items()}
    return node


def repair_line(line: str) -> str:
    """``line`` with every lone surrogate in its JSON strings replaced by U+FFFD (paired
    escapes stay the character they name); any other line as it came — one nested too
    deep to read or copy (``RecursionError``, from the parser or ``_repaired``) too: the
    SDK's parser refuses it like any unreadable line, and reading goes on."""
    if not _SURROGATE_ESCAPE.search(line):
        return line
    try:
        message = json.loads(line)  # Python's parser keeps lone surrogates in the strings
        repaired = _repaired(message)
    except (ValueError, RecursionError):
        return line  # not JSON, or nested past the recursion limit: left to the SDK to reject
    return line if repaired == message else _line(repaired)


def _line(message: Any) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"


def batch_members(line: str) -> list[str] | None:
    """The messages of a JSON-RPC batch line (a JSON array of objects), one line each, or
    None for any other line."""
    if not line.lstrip().startswith("["):
        return None
    try:
        batch = json.loads(line)
        if not batch or not isinstance(batch, list) or not all(isinstance(m, dict) for m in batch):
            return None
        return [_line(_repaired(member)) for member in batch]
    except (ValueError, RecursionError):  # not JSON, or nested past the recursion limit
        return None


class HostInput:
    """The host's stdin as UTF-8 text (an invalid byte read as U+FFFD), each line through
    ``repair_line``; what ``anyio.wrap_file`` needs of a file (the SDK only iterates it).
    The underlying buffer is not ours: it is never closed."""

    def __init__(self, buffer: BinaryIO | None = None) -> None:
        wire = buffer if buffer is not None else sys.stdin.buffer
        self._text = io.TextIOWrapper(wire, encoding="utf-8", errors="replace")
        self._batched: deque[str] = deque()  # the rest of a batch, taken before the next line

    def readline(self) -> str:
        if not self._batched:
            line = self._text.readline()
            members = batch_members(line)
            if members is None:
                return repair_line(line)
            self._batched.extend(members)
        return repair_line(self._batched.popleft())

    def host_lines(self) -> anyio.AsyncFile[str]:
        return anyio.AsyncFile(cast(IO[str], self))

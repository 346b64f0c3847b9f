"""Bytes of a memory file that are not UTF-8: kept exactly, shown readably.

Memory files are read with ``surrogateescape``: each byte that is not part of
valid UTF-8 becomes one lone surrogate (U+DC80..U+DCFF), so writing the text
back with the same error handler gives the original bytes. Lone surrogates
cannot be encoded as JSON or stored in SQLite, so everything that leaves the
file -- entries, the file's text in ``read_state`` -- goes through ``display``:
each such byte is read as cp1252 (Latin-1 for the five bytes cp1252 leaves
undefined). The mapping is one-to-one, so the display text names every byte.
"""

from __future__ import annotations

import re
from typing import Final

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_LINE: Final = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")


def _byte_reading(byte: int) -> str:
    try:
        return bytes([byte]).decode("cp1252")
    except UnicodeDecodeError:  # 0x81, 0x8D, 0x8F, 0x90, 0x9D
        return chr(byte)


_TABLE: Final = {0xDC00 + byte: _byte_reading(byte) for byte in range(0x80, 0x100)}


def has_undecodable(text: str) -> bool:
    """True when ``text`` holds bytes that were not UTF-8 (or any lone surrogate)."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def display(text: str) -> str:
    """``text`` with every escaped byte read as cp1252; other lone surrogates become U+FFFD."""
    if not has_undecodable(text):
        return text
    return _SURROGATE.sub(lambda m: _TABLE.get(ord(m.group()), "\ufffd"), text)


def undecodable_lines(text: str) -> list[int]:
    """1-based numbers of the lines (split at CR, LF and CRLF) holding undecodable bytes."""
    if not has_undecodable(text):
        return []
    return [number for number, line in enumerate(_LINE.findall(text), start=1) if _SURROGATE.search(line)]

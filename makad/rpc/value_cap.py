"""The value cap: how many JSON values one message may hold, counted before it is decoded.

Decoding costs by the value, not by the byte: a 12 MB object of a million keys takes the
decoder over a second, in one C call that holds the GIL, so a worker thread does not spare
the event loop. The cap bounds that call. Values are counted without decoding: each comma
and each opening bracket outside strings is one (a container's children, or an empty
container), so the count is the number of array elements and object members, an empty
array or object counting one. The common message has fewer commas and brackets in all
than the cap and is never scanned; a larger one is scanned in pieces of ``PIECE_BYTES``
(each a few C calls), so that a worker thread running the scan lets the loop run between
two pieces.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from makad.settings import MAX_MESSAGE_VALUES as MAX_MESSAGE_VALUES  # where it is set

PIECE_BYTES: Final = 256 * 1024

# Within a string with its escapes removed: everything up to its closing quote.
_STRING: Final = re.compile(rb'"[^"]*"')


def _unescaped(data: bytes) -> bytes:
    """``data`` (whole escapes only) without its escaped backslashes and escaped quotes: in
    JSON every backslash starts a two-byte escape, so a run of them pairs up from its start."""
    if b"\\" not in data:
        return data
    return data.replace(b"\\\\", b"").replace(b'\\"', b"")


def _structure(outside: bytes) -> int:
    return outside.count(b",") + outside.count(b"[") + outside.count(b"{")


def _colons(outside: bytes) -> int:
    return outside.count(b":")


def upper_bound(payload: bytes) -> int:
    """At least the number of values in ``payload`` (commas and brackets in strings too)."""
    return _structure(payload)


def _count_outside_strings(payload: bytes, count: Callable[[bytes], int], stop_above: int | None) -> int:
    """The sum of ``count`` over the text of ``payload`` outside its strings, in pieces of
    ``PIECE_BYTES`` (an escape cut by a piece's end is carried over to the next); once
    past ``stop_above`` (when given), some number over it."""
    total = 0
    inside = False  # the piece starts within a string
    carried = b""  # a backslash whose escape goes on in the next piece
    pos, end = 0, len(payload)
    while pos < end:
        raw = carried + payload[pos : pos + PIECE_BYTES]
        pos += PIECE_BYTES
        carried = b""
        if raw.endswith(b"\\") and (len(raw) - len(raw.rstrip(b"\\"))) % 2:
            raw, carried = raw[:-1], b"\\"
        piece = _unescaped(raw)
        if inside:
            close = piece.find(b'"')
            if close < 0:
                continue
            piece = piece[close + 1 :]
            inside = False
        if piece.count(b'"') % 2:
            # A string opens in this piece and closes in a later one.
            piece = piece[: piece.rfind(b'"')]
            inside = True
        total += count(_STRING.sub(b"", piece))
        if stop_above is not None and total > stop_above:
            break
    return total


def count_values(payload: bytes, stop_above: int = MAX_MESSAGE_VALUES) -> int:
    """The values in ``payload`` (array elements and object members, an empty container
    counting one), or a number over ``stop_above`` as soon as that many are found. Not a
    validation: invalid JSON gets some count, and the decoder says what is wrong."""
    return _count_outside_strings(payload, _structure, stop_above)


def count_members(payload: bytes) -> int:
    """The object members written in ``payload`` (valid JSON): its colons outside strings,
    a member given twice counted twice."""
    return _count_outside_strings(payload, _colons, None)


def over_cap(payload: bytes, limit: int = MAX_MESSAGE_VALUES) -> bool:
    """Whether ``payload`` holds more than ``limit`` values."""
    if len(payload) <= limit or upper_bound(payload) <= limit:
        return False
    return count_values(payload, limit) > limit

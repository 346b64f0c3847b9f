"""``json.loads`` in pieces: no single call decodes more than a bounded part of a document.

A C decoder holds the GIL for as long as one call runs: ``json.loads`` of a 16 MiB
array of small records built it in half a second, during which the daemon's event loop
(and every other client) waited, although the import ran in a worker thread. ``loads``
reads the outer levels itself (the document, the members of a top-level object, the
elements of arrays down to ``ARRAY_DEPTH``) in batches of about ``PIECE_CHARS``: the
text up to the first comma past that size is decoded as one array (or object) by the
standard library's C scanner; when that comma lies inside an element (the batch is then
not valid JSON), one element is read on its own and the next batch tried past it. A
worker thread running it gives the loop a turn between two batches. The result, and
what is refused, are ``json.loads``' own (NaN, duplicate keys, escapes, depth); only the
error messages differ a little.
"""

from __future__ import annotations

import json
import json.decoder
import re
from collections.abc import Callable
from typing import Any, Final

# Arrays down to this depth are read in batches, objects at the top only: an import's
# records sit there (``[{…}, …]``, ``{"results": [{…}, …]}``).
ARRAY_DEPTH: Final = 3
# About how much text one call of the C scanner decodes (one value may be longer).
PIECE_CHARS: Final = 256 * 1024
_BLANKS: Final = " \t\n\r"
_BLANK: Final = re.compile(r"[ \t\n\r]*")
# The standard library's C scanner: one value from a position, and one string's end.
_scan: Final[Callable[[str, int], tuple[Any, int]]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_scanstring: Final[Callable[[str, int], tuple[str, int]]] = json.decoder.scanstring  # type: ignore[attr-defined]


def loads(text: str) -> Any:
    """The JSON value of ``text``, as ``json.loads`` gives it; ``ValueError`` (a
    ``json.JSONDecodeError``) or ``RecursionError`` when it is not JSON."""
    if len(text) <= PIECE_CHARS:
        return json.loads(text)
    value, end = _value(text, _skip(text, 0), 0)
    end = _skip(text, end)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def _skip(text: str, pos: int) -> int:
    """The first position from ``pos`` on that is not a blank."""
    if pos >= len(text) or text[pos] not in _BLANKS:
        return pos
    found = _BLANK.match(text, pos)
    return found.end() if found is not None else pos


def _value(text: str, pos: int, depth: int) -> tuple[Any, int]:
    first = text[pos : pos + 1]
    if first == "[" and depth < ARRAY_DEPTH:
        return _array(text, pos + 1, depth + 1)
    if first == "{" and depth == 0:
        return _object(text, pos + 1, depth + 1)
    try:
        value, end = _scan(text, pos)
    except StopIteration as stop:
        raise json.JSONDecodeError("Expecting value", text, stop.value) from None
    return value, end


def _container(text: str, pos: int, depth: int, opener: str, closer: str) -> tuple[Any, int]:
    """The array or object whose first element (or member) starts at ``pos``."""
    whole: Any = [] if opener == "[" else {}
    pos = _skip(text, pos)
    if text[pos : pos + 1] == closer:
        return whole, pos + 1
    stuck = 0  # a batch failed at a comma before this: read one at a time up to it
    while True:
        if text[pos : pos + 1] == closer:  # right after a comma
            raise json.JSONDecodeError("Expecting value", text, pos)
        comma = text.find(",", max(pos + PIECE_CHARS, stuck)) if pos >= stuck else -2
        batch = _decoded(opener + text[pos:comma] + closer) if comma >= 0 else None
        if batch is not None:
            _add(whole, batch)
            pos = comma
        elif comma == -1:
            # No comma that far: the rest (up to the closing bracket) is short, or one
            # long value. The scanner stops at the bracket, whatever follows it.
            try:
                rest, end = _scan(opener + text[pos:], 0)
            except (StopIteration, ValueError, RecursionError):
                stuck = len(text) + 1  # not valid: one at a time finds where and says why
                continue
            _add(whole, rest)
            return whole, pos + end - 1
        else:
            if comma >= 0:
                stuck = comma + 1
            pos = _one(text, pos, depth, whole)
        after = text[pos : pos + 1]
        if after == ",":
            pos = _skip(text, pos + 1)
        elif after == closer:
            return whole, pos + 1
        else:
            raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)


def _decoded(piece: str) -> Any:
    try:
        return json.loads(piece)
    except (ValueError, RecursionError):
        return None


def _add(whole: Any, more: Any) -> None:
    if isinstance(whole, list):
        whole.extend(more)
    else:
        whole.update(more)  # a repeated key keeps its first place, as json.loads has it


def _one(text: str, pos: int, depth: int, whole: Any) -> int:
    """Read one element (or member) at ``pos`` into ``whole``; where it ends."""
    if isinstance(whole, list):
        value, pos = _value(text, pos, depth)
        whole.append(value)
        return _skip(text, pos)
    if text[pos : pos + 1] != '"':
        raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, pos)
    key, pos = _scanstring(text, pos + 1)
    pos = _skip(text, pos)
    if text[pos : pos + 1] != ":":
        raise json.JSONDecodeError("Expecting ':' delimiter", text, pos)
    whole[key], pos = _value(text, _skip(text, pos + 1), depth)
    return _skip(text, pos)


def _array(text: str, pos: int, depth: int) -> tuple[list[Any], int]:
    items: list[Any]
    items, end = _container(text, pos, depth, "[", "]")
    return items, end


def _object(text: str, pos: int, depth: int) -> tuple[dict[str, Any], int]:
    members: dict[str, Any]
    members, end = _container(text, pos, depth, "{", "}")
    return members, end

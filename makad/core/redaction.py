"""Secret redaction, applied to every text before it is written anywhere.

Each secret becomes ``[REDACTED:<kind>]``; where the secrets are is
``makad.core.secret_detectors``' job (format, context, keyword and base64
layers, on a normalized view of the text). This module replaces them: in one
text (``redact``), in consecutive texts read as one stream (``redact_joined``:
one append's events, so a token split across two events is redacted in both),
only the values the caller names (``redact_values``, for the backups), in a
JSON-like tree or a memory entry. Identifiers cannot take a marker (two would
merge): ``identifier_stand_in`` replaces one holding a secret by a keyed hash.

``redact`` is deterministic and idempotent: markers never match again.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from makad.core.secret_detectors import (
    LONG_LINE,
    MARKER_PREFIX,
    Span,
    add_spans,
    end_of_line,
    find_spans,
    library,
    may_hold_keyword,
    preload,
    union,
)
from makad.core.secret_views import has_suspects, visible
from makad.core.types import Entry

__all__ = [
    "IDENTIFIER_PREFIX",
    "MARKER_PREFIX",
    "Redacted",
    "find_spans",
    "identifier_stand_in",
    "preload",
    "redact",
    "redact_entry",
    "redact_joined",
    "redact_tree",
    "redact_values",
    "secrets_in",
    "without_markers",
]

IDENTIFIER_PREFIX: Final = "redacted-"


class Redacted(msgspec.Struct, frozen=True):
    """The redacted text, how many secrets were replaced, and their kinds (sorted, unique)."""

    text: str
    count: int
    kinds: list[str]


# What a secret became: ``[REDACTED:<kind>]``.
_MARKER: Final = re.compile(re.escape(MARKER_PREFIX) + r"[\w-]*\]")


def without_markers(text: str) -> str:
    """``text`` with each redaction marker a space: the words a marker is made of
    ("redacted", the secret's kind) say nothing of what the text is about."""
    return _MARKER.sub(" ", text) if MARKER_PREFIX in text else text


def redact(text: str) -> Redacted:
    """Replace every secret in ``text`` with ``[REDACTED:<kind>]``."""
    spans = find_spans(text)
    return _apply(text, spans) if spans else Redacted(text, 0, [])


def _apply(text: str, spans: list[Span]) -> Redacted:
    if not spans:
        return Redacted(text, 0, [])
    pieces: list[str] = []
    cursor = 0
    for start, end, kind in spans:
        pieces.append(text[cursor:start])
        pieces.append(f"{MARKER_PREFIX}{kind}]")
        cursor = end
    pieces.append(text[cursor:])
    return Redacted("".join(pieces), len(spans), sorted({kind for _, _, kind in spans}))


# --- several texts as one -----------------------------------------------------------------

# How far on each side of a boundary the joined text is looked at first; a secret
# found within JOIN_SLACK of a window edge may go on past it, so the window grows.
JOIN_WINDOW = 256
JOIN_SLACK = 64


def redact_joined(texts: Sequence[str]) -> tuple[list[Redacted], int]:
    """Redact consecutive texts (one append's events) as one stream.

    Each text is redacted on its own, and the text around every boundary is
    scanned joined: a secret split across two texts (a streamed token, a key
    whose ``api_key =`` is in the previous text) is redacted in each text it
    touches. Returns the texts and how many secrets there were (a split secret
    counts once).
    """
    own = [find_spans(text) for text in texts]
    if len(texts) < 2:
        return [_apply(text, spans) for text, spans in zip(texts, own, strict=True)], sum(map(len, own))
    offsets = [0]
    for text in texts:
        offsets.append(offsets[-1] + len(text))
    joined = "".join(texts)
    extra: list[list[Span]] = [[] for _ in texts]
    split = 0
    for start, end, kind in _joined_spans(joined, offsets, own):
        first = bisect.bisect_right(offsets, start) - 1
        pieces = 0
        index = first
        while index < len(texts) and offsets[index] < end:
            low, high = max(start, offsets[index]), min(end, offsets[index + 1])
            if high > low:
                extra[index].append((low - offsets[index], high - offsets[index], kind))
                pieces += 1
            index += 1
        split += max(0, pieces - 1)
    results = [_apply(text, union(spans, more)) for text, spans, more in zip(texts, own, extra, strict=True)]
    return results, sum(r.count for r in results) - split


def _joined_spans(joined: str, offsets: list[int], own: list[list[Span]]) -> list[Span]:
    """Secrets of the joined text that only the join reveals: those crossing a boundary,
    or on a line that does (their context is on the other side).

    Most boundaries need nothing; a long word cut in two is scanned alone (cheap); a
    line holding a context (a keyword, a URL, a key header), characters the normalized
    view changes, or an own secret near the boundary is scanned in a window that grows
    while a secret reaches its edge.
    """
    size = len(joined)
    boundaries = [b for b in offsets[1:-1] if 0 < b < size]
    windows: list[list[int]] = []
    found: list[Span] = []
    for k in range(1, len(offsets) - 1):
        at = offsets[k]
        if not 0 < at < size:
            continue
        before, after = own[k - 1], own[k]
        # A secret of either text on the line of the boundary (or ending right before it,
        # like a private key cut inside its last line) is looked at whole.
        left = bool(before) and before[-1][1] + 1 >= _line_start(joined, at) - offsets[k - 1]
        right = bool(after) and after[0][0] <= end_of_line(joined, at) + 1 - at
        need = "window" if left or right else _crossing_need(joined, at)
        if need is None:
            continue
        if isinstance(need, tuple):  # a long word cut in two: only it can hold the secret
            low, high = need
            add_spans(
                found,
                [
                    (start + low, end + low, kind)
                    for start, end, kind in find_spans(joined[low:high])
                    if start + low < at < end + low
                    and (
                        kind != "generic_secret" or _joined_value(joined, boundaries, start + low, end + low)
                    )
                ],
            )
            continue
        low, high = max(0, at - JOIN_WINDOW), min(size, at + JOIN_WINDOW)
        if left:
            low = min(low, offsets[k - 1] + before[-1][0])
        if right:
            high = max(high, at + after[0][1])
        if windows and low <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], high)
        else:
            windows.append([low, high])
    for low, high in windows:
        low, high = _line_edges(joined, low, high)
        while True:
            kept = [
                (start + low, end + low, kind)
                for start, end, kind in find_spans(joined[low:high])
                if _spans_boundary(joined, boundaries, start + low, end + low)
                and (kind != "generic_secret" or _joined_value(joined, boundaries, start + low, end + low))
            ]
            grow = any(
                (start - low < JOIN_SLACK and low > 0) or (high - end < JOIN_SLACK and high < size)
                for start, end, _ in kept
            )
            if not grow:
                break
            width = high - low
            low, high = _line_edges(joined, max(0, low - width), min(size, high + width))
        add_spans(found, kept)
    return found


# Every format holds a run this long (see ``has_long_run``): a shorter cut word holds none.
_SPLIT_WORD = 20
# The formats whose secrets can be letters alone (AWS access keys, Google API keys).
_LETTERS_ONLY_PREFIXES: Final = ("AKIA", "ASIA", "ABIA", "ACCA", "AIza")
# What the context rules and multi-word formats need before a value, lower-cased.
_CONTEXT_WORDS: Final = ("://", "-----begin", "putty-user-key-file", "bearer", "token", "aws")


def _crossing_need(joined: str, at: int) -> str | tuple[int, int] | None:
    """What the boundary at ``at`` needs scanned, judged the way ``_find``'s fast path
    judges a text, on the line up to the end of the word the boundary cuts: ``"window"``
    when it holds a keyword, a URL, a key header or another context (every context comes
    before its value), or characters the normalized view changes; the span of the cut
    word alone when that word is 20+ characters long; else nothing."""
    floor, ceiling = max(0, at - JOIN_WINDOW), min(len(joined), at + JOIN_WINDOW)
    start = at
    while start > floor and not joined[start - 1].isspace():
        start -= 1
    end = at
    while end < ceiling and not joined[end].isspace():
        end += 1
    line = max(joined.rfind("\n", floor, start), joined.rfind("\r", floor, start), floor - 1) + 1
    before = joined[line:end]
    lowered = before.lower()
    if (
        has_suspects(before)
        or any(word in lowered for word in _CONTEXT_WORDS)
        or (may_hold_keyword(lowered) and library().keyword.search(lowered) is not None)
    ):
        return "window"
    if end - start < _SPLIT_WORD or not start < at < end:
        return None
    word = joined[start:end]
    # Only two formats can be letters alone; any other secret has a digit or a symbol.
    if word.isalpha() and not any(prefix in word for prefix in _LETTERS_ONLY_PREFIXES):
        return None
    return start, end


def _joined_value(text: str, boundaries: list[int], start: int, end: int) -> bool:
    """Whether a keyword's value found across texts is really split off by a boundary: one
    cuts the value mid-word (no blank on either side, and no sentence end before it unless
    the value is quoted), or one falls between the keyword and the value (nothing but
    blanks and quotes in between), or one cuts the keyword itself (``pass`` + ``word = …``).
    Prose that ends one text and starts the next ("secret: patience." + "git@…"), or a
    keyword from the other text lending its context to a value ("${DB_PASSWORD}" + a JSON
    object), is none of these."""
    index = bisect.bisect_right(boundaries, start)
    if index < len(boundaries) and boundaries[index] < end:
        at = boundaries[index]
        if text[at - 1].isspace() or text[at].isspace():
            return False
        quoted = start > 0 and end < len(text) and text[start - 1] == text[end] and text[end] in "'\"`"
        return quoted or text[at - 1] not in ".!?,;:"
    if index == 0 or boundaries[index - 1] < _line_start(text, start, JOIN_WINDOW):
        return False
    at = boundaries[index - 1]
    if not text[at:start].strip(" \t\"'`"):
        return True
    word_start = at
    while word_start > 0 and not text[word_start - 1].isspace():
        word_start -= 1
    word = text[word_start:start].lower()
    return any(
        word_start + hit.start() < at < word_start + hit.end()
        and _KEY_TAIL.fullmatch(text, word_start + hit.end(), start) is not None
        for hit in library().keyword.finditer(word)
    )


# What may follow a keyword before its value: the rest of the name, an operator, a quote.
_KEY_TAIL: Final = re.compile(r"[A-Za-z0-9_]*['\"]?\s*(?::=|[:=]{1,3}>?)\s*['\"`]?")


def _line_edges(text: str, low: int, high: int) -> tuple[int, int]:
    """Widen ``[low, high)`` to whole lines, unless a line is too long to take whole."""
    end = end_of_line(text, high, LONG_LINE)
    return _line_start(text, low), (end if end < min(len(text), high + LONG_LINE) else high)


def _line_start(text: str, pos: int, limit: int = LONG_LINE) -> int:
    """Where the line holding ``pos`` starts, looking back at most ``limit`` characters."""
    floor = max(0, pos - limit)
    start = max(text.rfind("\n", floor, pos), text.rfind("\r", floor, pos)) + 1
    return start if start > floor or floor == 0 else pos


def _spans_boundary(text: str, boundaries: list[int], start: int, end: int) -> bool:
    """Whether a boundary lies inside the span, or on the line around it (within reach)."""
    line_start = _line_start(text, start, JOIN_WINDOW)
    line_end = end_of_line(text, end, JOIN_WINDOW)
    index = bisect.bisect_right(boundaries, line_start)
    return index < len(boundaries) and boundaries[index] < line_end


# --- secrets as values --------------------------------------------------------------------


def secrets_in(text: str) -> frozenset[str]:
    """The secrets in a text as values (invisible characters dropped), to compare texts."""
    return frozenset(visible(text[start:end]) for start, end, _ in find_spans(text))


def redact_values(text: str, values: frozenset[str]) -> Redacted:
    """Redact only the secrets whose value (see ``secrets_in``) is one of ``values``."""
    return _apply(text, [span for span in find_spans(text) if visible(text[span[0] : span[1]]) in values])


def redact_tree(value: Any) -> Any:
    """A JSON-like value with every string in it (keys included) redacted."""
    if isinstance(value, str):
        return redact(value).text
    if isinstance(value, dict):
        return {redact_tree(k): redact_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(item) for item in value]
    return value


def redact_entry(entry: Entry) -> Entry:
    """A memory entry with its text fields redacted (the same entry when it holds none)."""
    title, content = redact(entry.title), redact(entry.content)
    tags = [redact(tag) for tag in entry.tags]
    refs = [redact(ref) for ref in entry.source_refs]
    if not (title.count or content.count or any(t.count for t in tags) or any(r.count for r in refs)):
        return entry
    return msgspec.structs.replace(
        entry,
        title=title.text,
        content=content.text,
        tags=[t.text for t in tags],
        source_refs=[r.text for r in refs],
    )


def identifier_stand_in(value: str, key: bytes) -> str:
    """An identifier (session id, request id, entry id) with no secret in it.

    Returned unchanged when it holds none; else ``redacted-<16 hex>``, a keyed
    hash of the whole value: distinct identifiers stay distinct (a retry or a
    later call with the same value finds the same record), the stand-in is a
    valid session id, and without the key it cannot be checked against a guess.
    """
    if not find_spans(value):
        return value
    digest = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), key=key, digest_size=8)
    return f"{IDENTIFIER_PREFIX}{digest.hexdigest()}"

"""Unicode normalisation (NFKC, NFC, NFD) of text of any size in bounded work.

``unicodedata.normalize`` runs in C without letting go of the interpreter, and its work
is not linear: it puts each run of combining marks in canonical order by insertion, so a
letter followed by 80,000 marks of alternating classes took seven seconds, a megabyte of
them hours — and no other thread, the event loop included, ran meanwhile. Here:

- a run of more than ``MAX_NON_STARTERS`` characters that decompose to combining marks
  keeps its first 30 (Unicode's stream-safe bound, UAX #15; no real script needs more);
- text is normalised in pieces of about ``PIECE_CHARS`` characters, cut only before a
  character that nothing before it can combine or reorder with, so the result is the one
  ``unicodedata.normalize`` gives for the whole (the marks past the bound aside) and each
  call is short (a character such as U+FDFA, which NFKC makes 18, no longer makes one
  call of millions).

A long run of non-ASCII text (CJK prose holds no ASCII for hundreds of characters) is
read through two character classes found once from ``unicodedata`` (``preload``, at the
daemon's warm-up): the marks, whose runs past the bound are cut by one regex
substitution, and the characters a piece may start at, each cut found by one search. Both
run in C, so the run is never walked character by character in Python.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterator
from typing import Final, Literal, NamedTuple

Form = Literal["NFKC", "NFC", "NFD"]

MAX_NON_STARTERS: Final = 30
PIECE_CHARS: Final = 4096
# Up to this many non-ASCII characters in a row are normalised as they are (an ASCII
# character is always a safe cut, and this many marks cost nothing much); a longer run is
# read character by character.
SHORT_RUN_CHARS: Final = 256

_LONG_NON_ASCII = re.compile(rf"[^\x00-\x7f]{{{SHORT_RUN_CHARS + 1},}}")
_ASCII = re.compile(r"[\x00-\x7f]")
_ASTRAL_RANGE: Final = "\\U00010000-\\U0010ffff"
_ASTRAL = re.compile(f"[{_ASTRAL_RANGE}]")

# Characters of combining class 0 that compose with the starter before them (the second
# character of a canonical pair): Hangul vowels and trailing consonants, and vowel signs
# and length marks of Indic and other scripts. A cut is never made before one.
_JOINS_BACKWARD: Final = frozenset(
    [chr(c) for c in range(0x1161, 0x1176)]
    + [chr(c) for c in range(0x11A8, 0x11C3)]
    + [
        chr(c)
        for c in (
            0x09BE, 0x09D7, 0x0B3E, 0x0B56, 0x0B57, 0x0BBE, 0x0BD7, 0x0CC2, 0x0CD5, 0x0CD6,
            0x0D3E, 0x0D57, 0x0DCF, 0x0DDF, 0x0FB5, 0x0FB7, 0x102E, 0x1B35, 0x11127, 0x1133E,
            0x11357, 0x114B0, 0x114BA, 0x114BD, 0x115AF, 0x11930,
        )
    ]
)  # fmt: skip

_CUT, _NO_CUT, _NON_STARTER = 0, 1, 2

# Blocks holding only characters a piece may start at: CJK ideographs, Hangul syllables,
# surrogates and private use, and the planes without a combining character. The classes
# below are found without scanning them (``tests/core/test_normal_form.py`` scans them).
_STARTER_BLOCKS: Final = (
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7A3),
    (0xD800, 0xF8FF),
    (0x20000, 0x2F7FF),
    (0x2FA20, 0xDFFFF),
    (0xF0000, 0x10FFFF),
)


def _kind(char: str) -> int:
    """Whether a piece may start at ``char`` (``_CUT``), may not (``_NO_CUT``), or
    ``char`` decomposes to a combining mark first (``_NON_STARTER``)."""
    first = unicodedata.normalize("NFKD", char)[:1] or char
    if unicodedata.combining(first):
        return _NON_STARTER
    return _NO_CUT if first in _JOINS_BACKWARD or char in _JOINS_BACKWARD else _CUT


class _Classes(NamedTuple):
    long_marks: re.Pattern[str]  # a run of more than MAX_NON_STARTERS marks
    cut: re.Pattern[str]  # a character a piece may start at


@functools.cache
def _not_cut() -> tuple[list[int], list[int]]:
    """The code points of the marks, and of the characters that join backward: every one
    ``_kind`` does not call ``_CUT`` (only one that is a mark, has a decomposition or is
    listed as joining backward can be one)."""
    marks: list[int] = []
    joining: list[int] = []
    for code in _scanned_code_points():
        char = chr(code)
        if unicodedata.combining(char) or unicodedata.decomposition(char) or char in _JOINS_BACKWARD:
            kind = _kind(char)
            if kind == _NON_STARTER:
                marks.append(code)
            elif kind == _NO_CUT:
                joining.append(code)
    return marks, joining


@functools.cache
def _classes(astral: bool) -> _Classes:
    """The classes for text with characters past U+FFFF (``astral``) or without.

    ``re`` tests a character against a class of the Basic Multilingual Plane in one table
    lookup, but against the ranges past U+FFFF one by one: so the ranges past U+FFFF are
    tried only for a character past U+FFFF, and text without one gets classes without them.
    """
    marks, joining = _not_cut()
    plane = [code for code in marks if code < 0x10000], [code for code in marks if code >= 0x10000]
    not_cut = sorted([*marks, *joining])
    plane_not_cut = (
        [code for code in not_cut if code < 0x10000],
        [code for code in not_cut if code >= 0x10000],
    )
    if not astral:
        mark_class = _char_class(plane[0])
        return _Classes(
            # One mark, then the rest: a pattern opening with a class is searched for by a
            # fast scan for that class, one opening with a repeat is tried at every position.
            long_marks=re.compile(f"[{mark_class}][{mark_class}]{{{MAX_NON_STARTERS},}}"),
            cut=re.compile(f"[^{_char_class(plane_not_cut[0])}]"),
        )
    mark = f"(?:[{_char_class(plane[0])}]|(?=[{_ASTRAL_RANGE}])[{_char_class(plane[1])}])"
    return _Classes(
        long_marks=re.compile(f"{mark}{{{MAX_NON_STARTERS + 1},}}"),
        cut=re.compile(
            f"[^{_ASTRAL_RANGE}{_char_class(plane_not_cut[0])}]"
            f"|(?=[{_ASTRAL_RANGE}])[^{_char_class(plane_not_cut[1])}]"
        ),
    )


def preload() -> None:
    """Find the character classes now (about a tenth of a second), not in a request."""
    _classes(astral=False)
    _classes(astral=True)


def _scanned_code_points() -> Iterator[int]:
    start = 0
    for low, high in _STARTER_BLOCKS:
        yield from range(start, low)
        start = high + 1
    yield from range(start, 0x110000)


def _char_class(codes: list[int]) -> str:
    """The inside of a ``[...]`` matching exactly ``codes`` (ascending), as ranges."""
    ranges: list[list[int]] = []
    for code in codes:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in ranges)


def normalized(text: str, form: Form = "NFKC", *, limit: int | None = None) -> str:
    """``unicodedata.normalize(form, text)`` in bounded work (see the module doc). With
    ``limit``, at most its first ``limit`` characters, and the text past what they need is
    not normalised (NFKC makes some characters 18: an index of such text stops growing)."""
    if text.isascii():
        return text if limit is None else text[:limit]
    if len(text) <= PIECE_CHARS and _LONG_NON_ASCII.search(text) is None:
        whole = unicodedata.normalize(form, text)
        return whole if limit is None else whole[:limit]
    out: list[str] = []
    size = 0
    for piece in _pieces(text, form):
        out.append(piece)
        size += len(piece)
        if limit is not None and size >= limit:
            return "".join(out)[:limit]
    return "".join(out)


def _pieces(text: str, form: Form) -> Iterator[str]:
    """``text`` normalised, a piece at a time."""
    start = 0
    for match in _LONG_NON_ASCII.finditer(text):
        # The ASCII character before the run may compose with its first mark: it goes
        # with the run (a cut before an ASCII character is always safe).
        run_start = max(match.start() - 1, start)
        yield from _in_pieces(text[start:run_start], form)
        yield from _long_run(text[run_start : match.end()], form)
        start = match.end()
    yield from _in_pieces(text[start:], form)


def _in_pieces(text: str, form: Form) -> Iterator[str]:
    """Text with no long non-ASCII run, normalised in pieces cut before ASCII characters."""
    start = 0
    while len(text) - start > PIECE_CHARS:
        found = _ASCII.search(text, start + PIECE_CHARS)
        if found is None:
            break
        yield unicodedata.normalize(form, text[start : found.start()])
        start = found.start()
    yield unicodedata.normalize(form, text[start:])


def _long_run(run: str, form: Form) -> Iterator[str]:
    """A long run of non-ASCII text: combining runs kept to ``MAX_NON_STARTERS``,
    normalised in pieces cut where ``_kind`` allows."""
    classes = _classes(astral=_ASTRAL.search(run) is not None)
    run = classes.long_marks.sub(_first_marks, run)
    start = 0
    while len(run) - start > PIECE_CHARS:
        cut = classes.cut.search(run, start + PIECE_CHARS)
        if cut is None:
            break
        yield unicodedata.normalize(form, run[start : cut.start()])
        start = cut.start()
    yield unicodedata.normalize(form, run[start:])


def _first_marks(marks: re.Match[str]) -> str:
    return marks.group()[:MAX_NON_STARTERS]

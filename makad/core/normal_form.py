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
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Final, Literal

Form = Literal["NFKC", "NFC", "NFD"]

MAX_NON_STARTERS: Final = 30
PIECE_CHARS: Final = 4096
# Up to this many non-ASCII characters in a row are normalised as they are (an ASCII
# character is always a safe cut, and this many marks cost nothing much); a longer run is
# read character by character.
SHORT_RUN_CHARS: Final = 256

_LONG_NON_ASCII = re.compile(rf"[^\x00-\x7f]{{{SHORT_RUN_CHARS + 1},}}")
_ASCII = re.compile(r"[\x00-\x7f]")

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


@lru_cache(maxsize=16384)
def _kind(char: str) -> int:
    """Whether a piece may start at ``char`` (``_CUT``), may not (``_NO_CUT``), or
    ``char`` decomposes to a combining mark first (``_NON_STARTER``)."""
    first = unicodedata.normalize("NFKD", char)[:1] or char
    if unicodedata.combining(first):
        return _NON_STARTER
    return _NO_CUT if first in _JOINS_BACKWARD or char in _JOINS_BACKWARD else _CUT


def normalized(text: str, form: Form = "NFKC") -> str:
    """``unicodedata.normalize(form, text)`` in bounded work (see the module doc)."""
    if text.isascii():
        return text
    if len(text) <= PIECE_CHARS and _LONG_NON_ASCII.search(text) is None:
        return unicodedata.normalize(form, text)
    out: list[str] = []
    start = 0
    for match in _LONG_NON_ASCII.finditer(text):
        # The ASCII character before the run may compose with its first mark: it goes
        # with the run (a cut before an ASCII character is always safe).
        run_start = max(match.start() - 1, start)
        out.append(_in_pieces(text[start:run_start], form))
        out.append(_long_run(text[run_start : match.end()], form))
        start = match.end()
    out.append(_in_pieces(text[start:], form))
    return "".join(out)


def _in_pieces(text: str, form: Form) -> str:
    """Text with no long non-ASCII run, normalised in pieces cut before ASCII characters."""
    out: list[str] = []
    start = 0
    while len(text) - start > PIECE_CHARS:
        found = _ASCII.search(text, start + PIECE_CHARS)
        if found is None:
            break
        out.append(unicodedata.normalize(form, text[start : found.start()]))
        start = found.start()
    out.append(unicodedata.normalize(form, text[start:]))
    return "".join(out)


def _long_run(run: str, form: Form) -> str:
    """A long run of non-ASCII text: combining runs kept to ``MAX_NON_STARTERS``,
    normalised in pieces cut where ``_kind`` allows."""
    out: list[str] = []
    piece: list[str] = []
    marks = 0
    kind = _kind
    for char in run:
        k = kind(char)
        if k == _NON_STARTER:
            marks += 1
            if marks > MAX_NON_STARTERS:
                continue
        else:
            marks = 0
            if k == _CUT and len(piece) >= PIECE_CHARS:
                out.append(unicodedata.normalize(form, "".join(piece)))
                piece = []
        piece.append(char)
    out.append(unicodedata.normalize(form, "".join(piece)))
    return "".join(out)

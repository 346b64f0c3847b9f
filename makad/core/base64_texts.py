"""The text hidden in base64 runs, wherever the encoded part starts inside the run.

A run of base64 characters is rarely only the encoded text: a URL path puts it after
``/v1/files/`` (and ``/`` is itself a base64 character), a cache file name after
``blob-``, a query string after ``q=a+`` (``+`` is one too), and an encoding of the
other alphabet holds ``-`` and ``_`` where these hold ``/`` and ``+``. Decoding the run
only from its first character finds nothing then: every group of four characters is
off by the length of what was glued in front.

``decoded_texts`` reads each run in both alphabets (the characters of the other one are
boundaries), and each piece between boundaries first whole, then from each of the four
alignments, tolerating garbage: base64 decodes four characters at a time, each group on
its own, so at the right alignment the encoded text comes out intact whatever surrounds
it. What comes out is kept where it is UTF-8 text of 8+ characters without control
characters (binary data and garbage seldom are), with the way back from a piece of it to
the characters that encode it. Every step is a linear scan in C (``binascii``, one regex
over bytes); a run is read at most nine times.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

# A run that may hold base64 (either alphabet), long enough to hold a secret.
BASE64_RUN: Final = re.compile(r"[A-Za-z0-9+/_-]{20,}+={0,2}")
MIN_TEXT_CHARS: Final = 8
# A piece shorter than this encodes fewer than 10 characters: no secret the detector
# finds is that short (the shortest is a three-letter keyword, "=" and six characters).
_MIN_PIECE: Final = 14
_STANDARD_ONLY: Final = re.compile(r"[+/]")
_URLSAFE_ONLY: Final = re.compile(r"[-_]")
_TO_STANDARD: Final = str.maketrans("-_", "+/")
_STANDARD_PIECE: Final = re.compile(r"[A-Za-z0-9+/]++")
_URLSAFE_PIECE: Final = re.compile(r"[A-Za-z0-9_-]++")
# Stretches of 8+ characters of decoded text without a control character (C0 but the
# blanks and line ends, DEL, C1) or a byte that is not UTF-8 (decoded as a lone surrogate).
_TEXT: Final = re.compile(r"[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\udc80-\udcff]{8,}+")
_ASCII_LEADS: Final = re.compile(r"[A-Za-f]{2}")
# Two groups of four characters that decode to three ASCII bytes each: the first
# character of a group is below 32 (bit 7 of the first byte clear), the second has bit 3
# clear (bit 7 of the second byte), the third bit 1 (bit 7 of the third byte), in either
# alphabet. Ten ASCII characters (the shortest secret) hold two such groups whatever
# their alignment; a stretch of prose or a path passes about once in 400 characters.
# (The group written out twice: ``(?:…){2}`` runs the repeat machinery at every
# position, 2-4 times slower on a long run of one character.)
_ASCII_GROUP: Final = r"[A-Za-f][A-HQ-Xg-nw-z0-3][ABEFIJMNQRUVYZcdghklopstwx014589][A-Za-z0-9+/_-]"
_ASCII_GROUPS: Final = re.compile(_ASCII_GROUP * 2)
_NOT_TEXT: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\udc80-\udcff]")


@dataclass(frozen=True, slots=True)
class DecodedText:
    """Text decoded from ``run[first:last]`` (``whole``: the piece decodes to nothing
    else), its first byte being byte ``offset`` of the decoding from ``alignment``."""

    text: str
    first: int
    last: int
    whole: bool
    piece_start: int
    piece_end: int
    alignment: int
    offset: int

    def chars(self, start: int, end: int) -> tuple[int, int]:
        """The characters of the run that encode ``text[start:end]``: whole groups of
        four, so nothing of that part of the text is left encoded outside them."""
        if self.whole:
            return self.first, self.last
        low = self.offset + len(self.text[:start].encode("utf-8", "surrogatepass"))
        high = self.offset + len(self.text[:end].encode("utf-8", "surrogatepass"))
        origin = self.piece_start + self.alignment
        return origin + 4 * (low // 3), min(self.piece_end, origin + 4 * ((high - 1) // 3 + 1))


def decoded_texts(run: str) -> Iterator[DecodedText]:
    """The texts hidden in a base64 run (a ``BASE64_RUN`` match), in both alphabets and
    every alignment."""
    body = run.rstrip("=")
    if _ASCII_GROUPS.search(body) is None:
        return  # no piece, in no alignment, decodes to six ASCII characters in a row
    standard = _STANDARD_ONLY.search(body) is not None
    urlsafe = _URLSAFE_ONLY.search(body) is not None
    if standard == urlsafe:
        # Neither alphabet's own characters: one reading. Both: each, cut at the other's.
        alphabets = (_STANDARD_PIECE, _URLSAFE_PIECE) if standard else (_STANDARD_PIECE,)
    else:
        # Pieces cut at the run's own alphabet characters first (a path's "/"): an
        # encoding glued to them comes out whole; then the run read in its alphabet.
        alphabets = (_URLSAFE_PIECE, _STANDARD_PIECE) if standard else (_STANDARD_PIECE, _URLSAFE_PIECE)
    for alphabet in alphabets:
        yield from _pieces(run, body, alphabet)


def _pieces(run: str, body: str, alphabet: re.Pattern[str]) -> Iterator[DecodedText]:
    for piece in alphabet.finditer(body):
        start, end = piece.span()
        if end - start < _MIN_PIECE:
            continue
        chars = piece.group()
        if _ASCII_GROUPS.search(chars) is None:
            continue  # no alignment decodes to six ASCII characters in a row
        translated = False
        for alignment in range(4):
            # Each ASCII byte starts a group whose first character is one of A-Z a-f:
            # text holding a secret (10+ ASCII characters) starts two groups in a row so.
            if end - start - alignment < _MIN_PIECE or _ASCII_LEADS.search(chars[alignment::4]) is None:
                continue
            if not translated:
                chars, translated = chars.translate(_TO_STANDARD), True
            if alignment == 0:
                whole = _whole(chars)
                if whole is not None:
                    padded_end = len(run) if end == len(body) else end
                    yield DecodedText(whole, start, padded_end, True, start, end, 0, 0)
                    break
            decoded = _decode(chars[alignment:]).decode("utf-8", "surrogateescape")
            for stretch in _TEXT.finditer(decoded):
                offset = len(decoded[: stretch.start()].encode("utf-8", "surrogateescape"))
                yield DecodedText(stretch.group(), start, end, False, start, end, alignment, offset)


def _decode(chars: str) -> bytes:
    """The bytes of standard-alphabet ``chars`` read from their first character, a last
    partial group included (a lone last character holds no whole byte: dropped)."""
    usable = len(chars) - (1 if len(chars) % 4 == 1 else 0)
    chars = chars[:usable]
    return binascii.a2b_base64(chars + "=" * (-len(chars) % 4))


def _whole(chars: str) -> str | None:
    """The text ``chars`` encode when they are exactly the encoding of UTF-8 text of 8+
    characters without control characters; else None."""
    try:
        text = _decode(chars).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    if len(text) < MIN_TEXT_CHARS or _NOT_TEXT.search(text) is not None:
        return None
    return text

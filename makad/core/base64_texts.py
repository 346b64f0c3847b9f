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
_BASE64_CHARS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-"
MIN_TEXT_CHARS: Final = 8
# Each Latin-1 byte as 1 when it is a base64 character of either alphabet, else 0.
_RUN_BYTE_FLAGS: Final = bytes(int(chr(byte) in _BASE64_CHARS) for byte in range(256))
_RUN_START: Final = b"\x01" * 20
# A piece shorter than this encodes fewer than 10 characters: no secret the detector
# finds is that short (the shortest is a three-letter keyword, "=" and six characters).
_MIN_PIECE: Final = 14
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
# The same test on a long piece, in C: each character as a byte whose bit k is set when
# the character fits place k of a group (bit 3: any base64 character, so the second group
# ends inside the piece), the piece as one integer, the byte of character ``i + k``
# shifted onto that of ``i`` for each place. (The regex fails at every position of a run
# of ``aaaa…``, ~45 ns a character; the shifts are a few microseconds a kilobyte.)
_GROUP_PLACES: Final = (
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef",
    "ABCDEFGHQRSTUVWXghijklmnwxyz0123",
    "ABEFIJMNQRUVYZcdghklopstwx014589",
    _BASE64_CHARS,
)
_GROUP_BITS: Final = bytes(
    sum(1 << place for place, chars in enumerate(_GROUP_PLACES) if chr(byte) in chars) for byte in range(256)
)
_GROUP_SHIFTS: Final = tuple(8 * k + k % 4 for k in range(1, 8))
_LONG_PIECE: Final = 1024
_NOT_TEXT: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\udc80-\udcff]")
# Each byte as 0 when it is an ASCII control character (C0 but the blanks and line ends,
# DEL), else 1: a stretch of 8+ text characters is 8+ bytes in a row flagged 1.
_TEXT_BYTE_FLAGS: Final = bytes(
    0 if (byte < 0x20 and byte not in (9, 10, 13)) or byte == 0x7F else 1 for byte in range(256)
)
_TEXT_BYTES: Final = b"\x01" * MIN_TEXT_CHARS


def base64_runs(text: str) -> Iterator[re.Match[str]]:
    """The matches of ``BASE64_RUN`` in ``text``. Each starts where 20 base64 characters
    in a row start (found with a byte search in C), where the regex is only matched: its
    search fails at every position of a long stretch of other characters (``====…``),
    ~60 ns each. (Latin-1 with "?" for other characters keeps positions as they are.)"""
    flags = text.encode("latin-1", "replace").translate(_RUN_BYTE_FLAGS)
    at = flags.find(_RUN_START)
    while at >= 0:
        match = BASE64_RUN.match(text, at)
        if match is None:  # pragma: no cover - 20 base64 characters always match
            return
        yield match
        at = flags.find(_RUN_START, match.end())


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
    if not _has_ascii_groups(body):
        return  # no piece, in no alignment, decodes to six ASCII characters in a row
    # (``in`` is a memchr; a regex search costs ~50 ns a character on a long run.)
    standard = "+" in body or "/" in body
    urlsafe = "-" in body or "_" in body
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
        if not _has_ascii_groups(chars):
            continue  # no alignment decodes to six ASCII characters in a row
        translated = False
        for alignment in range(4):
            # Each ASCII byte starts a group whose first character is one of A-Z a-f:
            # text holding a secret (10+ ASCII characters) starts two groups in a row so.
            if end - start - alignment < _MIN_PIECE or _ASCII_LEADS.search(chars[alignment::4]) is None:
                continue
            if not translated:
                # (Two replaces: ``str.translate`` with a table raises and catches a
                # KeyError for every character the table does not name.)
                chars, translated = chars.replace("-", "+").replace("_", "/"), True
            raw = _decode(chars[alignment:])
            flags = raw.translate(_TEXT_BYTE_FLAGS)
            # An ASCII control byte is no text (decoded, or not UTF-8): nothing whole.
            if alignment == 0 and b"\x00" not in flags:
                whole = _whole(raw)
                if whole is not None:
                    padded_end = len(run) if end == len(body) else end
                    yield DecodedText(whole, start, padded_end, True, start, end, 0, 0)
                    break
            if _TEXT_BYTES not in flags:
                continue  # no eight bytes in a row without an ASCII control: no stretch
            decoded = raw.decode("utf-8", "surrogateescape")
            # The byte offset of each stretch, counted on from the previous one: counting
            # from the start each time is quadratic on a long run of random bytes.
            offset, counted = 0, 0
            for stretch in _TEXT.finditer(decoded):
                offset += _utf8_length(decoded[counted : stretch.start()])
                counted = stretch.start()
                yield DecodedText(stretch.group(), start, end, False, start, end, alignment, offset)


def _has_ascii_groups(chars: str) -> bool:
    """Whether base64 ``chars`` hold a match of ``_ASCII_GROUPS``."""
    if len(chars) < _LONG_PIECE:
        return _ASCII_GROUPS.search(chars) is not None
    flags = chars.encode("ascii").translate(_GROUP_BITS)
    each = int.from_bytes(flags, "little")
    places = each
    for shift in _GROUP_SHIFTS:
        places &= each >> shift
    return places & int.from_bytes(b"\x01" * len(flags), "little") != 0


def _utf8_length(text: str) -> int:
    """How many bytes ``text`` (bytes decoded with ``surrogateescape``) was."""
    return len(text.encode("utf-8", "surrogateescape"))


def _decode(chars: str) -> bytes:
    """The bytes of standard-alphabet ``chars`` read from their first character, a last
    partial group included (a lone last character holds no whole byte: dropped)."""
    usable = len(chars) - (1 if len(chars) % 4 == 1 else 0)
    chars = chars[:usable]
    return binascii.a2b_base64(chars + "=" * (-len(chars) % 4))


def _whole(raw: bytes) -> str | None:
    """The text of bytes ``raw`` (a piece decoded) when they are UTF-8 text of 8+
    characters without control characters; else None."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) < MIN_TEXT_CHARS or _NOT_TEXT.search(text) is not None:
        return None
    return text

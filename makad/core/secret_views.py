"""What the redactor looks at besides the text itself: a normalized view, decoded base64.

A secret can hide from plain pattern matching in two cheap ways: invisible
characters inside it (``sk-ant-\u200bapi03-…``, a soft hyphen, a BOM) or
look-alike compatibility characters (full-width ``ｓｋ－``), and an encoding
(``c2stYW50LWFwaTAz…``). ``normalized_view`` gives the text the detector should
see and maps positions back, so the redaction replaces exactly the original
characters the secret spans and leaves every other character, invisible ones
included, as it was. ``decode_base64_run`` turns a plausible base64 run back
into the text it encodes, or None.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

# Default-ignorable code points (Unicode 15.1 DerivedCoreProperties) plus every
# format character (category Cf): nothing a person sees, so nothing a secret needs.
_IGNORABLE_RANGES: Final = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
# Compatibility forms of ASCII letters, digits and symbols: full-width forms and
# the mathematical alphanumerics. Folded to ASCII, since every credential is ASCII.
_FOLDABLE_RANGES: Final = ((0xFF01, 0xFF5E), (0x1D400, 0x1D7FF))


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(f"\\U{low:08x}" if low == high else f"\\U{low:08x}-\\U{high:08x}" for low, high in ranges)


_IGNORABLE: Final = re.compile(f"[{_char_class(_IGNORABLE_RANGES)}]")
_SUSPECT: Final = re.compile(f"[{_char_class(_IGNORABLE_RANGES + _FOLDABLE_RANGES)}]")


def has_suspects(text: str) -> bool:
    """Whether the normalized view of ``text`` would differ from it."""
    return not text.isascii() and _SUSPECT.search(text) is not None


def is_ignorable(char: str) -> bool:
    """Whether a character is invisible for detection (format or default-ignorable)."""
    return _IGNORABLE.fullmatch(char) is not None


@lru_cache(maxsize=4096)
def _fold(char: str) -> str:
    """The ASCII character a compatibility form stands for; '' to drop it."""
    if _IGNORABLE.fullmatch(char):
        return ""
    folded = unicodedata.normalize("NFKC", char)
    return folded if len(folded) == 1 and folded.isascii() else char


@dataclass(frozen=True, slots=True)
class View:
    """The text as the detector sees it, and the way back to the original positions.

    ``starts`` and ``origins`` are parallel: the view's piece starting at
    ``starts[i]`` was copied from the original at ``origins[i]``, one character
    for one character.
    """

    text: str
    starts: list[int]
    origins: list[int]

    def original(self, start: int, end: int) -> tuple[int, int]:
        """The original range the view's ``[start, end)`` was made from (end > start)."""
        return self._position(start), self._position(end - 1) + 1

    def _position(self, index: int) -> int:
        piece = bisect.bisect_right(self.starts, index) - 1
        return self.origins[piece] + index - self.starts[piece]


def normalized_view(text: str) -> View | None:
    """The text without invisible characters and with ASCII look-alikes folded; None when
    that changes nothing (the common case, decided by one regex scan)."""
    if not has_suspects(text):
        return None
    pieces: list[str] = []
    starts: list[int] = []
    origins: list[int] = []
    length = 0
    cursor = 0
    for match in _SUSPECT.finditer(text):
        at = match.start()
        if at > cursor:
            starts.append(length)
            origins.append(cursor)
            pieces.append(text[cursor:at])
            length += at - cursor
        folded = _fold(match.group())
        if folded:
            starts.append(length)
            origins.append(at)
            pieces.append(folded)
            length += 1
        cursor = at + 1
    if cursor < len(text):
        starts.append(length)
        origins.append(cursor)
        pieces.append(text[cursor:])
    view = "".join(pieces)
    if view == text:
        return None
    if not starts:  # nothing visible at all
        return View("", [0], [0])
    return View(view, starts, origins)


def visible(text: str) -> str:
    """``text`` without its invisible characters: how two spellings of a secret compare."""
    return _IGNORABLE.sub("", text) if not text.isascii() else text


# A run that may be base64 (standard or URL-safe alphabet), long enough to hold a secret.
BASE64_RUN: Final = re.compile(r"[A-Za-z0-9+/_-]{20,}={0,2}")
MAX_BASE64_RUN = 1 << 20
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def decode_base64_run(run: str) -> str | None:
    """The text a base64 run encodes, when it is well-formed base64 of UTF-8 text
    without control characters; else None (binary data, prose, identifiers)."""
    body = run.rstrip("=")
    if len(body) > MAX_BASE64_RUN:
        return None
    standard = "+" in body or "/" in body
    if standard and ("-" in body or "_" in body):
        return None  # two alphabets: a path or an identifier, not base64
    if len(body) % 4 == 1:
        body = body[:-1]
    padded = body + "=" * (-len(body) % 4)
    try:
        raw = base64.b64decode(padded, validate=True) if standard else base64.urlsafe_b64decode(padded)
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    if len(decoded) < 8 or _CONTROL.search(decoded) is not None:
        return None
    return decoded

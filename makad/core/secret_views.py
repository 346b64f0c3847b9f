"""What the redactor looks at besides the text itself: views that undo disguises.

A secret can hide from plain pattern matching in cheap ways: invisible characters
inside it (``sk-ant-\u200bapi03-…``, a soft hyphen, a BOM), look-alike compatibility
characters (full-width ``ｓｋ－``), and escapes (``%2F`` in a URL, ``\\/`` in a JSON string). Each view here
gives the text the detector should see and maps positions back, so the redaction
replaces exactly the original characters the secret spans and leaves every other
character, invisible ones included, as it was. (Base64 is ``makad.core.base64_texts``.)
"""

from __future__ import annotations

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

    ``starts`` and ``origins`` are parallel: the view's piece starting at ``starts[i]``
    was copied from the original at ``origins[i]``, one character for one character,
    or, where ``widths[i]`` is set, is one character standing for ``widths[i]`` original
    ones (a decoded escape such as ``%2F``).
    """

    text: str
    starts: list[int]
    origins: list[int]
    widths: list[int] | None = None

    def original(self, start: int, end: int) -> tuple[int, int]:
        """The original range the view's ``[start, end)`` was made from (end > start)."""
        return self._position(start), self._end(end - 1)

    def _position(self, index: int) -> int:
        piece = bisect.bisect_right(self.starts, index) - 1
        return self.origins[piece] + index - self.starts[piece]

    def _end(self, index: int) -> int:
        piece = bisect.bisect_right(self.starts, index) - 1
        width = self.widths[piece] if self.widths is not None else 0
        return self.origins[piece] + (width or index - self.starts[piece] + 1)


class _Builder:
    """A view made piece by piece: copied runs and single replacement characters."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.starts: list[int] = []
        self.origins: list[int] = []
        self.widths: list[int] = []
        self.length = 0

    def copy(self, text: str, start: int, end: int) -> None:
        if end > start:
            self._add(text[start:end], start, 0)

    def put(self, char: str, origin: int, width: int) -> None:
        self._add(char, origin, width)

    def _add(self, piece: str, origin: int, width: int) -> None:
        self.starts.append(self.length)
        self.origins.append(origin)
        self.widths.append(width)
        self.pieces.append(piece)
        self.length += len(piece)

    def view(self, original: str) -> View | None:
        text = "".join(self.pieces)
        if text == original:
            return None
        if not self.starts:  # nothing left at all
            return View("", [0], [0])
        widths = self.widths if any(self.widths) else None
        return View(text, self.starts, self.origins, widths)


def normalized_view(text: str) -> View | None:
    """The text without invisible characters and with ASCII look-alikes folded; None when
    that changes nothing (the common case, decided by one regex scan)."""
    if not has_suspects(text):
        return None
    built = _Builder()
    cursor = 0
    for match in _SUSPECT.finditer(text):
        at = match.start()
        built.copy(text, cursor, at)
        folded = _fold(match.group())
        if folded:
            built.put(folded, at, 1)
        cursor = at + 1
    built.copy(text, cursor, len(text))
    return built.view(text)


# Escapes a URL or a JSON string puts on the characters of a secret: ``%2F``, ``\/``,
# ``\u002F``. Only those standing for printable ASCII or a blank are read (every
# credential is ASCII); ``%E2%80%8B`` and the like stay as they are.
_ESCAPE: Final = re.compile(r"%([0-9A-Fa-f]{2})|\\(?:/|u00([0-7][0-9A-Fa-f]))")
_PLUS: Final = re.compile(r"\+")


def unescaped_view(text: str) -> View | None:
    """The text with its URL (``%XX``) and JSON (``\\/``, ``\\u00XX``) escapes of
    printable ASCII decoded, and, when it holds ``%XX`` escapes (a form-encoded query
    string), ``+`` read as a blank; None when it holds none."""
    if "%" not in text and "\\" not in text:
        return None
    escapes = [m for m in _ESCAPE.finditer(text) if _unescaped(m) is not None]
    if not escapes:
        return None
    if "+" in text and any(m.group(1) for m in escapes):
        escapes = sorted([*escapes, *_PLUS.finditer(text)], key=lambda m: m.start())
    built = _Builder()
    cursor = 0
    for match in escapes:
        built.copy(text, cursor, match.start())
        built.put(_unescaped(match) or " ", match.start(), match.end() - match.start())
        cursor = match.end()
    built.copy(text, cursor, len(text))
    return built.view(text)


def _unescaped(match: re.Match[str]) -> str | None:
    """The character an escape stands for, when it is printable ASCII or a blank."""
    if match.group() == "+":
        return None
    code = match.group(1) or match.group(2)
    char = chr(int(code, 16)) if code else "/"
    return char if char.isprintable() or char in "\t\n\r" else None


def visible(text: str) -> str:
    """``text`` without its invisible characters: how two spellings of a secret compare."""
    return _IGNORABLE.sub("", text) if not text.isascii() else text

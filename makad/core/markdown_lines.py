"""Markdown line shapes read without a regular expression over the whole line.

``^ {0,3}#{1,6}(?:\\s+(.*?))?\\s*#*\\s*$`` (an ATX heading and its text) tries its lazy
text against every tail of the line and its blanks against every run of blanks: a long
run of blanks made it cubic (1,000 blanks took seconds). ``atx_heading`` reads the same
lines the same way with string methods, each character a bounded number of times;
``without_comments`` drops ``<!-- … -->`` as ``<!--.*?-->`` did, without rescanning the
line from every unclosed ``<!--``.
"""

from __future__ import annotations

from typing import NamedTuple


class Heading(NamedTuple):
    level: int
    # The heading's text, closing hashes and blanks removed; None when the line is hashes
    # and blanks alone with no blank right after the opening hashes (``#``, ``#######``).
    text: str | None


def atx_heading(line: str, *, any_indent: bool = False) -> Heading | None:
    """The ATX heading ``line`` (one line: no ``\\n``) is, as
    ``^ {0,3}#{1,6}(?:\\s+(?P<text>.*?))?\\s*#*\\s*$`` reads it (with ``any_indent``,
    ``\\s{0,3}`` for the indent); None when it is none."""
    indent = 0
    while (
        indent < 3 and indent < len(line) and (line[indent].isspace() if any_indent else line[indent] == " ")
    ):
        indent += 1
    hashes = len(line) - indent - len(line[indent:].lstrip("#"))
    if hashes == 0:
        return None
    rest = line[indent + hashes :]
    if hashes <= 6 and rest[:1].isspace():
        # The text is the rest without its blanks and closing hashes (the lazy group
        # leaves them to ``\s*#*\s*``).
        return Heading(hashes, rest.strip().rstrip("#").rstrip())
    if not rest.strip():
        # Only hashes and blanks: ``#{1,6}`` then ``#*`` take the hashes, ``\s*`` the blanks.
        return Heading(min(hashes, 6), None)
    return None


def without_comments(line: str) -> str:
    """``line`` (one line: no ``\\n``) with each ``<!-- … -->`` removed (the nearest ``-->``
    closes each); an unclosed ``<!--`` and everything after it stay."""
    if "<!--" not in line:
        return line
    pieces: list[str] = []
    pos = 0
    while (start := line.find("<!--", pos)) >= 0:
        end = line.find("-->", start + 4)
        if end < 0:
            break  # no later "<!--" can be closed either: every "-->" is before it
        pieces.append(line[pos:start])
        pos = end + 3
    pieces.append(line[pos:])
    return "".join(pieces)

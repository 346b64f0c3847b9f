"""A metadata comment whose ``maka-memory:`` is misspelt, typed under an entry's heading.

``<!-- maka-memroy: id=… -->`` (or ``Maka-Memory:``, ``maka memory:``, no colon, no
marker at all before ``id=… status=…``) is not read as metadata: the comment becomes the
first line of the entry's content and the entry answers to an id derived from its text,
so its history, approvals and the id other tools know seem gone. Nothing changes that
(the file stays as typed); ``bad_metadata`` on the comment's line says what happened and
gives the spelling makad reads. A comment of the user's own (``<!-- TODO: … -->``) warns
about nothing.

Pure and cheap: only entries without a metadata comment whose content starts with
``<!--`` are looked at.
"""

from __future__ import annotations

import difflib
import re
from typing import Final

from makad.core import memory_format as fmt
from makad.core.entry_comment import FIELDS
from makad.core.entry_text import is_blank, split_lines
from makad.core.file_warnings import quoted
from makad.core.types import Warning
from makad.core.undecodable import display

MARKER: Final = "maka-memory:"
_OPENING: Final = re.compile(r"[ \t]*<!--[ \t]*")
_SEPARATORS: Final = re.compile(r"[\s_:-]+")
# "makamemroy", "makamemory" cased or spaced differently: near; "memory", "note": not.
_NEAR: Final = 0.8
# Without a marker, this many known ``key=value`` tokens still say "metadata" (one ``id=``
# in a note of the user's does not).
_KNOWN_TOKENS: Final = 2
MAX_WARNINGS: Final = 10


def misspelt_comments(doc: fmt.MemoryDocument, file_name: str = "MEMORY.md") -> list[Warning]:
    """``bad_metadata`` for each entry of ``doc`` whose first line under the heading is a
    comment meant as its metadata comment but not read as one."""
    flagged = {
        index
        for index, section in enumerate(doc.sections)
        if not section.has_comment and section.entry.content.startswith("<!--")
    }
    if not flagged:
        return []
    out: list[Warning] = []
    line = 1 + len(split_lines(doc.preamble))
    for index, section in enumerate(doc.sections[: max(flagged) + 1]):
        lines = split_lines(section.raw)
        found = _first_text_line(lines) if index in flagged else None
        if found is not None and (tokens := _meant_as_metadata(display(lines[found]))) is not None:
            out.append(_warning(section, line + found, file_name, tokens))
            if len(out) >= MAX_WARNINGS:
                return out
        line += len(lines)
    return out


def _first_text_line(lines: list[str]) -> int | None:
    """The index of the first non-blank line after the heading (``lines[0]``)."""
    return next((index for index, text in enumerate(lines[1:], 1) if not is_blank(text)), None)


def _meant_as_metadata(line: str) -> list[str] | None:
    """The comment's ``key=value`` tokens when ``line`` looks like a metadata comment with
    its marker misspelt or left out; None for any other line."""
    opening = _OPENING.match(line)
    if opening is None:
        return None
    body = line[opening.end() :].split("-->", 1)[0]
    words = body.split()
    first_token = next((i for i, word in enumerate(words) if "=" in word), len(words))
    label = _SEPARATORS.sub("", " ".join(words[:first_token]).split(":", 1)[0]).casefold()
    tokens = words[first_token:]
    known = sum(1 for token in tokens if token.partition("=")[0] in FIELDS)
    if label and _near_marker(label):
        return tokens
    if not label and known >= _KNOWN_TOKENS:
        return tokens
    return None


def _near_marker(label: str) -> bool:
    return difflib.SequenceMatcher(None, label, "makamemory").ratio() >= _NEAR


def _joined_lists(tokens: list[str]) -> list[str]:
    """``tags=go, style`` (a space after a comma) as the one token makad reads: ``tags=go,style``."""
    out: list[str] = []
    for token in tokens:
        if out and out[-1].endswith(",") and "=" not in token:
            out[-1] += token
        else:
            out.append(token)
    return out


def _warning(section: fmt.Section, line: int, file_name: str, tokens: list[str]) -> Warning:
    entry = section.entry
    typed_id = next((token for token in tokens if token.startswith("id=")), None)
    instead = f" instead of {quoted(typed_id)}" if typed_id else ""
    meant = " ".join([f"<!-- {MARKER}", quoted(" ".join(_joined_lists(tokens))), "-->"])
    return Warning(
        kind="bad_metadata",
        line=line,
        entry_id=entry.id,
        message=(
            f'{file_name} line {line}, entry "{quoted(entry.title)}": this comment is not read as the '
            f"entry's metadata, whose comment starts <!-- {MARKER}, so it reads as the first line "
            f"of the entry's content and the entry answers to {entry.id}{instead} (the line is "
            f"kept as written); did you mean {meant}?"
        ),
    )

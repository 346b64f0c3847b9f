"""One owner per fact: a summary line the working state already shows is left out.

A checkpoint compaction copies the session's goals, decisions and notes (errors and
corrections, learnings) into its summary, and the working state keeps showing them
after it: a pack would say each twice. The working state owns them — it is the
session's current view, revised after the compaction — so a line of the summary whose
text the working state segment shows (compared on a canonical form: list markers,
quoting, case, runs of whitespace and trailing punctuation make no difference) is left
out of the summary, and the trace lists it with the reason ``owned_elsewhere``.

A summary line cut short with an ellipsis is owned when a working-state line starts
with what it kept. Only what the working state segment actually shows owns anything:
an item the budget cut from it stays in the summary. Headings are kept; a section left
without a line says where its lines went, so a summary's required sections stay.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

OWNED_ELSEWHERE: Final = "owned_elsewhere"
# A line this short ("- none", "Done.") is too generic to be one fact.
MIN_OWNED_CHARS: Final = 8
MOVED_NOTE: Final = "- (shown in the working state)"

_MARKER = re.compile(r"^(?:[-*+•]\s+|\d{1,3}[.)]\s+|>\s*)+")
# What ends a line without saying anything (whitespace is one space by then).
_TRAILING: Final = " .;:,!"
_WHITESPACE = re.compile(r"\s+")
_HEADING = re.compile(r"^#{1,6}\s")
_ELLIPSIS = ("…", "...")


class OwnedLine(msgspec.Struct, kw_only=True, rename="camel", frozen=True):
    """A line left out of one segment because another shows it.

    ``segment``: where it was left out; ``owner``: the segment that shows it;
    ``section``: the heading it stood under (``""`` before any); ``text``: the line.
    """

    segment: str
    owner: str
    section: str
    text: str
    reason: str = OWNED_ELSEWHERE


def fact_key(line: str) -> str:
    """The canonical form lines are compared on: no list marker or quote, casefolded,
    whitespace collapsed, trailing punctuation gone."""
    text = _MARKER.sub("", line.strip())
    text = text.replace("**", "")
    text = _WHITESPACE.sub(" ", text).casefold()
    return text.rstrip(_TRAILING)


def _cut_prefix(line: str) -> str | None:
    """The kept part of a line cut with an ellipsis, as a key; None when not cut."""
    stripped = line.rstrip()
    for mark in _ELLIPSIS:
        if stripped.endswith(mark):
            return fact_key(stripped[: -len(mark)])
    return None


def owner_keys(text: str) -> set[str]:
    """The facts a segment's text shows: one key a line, headings and short lines aside."""
    keys = set()
    for line in text.splitlines():
        if _HEADING.match(line.strip()):
            continue
        key = fact_key(line)
        if len(key) >= MIN_OWNED_CHARS:
            keys.add(key)
    return keys


def _owned(line: str, keys: set[str], sorted_keys: list[str]) -> bool:
    key = fact_key(line)
    if len(key) < MIN_OWNED_CHARS:
        return False
    if key in keys:
        return True
    prefix = _cut_prefix(line)
    if prefix is None or len(prefix) < MIN_OWNED_CHARS:
        return False
    return any(k.startswith(prefix) for k in sorted_keys)


def drop_owned(body: str, owner_text: str, *, segment: str, owner: str) -> tuple[str, list[OwnedLine]]:
    """``body`` without the lines ``owner_text`` shows, and those lines (see module doc)."""
    keys = owner_keys(owner_text)
    if not keys or not body:
        return body, []
    sorted_keys = sorted(keys)
    kept: list[str] = []
    owned: list[OwnedLine] = []
    section = ""
    heading_at: int | None = None  # where the current section's heading is in ``kept``
    section_lines = 0  # content lines the current section kept
    section_owned = 0

    def close_section() -> None:
        if heading_at is not None and section_owned and not section_lines:
            at = len(kept)
            while at > heading_at + 1 and not kept[at - 1].strip():
                at -= 1
            kept.insert(at, MOVED_NOTE)

    for line in body.split("\n"):
        stripped = line.strip()
        if _HEADING.match(stripped):
            close_section()
            section = stripped.lstrip("#").strip()
            heading_at, section_lines, section_owned = len(kept), 0, 0
            kept.append(line)
            continue
        if stripped and _owned(line, keys, sorted_keys):
            owned.append(OwnedLine(segment=segment, owner=owner, section=section, text=stripped))
            section_owned += 1
            continue
        if stripped:
            section_lines += 1
        kept.append(line)
    close_section()
    return "\n".join(kept), owned

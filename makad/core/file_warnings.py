"""Warnings about what a memory file holds: found on read, reported, never fatal.

Pure: the callers read the files (and look for misplaced ones) and pass the text in."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import PurePath
from typing import Final

from makad.core import memory_format as fmt
from makad.core.compaction import abbreviate
from makad.core.context_types import ContextLimits
from makad.core.counted import counted
from makad.core.entries import is_open
from makad.core.entry_text import is_blank, split_lines
from makad.core.levels import USER_ID_PREFIX, Level
from makad.core.memory_select import PINNED_WARN_BUDGET, OtherLevelPins, pinned_overflow
from makad.core.outside_text import stray_lines
from makad.core.tokens import HeuristicCounter
from makad.core.types import Entry, Warning
from makad.core.undecodable import display, undecodable_lines

# One warning per line up to this many; the rest are summed up in one more.
MAX_LINE_WARNINGS: Final = 10
# A line, a title or a comment typed in the file is quoted in a warning at most this long.
QUOTE_CHARS: Final = 120


def quoted(text: str) -> str:
    """``text`` as a warning quotes it: one line, at most ``QUOTE_CHARS`` characters."""
    return abbreviate(text[: QUOTE_CHARS * 4], QUOTE_CHARS)


def not_utf8(text: str | None, file_name: str, *, per_line: bool = True) -> list[Warning]:
    """``not_utf8`` warnings naming the lines of ``text`` that are not valid UTF-8.

    With ``per_line`` false (a file other than the one the reply is about) a single
    warning without ``line`` names them in its message.
    """
    lines = undecodable_lines(text) if text else []
    if not lines:
        return []
    shown = ", ".join(map(str, lines[:MAX_LINE_WARNINGS]))
    more = f" and {len(lines) - MAX_LINE_WARNINGS} more" if len(lines) > MAX_LINE_WARNINGS else ""
    if not per_line:
        return [
            Warning(
                kind="not_utf8",
                message=(
                    f"{file_name} is not valid UTF-8 at line{'s' if len(lines) > 1 else ''} {shown}{more}: "
                    "those bytes are shown as cp1252 and kept as they are on disk"
                ),
            )
        ]
    out = [
        Warning(
            kind="not_utf8",
            line=number,
            message=(
                f"{file_name} line {number} is not valid UTF-8: its bytes are shown as cp1252 and kept "
                "as they are on disk until that entry is changed"
            ),
        )
        for number in lines[:MAX_LINE_WARNINGS]
    ]
    if more:
        out.append(
            Warning(
                kind="not_utf8",
                message=(
                    f"{file_name} has {counted(len(lines) - MAX_LINE_WARNINGS, 'more line')} that "
                    f"{'is' if len(lines) - MAX_LINE_WARNINGS == 1 else 'are'} not valid UTF-8"
                ),
            )
        )
    return out


ENTRY_FIX: Final = "start each memory with a `## Title` line (makad's docs/FORMAT.md)"
# ``##Title`` (no space) and ``### Title`` look like entry headings but are not.
_SLIPPED_HEADING: Final = re.compile(r" {0,3}(?:##(?=[^\s#])|#{3,6}[ \t]+)(.*?)[ \t]*$")


def _entry_fix(text: str) -> str:
    """The fix for a stray line: the heading it was likely meant as, else the general rule."""
    slipped = _SLIPPED_HEADING.fullmatch(text.rstrip("\r\n"))
    if slipped is None or not slipped[1]:
        return ENTRY_FIX
    return (
        f"did you mean ## {quoted(slipped[1])}? "
        "(an entry starts with two # and a space: makad's docs/FORMAT.md)"
    )


def _one_hash_title(text: str) -> str | None:
    """The title of a ``# Title`` line (one #, up to three spaces before it), else None."""
    line = text.rstrip("\r\n")
    rest = line.lstrip(" ")
    if len(line) - len(rest) > 3 or not rest.startswith(("# ", "#\t")):
        return None
    return rest[1:].strip() or None


def _one_hash_headings(lines: list[str], stray: list[int]) -> dict[int, str]:
    """The ``# Title`` lines (number → title) of a preamble holding two or more of them: one
    is the file's title, a second means the ``# `` lines were typed as entries' headings."""
    skipped = set(stray)
    found: dict[int, str] = {}
    for number, text in enumerate(lines, start=1):
        title = None if number in skipped else _one_hash_title(display(text))
        if title is not None:
            found[number] = title
    return found if len(found) >= 2 else {}


def _stray_fix(text: str, number: int, headings: dict[int, str]) -> str:
    """The fix for stray line ``number``: the ``## `` heading meant by the ``# `` line above it
    (in a preamble of several, ``headings``), else what ``_entry_fix`` says."""
    above = [n for n in headings if n < number]
    if not above or _SLIPPED_HEADING.fullmatch(text.rstrip("\r\n")) is not None:
        return _entry_fix(text)
    title = quoted(headings[above[-1]])
    return (
        f'the "# {title}" above it (line {above[-1]}) has one # where an entry\'s heading has two: '
        f"did you mean ## {title}? (makad's docs/FORMAT.md)"
    )


def outside_entries(preamble: str, file_name: str) -> list[Warning]:
    """``text_outside_entries`` for each line of ``preamble`` (the text before the first
    ``## `` entry) that is not blank, the file's ``# `` title or an HTML comment.

    Such text is kept as it is but is no memory: a CLAUDE.md-style list of bullets there
    reads as "no entries", which is what this warning explains.
    """
    stray = stray_lines(preamble)
    lines = split_lines(preamble) if stray else []
    headings = _one_hash_headings(lines, stray)
    out = [
        Warning(
            kind="text_outside_entries",
            line=number,
            message=f"{file_name} line {number} is outside any entry, so it is not read as a memory: "
            + _stray_fix(display(lines[number - 1]), number, headings),
        )
        for number in stray[:MAX_LINE_WARNINGS]
    ]
    if len(stray) > MAX_LINE_WARNINGS:
        out.append(
            Warning(
                kind="text_outside_entries",
                message=f"{file_name} has {len(stray) - MAX_LINE_WARNINGS} more lines outside any entry",
            )
        )
    return out


# A ``##`` line with no space after it, or a ``# Title`` (one # short of an entry): a
# heading typed wrong, unless in a code block.
_UNSPACED_HEADING: Final = re.compile(r"^ {0,3}(?:##[^\s#]|#[ \t]+\S)", re.MULTILINE)
_FENCE: Final = re.compile(r" {0,3}(?:```|~~~)")


def unspaced_headings(doc: fmt.MemoryDocument, file_name: str = "MEMORY.md") -> list[Warning]:
    """``not_a_heading`` for each ``##Title`` line (no space after ``##``) or ``# Title`` line
    (one ``#``) inside an entry, outside code blocks, after a blank line (in an entry typed by
    hand, without a metadata comment or with ``origin=unknown``, after any line): it starts no
    entry, so its text reads as part of the entry above.
    Cheap on a clean file: one regular-expression search per section."""
    out: list[Warning] = []
    line = 1 + len(split_lines(doc.preamble))
    for section in doc.sections:
        if not _UNSPACED_HEADING.search(section.raw):
            line += _count_lines(section.raw)
            continue
        lines = split_lines(section.raw)
        by_hand = not section.has_comment or section.entry.origin == "unknown"
        for index in _unspaced_lines(lines, glued=by_hand):
            typed = display(lines[index]).strip()
            single = not typed.startswith("##")
            why = (
                "has one # where an entry's heading has two"
                if single
                else "is no heading: ## needs a space after it"
            )
            out.append(
                Warning(
                    kind="not_a_heading",
                    line=line + index,
                    entry_id=section.entry.id,
                    message=f'{file_name} line {line + index} "{quoted(typed)}" {why}, so the line '
                    f'and the text below it read as part of the entry "{quoted(section.entry.title)}" '
                    f"above; did you mean ## {quoted(typed[1 if single else 2 :].strip())}?",
                )
            )
            if len(out) >= MAX_LINE_WARNINGS:
                return out
        line += len(lines)
    return out


def _unspaced_lines(lines: list[str], *, glued: bool) -> list[int]:
    """Indexes of the ``##Title`` and ``# Title`` lines of a section's ``lines`` (its heading first) that
    start a paragraph (with ``glued``, any of them), not counting those inside a fenced code
    block. A paragraph's first line is where an entry typed by hand starts; in an entry the
    daemon wrote (added, proposed or imported) an ``##`` glued to the text above it is more
    likely the text's own (a hashtag, a shell comment), while in one typed by hand it is a
    heading typed without the blank line above it."""
    found: list[int] = []
    fenced = False
    for index, text in enumerate(lines[1:], 1):
        if _FENCE.match(text):
            fenced = not fenced
        elif not fenced and _UNSPACED_HEADING.match(text) and (glued or is_blank(lines[index - 1])):
            found.append(index)
    return found


def _count_lines(text: str) -> int:
    if "\r" in text:
        return len(split_lines(text))
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


_PROPOSAL_FIX: Final = (
    "put <!-- maka-memory: status=review_required --> on the line under its heading to "
    "have it reviewed, or move it to MEMORY.md to keep it as a memory"
)


def not_proposals(doc: fmt.MemoryDocument, *, per_line: bool = True) -> list[Warning]:
    """``not_a_proposal`` for each section of PENDING.md (``doc``) that waits for no review
    (typed there without ``status=review_required``, or left ``active``): kept as it is, but
    neither listed nor approved. With ``per_line`` false, one warning names the lines."""
    lines: list[tuple[int, str]] = []
    line = 1 + len(split_lines(doc.preamble))
    for section in doc.sections:
        if not is_open(section.entry):
            lines.append((line, section.entry.title))
        line += len(split_lines(section.raw))
    if not lines:
        return []
    if not per_line:
        shown = ", ".join(str(number) for number, _ in lines[:MAX_LINE_WARNINGS])
        more = f" and {len(lines) - MAX_LINE_WARNINGS} more" if len(lines) > MAX_LINE_WARNINGS else ""
        return [
            Warning(
                kind="not_a_proposal",
                message=(
                    f"PENDING.md line {shown} starts a section that is not waiting for review, so it "
                    f"is neither listed nor approved: {_PROPOSAL_FIX}"
                    if len(lines) == 1
                    else f"PENDING.md lines {shown}{more} start sections that are not waiting for "
                    f"review, so they are neither listed nor approved: {_PROPOSAL_FIX}"
                ),
            )
        ]
    out = [
        Warning(
            kind="not_a_proposal",
            line=number,
            message=f'PENDING.md line {number}: "{title}" is not waiting for review, so it is '
            f"neither listed nor approved: {_PROPOSAL_FIX}",
        )
        for number, title in lines[:MAX_LINE_WARNINGS]
    ]
    if len(lines) > MAX_LINE_WARNINGS:
        out.append(
            Warning(
                kind="not_a_proposal",
                message=f"PENDING.md has {counted(len(lines) - MAX_LINE_WARNINGS, 'more section')} "
                "not waiting for review",
            )
        )
    return out


def pending_over_cap(too_large: bool, size: int, cap: int) -> list[Warning]:
    """``pending_safe_mode`` when PENDING.md is over the size cap: none of its proposals is
    read, so an empty list of them must not pass for an empty queue."""
    if not too_large:
        return []
    return [
        Warning(
            kind="pending_safe_mode",
            message=f"PENDING.md is {size} bytes, over the {cap}-byte cap: no proposal is listed, "
            "approved or queued until it is shrunk",
        )
    ]


ROOT_FILES: Final = ("MEMORY.md", "PENDING.md")


def misplaced(found: Iterable[str], workspace: PurePath | None = None) -> list[Warning]:
    """``misplaced_file`` for each of ``found``, a MEMORY.md or PENDING.md at the workspace's
    top instead of in ``memory/``. The caller asks only while ``memory/MEMORY.md`` holds no
    entry: beside a used memory file, a root MEMORY.md is likely another tool's. A
    ``workspace`` named ``memory`` is most likely a workspace's memory folder given as the
    workspace: the warning names its parent instead of advising a move.
    """
    if workspace is not None and workspace.name == "memory":
        return [
            Warning(
                kind="misplaced_file",
                message=f"{name} is at the top of {workspace}, which looks like a workspace's "
                f"memory folder: that workspace is {workspace.parent} (maka -w {workspace.parent} "
                "…, or run maka in that folder)",
            )
            for name in found
        ]
    return [
        Warning(
            kind="misplaced_file",
            message=f"{name} is at the top of the workspace, where makad does not read it: "
            f"makad reads memory/{name}. Move it there (mkdir -p memory && mv {name} memory/)",
        )
        for name in found
    ]


def pinned_over_share(
    doc: fmt.MemoryDocument,
    entries: list[Entry],
    now_ms: int,
    user_confidence: dict[str, str],
    level: Level,
    file_name: str = "MEMORY.md",
    other: OtherLevelPins | None = None,
) -> list[Warning]:
    """``pinned_over_share`` for each pinned entry of ``entries`` (the dated entries of
    ``doc``, in its order) that a 1,500-token context pack has no room for: the pinned
    entries need more than the small-memory share of such a pack
    (``makad.core.memory_select.pinned_overflow``). ``other``: the user level's pinned
    entries, which the same packs show beside a workspace's; those of them left out are
    named too (without a line: they are in the user level's file). Blocking (renders each
    pinned entry)."""
    found = pinned_overflow(
        entries, now_ms, ContextLimits(), HeuristicCounter(), level, user_confidence, other
    )
    if not found.past:
        return []
    theirs = {entry.id for entry in other.entries} if other is not None else set()
    lines: dict[str, int] = {}
    line = 1 + len(split_lines(doc.preamble))
    for section in doc.sections:
        lines.setdefault(section.entry.id, line)
        line += len(split_lines(section.raw))
    counted = f"the {found.pinned} pinned entries"
    if found.others:
        counted += f" ({found.others} of them the user level's, shown beside this workspace's)"
    why = (
        f"{counted} need about {found.tokens:,} tokens, more than the "
        f"{found.limit:,} a {PINNED_WARN_BUDGET:,}-token context pack gives them (half its budget, "
        "at most 2,000 tokens): such packs leave it out, the context trace says when. Unpin some "
        "(maka memory unpin ID) or shorten them"
    )
    out = [
        Warning(
            kind="pinned_over_share",
            message=f'the user level\'s pinned entry "{entry.title}" does not fit: {why} '
            f"(this one: maka --user memory unpin {entry.id.removeprefix(USER_ID_PREFIX)})",
        )
        if entry.id in theirs
        else Warning(
            kind="pinned_over_share",
            line=lines.get(entry.id),
            entry_id=entry.id,
            message=f'{file_name} line {lines.get(entry.id, "?")}: the pinned entry "{entry.title}" '
            f"does not fit: {why}",
        )
        for entry in found.past[:MAX_LINE_WARNINGS]
    ]
    if len(found.past) > MAX_LINE_WARNINGS:
        out.append(
            Warning(
                kind="pinned_over_share",
                message=f"{file_name} has {len(found.past) - MAX_LINE_WARNINGS} more pinned entries that "
                f"do not fit: {why}",
            )
        )
    return out

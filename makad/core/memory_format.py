"""MEMORY.md and PENDING.md: parse into entries, render back byte for byte.

A document is ``BOM? + preamble + section + section + ...``; concatenating the
parts gives the original text exactly, so rendering an unchanged document is
lossless by construction. Operations return a new document in which only the
sections they touch carry new bytes.

Where a section starts -- an ATX ``## `` heading at the top level of the
document, found with markdown-it (CommonMark), so ``## `` inside a code fence,
a block quote or a list is not an entry. (Where no parse can change the answer -- no
``## `` line to classify, or only headings, blank lines and paragraph text -- none
is run: markdown-it costs ~25 µs a line.) Setext headings (``Title`` over
``---``) never start entries. One exception keeps daemon-written entries
unhidable: a ``## `` line whose next non-blank line is a ``<!-- maka-memory:``
comment always starts an entry, even after an unclosed code fence or HTML
comment. Everything before the first entry is the preamble.

A section runs from its heading line to the next one (exclusive), trailing
blank lines and any prose included. Its entry's content is the text after the
metadata comment (or after the heading when there is none), with line endings
normalised to ``\\n`` and leading and trailing blank lines removed. Content the
daemon writes is escaped and closed so it cannot change how the rest of the
file parses, and the escape is invisible to readers (``makad.core.entry_text``).

Bytes that are not UTF-8 arrive as lone surrogates (``surrogateescape``) and
stay in ``raw``, so untouched sections are written back byte for byte; every
value read from them (title, content, comment values) is shown through
``makad.core.undecodable.display``, so no surrogate leaves this module.

Identity -- new ids are ``sha256(content + str(createdAt))[:16]``; old
``manual-<ms>`` ids stay as they are. An entry without an id (no comment, or a
comment without ``id=``) gets ``h-`` + ``sha256(title + "\\n" + content)[:16]``
(the content as the file spells it) and is marked ``derived``; the daemon then
gives it the id of the entry it continues (``makad.core.typed_ids``, applied with
``renamed``), and the id is persisted the first time the entry is rewritten. When
ids repeat, every section is kept; the second one reports ``<id>~2``, the third
``<id>~3``, and so on.

Metadata -- the comment is read and edited by ``makad.core.entry_comment``:
values this version does not understand are held byte for byte, and rewriting
an entry only changes the tokens of the fields that changed. A rewritten
section keeps its heading line when the title is the same and its content
lines when the content is the same.

Fail-open -- parsing never raises, keeps every section, and marks an entry
whose comment is unclosed, has stray text, a token without ``=`` or a bad
known value as ``comment_malformed`` while still returning its content.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Final

import msgspec

from makad.core.entry_comment import CommentFields, edit_tokens, field_tokens, held_keys, read_comment
from makad.core.entry_text import (
    COMMENT,
    EOL,
    H2,
    LINE_BOM,
    block_tokens,
    is_blank,
    join_content,
    prepare,
    split_lines,
    strip_eol,
    unescape,
)
from makad.core.types import Entry
from makad.core.undecodable import display

HEADER: Final = "# Maka Memory\n\n"
# PENDING.md's title; a file with any other preamble (``# Maka Memory`` from older
# versions included) reads the same.
PENDING_HEADER: Final = "# Maka Pending Proposals\n\n"

_LINE_BREAKS = re.compile(r"[\r\n]+")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# The CR of a CRLF is no line break of its own: ``x\r\n`` ends no blank line.
_BLANK_END = re.compile(r"(?:\A|\r\n|\r(?!\n)|\n)[ \t]*(?:\r\n|\r|\n)\Z")
# Decay needs all three understood: a held createdAt reads as 0 and would archive at once.
_DECAY_KEYS: Final = frozenset({"createdAt", "decayTtlMs", "status"})


@dataclass(frozen=True, slots=True)
class Section:
    """One entry's exact bytes and what was read from them."""

    raw: str
    entry: Entry
    declared_id: str
    has_comment: bool = False
    comment_malformed: bool = False
    # The file names no id for it (typed by hand): its id came from its text, or from
    # the entry it continues (``renamed``).
    derived: bool = False
    # Comment tokens the entry does not represent, kept byte for byte: unknown keys,
    # tokens without ``=``, and known keys whose value was not understood or repeated.
    unknown_fields: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryDocument:
    """A parsed memory file: ``render`` gives back its exact text."""

    preamble: str = ""
    sections: tuple[Section, ...] = ()
    newline: str = "\n"
    bom: bool = False


# --- parsing -----------------------------------------------------------------


def parse(text: str, earlier: MemoryDocument | None = None) -> MemoryDocument:
    """Split ``text`` into preamble and sections; never raises.

    ``earlier``: a document ``parse`` returned before (as it returned it, no section
    changed since), typically the file's previous version: a section of ``text`` whose
    bytes are one of its sections' is that section (given the id this file's order
    claims for it) rather than read again. A section is a function of its bytes and of
    the ids claimed before it, so the result is the same; a write of one entry into a
    file of thousands then reads one section, not all of them."""
    bom = text.startswith("\ufeff")
    body = text[1:] if bom else text
    lines = split_lines(body)
    newline = _newline_style(lines)
    bodies = [strip_eol(line) for line in lines]
    bounds = [*_heading_lines(bodies), len(lines)]
    preamble = "".join(lines[: bounds[0]])
    # Each section is built once, already holding its unique id (copying it to rename it
    # cost a quarter of reading a file of one repeated heading), from the lines split
    # above rather than its bytes split again.
    ids = _UniqueIds()
    if earlier is None or not earlier.sections:
        sections = tuple(_read_section("".join(lines[a:b]), ids, bodies[a:b]) for a, b in pairwise(bounds))
    else:
        known = {section.raw: section for section in earlier.sections}
        sections = tuple(
            _reread_section("".join(lines[a:b]), ids, bodies, a, b, known) for a, b in pairwise(bounds)
        )
    return MemoryDocument(preamble, sections, newline, bom)


def _reread_section(
    raw: str, ids: _UniqueIds, bodies: list[str], start: int, end: int, known: dict[str, Section]
) -> Section:
    """The section ``raw`` holds: ``known``'s section of the same bytes holding the id
    claimed now, else read (``bodies[start:end]``: its lines without their endings)."""
    found = known.get(raw)
    if found is None:
        return _read_section(raw, ids, bodies[start:end])
    entry_id = ids.claim(found.declared_id)
    return found if entry_id == found.entry.id else _holding(found, entry_id)


def render(doc: MemoryDocument) -> str:
    """Concatenate the document's parts: the inverse of ``parse``."""
    prefix = "\ufeff" if doc.bom else ""
    return prefix + doc.preamble + "".join(section.raw for section in doc.sections)


def new_document(newline: str = "\n", header: str = HEADER) -> MemoryDocument:
    """An empty memory file: just its title (``# Maka Memory``, or ``PENDING_HEADER``)."""
    return MemoryDocument(preamble=header.replace("\n", newline), newline=newline)


def is_empty(doc: MemoryDocument) -> bool:
    """Nothing in it at all: no preamble, no section (a file saved empty)."""
    return not doc.preamble and not doc.sections


def entries(doc: MemoryDocument) -> list[Entry]:
    """Every entry in file order (duplicate ids carry a ``~n`` suffix)."""
    return [section.entry for section in doc.sections]


def find(doc: MemoryDocument, entry_id: str) -> Section | None:
    """The section holding ``entry_id``, if any."""
    index = _index_of(doc, entry_id)
    return None if index is None else doc.sections[index]


def new_entry_id(content: str, created_at_ms: int) -> str:
    """Id for a new entry: first 16 hex chars of sha256(content + createdAt)."""
    return _sha16(content + str(created_at_ms))


DERIVED_ID_PREFIX = "h-"  # an entry that names no id (typed by hand): derived from its text


def derived_entry_id(title: str, content: str) -> str:
    """Id for an entry that names none: stable while title and content are."""
    return DERIVED_ID_PREFIX + _sha16(title + "\n" + content)


def _newline_style(lines: list[str]) -> str:
    for line in lines:
        match = EOL.search(line)
        if match:
            return match.group()
    return "\n"


def _comment_follows(bodies: list[str], index: int) -> bool:
    # By index, not over a slice: a slice copies the rest of the file for every heading.
    for at in range(index + 1, len(bodies)):
        if not is_blank(bodies[at]):
            return bool(COMMENT.match(bodies[at]))
    return False


def _heading_lines(bodies: list[str]) -> list[int]:
    """Indexes of the lines that start a section."""
    h2_lines = [i for i, body in enumerate(bodies) if H2.match(body)]
    anchored = [i for i in h2_lines if _comment_follows(bodies, i)]
    found = set(anchored)
    bounds = sorted({0, *anchored, len(bodies)})
    for start, end in pairwise(bounds):
        # Only a line ``H2`` matches can be a top-level ``## `` heading: a chunk with none
        # but its own anchored heading needs no parse (a file the daemon wrote: all).
        first, last = bisect.bisect_left(h2_lines, start), bisect.bisect_left(h2_lines, end)
        candidates = [i for i in h2_lines[first:last] if i not in found]
        if not candidates:
            continue
        if all(_is_inert(body) for body in bodies[start:end]):
            found.update(candidates)
            continue
        # Metadata comments read as blank lines, so an unclosed one cannot swallow the
        # rest of the chunk as an HTML block.
        found.update(start + line for line in _top_level_h2(bodies[start:end]))
    return sorted(found)


# A line that opens no block of more than itself: an ATX heading of any level. (Metadata
# comments read as blank lines; a line starting with a letter is paragraph text.)
_ANY_ATX: Final = re.compile(r"\ufeff? {0,3}#{1,6}(?=[ \t]|\Z)")


def _is_inert(body: str) -> bool:
    """Whether ``body`` can neither open nor continue a container, a code block or an HTML
    block in CommonMark: blank (blanks are spaces and tabs), a metadata comment, an ATX
    heading, or text whose first character is a letter (paragraph text, which an ATX
    heading interrupts). In a chunk of such lines every ``## `` line is a top-level
    heading, which is what markdown-it would say at ~25 µs a line."""
    first = body.removeprefix(LINE_BOM)[:1]
    return (
        first.isalpha()
        or not body.strip(" \t")
        or _ANY_ATX.match(body) is not None
        or COMMENT.match(body) is not None
    )


def _top_level_h2(bodies: list[str]) -> list[int]:
    tokens = block_tokens(bodies)
    if tokens is None:  # fail-open: fall back to the anchored headings only
        return []
    return [
        token.map[0]
        for token in tokens
        if token.type == "heading_open"
        and token.tag == "h2"
        and token.markup == "##"
        and token.level == 0
        and token.map is not None
    ]


def _title(heading: str) -> str:
    text = H2.sub("", heading, count=1).strip(" \t")
    return _without_closing_hashes(text).strip(" \t")


def _without_closing_hashes(text: str) -> str:
    """``text`` (stripped of blanks) without a closing run of ``#`` that follows a blank or
    is the whole text, as ``(?:^|[ \\t]+)#+[ \\t]*\\Z`` removed it (that search was
    quadratic on a long run of blanks)."""
    before = text.rstrip("#")
    if before == text or (before and before[-1] not in " \t"):
        return text
    return before


def _comment_index(bodies: list[str]) -> int:
    """Index of the line a metadata comment would be on: the first non-blank after the heading."""
    index = 1
    while index < len(bodies) and is_blank(bodies[index]):
        index += 1
    return index


def _read_section(raw: str, ids: _UniqueIds, bodies: list[str] | None = None) -> Section:
    """The section ``raw`` holds; ``bodies``: its lines without their endings, if known."""
    if bodies is None:
        bodies = [strip_eol(line) for line in split_lines(raw)]
    title = display(_title(bodies[0])) if bodies else ""
    index = _comment_index(bodies)
    comment = COMMENT.match(bodies[index]) if index < len(bodies) else None
    fields = CommentFields()
    content_lines = bodies[1:]
    if comment is not None:
        fields = read_comment(bodies[index][comment.end() :])
        content_lines = ([fields.trailing] if fields.trailing else []) + bodies[index + 1 :]
    spelled = join_content([display(line) for line in content_lines])
    content = "\n".join(unescape(spelled.split("\n"))) if spelled else ""
    values = fields.values
    declared = values.get("id")
    declared_id = declared if isinstance(declared, str) else derived_entry_id(title, spelled)
    created = _int_or(values.get("createdAt"), 0)
    # The ignores below: a value a newer version wrote (origin=robot) is kept as written,
    # outside the Literal the type names, so a rewrite never destroys it (lossless).
    entry = Entry(
        id=ids.claim(declared_id),
        title=title,
        content=content,
        origin=values.get("origin", "unknown"),  # type: ignore[arg-type]
        created_at=created,
        updated_at=_int_or(values.get("updatedAt"), created),
        status=values.get("status", "active"),  # type: ignore[arg-type]
        tags=_list_or(values.get("tags")),
        decay_ttl_ms=values.get("decayTtlMs"),  # type: ignore[arg-type]
        scope=values.get("scope", "workspace"),  # type: ignore[arg-type]
        session_id=values.get("session"),  # type: ignore[arg-type]
        source_refs=_list_or(values.get("source")),
        supersedes=values.get("supersedes"),  # type: ignore[arg-type]
    )
    return Section(
        raw=raw,
        entry=entry,
        declared_id=declared_id,
        has_comment=comment is not None,
        comment_malformed=fields.malformed or (comment is not None and declared is None),
        unknown_fields=tuple(fields.held),
        derived=not isinstance(declared, str),
    )


def comment_of(section: Section) -> tuple[int, str] | None:
    """Where ``section``'s metadata comment is (lines after its heading) and its text after
    ``maka-memory:``; None when it has none. Found without splitting the section's lines:
    the comment is the first non-blank line after the heading, so the first ``<!--`` past
    the heading's line is on it."""
    if not section.has_comment:
        return None
    raw = section.raw
    heading_end = _LINE_BREAK.search(raw)
    opening = raw.find("<!--", heading_end.end() if heading_end else len(raw))
    if opening < 0:
        return None
    start = max(raw.rfind("\n", 0, opening), raw.rfind("\r", 0, opening)) + 1
    comment = COMMENT.match(raw, start)
    if comment is None:
        return None
    end = _LINE_BREAK.search(raw, comment.end())
    lines_before = raw[:start]
    offset = len(split_lines(lines_before)) if "\r" in lines_before else lines_before.count("\n")
    return offset, raw[comment.end() : end.start() if end else len(raw)]


def _int_or(value: object, default: int) -> int:
    return value if isinstance(value, int) else default


def _list_or(value: object) -> list[str]:
    return list(value) if isinstance(value, list) else []


class _UniqueIds:
    """Ids handed out in file order, a repeated one with a ``~n`` suffix (first one wins)."""

    def __init__(self) -> None:
        self._taken: set[str] = set()
        # The last suffix given to each repeated id: the next copy resumes there (every
        # suffix below it is taken), so thousands of copies are not quadratic.
        self._last_suffix: dict[str, int] = {}

    def claim(self, declared_id: str) -> str:
        entry_id = declared_id
        if entry_id in self._taken:
            suffix = self._last_suffix.get(declared_id, 1)
            while entry_id in self._taken:
                suffix += 1
                entry_id = f"{declared_id}~{suffix}"
            self._last_suffix[declared_id] = suffix
        self._taken.add(entry_id)
        return entry_id


def _assemble(preamble: str, sections: list[Section], newline: str, bom: bool) -> MemoryDocument:
    """Build a document, giving repeated ids a ``~n`` suffix (first one wins)."""
    unique, _ = _claimed(sections)
    return MemoryDocument(preamble, tuple(unique), newline, bom)


def _claimed(sections: Sequence[Section]) -> tuple[list[Section], _UniqueIds]:
    """``sections`` holding the ids claimed for them in order, and the claims made."""
    ids = _UniqueIds()
    unique: list[Section] = []
    for section in sections:
        entry_id = ids.claim(section.declared_id)
        unique.append(section if entry_id == section.entry.id else _holding(section, entry_id))
    return unique, ids


def _holding(section: Section, entry_id: str) -> Section:
    """``section`` reporting ``entry_id`` (its declared id unchanged)."""
    return Section(
        section.raw,
        msgspec.structs.replace(section.entry, id=entry_id),
        section.declared_id,
        section.has_comment,
        section.comment_malformed,
        section.derived,
        section.unknown_fields,
    )


def _sha16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


# --- rendering ---------------------------------------------------------------


def render_entry(entry: Entry, unknown_fields: tuple[str, ...] | list[str] = (), newline: str = "\n") -> str:
    """One section as the daemon writes it, ending with a newline (two when a block needs it)."""
    tokens = [*field_tokens(entry).values(), *unknown_fields]
    head = _heading(entry.title) + newline + _comment(tokens) + newline
    return head + _body(entry.content, newline, "")


def _heading(title: str) -> str:
    title = _LINE_BREAKS.sub(" ", title).strip(" \t")
    if title.endswith("#"):  # a closing sequence keeps the title's own final '#'
        title += " #"
    return f"## {title}".rstrip(" ")


def _comment(tokens: list[str]) -> str:
    return f"<!-- maka-memory: {' '.join(tokens)} -->"


def _body(content: str, newline: str, trailing: str) -> str:
    """Content lines as written, then ``trailing`` blank lines (at least one if a block needs it)."""
    prepared = prepare(content)
    text = newline.join(prepared.lines) + newline if prepared.lines else ""
    return text + (trailing or (newline if prepared.blank_after else ""))


def _rewrite(section: Section, entry: Entry, newline: str) -> str:
    """``section`` holding ``entry`` instead: only what changed gets new bytes."""
    lines = split_lines(section.raw)
    before = section.entry
    heading = lines[0] if entry.title == before.title else _heading(entry.title)
    head = heading if EOL.search(heading) else heading + newline
    bodies = [strip_eol(line) for line in lines]
    index = _comment_index(bodies)
    comment = COMMENT.match(bodies[index]) if section.has_comment and index < len(bodies) else None
    if comment is not None:
        fields = read_comment(bodies[index][comment.end() :])
        tokens = edit_tokens(fields.tokens, before, section.declared_id, entry)
        gap, rest = "".join(lines[1:index]), lines[index + 1 :]
        eol = EOL.search(lines[index])
        comment_line = _comment(tokens) + (eol.group() if eol else newline)
        keep_body = fields.closed and not fields.trailing
    else:
        gap, rest = "", lines[1:]
        comment_line = _comment(list(field_tokens(entry).values())) + newline
        keep_body = True
    if keep_body and entry.content == before.content:
        return head + gap + comment_line + "".join(rest)
    return head + gap + comment_line + _body(entry.content, newline, _trailing_blank_lines(section.raw))


# --- operations --------------------------------------------------------------


def upsert(doc: MemoryDocument, entry: Entry) -> MemoryDocument:
    """Replace the section with ``entry.id`` in place (a minimal edit), or append a new one.

    An entry equal to what is already there leaves the document untouched.
    """
    index = _index_of(doc, entry.id)
    if index is None:
        return _append(doc, render_entry(entry, (), doc.newline))
    section = doc.sections[index]
    if section.entry == entry:
        return doc
    return _replace_raw(doc, index, _rewrite(section, entry, doc.newline))


class Upserts:
    """Many ``upsert`` and ``find`` calls on one document, each costing about the section it
    touches: the result, and every section found on the way, is what calling ``upsert`` and
    ``find`` on the whole document in turn gives (``~n`` suffixes included), which costs
    the whole document per call.

    The ids of a document follow from its sections' declared ids in order (each claim
    depends only on the ones before it), so an entry appended under an id no section holds,
    or a section rewritten with the same declared id, leaves every other id as it was: only
    a rewrite that changes a declared id (an entry typed by hand getting its id written, a
    ``~n`` copy its own) claims them all again, as every ``upsert`` does."""

    def __init__(self, doc: MemoryDocument) -> None:
        self._doc: MemoryDocument | None = doc  # None once anything changed
        self._preamble = doc.preamble
        self._sections = list(doc.sections)
        self._newline = doc.newline
        self._bom = doc.bom
        # Set once the ids are claimed afresh: a document ``renamed`` gave ids may hold
        # ones a claim would not give, which the first change (like ``upsert``'s) renumbers.
        self._ids: _UniqueIds | None = None
        self._index = self._first_indexes()

    def _first_indexes(self) -> dict[str, int]:
        index: dict[str, int] = {}
        for at, section in enumerate(self._sections):
            index.setdefault(section.entry.id, at)
        return index

    def _claim_all(self) -> None:
        self._sections, self._ids = _claimed(self._sections)
        self._index = self._first_indexes()

    def find(self, entry_id: str) -> Section | None:
        """The section holding ``entry_id`` in the document as it is now, if any."""
        at = self._index.get(entry_id)
        return None if at is None else self._sections[at]

    def upsert(self, entry: Entry) -> None:
        """What ``upsert`` does to the document as it is now."""
        at = self._index.get(entry.id)
        if at is None:
            self._append(render_entry(entry, (), self._newline))
            return
        section = self._sections[at]
        if section.entry == entry:
            return
        self._doc = None
        rewritten = _read_as(_rewrite(section, entry, self._newline), section.entry.id)
        self._sections[at] = rewritten
        if self._ids is None or rewritten.declared_id != section.declared_id:
            self._claim_all()
        elif rewritten.entry.id != section.entry.id:
            self._sections[at] = _holding(rewritten, section.entry.id)

    def _append(self, raw: str) -> None:
        self._doc = None
        if self._ids is None:
            self._claim_all()
        assert self._ids is not None
        sections = self._sections
        if not self._preamble and not sections:
            self._preamble = HEADER.replace("\n", self._newline)
        if sections:
            sections[-1] = replace(sections[-1], raw=_with_blank_line_end(sections[-1].raw, self._newline))
        else:
            self._preamble = _with_blank_line_end(self._preamble, self._newline)
        section = _read_as(raw, None)
        entry_id = self._ids.claim(section.declared_id)
        sections.append(section if entry_id == section.entry.id else _holding(section, entry_id))
        self._index.setdefault(entry_id, len(sections) - 1)

    def doc(self) -> MemoryDocument:
        """The document with every upsert so far applied (the one given, when none changed it)."""
        if self._doc is not None:
            return self._doc
        return MemoryDocument(self._preamble, tuple(self._sections), self._newline, self._bom)


def remove_each(doc: MemoryDocument, ids: Sequence[str]) -> MemoryDocument:
    """What ``remove`` of each of ``ids`` in turn gives, in one pass when no id can move: when
    every section holds the id it declares and no two declare the same, removing one changes
    no other's id. (Otherwise a removal can give a later ``~n`` copy the id itself, and the
    next removal must see that: the ids are removed one at a time.)"""
    if not ids:
        return doc
    declared = {s.declared_id for s in doc.sections}
    if len(declared) != len(doc.sections) or any(s.entry.id != s.declared_id for s in doc.sections):
        for entry_id in ids:
            doc = remove(doc, entry_id)
        return doc
    gone = set(ids)
    kept = tuple(s for s in doc.sections if s.entry.id not in gone)
    if len(kept) == len(doc.sections):
        return doc
    return MemoryDocument(doc.preamble, kept, doc.newline, doc.bom)


def render_entries(entries: Sequence[Entry], newline: str = "\n") -> str:
    """A new memory file holding ``entries`` in order, a blank line between sections: what
    upserting each into ``new_document`` renders, in one pass (``upsert`` looks through
    the whole document each time, so entry by entry takes time quadratic in their number)."""
    header = HEADER.replace("\n", newline)
    if not entries:
        return header
    raws = [render_entry(entry, (), newline) for entry in entries]
    parts = [_with_blank_line_end(header, newline)]
    parts.extend(_with_blank_line_end(raw, newline) for raw in raws[:-1])
    parts.append(raws[-1])
    return "".join(parts)


def put_raw(doc: MemoryDocument, entry_id: str, raw: str) -> MemoryDocument:
    """Put a section's exact bytes in place of ``entry_id``'s, or append them as a new one.

    Bytes that name no id (an entry typed by hand) stay ``entry_id``'s."""
    index = _index_of(doc, entry_id)
    if index is None:
        return _append(doc, raw, entry_id)
    if index < len(doc.sections) - 1 and not EOL.search(raw):
        raw += doc.newline  # the next section must keep starting a line
    return _replace_raw(doc, index, raw, entry_id)


def renamed(doc: MemoryDocument, ids: Mapping[int, str]) -> MemoryDocument:
    """``doc`` with the sections at the given indexes holding the given ids (ids no other
    section holds: an entry typed by hand keeps the id of the entry it continues)."""
    if not ids:
        return doc
    sections = list(doc.sections)
    for index, entry_id in ids.items():
        sections[index] = _named(sections[index], entry_id)
    return replace(doc, sections=tuple(sections))


def _named(section: Section, entry_id: str) -> Section:
    if section.entry.id == entry_id and section.declared_id == entry_id:
        return section
    entry = msgspec.structs.replace(section.entry, id=entry_id)
    # Built directly: dataclasses.replace costs several times more, once per hand-typed
    # section of every version read.
    return Section(
        section.raw,
        entry,
        entry_id,
        section.has_comment,
        section.comment_malformed,
        section.derived,
        section.unknown_fields,
    )


def remove(doc: MemoryDocument, entry_id: str) -> MemoryDocument:
    """Drop the section holding ``entry_id``; an unknown id changes nothing."""
    index = _index_of(doc, entry_id)
    if index is None:
        return doc
    sections = list(doc.sections)
    del sections[index]
    return _assemble(doc.preamble, sections, doc.newline, doc.bom)


def apply_decay(doc: MemoryDocument, now_ms: int) -> tuple[MemoryDocument, list[str]]:
    """Archive active entries past ``createdAt + decayTtlMs`` (0 means never).

    Only the ``status=`` token of each expired entry's comment is rewritten. An
    entry holding a value this version does not understand for ``createdAt``,
    ``decayTtlMs`` or ``status`` is left alone. Returns the new document and the
    archived ids.
    """
    archived: list[str] = []
    for index, section in enumerate(doc.sections):
        entry = section.entry
        if (
            entry.status == "active"
            and entry.decay_ttl_ms  # None or 0: never decays
            and now_ms > entry.created_at + entry.decay_ttl_ms
            and not held_keys(section.unknown_fields) & _DECAY_KEYS
        ):
            archived_entry = msgspec.structs.replace(entry, status="archived")
            doc = _replace_raw(doc, index, _rewrite(section, archived_entry, doc.newline))
            archived.append(entry.id)
    return doc, archived


@dataclass(frozen=True, slots=True)
class MergeResult:
    """A three-way merge: the document to write and the ids both sides changed."""

    document: MemoryDocument
    conflicts: list[str]


def merge_by_id(base: MemoryDocument, ours: MemoryDocument, theirs: MemoryDocument) -> MergeResult:
    """Apply the daemon's changes (base -> ours) onto the file as it is now (theirs).

    Entries only the daemon changed take the daemon's version; entries only the
    user changed keep the user's. An entry both changed differently keeps the
    user's version and its id is reported in ``conflicts``.
    """
    base_by_id = {s.entry.id: s for s in base.sections}
    ours_by_id = {s.entry.id: s for s in ours.sections}
    merged = theirs
    if ours.preamble != base.preamble and theirs.preamble == base.preamble:
        merged = replace(merged, preamble=ours.preamble)
    conflicts: list[str] = []
    for entry_id in [*base_by_id, *(i for i in ours_by_id if i not in base_by_id)]:
        b, o = base_by_id.get(entry_id), ours_by_id.get(entry_id)
        if _same(b, o):
            continue
        t = find(merged, entry_id)
        if _same(t, o):
            continue
        if not _same(t, b):
            conflicts.append(entry_id)
        elif o is None:
            merged = remove(merged, entry_id)
        elif t is not None and b is not None and t.raw == b.raw:
            # The user left this section alone: write the daemon's exact bytes.
            index = _index_of(merged, entry_id)
            assert index is not None
            merged = _replace_raw(merged, index, o.raw)
        else:
            merged = upsert(merged, o.entry)
    return MergeResult(merged, conflicts)


def _same(a: Section | None, b: Section | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.entry == b.entry and a.unknown_fields == b.unknown_fields


def _index_of(doc: MemoryDocument, entry_id: str) -> int | None:
    for index, section in enumerate(doc.sections):
        if section.entry.id == entry_id:
            return index
    return None


def _replace_raw(doc: MemoryDocument, index: int, raw: str, entry_id: str | None = None) -> MemoryDocument:
    """``doc`` with new bytes for the section at ``index``: they keep its id (or
    ``entry_id``) when they name none."""
    sections = list(doc.sections)
    sections[index] = _read_as(raw, entry_id or doc.sections[index].entry.id)
    return _assemble(doc.preamble, sections, doc.newline, doc.bom)


def _read_as(raw: str, entry_id: str | None) -> Section:
    """The section ``raw`` holds, with ``entry_id`` when its bytes name no id."""
    section = _read_section(raw, _UniqueIds())
    return _named(section, entry_id) if section.derived and entry_id else section


def _append(doc: MemoryDocument, raw: str, entry_id: str | None = None) -> MemoryDocument:
    if not doc.preamble and not doc.sections:
        doc = replace(doc, preamble=HEADER.replace("\n", doc.newline))
    sections = list(doc.sections)
    if sections:
        last = sections[-1]
        sections[-1] = replace(last, raw=_with_blank_line_end(last.raw, doc.newline))
        preamble = doc.preamble
    else:
        preamble = _with_blank_line_end(doc.preamble, doc.newline)
    sections.append(_read_as(raw, entry_id))
    return _assemble(preamble, sections, doc.newline, doc.bom)


def _with_blank_line_end(text: str, newline: str) -> str:
    if not text or _BLANK_END.search(text):
        return text
    if not EOL.search(text):
        text += newline
    return text if _BLANK_END.search(text) else text + newline


def _trailing_blank_lines(raw: str) -> str:
    lines = split_lines(raw)
    end = len(lines)
    while end > 1 and is_blank(lines[end - 1]) and EOL.search(lines[end - 2]):
        end -= 1
    return "".join(lines[end:])

"""MEMORY.md and PENDING.md: parse into entries, render back byte for byte.

A document is ``BOM? + preamble + section + section + ...``; concatenating the
parts gives the original text exactly, so rendering an unchanged document is
lossless by construction. Operations return a new document in which only the
sections they touch carry new bytes.

Where a section starts -- an ATX ``## `` heading at the top level of the
document, found with markdown-it (CommonMark), so ``## `` inside a code fence,
a block quote or a list is not an entry. Setext headings (``Title`` over
``---``) never start entries. One exception keeps daemon-written entries
unhidable: a ``## `` line whose next non-blank line is a ``<!-- maka-memory:``
comment always starts an entry, even after an unclosed code fence or HTML
comment. Everything before the first entry is the preamble.

A section runs from its heading line to the next one (exclusive), trailing
blank lines and any prose included. Its entry's content is the text after the
metadata comment (or after the heading when there is none), with line endings
normalised to ``\\n`` and leading and trailing blank lines removed; rendering
writes the content followed by one newline, and appending puts one blank line
between sections.

Identity -- new ids are ``sha256(content + str(createdAt))[:16]``; old
``manual-<ms>`` ids stay as they are. An entry without an id (no comment, or a
comment without ``id=``) gets ``h-`` + ``sha256(title + "\\n" + content)[:16]``:
stable across restarts, and persisted the first time the entry is rewritten.
When ids repeat, every section is kept; the second one reports ``<id>~2``, the
third ``<id>~3``, and so on.

Comment values that may hold spaces, commas, ``%``, ``<``, ``>`` or ``=``
(ids, tags, source refs, session, supersedes) are percent-encoded for those
characters only, so slugs, refs like ``event:s1:3-9`` and CJK text stay
readable. ``decayTtlMs`` is written only when set; ``scope``, ``session``,
``source`` and ``supersedes`` only when not default. Unknown ``key=value``
tokens are kept verbatim and written back after the known fields.

Fail-open -- parsing never raises, keeps every section, and marks an entry
whose comment is unclosed, has stray text, a token without ``=`` or a bad
known value as ``comment_malformed`` while still returning its content.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Final, get_args
from urllib.parse import quote, unquote

import msgspec
from markdown_it import MarkdownIt

from makad.core.types import Entry, EntryStatus, Origin, Scope

HEADER: Final = "# Maka Memory\n\n"

_ORIGINS: Final[frozenset[str]] = frozenset(get_args(Origin))
_STATUSES: Final[frozenset[str]] = frozenset(get_args(EntryStatus))
_SCOPES: Final[frozenset[str]] = frozenset(get_args(Scope))
_KNOWN_KEYS: Final = (
    "id",
    "origin",
    "createdAt",
    "updatedAt",
    "status",
    "tags",
    "decayTtlMs",
    "scope",
    "session",
    "source",
    "supersedes",
)
_MAX_INT: Final = 2**63 - 1

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_EOL = re.compile(r"(?:\r\n|\r|\n)\Z")
_H2 = re.compile(r" {0,3}##(?=[ \t]|\Z)")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+[ \t]*\Z")
_COMMENT = re.compile(r"[ \t]*<!--[ \t]*maka-memory:")
_UNSAFE_VALUE = re.compile(r"[%,<>=\s\x00-\x1f\x7f]")
_BLANK_END = re.compile(r"(?:\A|\r\n|\r|\n)[ \t]*(?:\r\n|\r|\n)\Z")
_DIGITS = re.compile(r"[0-9]+")

# Only block structure matters here; inline parsing would be wasted work.
_MARKDOWN: Final = MarkdownIt("commonmark").disable(["inline", "text_join"])


@dataclass(frozen=True, slots=True)
class Section:
    """One entry's exact bytes and what was read from them."""

    raw: str
    entry: Entry
    declared_id: str
    has_comment: bool = False
    comment_malformed: bool = False
    unknown_fields: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryDocument:
    """A parsed memory file: ``render`` gives back its exact text."""

    preamble: str = ""
    sections: tuple[Section, ...] = ()
    newline: str = "\n"
    bom: bool = False


# --- parsing -----------------------------------------------------------------


def parse(text: str) -> MemoryDocument:
    """Split ``text`` into preamble and sections; never raises."""
    bom = text.startswith("\ufeff")
    body = text[1:] if bom else text
    lines = _split_lines(body)
    newline = _newline_style(lines)
    starts = _heading_lines([_strip_eol(line) for line in lines])
    bounds = [*starts, len(lines)]
    preamble = "".join(lines[: bounds[0]])
    raws = ["".join(lines[a:b]) for a, b in pairwise(bounds)]
    return _assemble(preamble, [_read_section(raw) for raw in raws], newline, bom)


def render(doc: MemoryDocument) -> str:
    """Concatenate the document's parts: the inverse of ``parse``."""
    prefix = "\ufeff" if doc.bom else ""
    return prefix + doc.preamble + "".join(section.raw for section in doc.sections)


def new_document(newline: str = "\n") -> MemoryDocument:
    """An empty memory file: just the ``# Maka Memory`` header."""
    return MemoryDocument(preamble=HEADER.replace("\n", newline), newline=newline)


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


def derived_entry_id(title: str, content: str) -> str:
    """Id for an entry that names none: stable while title and content are."""
    return "h-" + _sha16(title + "\n" + content)


def _split_lines(text: str) -> list[str]:
    # Same line breaks as markdown-it (\r\n, \r, \n), so its line map lines up.
    return _LINE.findall(text)


def _strip_eol(line: str) -> str:
    return _EOL.sub("", line)


def _newline_style(lines: list[str]) -> str:
    for line in lines:
        match = _EOL.search(line)
        if match:
            return match.group()
    return "\n"


def _is_blank(line: str) -> bool:
    return not line.strip(" \t\r\n")


def _comment_follows(bodies: list[str], index: int) -> bool:
    for body in bodies[index + 1 :]:
        if not _is_blank(body):
            return bool(_COMMENT.match(body))
    return False


def _heading_lines(bodies: list[str]) -> list[int]:
    """Indexes of the lines that start a section."""
    anchored = [i for i, body in enumerate(bodies) if _H2.match(body) and _comment_follows(bodies, i)]
    found = set(anchored)
    bounds = sorted({0, *anchored, len(bodies)})
    for start, end in pairwise(bounds):
        # A metadata comment is blanked so an unclosed one cannot swallow the
        # rest of the chunk as an HTML block.
        chunk = "\n".join("" if _COMMENT.match(b) else b for b in bodies[start:end])
        found.update(start + line for line in _top_level_h2(chunk))
    return sorted(found)


def _top_level_h2(source: str) -> list[int]:
    try:
        tokens = _MARKDOWN.parse(source)
    except Exception:  # fail-open: fall back to the anchored headings only
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
    text = _H2.sub("", heading, count=1).strip(" \t")
    return _CLOSING_HASHES.sub("", text).strip(" \t")


@dataclass(slots=True)
class _Fields:
    """Values read from a metadata comment, before they become an Entry."""

    values: dict[str, object]
    unknown: list[str]
    malformed: bool = False


def _read_section(raw: str) -> Section:
    bodies = [_strip_eol(line) for line in _split_lines(raw)]
    title = _title(bodies[0]) if bodies else ""
    index = 1
    while index < len(bodies) and _is_blank(bodies[index]):
        index += 1
    comment = _COMMENT.match(bodies[index]) if index < len(bodies) else None
    has_comment = comment is not None
    fields = _Fields(values={}, unknown=[])
    content_lines = bodies[1:]
    if comment is not None:
        trailing = _read_comment(bodies[index][comment.end() :], fields)
        content_lines = ([trailing] if trailing else []) + bodies[index + 1 :]
    content = _join_content(content_lines)
    values = fields.values
    declared = values.get("id")
    entry_id = declared if isinstance(declared, str) else derived_entry_id(title, content)
    if has_comment and declared is None:
        fields.malformed = True
    created = _int_or(values.get("createdAt"), 0)
    entry = Entry(
        id=entry_id,
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
        declared_id=entry_id,
        has_comment=has_comment,
        comment_malformed=fields.malformed,
        unknown_fields=tuple(fields.unknown),
    )


def _int_or(value: object, default: int) -> int:
    return value if isinstance(value, int) else default


def _list_or(value: object) -> list[str]:
    return list(value) if isinstance(value, list) else []


def _read_comment(rest: str, fields: _Fields) -> str:
    """Fill ``fields`` from the comment text after ``maka-memory:``; return stray text."""
    end = rest.find("-->")
    trailing = ""
    if end < 0:
        fields.malformed = True
        end = len(rest)
    else:
        trailing = rest[end + 3 :].strip(" \t")
        fields.malformed = bool(trailing)
    for token in rest[:end].split():
        key, sep, value = token.partition("=")
        if not sep:
            fields.malformed = True
            fields.unknown.append(token)
        elif key not in _KNOWN_KEYS:
            fields.unknown.append(token)
        elif key in fields.values:
            fields.malformed = True
        else:
            parsed = _parse_value(key, value)
            if parsed is _INVALID:
                fields.malformed = True
            else:
                fields.values[key] = parsed
    return trailing


_INVALID: Final = object()


def _parse_value(key: str, value: str) -> object:
    if key == "id":
        return unquote(value) or _INVALID
    if key in ("session", "supersedes"):
        return unquote(value) or None
    if key in ("tags", "source"):
        return [unquote(item) for item in value.split(",") if item]
    if key == "origin":
        return value if value in _ORIGINS else _INVALID
    if key == "status":
        return value if value in _STATUSES else _INVALID
    if key == "scope":
        return value if value in _SCOPES else _INVALID
    if key == "decayTtlMs" and value.lower() in ("", "null", "none"):
        return None
    if _DIGITS.fullmatch(value) and len(value) <= 19 and int(value) <= _MAX_INT:
        return int(value)
    return _INVALID


def _join_content(lines: list[str]) -> str:
    start, end = 0, len(lines)
    while start < end and _is_blank(lines[start]):
        start += 1
    while end > start and _is_blank(lines[end - 1]):
        end -= 1
    return "\n".join(lines[start:end])


def _assemble(preamble: str, sections: list[Section], newline: str, bom: bool) -> MemoryDocument:
    """Build a document, giving repeated ids a ``~n`` suffix (first one wins)."""
    taken: set[str] = set()
    unique: list[Section] = []
    for section in sections:
        entry_id = section.declared_id
        suffix = 1
        while entry_id in taken:
            suffix += 1
            entry_id = f"{section.declared_id}~{suffix}"
        taken.add(entry_id)
        if entry_id != section.entry.id:
            section = replace(section, entry=msgspec.structs.replace(section.entry, id=entry_id))
        unique.append(section)
    return MemoryDocument(preamble, tuple(unique), newline, bom)


def _sha16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


# --- rendering ---------------------------------------------------------------


def render_entry(entry: Entry, unknown_fields: tuple[str, ...] | list[str] = (), newline: str = "\n") -> str:
    """One section as the daemon writes it, ending with a single newline."""
    fields = [
        f"id={_encode(entry.id)}",
        f"origin={entry.origin}",
        f"createdAt={entry.created_at}",
        f"updatedAt={entry.updated_at}",
        f"status={entry.status}",
        "tags=" + ",".join(_encode(tag) for tag in entry.tags),
    ]
    if entry.decay_ttl_ms is not None:
        fields.append(f"decayTtlMs={entry.decay_ttl_ms}")
    if entry.scope != "workspace":
        fields.append(f"scope={entry.scope}")
    if entry.session_id:
        fields.append(f"session={_encode(entry.session_id)}")
    if entry.source_refs:
        fields.append("source=" + ",".join(_encode(ref) for ref in entry.source_refs))
    if entry.supersedes:
        fields.append(f"supersedes={_encode(entry.supersedes)}")
    fields.extend(unknown_fields)
    title = re.sub(r"[\r\n]+", " ", entry.title).strip(" \t")
    lines = [f"## {title}".rstrip(" "), f"<!-- maka-memory: {' '.join(fields)} -->"]
    lines.extend(_escape_headings(_content_lines(entry.content)))
    return newline.join(lines) + newline


def _encode(value: str) -> str:
    return _UNSAFE_VALUE.sub(lambda match: quote(match.group(), safe=""), value)


def _content_lines(content: str) -> list[str]:
    joined = _join_content([_strip_eol(line) for line in _split_lines(content)])
    return joined.split("\n") if joined else []


def _escape_headings(lines: list[str]) -> list[str]:
    """Backslash-escape content lines that would otherwise start a new section."""
    if not any(_H2.match(line) for line in lines):
        return lines
    starts = set(_heading_lines(lines))
    return ["\\" + line.lstrip(" ") if i in starts else line for i, line in enumerate(lines)]


# --- operations --------------------------------------------------------------


def upsert(
    doc: MemoryDocument, entry: Entry, unknown_fields: tuple[str, ...] | None = None
) -> MemoryDocument:
    """Replace the section with ``entry.id`` in place, or append a new one.

    Unknown comment fields of the replaced section are kept unless given.
    An entry equal to what is already there leaves the document untouched.
    """
    index = _index_of(doc, entry.id)
    if index is None:
        return _append(doc, render_entry(entry, unknown_fields or (), doc.newline))
    section = doc.sections[index]
    fields = section.unknown_fields if unknown_fields is None else tuple(unknown_fields)
    if section.entry == entry and fields == section.unknown_fields:
        return doc
    raw = render_entry(entry, fields, doc.newline) + _trailing_blank_lines(section.raw)
    return _replace_raw(doc, index, raw)


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

    Only the ``status=`` token of each expired entry's comment is rewritten.
    Returns the new document and the archived ids.
    """
    archived: list[str] = []
    for index, section in enumerate(doc.sections):
        entry = section.entry
        if (
            entry.status == "active"
            and entry.decay_ttl_ms  # None or 0: never decays
            and now_ms > entry.created_at + entry.decay_ttl_ms
        ):
            doc = _replace_raw(doc, index, _set_comment_field(section.raw, "status", "archived"))
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
            merged = upsert(merged, o.entry, o.unknown_fields)
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


def _replace_raw(doc: MemoryDocument, index: int, raw: str) -> MemoryDocument:
    sections = list(doc.sections)
    sections[index] = _read_section(raw)
    return _assemble(doc.preamble, sections, doc.newline, doc.bom)


def _append(doc: MemoryDocument, raw: str) -> MemoryDocument:
    if not doc.preamble and not doc.sections:
        doc = replace(doc, preamble=HEADER.replace("\n", doc.newline))
    sections = list(doc.sections)
    if sections:
        last = sections[-1]
        sections[-1] = replace(last, raw=_with_blank_line_end(last.raw, doc.newline))
        preamble = doc.preamble
    else:
        preamble = _with_blank_line_end(doc.preamble, doc.newline)
    sections.append(_read_section(raw))
    return _assemble(preamble, sections, doc.newline, doc.bom)


def _with_blank_line_end(text: str, newline: str) -> str:
    if not text or _BLANK_END.search(text):
        return text
    if not _EOL.search(text):
        text += newline
    return text if _BLANK_END.search(text) else text + newline


def _trailing_blank_lines(raw: str) -> str:
    lines = _split_lines(raw)
    end = len(lines)
    while end > 1 and _is_blank(lines[end - 1]) and _EOL.search(lines[end - 2]):
        end -= 1
    return "".join(lines[end:])


def _set_comment_field(raw: str, key: str, value: str) -> str:
    """Set ``key=value`` inside the section's metadata comment, touching nothing else."""
    lines = _split_lines(raw)
    index = 1
    while index < len(lines) and _is_blank(lines[index]):
        index += 1
    match = _COMMENT.match(lines[index]) if index < len(lines) else None
    if match is None:
        newline = _newline_style(lines)
        head = lines[0] if _EOL.search(lines[0]) else lines[0] + newline
        comment = f"<!-- maka-memory: {key}={value} -->{newline}"
        return head + comment + "".join(lines[1:])
    line, start = lines[index], match.end()
    close = line.find("-->", start)
    stop = close if close >= 0 else len(_strip_eol(line))
    for token in re.finditer(r"\S+", line[start:stop]):
        if token.group().partition("=")[0] == key:
            a, b = start + token.start(), start + token.end()
            lines[index] = f"{line[:a]}{key}={value}{line[b:]}"
            return "".join(lines)
    gap = " " if close >= 0 else ""
    head = line[:stop].rstrip(" \t")
    lines[index] = f"{head} {key}={value}{gap}{line[stop:]}"
    return "".join(lines)

"""makad's own exports read back: ``export_memories`` JSON and Markdown (a MEMORY.md).

JSON is ``{"entries": [Entry, ...]}`` (camelCase, as ``read_state`` returns entries);
Markdown is the MEMORY.md format, so a MEMORY.md from another workspace, or one typed by
hand as ``## Title`` sections, reads the same way. Titles, contents (every paragraph,
code block and escaped ``## `` line), tags and decay are kept as they are; the id and
dates become the item's source id and dates. Only what was an active memory there comes
back: an archived entry (``export -a``) and one scoped to a session of that workspace are
skipped, saying so, never made active memories of this one.
"""

from __future__ import annotations

from typing import Any

from makad.core import memory_format as fmt
from makad.core.importers.collect import (
    MAX_IMPORT_ITEMS,
    Collector,
    TooManyItems,
    as_object,
    json_records,
    load_json,
    string_list,
)
from makad.core.importers.records import ImportResult, ItemSkipped
from makad.core.types import Entry


def parse_makad(text: str) -> ImportResult:
    out = Collector("makad")
    ok, _ = load_json(text)
    if ok:
        for locator, record in json_records(text, ("entries",), out):
            out.read(locator, _json_entry, out, locator, record)
        return out.result()
    if text.startswith("## ") + text.count("\n## ") + text.count("\r## ") > MAX_IMPORT_ITEMS:
        # Every entry starts with such a line (after an LF, a CRLF or a lone CR): counted
        # in C before millions of sections are built only to be refused one by one.
        raise TooManyItems()
    document = fmt.parse(text)
    line = 1 + len(document.preamble.splitlines())
    for section in document.sections:
        out.read(f"line {line}", _section_entry, out, f"line {line}", section.entry)
        line += len(section.raw.splitlines())
    if not document.sections:
        out.error("file", "no '## ' entries found")
    return out.result()


def _json_entry(out: Collector, locator: str, record: object) -> None:
    entry: dict[str, Any] = as_object(record)
    _skip_unless_active(entry.get("status"), entry.get("scope"))
    out.item(
        locator,
        entry.get("content"),
        title=entry.get("title"),
        tags=string_list(entry.get("tags")),
        source_id=entry.get("id"),
        created=entry.get("createdAt") or None,
        updated=entry.get("updatedAt") or None,
        exact=True,
        decay_ttl_ms=entry.get("decayTtlMs"),
    )


def _section_entry(out: Collector, locator: str, entry: Entry) -> None:
    _skip_unless_active(entry.status, entry.scope)
    out.item(
        locator,
        entry.content,
        title=entry.title,
        tags=entry.tags,
        source_id=entry.id,
        created=entry.created_at or None,
        updated=entry.updated_at or None,
        exact=True,
        decay_ttl_ms=entry.decay_ttl_ms,
    )


def _skip_unless_active(status: object, scope: object) -> None:
    if status == "archived":
        raise ItemSkipped("archived in the export: an import brings back active memories only")
    if scope == "session":
        raise ItemSkipped("scoped to one session of the workspace it was exported from")

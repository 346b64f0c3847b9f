"""Supermemory: its document list, and documents with the memories extracted from them.

Supermemory has no export file; its documented list endpoints are the export.
``POST /v3/documents/list`` returns ``{"memories": [{"id", "customId", "title",
"summary", "content"?, "status", "type", "metadata", "containerTags", "createdAt",
"updatedAt"}], "pagination": {...}}``: each document is one memory (its content, else
its summary). ``POST /v3/memories/documents`` returns ``{"documents": [{..., "memoryEntries":
[{"id", "memory", "isLatest", "isForgotten", "createdAt", "updatedAt", ...}]}],
"pagination": ...}``: each latest, not forgotten memory entry is one memory. Container
tags and ``metadata.category`` become tags.
"""

from __future__ import annotations

from typing import Any

from makad.core.importers.collect import Collector, as_object, json_records, load_json, string_list
from makad.core.importers.records import ImportResult, ItemSkipped

DOCUMENT_MARKS = ("containerTags", "customId", "connectionId")


def is_document(record: object) -> bool:
    return isinstance(record, dict) and any(key in record for key in DOCUMENT_MARKS)


def has_memory_entries(record: object) -> bool:
    return isinstance(record, dict) and isinstance(record.get("memoryEntries"), list)


def parse_supermemory(text: str) -> ImportResult:
    out = Collector("supermemory")
    ok, document = load_json(text)
    if ok and isinstance(document, dict) and isinstance(document.get("documents"), list):
        for index, record in enumerate(document["documents"]):
            locator = f"documents[{index}]"
            out.read(locator, _with_entries, out, locator, record)
        return out.result()
    for locator, record in json_records(text, ("memories", "documents"), out):
        out.read(locator, _document, out, locator, record)
    return out.result()


def _tags(record: dict[str, Any]) -> list[str]:
    tags = string_list(record.get("containerTags"))
    metadata = record.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("category"), str):
        tags.append(metadata["category"])
    return tags


def _document(out: Collector, locator: str, record: object) -> None:
    doc: dict[str, Any] = as_object(record)
    if doc.get("status") == "failed":
        raise ItemSkipped("its processing failed in Supermemory")
    content = doc.get("content") if isinstance(doc.get("content"), str) and doc["content"].strip() else None
    out.item(
        locator,
        content or doc.get("summary"),
        title=doc.get("title"),
        tags=_tags(doc),
        source_id=doc.get("customId") or doc.get("id"),
        created=doc.get("createdAt"),
        updated=doc.get("updatedAt"),
    )


def _with_entries(out: Collector, locator: str, record: object) -> None:
    doc: dict[str, Any] = as_object(record)
    entries = doc.get("memoryEntries")
    if not isinstance(entries, list):
        _document(out, locator, doc)
        return
    tags = _tags(doc)
    for index, raw in enumerate(entries):
        where = f"{locator}.memoryEntries[{index}]"
        out.read(where, _entry, out, where, raw, tags)


def _entry(out: Collector, locator: str, record: object, tags: list[str]) -> None:
    entry: dict[str, Any] = as_object(record)
    if entry.get("isForgotten") is True:
        raise ItemSkipped("forgotten in Supermemory")
    if entry.get("isLatest") is False:
        raise ItemSkipped("a newer version of this memory exists")
    space = entry.get("spaceContainerTag")
    out.item(
        locator,
        entry.get("memory"),
        tags=[*tags, space] if isinstance(space, str) else tags,
        source_id=entry.get("id"),
        created=entry.get("createdAt"),
        updated=entry.get("updatedAt"),
    )

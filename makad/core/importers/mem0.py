"""mem0 ``get_all`` output and the OpenMemory export (both from mem0ai).

mem0 ``get_all`` returns ``{"results": [...]}`` (v1.1+, plus ``relations`` when the
graph store is on; the platform API pages it with ``count``/``next``) or a bare list
in older versions. Each memory: ``id``, ``memory``, ``hash``, ``metadata``,
``categories`` (platform), ``created_at``, ``updated_at``, ``user_id``/``agent_id``/``run_id``.

OpenMemory's backup export is a zip holding ``memories.json`` (``user``, ``apps``,
``categories`` with ids, ``memories`` with ``id``, ``content``, ``metadata``, ``state``,
``created_at``, ``updated_at``, ``category_ids``) and ``memories.jsonl.gz`` (one
memory a line: ``id``, ``content``, ``metadata``, ``created_at``, ``updated_at``,
``state``, ``app``, ``categories`` as names). The service unzips; this reads either file.
"""

from __future__ import annotations

from typing import Any

from makad.core.importers.collect import (
    Collector,
    as_object,
    json_records,
    load_json,
    string_list,
)
from makad.core.importers.records import ImportResult, ItemSkipped


def parse_mem0(text: str) -> ImportResult:
    out = Collector("mem0")
    for locator, record in json_records(text, ("results", "memories"), out):
        out.read(locator, _mem0_item, out, locator, record)
    return out.result()


def categories(memory: dict[str, Any]) -> list[str]:
    """``categories`` (the platform's) and ``metadata.category`` / ``metadata.categories``
    (what apps set through ``add(..., metadata=...)``), each a string or a list."""
    found: list[str] = []
    metadata = memory.get("metadata")
    for value in (
        memory.get("categories"),
        *((metadata.get("category"), metadata.get("categories")) if isinstance(metadata, dict) else ()),
    ):
        found += [value] if isinstance(value, str) else string_list(value)
    return found


def _mem0_item(out: Collector, locator: str, record: object) -> None:
    memory = as_object(record)
    out.item(
        locator,
        memory.get("memory"),
        tags=categories(memory),
        source_id=memory.get("id") or memory.get("hash"),
        created=memory.get("created_at"),
        updated=memory.get("updated_at"),
    )


def parse_openmemory(text: str) -> ImportResult:
    out = Collector("openmemory")
    _, document = load_json(text)
    names: dict[str, str] = {}
    if isinstance(document, dict):
        categories = document.get("categories")
        for category in categories if isinstance(categories, list) else []:
            if isinstance(category, dict) and isinstance(category.get("name"), str):
                names[str(category.get("id"))] = category["name"]
    for locator, record in json_records(text, ("memories",), out):
        out.read(locator, _openmemory_item, out, locator, record, names)
    return out.result()


def _openmemory_item(out: Collector, locator: str, record: object, names: dict[str, str]) -> None:
    memory: dict[str, Any] = as_object(record)
    if memory.get("state") == "deleted":
        raise ItemSkipped("deleted in the source")
    tags = categories(memory)
    tags += [names[c] for c in string_list(memory.get("category_ids")) if c in names]
    out.item(
        locator,
        memory.get("content"),
        tags=tags,
        source_id=memory.get("id"),
        created=memory.get("created_at"),
        updated=memory.get("updated_at"),
    )

"""What changed between two readings of a memory file, said per entry (watch, undo)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from maka.cli.output import short_id


class EntryChange(NamedTuple):
    action: str  # added | removed | archived | restored | changed
    id: str
    title: str

    def describe(self) -> str:
        return f"{self.action} {self.title!r} ({short_id(self.id)})"


def _by_id(entries: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {str(e["id"]): e for e in entries}


def _content(entry: Mapping[str, Any]) -> tuple[Any, ...]:
    return (entry.get("title"), entry.get("content"), tuple(entry.get("tags") or ()))


def entry_changes(
    before: Iterable[Mapping[str, Any]], after: Iterable[Mapping[str, Any]]
) -> list[EntryChange]:
    """Per entry, in the order of ``after`` (removed ones last): what happened to it."""
    old, new = _by_id(before), _by_id(after)
    out: list[EntryChange] = []
    for entry_id, entry in new.items():
        title = str(entry.get("title", ""))
        was = old.get(entry_id)
        if was is None:
            out.append(EntryChange("added", entry_id, title))
            continue
        status, old_status = entry.get("status", "active"), was.get("status", "active")
        if status != old_status and "archived" in (status, old_status):
            out.append(EntryChange("archived" if status == "archived" else "restored", entry_id, title))
        elif _content(entry) != _content(was):
            out.append(EntryChange("changed", entry_id, title))
    out.extend(EntryChange("removed", i, str(e.get("title", ""))) for i, e in old.items() if i not in new)
    return out

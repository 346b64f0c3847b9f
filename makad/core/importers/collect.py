"""Shared plumbing for format readers: JSON records with locators, and per-item error capture."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from makad.core.bounded_json import loads
from makad.core.entries import MAX_ENTRY_BYTES
from makad.core.entry_text import text_lines
from makad.core.importers.records import (
    INTERNAL_REASON,
    FormatName,
    ImportItem,
    ImportResult,
    ItemError,
    ItemProblem,
    ItemSkipped,
    derive_title,
    first_line,
    hash_id,
    headline,
    normalize_tags,
)
from makad.core.importers.timestamps import to_epoch_ms
from makad.core.redaction import redact
from makad.errors import TooLarge

# More memories than an import reads: PENDING.md (128 KiB) holds a few hundred proposals,
# so an export past this is read again and again for years of review, and each item costs
# redaction, a title and a key (16 MiB of one-word lines are a million items: minutes of
# CPU for one call). Counted as items are read, so such a file is refused early.
MAX_IMPORT_ITEMS: Final = 50_000


class FileProblem(Exception):
    """The input as a whole cannot be read as the requested format."""


class TooManyItems(TooLarge):
    """The input holds more memories than an import reads (``MAX_IMPORT_ITEMS``)."""

    def __init__(self) -> None:
        super().__init__(
            f"the import holds more than {MAX_IMPORT_ITEMS} memories: import it in parts",
            limit=MAX_IMPORT_ITEMS,
        )


class Collector:
    """Accumulates one parse's items, per-item errors and deliberate skips."""

    def __init__(self, fmt: FormatName) -> None:
        self.format: FormatName = fmt
        self.items: list[ImportItem] = []
        self.errors: list[ItemError] = []
        self.skipped: list[ItemError] = []

    def item(
        self,
        locator: str,
        content: object,
        *,
        title: object = None,
        tags: Iterable[object] = (),
        source_id: object = None,
        created: object = None,
        updated: object = None,
        exact: bool = False,
        decay_ttl_ms: object = None,
    ) -> None:
        """Add one item, or raise ``ItemProblem`` when its content is missing or not text.

        ``exact`` (makad's own exports): title, content and tags as they are, only blank
        lines around the content dropped (as MEMORY.md does), so a round trip is lossless.
        """
        if len(self.items) >= MAX_IMPORT_ITEMS:
            raise TooManyItems()
        if not isinstance(content, str):
            raise ItemProblem("content is missing or not text")
        if _over_entry_cap(content.strip()):
            # Refused here, as storing it would: its title, id and key are never computed
            # over megabytes.
            raise ItemProblem(f"content is over {MAX_ENTRY_BYTES} bytes")
        body = _without_blank_edges(content) if exact else content.strip()
        if not body.strip():
            raise ItemProblem("content is empty")
        given_title = title if isinstance(title, str) else None
        sid = source_id if isinstance(source_id, str | int) and str(source_id).strip() else None
        if exact and given_title and given_title.strip() and "\n" not in given_title:
            kept_title = given_title.strip()
        else:
            # Secrets redacted before the title is cut short: a secret cut in two is one
            # the redactor no longer recognises (the stored title is redacted again).
            kept_title = derive_title(
                given_title and redact(first_line(given_title)).text, headline(redact(first_line(body)).text)
            )
        self.items.append(
            ImportItem(
                title=kept_title,
                content=body,
                tags=[t for t in tags if isinstance(t, str) and t] if exact else normalize_tags(tags),
                source_id=str(sid).strip() if sid is not None else hash_id(body),
                created_at_ms=to_epoch_ms(created),
                updated_at_ms=to_epoch_ms(updated),
                source_format=self.format,
                locator=locator,
                decay_ttl_ms=_decay_or_none(decay_ttl_ms),
            )
        )

    def read(self, locator: str, reader: Callable[..., None], *args: Any) -> None:
        """Run ``reader(*args)`` for one item; its failure becomes an error for that item alone."""
        try:
            reader(*args)
        except TooManyItems:
            raise
        except ItemSkipped as skip:
            self.skipped.append(ItemError(locator=locator, reason=str(skip)))
        except ItemProblem as problem:
            self.errors.append(ItemError(locator=locator, reason=str(problem)))
        except Exception:
            self.errors.append(ItemError(locator=locator, reason=INTERNAL_REASON))

    def error(self, locator: str, reason: str) -> None:
        self.errors.append(ItemError(locator=locator, reason=reason))

    def skip(self, locator: str, reason: str) -> None:
        """What was left out on purpose, with why."""
        self.skipped.append(ItemError(locator=locator, reason=reason))

    def result(self) -> ImportResult:
        return ImportResult(format=self.format, items=self.items, errors=self.errors, skipped=self.skipped)


def _decay_or_none(value: object) -> int | None:
    """A decay (milliseconds, 0: never) as an entry's ``decayTtlMs`` holds one, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 53:
        return value
    return None


def _over_entry_cap(text: str) -> bool:
    # Each character is a byte at least: only a short text needs encoding to be sure.
    return len(text) > MAX_ENTRY_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_ENTRY_BYTES


def _without_blank_edges(text: str) -> str:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def load_json(text: str) -> tuple[bool, Any]:
    """(True, document) when the whole text is one JSON document, else (False, None).
    Decoded in pieces (``makad.core.bounded_json``): a large document never holds the
    interpreter in one call."""
    try:
        return True, loads(text)
    except (ValueError, RecursionError):
        return False, None


def json_lines(text: str, out: Collector) -> list[tuple[str, Any]]:
    """Each non-blank line as a JSON value with its ``line N`` locator; bad lines become errors."""
    records: list[tuple[str, Any]] = []
    for number, line in enumerate(text_lines(text), start=1):
        if not line.strip():
            continue
        ok, value = load_json(line)
        if ok:
            records.append((f"line {number}", value))
        else:
            out.error(f"line {number}", "not valid JSON")
    return records


def json_records(text: str, list_keys: Sequence[str], out: Collector) -> list[tuple[str, Any]]:
    """The records of a JSON document (a list, or a list under one of ``list_keys``) or JSONL."""
    ok, document = load_json(text)
    if not ok:
        records = json_lines(text, out)
        if not records and not out.errors:
            raise FileProblem("no records found")
        return records
    if isinstance(document, list):
        return [(f"[{i}]", value) for i, value in enumerate(document)]
    if isinstance(document, dict):
        for key in list_keys:
            value = document.get(key)
            if isinstance(value, list):
                return [(f"{key}[{i}]", item) for i, item in enumerate(value)]
        if len(text.splitlines()) == 1:
            return [("line 1", document)]
    raise FileProblem("expected a list of records")


def as_object(record: object) -> dict[str, Any]:
    """The record as a JSON object, or ``ItemProblem`` when it is anything else."""
    if not isinstance(record, dict):
        raise ItemProblem("not a JSON object")
    return record


def string_list(value: object) -> list[str]:
    """The strings of a JSON list (anything else yields nothing)."""
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

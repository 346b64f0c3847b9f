"""Honcho (Plastic Labs): the conclusions it derived about a peer, and its peer cards.

Honcho has no export file; what its API hands out is the export. Conclusions (v3;
"observations" in v2) come from ``POST /v3/workspaces/{w}/conclusions/list`` as a page
``{"items": [...], "total", "page", "size", "pages"}`` or from ``…/conclusions/query``
as a bare list, each ``{"id", "content", "observer_id", "observed_id", "session_id",
"created_at"}``; a JSONL of them reads too. A peer card
(``GET /v3/workspaces/{w}/peers/{p}/card``) is ``{"peer_card": ["fact", ...]}``.
Each conclusion is tagged with the peer it is about.
"""

from __future__ import annotations

from typing import Any

from makad.core.importers.collect import Collector, as_object, json_records, load_json
from makad.core.importers.records import ImportResult, ItemProblem

PEER_FIELDS = ("observer_id", "observed_id")


def is_conclusion(record: object) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("content"), str)
        and (any(key in record for key in PEER_FIELDS))
    )


def parse_honcho(text: str) -> ImportResult:
    out = Collector("honcho")
    ok, document = load_json(text)
    if ok and isinstance(document, dict) and "peer_card" in document:
        card = document.get("peer_card")
        facts = card if isinstance(card, list) else []
        for index, fact in enumerate(facts):
            locator = f"peer_card[{index}]"
            out.read(locator, _fact, out, locator, fact)
        if not facts:
            out.error("file", "the peer card is empty")
        return out.result()
    for locator, record in json_records(text, ("items", "conclusions", "observations"), out):
        out.read(locator, _conclusion, out, locator, record)
    return out.result()


def _fact(out: Collector, locator: str, fact: object) -> None:
    if not isinstance(fact, str):
        raise ItemProblem("a peer card fact is not text")
    out.item(locator, fact, tags=["peer-card"])


def _conclusion(out: Collector, locator: str, record: object) -> None:
    conclusion: dict[str, Any] = as_object(record)
    observed = conclusion.get("observed_id")
    out.item(
        locator,
        conclusion.get("content"),
        tags=[observed] if isinstance(observed, str) else [],
        source_id=conclusion.get("id"),
        created=conclusion.get("created_at"),
    )

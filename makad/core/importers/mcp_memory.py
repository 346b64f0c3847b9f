"""The MCP reference memory server's knowledge graph (``memory.jsonl``).

One JSON object a line: ``{"type": "entity", "name", "entityType", "observations": [..]}``
or ``{"type": "relation", "from", "to", "relationType"}`` (the older ``memory.json``
held ``{"entities": [...], "relations": [...]}``). An entity becomes one memory of its
observations; a relation becomes a one-line fact. Neither has ids or timestamps, so
names are the source ids.
"""

from __future__ import annotations

from makad.core.importers.collect import Collector, as_object, json_records, load_json
from makad.core.importers.records import ImportResult, ItemProblem, ItemSkipped


def parse_mcp_memory(text: str) -> ImportResult:
    out = Collector("mcp_memory")
    _, document = load_json(text)
    if isinstance(document, dict) and ("entities" in document or "relations" in document):
        records = [
            (f"{key}[{i}]", _typed(item, kind))
            for key, kind in (("entities", "entity"), ("relations", "relation"))
            for i, item in enumerate(_list(document.get(key)))
        ]
    else:
        records = json_records(text, ("entities",), out)
    for locator, record in records:
        out.read(locator, _record_item, out, locator, record)
    return out.result()


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _typed(item: object, kind: str) -> object:
    return {"type": kind, **item} if isinstance(item, dict) else item


def _record_item(out: Collector, locator: str, record: object) -> None:
    fields = as_object(record)
    kind = fields.get("type")
    if kind == "entity":
        name, entity_type = fields.get("name"), fields.get("entityType")
        if not isinstance(name, str) or not name.strip():
            raise ItemProblem("entity has no name")
        observations = fields.get("observations")
        if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
            raise ItemProblem("observations must be a list of strings")
        lines = [o.strip() for o in observations if o.strip()]
        if not lines:
            raise ItemSkipped("entity has no observations")
        out.item(
            locator,
            "\n".join(f"- {o}" for o in lines),
            title=name,
            tags=[entity_type] if isinstance(entity_type, str) else [],
            source_id=f"entity:{name.strip()}",
        )
    elif kind == "relation":
        ends = [fields.get(key) for key in ("from", "relationType", "to")]
        if not all(isinstance(e, str) and e.strip() for e in ends):
            raise ItemProblem("relation needs from, relationType and to")
        source, relation, target = (str(e).strip() for e in ends)
        fact = f"{source} {relation.replace('_', ' ')} {target}"
        out.item(
            locator,
            fact,
            title=fact,
            tags=["relation"],
            source_id=f"relation:{source}|{relation}|{target}",
        )
    else:
        raise ItemProblem("type must be entity or relation")

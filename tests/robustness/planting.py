"""Plant a secret in every string field of every method, generated from the OpenRPC document.

``string_slots`` walks a method's params schema (``$ref``s, ``anyOf``, arrays,
objects and their ``additionalProperties`` keys and values) and yields a path to
every place a client can put free text; ``place`` builds params holding a value at
one such path on top of a valid template. A field added to the protocol later is
found by the walk, so it is planted without anyone listing it here.
"""

from __future__ import annotations

import copy
import hashlib
import string
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

ALNUM = string.ascii_letters + string.digits

# A step into a value: ("prop", name), ("item",), ("key",) or ("value",).
Step = tuple[str, ...]
Path = tuple[Step, ...]


def github_token(label: str) -> str:
    """A fabricated, label-specific token in GitHub's format (no one issued it); it fits
    every identifier pattern (session ids, directory names)."""
    digest = hashlib.sha256(label.encode()).digest() * 2
    return "ghp_" + "".join(ALNUM[b % len(ALNUM)] for b in digest[:36])


@dataclass(frozen=True)
class Slot:
    method: str
    path: Path

    @property
    def label(self) -> str:
        parts = []
        for step in self.path:
            parts.append(
                step[1] if step[0] == "prop" else {"item": "[]", "key": "{key}", "value": "{value}"}[step[0]]
            )
        return f"{self.method}.{'.'.join(parts)}"

    @property
    def top(self) -> str:
        return self.path[0][1]


class Schemas:
    """The OpenRPC document's schemas, with ``$ref`` resolution."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.components = document.get("components", {}).get("schemas", {})

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            schema = self.components[schema["$ref"].rsplit("/", 1)[1]]
        return schema

    def alternatives(self, schema: dict[str, Any]) -> list[dict[str, Any]]:
        """The non-null shapes a value may take."""
        schema = self.resolve(schema)
        if "anyOf" in schema:
            return [alt for option in schema["anyOf"] for alt in self.alternatives(option)]
        if schema.get("type") == "null":
            return []
        return [schema]

    def methods(self) -> dict[str, list[dict[str, Any]]]:
        return {m["name"]: m["params"] for m in self.document["methods"]}

    def params_schema(self, method: str) -> dict[str, Any]:
        """A method's by-name params as one object schema."""
        params = self.methods()[method]
        return {
            "type": "object",
            "properties": {p["name"]: p["schema"] for p in params},
            "required": [p["name"] for p in params if p.get("required")],
        }

    def string_slots(self, method: str) -> Iterator[Slot]:
        for path in self._paths(self.params_schema(method), 0):
            yield Slot(method, path)

    def _paths(self, schema: dict[str, Any], depth: int) -> Iterator[Path]:
        if depth > 6:
            return
        for alt in self.alternatives(schema):
            if "enum" in alt or "const" in alt:
                continue
            kind = alt.get("type")
            if kind == "string":
                yield ()
            elif kind == "array" and "items" in alt:
                for rest in self._paths(alt["items"], depth + 1):
                    yield (("item",), *rest)
            elif kind == "object" or "properties" in alt:
                for name, prop in alt.get("properties", {}).items():
                    for rest in self._paths(prop, depth + 1):
                        yield (("prop", name), *rest)
                extra = alt.get("additionalProperties")
                if isinstance(extra, dict):
                    yield (("key",),)
                    for rest in self._paths(extra, depth + 1):
                        yield (("value",), *rest)

    def minimal(self, schema: dict[str, Any]) -> Any:
        """A small valid value: required properties only."""
        alts = self.alternatives(schema)
        if not alts:
            return None
        alt = alts[0]
        if "enum" in alt:
            return alt["enum"][0]
        kind = alt.get("type")
        if kind == "string":
            return "x"
        if kind == "integer":
            return max(alt.get("minimum", 1), 1)
        if kind == "number":
            return 1.0
        if kind == "boolean":
            return False
        if kind == "array":
            return []
        props = alt.get("properties", {})
        return {name: self.minimal(props[name]) for name in alt.get("required", [])}

    def place(self, template: Any, schema: dict[str, Any], path: Path, value: str) -> Any:
        """``template`` (or a minimal value) with ``value`` at ``path``."""
        if not path:
            return value
        step, rest = path[0], path[1:]
        alts = [a for a in self.alternatives(schema) if self._fits(a, step)]
        alt = alts[0]
        if step[0] == "prop":
            obj = self.minimal(alt)
            if isinstance(template, dict):
                obj.update(copy.deepcopy(template))
            props = alt.get("properties", {})
            obj[step[1]] = self.place(obj.get(step[1]), props[step[1]], rest, value)
            return obj
        if step[0] == "item":
            items = list(template) if isinstance(template, list) and template else [None]
            items[0] = self.place(items[0], alt["items"], rest, value)
            return items
        mapping = dict(template) if isinstance(template, dict) and template else {}
        extra = alt["additionalProperties"]
        first_key = next(iter(mapping), "Learnings")
        first_value = mapping.get(first_key, self.minimal(extra))
        if step[0] == "key":
            return {value: first_value}
        return {first_key: self.place(first_value, extra, rest, value)}

    @staticmethod
    def _fits(alt: dict[str, Any], step: Step) -> bool:
        if step[0] == "prop":
            return step[1] in alt.get("properties", {})
        if step[0] == "item":
            return alt.get("type") == "array"
        return isinstance(alt.get("additionalProperties"), dict)

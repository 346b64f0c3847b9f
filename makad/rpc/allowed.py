"""The values a field of a method's params allows, for an ``Invalid enum value`` error.

msgspec names the field (``$.edits[...].origin``) but not what it would have taken;
this walks the params' type along that path and collects the values of the literal or
enum found there, so the error's ``data.allowed`` names them.
"""

from __future__ import annotations

import enum
import functools
import re
from typing import Any, Final

import msgspec.inspect as mi

_STEP: Final = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")


@functools.lru_cache(maxsize=256)
def allowed_values(params_type: type, path: str) -> tuple[Any, ...]:
    """The literal or enum values the field at ``path`` (msgspec's ``$…`` form) of
    ``params_type`` allows; empty when the path names no such field."""
    if not path.startswith("$"):
        return ()
    steps = [m.group(1) if m.group(1) is not None else m.group(2) for m in _STEP.finditer(path, 1)]
    node: mi.Type | None = mi.type_info(params_type)
    for step in steps:
        if node is None:
            return ()
        node = _child(node, step)
    return tuple(dict.fromkeys(_values(node))) if node is not None else ()


def _child(node: mi.Type, step: str) -> mi.Type | None:
    if isinstance(node, mi.Metadata):
        return _child(node.type, step)
    if isinstance(node, mi.UnionType):
        for member in node.types:
            found = _child(member, step)
            if found is not None:
                return found
        return None
    if isinstance(node, mi.StructType):
        return next((f.type for f in node.fields if f.encode_name == step), None)
    if isinstance(node, mi.DictType):
        return node.value_type
    if isinstance(node, mi.ListType | mi.SetType | mi.FrozenSetType | mi.VarTupleType):
        return node.item_type
    if isinstance(node, mi.TupleType) and step.isdigit() and int(step) < len(node.item_types):
        return node.item_types[int(step)]
    return None


def _values(node: mi.Type) -> list[Any]:
    if isinstance(node, mi.Metadata):
        return _values(node.type)
    if isinstance(node, mi.LiteralType):
        return list(node.values)
    if isinstance(node, mi.EnumType):
        members: type[enum.Enum] = node.cls
        return [m.value for m in members]
    if isinstance(node, mi.UnionType):
        return [v for member in node.types for v in _values(member)]
    return []

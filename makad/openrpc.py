"""The OpenRPC document, generated from the wire types of the catalogue."""

from __future__ import annotations

from typing import Any

import msgspec

from makad import __version__
from makad.core.chain import MAX_APPEND_EVENTS
from makad.errors import ALL_ERRORS, MakadError
from makad.rpc.value_cap import MAX_MESSAGE_VALUES
from makad.service.reply_fit import MAX_EVENT_BYTES
from makad.settings import DEFAULT_MAX_MESSAGE_BYTES
from makad.wire.base import MethodSpec
from makad.wire.catalogue import NOTIFICATIONS, NotificationSpec

REF_TEMPLATE = "#/components/schemas/{name}"

# What a client must stay within, so that it can split a request before sending it rather
# than have the connection closed. maxMessageBytes is the default of --max-message-bytes.
LIMITS: dict[str, int] = {
    "maxMessageBytes": DEFAULT_MAX_MESSAGE_BYTES,
    "maxMessageValues": MAX_MESSAGE_VALUES,
    "maxAppendEvents": MAX_APPEND_EVENTS,
    "maxEventBytes": MAX_EVENT_BYTES,
}


def _error_entry(err: type[MakadError]) -> dict[str, Any]:
    return {"code": err.code, "message": err.kind, "data": {"kind": err.kind}}


def _component_error(err: type[MakadError]) -> dict[str, Any]:
    """An error of components.errors: with the keys its data may carry (a specification
    extension), when it names them."""
    entry = _error_entry(err)
    if err.data_fields:
        entry["x-dataFields"] = dict(err.data_fields)
    return entry


def generate(
    catalogue: dict[str, MethodSpec], notifications: tuple[NotificationSpec, ...] = NOTIFICATIONS
) -> dict[str, Any]:
    specs = list(catalogue.values())
    # The notifications' params first: their schemas are components like the methods'.
    types: list[Any] = [note.params for note in notifications]
    # Where each method's result schemas start in ``types``, and how many (a tuple of
    # alternatives is described as anyOf: msgspec describes only tagged Struct unions).
    result_at: list[tuple[int, int]] = []
    for spec in specs:
        types.append(spec.params)
        alternatives = spec.result if isinstance(spec.result, tuple) else (spec.result,)
        result_at.append((len(types), len(alternatives)))
        types.extend(alternatives)
    schemas, components = msgspec.json.schema_components(types, ref_template=REF_TEMPLATE)
    methods = []
    for spec, (start, count) in zip(specs, result_at, strict=True):
        result = schemas[start] if count == 1 else {"anyOf": list(schemas[start : start + count])}
        params_schema = components[spec.params.__name__]
        required = set(params_schema.get("required", []))
        params = [
            {"name": name, "required": name in required, "schema": schema}
            for name, schema in params_schema.get("properties", {}).items()
        ]
        method: dict[str, Any] = {
            "name": spec.name,
            "summary": spec.summary,
            "paramStructure": "by-name",
            "params": params,
            "result": {"name": "result", "schema": result},
        }
        if spec.description:
            method["description"] = spec.description
        if spec.errors:
            method["errors"] = [_error_entry(err) for err in spec.errors]
        methods.append(method)
    return {
        "openrpc": "1.3.2",
        "info": {
            "title": "makad",
            "version": __version__,
            "description": "JSON-RPC 2.0 over a Unix socket (NDJSON or Content-Length framing). "
            "A message holds at most 16 MiB (--max-message-bytes) and 100,000 JSON values "
            "(array elements and object members, the whole message counted); past either cap "
            "it is refused unread with -32600 too_large (data.limit: the cap passed), id "
            "null, and the connection is closed. The caps are listed in x-limits. See "
            "protocol/PROTOCOL.md.",
        },
        "methods": methods,
        # Not part of OpenRPC 1.3 (which describes methods only): what the daemon sends
        # unasked, each with the schema of its params.
        "x-notifications": [
            {"name": note.name, "summary": note.summary, "params": schemas[index]}
            for index, note in enumerate(notifications)
        ],
        # Not part of OpenRPC either: the caps on a message and on append_events, which the
        # clients' generated constants come from.
        "x-limits": dict(LIMITS),
        "components": {
            "schemas": dict(sorted(components.items())),
            "errors": {err.kind: _component_error(err) for err in ALL_ERRORS},
        },
    }


def encode(doc: dict[str, Any]) -> bytes:
    """Stable, human-diffable bytes of the document (as checked in)."""
    return msgspec.json.format(msgspec.json.encode(doc), indent=2) + b"\n"

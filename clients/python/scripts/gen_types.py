#!/usr/bin/env python3
"""Generate clients/python/maka/generated.py from protocol/openrpc.json (stdlib only).

    .venv/bin/python clients/python/scripts/gen_types.py           write the module
    .venv/bin/python clients/python/scripts/gen_types.py --check   exit 1 when it differs from the document

The Python twin of clients/node/scripts/gen-types.mjs: every component schema becomes a
TypedDict (results stay the plain dicts the daemon sent; the types are for the checker and
the reader), every method a typed function on ``Methods`` / ``AsyncMethods``
(``client.m.read_state(workspace=...)``). The conversion is generic over JSON Schema as
msgspec emits it, so a new method or schema needs only a re-run (``scripts/gen-protocol``
does it with the OpenRPC document).
"""

from __future__ import annotations

import builtins
import json
import keyword
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
DOCUMENT_PATH = ROOT / "protocol" / "openrpc.json"
OUTPUT_PATH = ROOT / "clients" / "python" / "maka" / "generated.py"
METHODS_OUTPUT_PATH = ROOT / "clients" / "python" / "maka" / "generated_methods.py"

# Names the generated module defines or imports itself: a schema with one of them is suffixed.
RESERVED = {
    "Any",
    "Awaitable",
    "Callable",
    "Literal",
    "NotRequired",
    "TypeAlias",
    "TypedDict",
    "Unpack",
    "cast",
    "annotations",
    "Call",
    "AsyncCall",
    "Methods",
    "AsyncMethods",
    "METHOD_NAMES",
    "PROTOCOL_VERSION",
    "DOMAIN_ERROR_CODES",
    *dir(builtins),
}
REF_PREFIX = "#/components/schemas/"


def type_name(name: str) -> str:
    """Python name of a component schema."""
    out = re.sub(r"\W", "_", str(name))
    if not out.isidentifier() or keyword.iskeyword(out):
        out = f"_{out}"
    return f"{out}Schema" if out in RESERVED else out


def method_attr(name: str) -> str:
    """``rpc.discover`` → ``rpc_discover``: the method's attribute on Methods."""
    out = re.sub(r"\W", "_", name)
    return f"{out}_" if keyword.iskeyword(out) or out in RESERVED else out


def pascal(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", name) if part)


def union(types: list[str]) -> str:
    unique = list(dict.fromkeys(types))
    if "Any" in unique:
        return "Any"
    return " | ".join(unique) if unique else "Any"


def literal(values: list[Any]) -> str:
    # repr, not JSON: a boolean literal is Python's True/False (strings and numbers agree).
    inner = [repr(v) if isinstance(v, bool) else json.dumps(v) for v in values if v is not None]
    out = [f"Literal[{', '.join(inner)}]"] if inner else []
    if None in values:
        out.append("None")
    return union(out)


def to_type(schema: Any) -> str:
    """The Python type expression of a JSON Schema."""
    if schema is True or schema is None or schema == {}:
        return "Any"
    if not isinstance(schema, dict):
        return "Any"
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return type_name(ref[len(REF_PREFIX) :]) if ref.startswith(REF_PREFIX) else "Any"
    if "const" in schema:
        return literal([schema["const"]])
    if isinstance(schema.get("enum"), list):
        return literal(schema["enum"])
    variants = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(variants, list):
        return union([to_type(v) for v in variants])
    if isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
        return to_type(schema["allOf"][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        return union([_single(k, schema) for k in kind])
    if isinstance(kind, str):
        return _single(kind, schema)
    return "Any"


def _single(kind: str, schema: dict[str, Any]) -> str:
    simple = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}
    if kind in simple:
        return simple[kind]
    if kind == "array":
        if isinstance(schema.get("prefixItems"), list):
            return f"tuple[{', '.join(to_type(s) for s in schema['prefixItems'])}]"
        return f"list[{to_type(schema.get('items'))}]"
    if kind == "object":
        extra = schema.get("additionalProperties")
        value = to_type(extra) if isinstance(extra, dict) and not schema.get("properties") else "Any"
        return f"dict[str, {value}]"
    return "Any"


def doc_lines(parts: list[Any]) -> list[str]:
    return [line.rstrip() for part in parts if part for line in str(part).splitlines()]


def docstring(parts: list[Any], indent: str) -> list[str]:
    paragraphs = [doc_lines([part]) for part in parts if doc_lines([part])]
    joined = [line for i, para in enumerate(paragraphs) for line in ([""] if i else []) + para]
    lines = [line.replace("\\", "\\\\").replace('"""', '\\"\\"\\"') for line in joined]
    if not lines:
        return []
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [
        f'{indent}"""{lines[0]}',
        *(f"{indent}{line}" if line else "" for line in lines[1:]),
        f'{indent}"""',
    ]


def field_notes(schema: Any) -> list[str]:
    if not isinstance(schema, dict):
        return []
    notes = doc_lines([schema.get("description")])
    if "default" in schema:
        notes.append(f"default: {json.dumps(schema['default'])}")
    if schema.get("format"):
        notes.append(f"format: {schema['format']}")
    return notes


def typed_dict(name: str, fields: list[tuple[str, str, bool, list[str]]], doc: list[Any]) -> list[str]:
    """A TypedDict: class syntax, or the functional form when a key is not an identifier."""
    if any(not key.isidentifier() or keyword.iskeyword(key) for key, *_ in fields):
        # Types as forward-reference strings (the module's names may come later), with
        # NotRequired outside them so it counts at run time too.
        items = ", ".join(
            f"{json.dumps(key)}: {json.dumps(t) if req else f'NotRequired[{json.dumps(t)}]'}"
            for key, t, req, _ in fields
        )
        return [f"{name} = TypedDict({json.dumps(name)}, {{{items}}})", ""]
    head = docstring(doc, "    ")
    body: list[str] = []
    for key, t, required, notes in fields:
        body += [f"    # {note}" for note in notes]
        body.append(f"    {key}: {t if required else f'NotRequired[{t}]'}")
    if head and body:
        head.append("")
    return [f"class {name}(TypedDict):", *head, *(body or ([] if head else ["    pass"])), "", ""]


def schema_declaration(name: str, schema: dict[str, Any]) -> list[str]:
    props = schema.get("properties")
    if schema.get("type") == "object" and isinstance(props, dict) and props:
        required = set(schema.get("required") or [])
        fields = [(key, to_type(sub), key in required, field_notes(sub)) for key, sub in props.items()]
        return typed_dict(name, fields, [schema.get("description")])
    return [
        *(f"# {line}" for line in doc_lines([schema.get("description")])),
        f"{name}: TypeAlias = {json.dumps(to_type(schema))}",
        "",
        "",
    ]


def method_signature(method: dict[str, Any]) -> tuple[str, str, list[str]]:
    """(params annotation part, result type, the method's docstring parts)."""
    params = method.get("params") or []
    result = to_type((method.get("result") or {}).get("schema"))
    kinds = sorted(
        {
            e.get("data", {}).get("kind") or e.get("message")
            for e in method.get("errors") or []
            if isinstance(e, dict)
        }
        - {None}
    )
    doc = [method.get("summary"), method.get("description")]
    if kinds:
        doc.append(f"Errors: {', '.join(kinds)}.")
    args = f", **params: Unpack[{pascal(method['name'])}Args]" if params else ""
    return args, result, doc


def args_declaration(method: dict[str, Any]) -> list[str]:
    params = method.get("params") or []
    if not params:
        return []
    fields = [
        (
            p["name"],
            to_type(p.get("schema")),
            bool(p.get("required")),
            doc_lines([p.get("summary"), p.get("description")]) + field_notes(p.get("schema")),
        )
        for p in params
    ]
    return typed_dict(f"{pascal(method['name'])}Args", fields, [f"Params of ``{method['name']}``."])


def method_declaration(method: dict[str, Any], is_async: bool) -> list[str]:
    args, result, doc = method_signature(method)
    call_params = "dict(params)" if method.get("params") else "None"
    head = "async def" if is_async else "def"
    call = (
        f"await self._call({json.dumps(method['name'])}, {call_params})"
        if is_async
        else f"self._call({json.dumps(method['name'])}, {call_params})"
    )
    return [
        f"    {head} {method_attr(method['name'])}(self{args}) -> {result}:",
        *docstring(doc, "        "),
        f"        return cast({json.dumps(result)}, {call})",
        "",
    ]


def methods_class(name: str, methods: list[dict[str, Any]], is_async: bool) -> list[str]:
    call_type = "AsyncCall" if is_async else "Call"
    how = "await client.m.read_state(workspace=ws)" if is_async else "client.m.read_state(workspace=ws)"
    out = [
        f"class {name}:",
        f'    """One typed function per method: ``{how}``."""',
        "",
        '    __slots__ = ("_call",)',
        "",
        f"    def __init__(self, call: {call_type}) -> None:",
        "        self._call = call",
        "",
    ]
    for method in methods:
        out += method_declaration(method, is_async)
    return [*out[:-1], "", ""]


def _schema_names(doc: dict[str, Any]) -> dict[str, str]:
    """Python name → what it declares (a schema, or a method's params), refusing clashes."""
    seen: dict[str, str] = {}
    for raw in (doc.get("components") or {}).get("schemas") or {}:
        name = type_name(raw)
        if name in seen:
            raise SystemExit(f"schemas {seen[name]} and {raw} both map to the name {name}")
        seen[name] = raw
    for method in _methods(doc):
        name = f"{pascal(method['name'])}Args"
        if name in seen:
            raise SystemExit(f"params of {method['name']} and schema {seen[name]} share the name {name}")
        seen[name] = method["name"]
    return seen


def _methods(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in doc.get("methods") or [] if isinstance(m, dict)]


def generate(doc: dict[str, Any]) -> str:
    """maka/generated.py: the TypedDicts, and the calls module's names re-exported."""
    _schema_names(doc)
    out = [
        '"""Types of the daemon\'s methods, generated from protocol/openrpc.json: do not edit.',
        "",
        "Regenerate with ``.venv/bin/python clients/python/scripts/gen_types.py`` (``scripts/gen-protocol``",
        "runs it); a test fails when this file drifts from the document. The typed functions",
        "live in ``maka.generated_methods`` (re-exported here), which a client loads without",
        "building these TypedDicts.",
        '"""',
        "# ruff: noqa: E501",
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any, Literal, NotRequired, TypeAlias, TypedDict",
        "",
        *(f"from maka.generated_methods import {name} as {name}" for name in CALLS_EXPORTS),
        "",
        "#: Version of the OpenRPC document (the daemon's version) these types come from.",
        f"PROTOCOL_VERSION = {json.dumps(str((doc.get('info') or {}).get('version', '0.0.0')))}",
        "",
        "",
    ]
    for raw, schema in ((doc.get("components") or {}).get("schemas") or {}).items():
        out += schema_declaration(type_name(raw), schema if isinstance(schema, dict) else {})
    for method in _methods(doc):
        out += args_declaration(method)
    text = "\n".join(out).rstrip("\n") + "\n"
    return re.sub(r"\n{4,}", "\n\n\n", text)


# What maka/generated_methods.py defines (maka/generated.py re-exports each).
CALLS_EXPORTS = (
    "DOMAIN_ERROR_CODES",
    "LIMITS",
    "METHOD_NAMES",
    "AsyncCall",
    "AsyncMethods",
    "Call",
    "Methods",
)


def generate_methods(doc: dict[str, Any]) -> str:
    """maka/generated_methods.py: the typed functions, the method names and error kinds. Their
    annotations name the TypedDicts for the checker only, so importing it builds none."""
    seen = _schema_names(doc)
    methods = _methods(doc)
    body = methods_class("Methods", methods, is_async=False)
    body += methods_class("AsyncMethods", methods, is_async=True)
    names = ", ".join(json.dumps(m["name"]) for m in methods)
    body += ["#: Method names in document order.", f"METHOD_NAMES = ({names})", ""]
    errors = (doc.get("components") or {}).get("errors") or {}
    body += ["#: Domain error kinds (``error.data.kind``) and their codes.", "DOMAIN_ERROR_CODES = {"]
    for key, error in errors.items():
        kind = (error.get("data") or {}).get("kind") or key
        body.append(f"    {json.dumps(kind)}: {int(error.get('code'))},")
    body.append("}")
    body += [
        "",
        "#: The caps on one message and on append_events (x-limits; maxMessageBytes is the",
        "#: default of the daemon's --max-message-bytes).",
        "LIMITS = {",
        *(f"    {json.dumps(key)}: {int(value)}," for key, value in (doc.get("x-limits") or {}).items()),
        "}",
    ]
    used = set(re.findall(r"[A-Za-z_]\w*", "\n".join(body)))
    typing_names = sorted({"Any", "cast"} | (used & {"Literal", "Unpack"}))
    checked = sorted((name for name in seen if name in used), key=lambda n: (n.lower(), n))
    out = [
        '"""The daemon\'s methods as typed functions, generated from protocol/openrpc.json: do not',
        "edit. Regenerate with ``.venv/bin/python clients/python/scripts/gen_types.py``.",
        "",
        "Apart from the TypedDicts they name (``maka.generated``) because building those is most",
        "of what importing the types costs, which every ``maka`` command would pay at start-up.",
        '"""',
        "# ruff: noqa: E501",
        "",
        "from __future__ import annotations",
        "",
        "from collections.abc import Awaitable, Callable",
        f"from typing import TYPE_CHECKING, {', '.join(typing_names)}",
        "",
    ]
    if checked:
        imports = [f"        {name}," for name in checked]
        out += ["if TYPE_CHECKING:", "    from maka.generated import (", *imports, "    )", ""]
    out += [
        "Call = Callable[[str, dict[str, Any] | None], Any]",
        "AsyncCall = Callable[[str, dict[str, Any] | None], Awaitable[Any]]",
        "",
        "",
        *body,
    ]
    text = "\n".join(out) + "\n"
    return re.sub(r"\n{4,}", "\n\n\n", text)


def read_document(path: Path = DOCUMENT_PATH) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return result


def main(argv: list[str]) -> int:
    doc = read_document()
    outputs = ((OUTPUT_PATH, generate(doc)), (METHODS_OUTPUT_PATH, generate_methods(doc)))
    if "--check" in argv:
        stale = [
            path.relative_to(ROOT)
            for path, text in outputs
            if (path.read_text(encoding="utf-8") if path.exists() else "") != text
        ]
        if stale:
            print(
                f"{', '.join(map(str, stale))} out of date with protocol/openrpc.json: run "
                f".venv/bin/python clients/python/scripts/gen_types.py",
                file=sys.stderr,
            )
            return 1
        return 0
    for path, text in outputs:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)} ({len(doc.get('methods') or [])} methods)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

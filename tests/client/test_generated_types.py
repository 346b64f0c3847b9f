"""The Python client's types, generated from protocol/openrpc.json like the Node ones."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import msgspec
import pytest

from maka import AsyncClient, generated
from maka.errors import BY_KIND
from tests.support import DaemonProcess

ROOT = Path(__file__).resolve().parents[2]


def generator() -> ModuleType:
    path = ROOT / "clients" / "python" / "scripts" / "gen_types.py"
    spec = importlib.util.spec_from_file_location("gen_types", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_types"] = module
    spec.loader.exec_module(module)
    return module


REGENERATE = "out of date: run .venv/bin/python clients/python/scripts/gen_types.py (or scripts/gen-protocol)"


def test_generated_module_matches_the_document() -> None:
    """Regenerating from protocol/openrpc.json gives the committed maka/generated.py."""
    gen = generator()
    assert gen.generate(gen.read_document()) == (ROOT / "clients/python/maka/generated.py").read_text(), (
        REGENERATE
    )


def test_generated_methods_module_matches_the_document() -> None:
    """Regenerating from protocol/openrpc.json gives the committed maka/generated_methods.py."""
    gen = generator()
    expected = (ROOT / "clients/python/maka/generated_methods.py").read_text()
    assert gen.generate_methods(gen.read_document()) == expected, REGENERATE


def test_every_method_and_error_kind_is_covered() -> None:
    """Each method of the document has a typed function; each domain error kind a class."""
    gen = generator()
    doc = gen.read_document()
    names = [m["name"] for m in doc["methods"]]
    assert list(generated.METHOD_NAMES) == names
    for name in names:
        attr = gen.method_attr(name)
        assert callable(getattr(generated.Methods, attr)) and callable(getattr(generated.AsyncMethods, attr))
    assert set(generated.DOMAIN_ERROR_CODES) <= set(BY_KIND)
    for kind, cls in BY_KIND.items():
        assert cls.__name__ and (
            kind in generated.DOMAIN_ERROR_CODES or kind in ("method_not_found", "internal")
        )


def test_the_generator_handles_other_schemas() -> None:
    """Odd names, keywords, tuples, nullable enums and maps become valid Python types."""
    gen = generator()
    doc: dict[str, Any] = {
        "info": {"version": "9.9.9"},
        "components": {
            "schemas": {
                "Odd": {
                    "type": "object",
                    "properties": {
                        "from": {"type": "string"},
                        "a-b": {"type": "integer"},
                        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]},
                        "mode": {"enum": ["x", None]},
                        "map": {
                            "type": "object",
                            "additionalProperties": {"$ref": "#/components/schemas/list"},
                        },
                    },
                    "required": ["from"],
                },
                "list": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "shadowing"},
            }
        },
        "methods": [
            {
                "name": "do.it",
                "params": [{"name": "class", "required": True, "schema": {"type": "boolean"}}],
                "result": {"schema": {"$ref": "#/components/schemas/Odd"}},
            }
        ],
    }
    text = gen.generate(doc)
    namespace: dict[str, Any] = {}
    exec(compile(text, "generated_probe", "exec"), namespace)
    odd = namespace["Odd"]
    assert odd.__required_keys__ == {"from"}
    assert {"a-b", "pair", "mode", "map"} <= odd.__optional_keys__
    assert "listSchema" in namespace and namespace["PROTOCOL_VERSION"] == "9.9.9"
    calls: list[tuple[str, Any]] = []
    functions: dict[str, Any] = {}
    exec(compile(gen.generate_methods(doc), "generated_methods_probe", "exec"), functions)
    methods = functions["Methods"](lambda name, params: calls.append((name, params)) or {"from": "x"})
    assert methods.do_it(**{"class": True}) == {"from": "x"}
    assert calls == [("do.it", {"class": True})]


def typed(value: Any, schema: type[Any]) -> Any:
    """``value`` validated against a generated TypedDict (raises when they disagree)."""
    return msgspec.convert(value, schema)


def test_typed_results_match_the_daemon(shared_daemon: DaemonProcess) -> None:
    """client.m's results validate against the generated types, method by method."""
    ws = str(shared_daemon.workspace)
    with shared_daemon.client() as c:
        typed(c.m.status(), generated.StatusResult)
        typed(
            c.m.set_settings(workspace=ws, agentReadEnabled=True, extractToolEnabled=True), generated.Settings
        )
        typed(
            c.m.add_entry(workspace=ws, title="Deploys", content="On Tuesdays.", tags=["ops"]),
            generated.EntryResult,
        )
        typed(c.m.read_state(workspace=ws, includeEntries=True), generated.LocalMemoryState)
        typed(
            c.m.propose(workspace=ws, title="Editor", content="Uses vim.", origin="extracted"),
            generated.ProposeResult,
        )
        typed(c.m.list_proposals(workspace=ws), generated.ProposalsResult)
        session = typed(c.m.open_session(workspace=ws), generated.SessionView)
        sid = session["sessionId"]
        typed(
            c.m.append_events(
                workspace=ws,
                sessionId=sid,
                events=[{"type": "user_message", "text": "deploys happen on tuesdays"}],
            ),
            generated.AppendEventsResult,
        )
        typed(c.m.search_history(workspace=ws, query="deploys"), generated.SearchHistoryResult)
        typed(c.m.retrieve(workspace=ws, refs=[f"event:{sid}:1"]), generated.RetrieveResult)
        typed(
            c.m.build_context(workspace=ws, budgetTokens=2000, query="deploys", sessionId=sid),
            generated.ContextPack,
        )
        typed(c.m.list_sessions(workspace=ws), generated.SessionsResult)
        assert c.m.ping() == "pong"
        with pytest.raises(msgspec.ValidationError):
            typed({"version": "0.1.0"}, generated.StatusResult)  # the check can fail


def test_async_typed_results(shared_daemon: DaemonProcess) -> None:
    """AsyncClient.m gives the same typed results."""

    async def go() -> Any:
        async with AsyncClient(str(shared_daemon.socket)) as c:
            return await c.m.get_settings(workspace=str(shared_daemon.workspace))

    assert typed(anyio.run(go), generated.Settings)["agentReadEnabled"] is False

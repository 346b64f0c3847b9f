"""The checked-in OpenRPC document matches the wire types and is served by rpc.discover."""

from __future__ import annotations

import json
from pathlib import Path

from makad import openrpc
from makad.wire.catalogue import CATALOGUE
from tests.support import DaemonProcess

DOC = Path(__file__).resolve().parents[2] / "protocol" / "openrpc.json"


def test_checked_in_document_is_fresh() -> None:
    """protocol/openrpc.json equals what the wire types generate (run scripts/gen-protocol)."""
    assert DOC.read_bytes() == openrpc.encode(openrpc.generate(CATALOGUE))


def test_every_method_is_by_name_with_result() -> None:
    """Every method declares by-name params and a result schema."""
    doc = json.loads(DOC.read_text())
    assert doc["openrpc"] == "1.3.2"
    assert {m["name"] for m in doc["methods"]} == set(CATALOGUE)
    for method in doc["methods"]:
        assert method["paramStructure"] == "by-name"
        assert "schema" in method["result"]


def test_schema_refs_resolve() -> None:
    """Every $ref in the document points at a component schema."""
    doc = json.loads(DOC.read_text())
    names = set(doc["components"]["schemas"])

    def walk(node: object) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                assert ref.removeprefix("#/components/schemas/") in names, ref
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)


def test_rpc_discover_serves_the_document(daemon: DaemonProcess) -> None:
    """rpc.discover returns the same document as the checked-in file."""
    assert daemon.call("rpc.discover") == json.loads(DOC.read_text())

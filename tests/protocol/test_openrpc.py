"""The checked-in OpenRPC document matches the wire types and is served by rpc.discover."""

from __future__ import annotations

import json
import re
from pathlib import Path

from makad import openrpc
from makad.wire.catalogue import CATALOGUE
from tests.support import DaemonProcess

DOC = Path(__file__).resolve().parents[2] / "protocol" / "openrpc.json"


def test_checked_in_document_is_fresh() -> None:
    """protocol/openrpc.json equals what the wire types generate."""
    fresh = openrpc.encode(openrpc.generate(CATALOGUE))
    assert DOC.read_bytes() == fresh, "out of date: run .venv/bin/python scripts/gen-protocol"


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


# Property names that carry a point in time, a length of time in ms, or one in days.
TIME_NAME = re.compile(r"^(ts|at|until|since|before|after)$|At$")
MS_NAME = re.compile(r"Ms$")
DAYS_NAME = re.compile(r"Days$")


def _time_properties() -> list[tuple[str, str, dict[str, object]]]:
    doc = json.loads(DOC.read_text())
    return [
        (component, name, schema)
        for component, body in doc["components"]["schemas"].items()
        for name, schema in body.get("properties", {}).items()
        if TIME_NAME.search(name) or MS_NAME.search(name) or DAYS_NAME.search(name)
    ]


def test_every_time_field_says_its_unit() -> None:
    """Each field holding a time or a length of time describes its unit in the document (and so
    in the generated client types): a time is Unix milliseconds (UTC), a length milliseconds or days."""
    props = _time_properties()
    assert len(props) > 30
    missing = []
    for component, name, schema in props:
        text = str(schema.get("description", ""))
        if TIME_NAME.search(name):
            ok = "Unix time in milliseconds" in text
        elif MS_NAME.search(name):
            ok = "milliseconds" in text
        else:
            ok = "days" in text
        if not ok:
            missing.append(f"{component}.{name}")
    assert not missing, missing

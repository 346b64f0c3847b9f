"""PROTOCOL.md's "On the wire" exchange, sent to a real daemon: each answer has the shape shown;
and every JSON example and request in the documents parses and fits the OpenRPC document."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import jsonschema

from tests.support import DaemonProcess, RawConnection

DOC = (Path(__file__).resolve().parents[2] / "protocol" / "PROTOCOL.md").read_text(encoding="utf-8")
SECTION = DOC.split("## On the wire", 1)[1].split("\n## ", 1)[0]
(EXCHANGE,) = re.findall(r"```text\n(.*?)```", SECTION, flags=re.S)
PLACEHOLDER = "/home/me/project"


def pairs(workspace: str) -> list[tuple[Any, Any]]:
    lines = [line for line in EXCHANGE.splitlines() if line.strip()]
    sent = [json.loads(line[2:].replace(PLACEHOLDER, workspace)) for line in lines if line.startswith("→ ")]
    shown = [line[2:] for line in lines if line.startswith("← ")]
    assert len(sent) == len(shown)
    return list(zip(sent, shown, strict=True))


def same_shape(shown: Any, got: Any) -> None:
    """Ids, codes, kinds and keys as shown; values that vary (ids, times, hashes) are not compared."""
    if isinstance(shown, list):
        assert isinstance(got, list) and len(got) == len(shown)
        for a, b in zip(shown, got, strict=True):
            same_shape(a, b)
        return
    assert shown.get("id") == got.get("id")
    if "error" in shown:
        assert got["error"]["code"] == shown["error"]["code"]
        assert got["error"]["data"]["kind"] == shown["error"]["data"]["kind"]
    else:
        result = shown["result"]
        assert isinstance(got["result"], type(result))
        if isinstance(result, dict):
            assert set(result) == set(got["result"]), set(result) ^ set(got["result"])


def test_every_exchange_answers_as_shown(daemon: DaemonProcess) -> None:
    """Each → line sent in order to a fresh daemon gets the ← answer's shape."""
    with RawConnection(daemon.socket) as conn:
        for request, shown in pairs(str(daemon.workspace)):
            conn.send(json.dumps(request))
            same_shape(
                json.loads(shown.replace("…", "")) if "…" not in shown else _loose(shown), conn.recv_message()
            )


def _loose(line: str) -> Any:
    """An answer shortened with … in the document: the parts shown, still valid JSON."""
    return json.loads(line)


ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [
    ROOT / "protocol" / "PROTOCOL.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *ROOT.glob("clients/*/README.md"),
]
OPENRPC = json.loads((ROOT / "protocol" / "openrpc.json").read_text())


def test_every_json_block_parses() -> None:
    """Every ```json example in PROTOCOL.md, docs/ and the clients' READMEs is valid JSON."""
    blocks = [
        (path.name, block)
        for path in DOCUMENTS
        for block in re.findall(r"```json\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)
    ]
    assert len(blocks) > 5
    for name, block in blocks:
        try:
            json.loads(block)
        except ValueError as exc:
            raise AssertionError(f"{name}: {block[:80]}") from exc


def _requests() -> list[tuple[str, dict[str, Any]]]:
    """Every request the documents show a client sending, but the ones answered with an error
    on purpose: ```json blocks naming a method with an id, and → lines."""
    found: list[tuple[str, dict[str, Any]]] = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        shown = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, flags=re.S)]
        lines = [line for line in text.splitlines() if line.startswith(("→ ", "← "))]
        for sent, answer in itertools.pairwise(lines):
            if sent.startswith("→ ") and answer.startswith("← ") and '"error"' not in answer:
                shown.append(json.loads(sent[2:]))
        for message in shown:
            for request in message if isinstance(message, list) else [message]:
                if isinstance(request, dict) and "method" in request and "id" in request:
                    found.append((path.name, request))
    return found


def test_every_documented_request_is_valid() -> None:
    """Each request in the documents names a method of the OpenRPC document and sends params its
    schema takes (required ones present, no unknown key): copied as it is, it is answered."""
    methods = {method["name"]: method for method in OPENRPC["methods"]}
    requests = _requests()
    assert len(requests) > 10
    for name, request in requests:
        method = methods[request["method"]]
        schema = {
            "type": "object",
            "properties": {param["name"]: param["schema"] for param in method["params"]},
            "required": [param["name"] for param in method["params"] if param["required"]],
            "additionalProperties": False,
            "components": OPENRPC["components"],
        }
        problems = [
            e.message
            for e in jsonschema.Draft202012Validator(schema).iter_errors(request.get("params") or {})
        ]
        assert not problems, (name, request["method"], problems)

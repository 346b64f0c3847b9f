"""PROTOCOL.md's "On the wire" exchange, sent to a real daemon: each answer has the shape shown."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

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


def test_every_json_block_parses() -> None:
    """Every ```json example in PROTOCOL.md is valid JSON."""
    blocks = re.findall(r"```json\n(.*?)```", DOC, flags=re.S)
    assert blocks
    for block in blocks:
        json.loads(block)

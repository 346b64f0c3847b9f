"""Each method's `errors` in protocol/openrpc.json (the generated clients' per-method error
types) declare every kind a real daemon answers it with: each method is called, with its
required params, on a plain, an incognito, a disabled, the user-level, a relative and a
missing workspace, and with ids that name nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import RawConnection, daemon_in_tmp

DOC = json.loads((Path(__file__).resolve().parents[2] / "protocol" / "openrpc.json").read_text())
DECLARED = {m["name"]: {e["data"]["kind"] for e in m.get("errors", [])} for m in DOC["methods"]}
REQUIRED = {m["name"]: [p["name"] for p in m["params"] if p["required"]] for m in DOC["methods"]}
# A value for each required param: valid in type, naming nothing that exists.
VALUES: dict[str, Any] = {
    "title": "t",
    "content": "c",
    "id": "0123456789abcdef",
    "backupId": "1796000000000-000001-MEMORY",
    "ids": ["0123456789abcdef"],
    "budgetTokens": 100,
    "sessionId": "no-such-session",
    "mode": "checkpoint",
    "checkpointId": "no-such-checkpoint",
    "events": [{"type": "user_message", "text": "x"}],
    "query": "x",
    "refs": ["event:no-such-session:1"],
    "summary": "s",
    "sourceRefs": ["event:no-such-session:1"],
    "tag": "t",
}
OWN_VALUES = {"dismiss_suggestion": {"id": "sg_0123456789abcdef"}}
PLACES = ["plain", "incognito", "disabled", "@user", "relative", "missing"]


@pytest.fixture(scope="module")
def answered() -> Iterator[dict[str, dict[str, str]]]:
    """Per method, each error kind it was answered with and the call that drew it."""
    for daemon in daemon_in_tmp():
        workspaces = {name: daemon.root / name for name in ("plain", "incognito", "disabled")}
        for path in workspaces.values():
            path.mkdir()
        spelled = {name: str(path) for name, path in workspaces.items()}
        spelled |= {"@user": "@user", "relative": "relative/ws", "missing": str(daemon.root / "gone")}
        kinds: dict[str, dict[str, str]] = {}
        with RawConnection(daemon.socket, timeout=30) as conn:
            conn.request(_request(0, "set_settings", {"workspace": spelled["incognito"], "incognito": True}))
            conn.request(_request(0, "set_settings", {"workspace": spelled["disabled"], "enabled": False}))
            for number, method in enumerate(DECLARED, start=1):
                if method == "shutdown":
                    continue
                for place in PLACES if "workspace" in REQUIRED[method] else PLACES[:1]:
                    params = {name: VALUES[name] for name in REQUIRED[method] if name in VALUES}
                    params |= OWN_VALUES.get(method, {})
                    if "workspace" in REQUIRED[method]:
                        params["workspace"] = spelled[place]
                    reply = conn.request(_request(number, method, params))
                    if "error" in reply:
                        kinds.setdefault(method, {})[reply["error"]["data"]["kind"]] = place
        yield kinds


def _request(id_: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


@pytest.mark.parametrize("method", [name for name in DECLARED if name != "shutdown"])
def test_every_error_a_method_answers_is_declared(answered: dict[str, dict[str, str]], method: str) -> None:
    """No call of the method was answered with an error kind its `errors` leave out."""
    undeclared = {
        kind: place for kind, place in answered.get(method, {}).items() if kind not in DECLARED[method]
    }
    assert not undeclared


def test_the_calls_draw_errors(answered: dict[str, dict[str, str]]) -> None:
    """The calls do reach the daemon's checks: most methods answer some of them with errors."""
    assert len(answered) > 35
    assert {"invalid_workspace", "not_found", "incognito_blocked", "disabled"} <= {
        kind for kinds in answered.values() for kind in kinds
    }


# Calls a method's own checks refuse (the params fit the schema): each answer's kind must be
# among the method's declared errors too. "{entry}" is an active entry's id, "{proposal}"
# an open proposal's.
OWN_CHECKS: list[tuple[str, dict[str, Any]]] = [
    ("set_settings", {"defaultDecayDays": 0}),
    ("update_entry", {"id": "{entry}", "title": " "}),
    ("approve", {"ids": []}),
    ("approve", {"ids": ["{proposal}"], "edits": {"{proposal}": {"supersedes": "ffffffffffffffff"}}}),
    ("reject", {"ids": []}),
    ("add_entry", {"title": "", "content": "c"}),
    ("dismiss_suggestion", {"id": "bad"}),
    ("retrieve", {"refs": ["memory:abc"]}),
]


def _filled(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        return value.format(**names)
    if isinstance(value, list):
        return [_filled(v, names) for v in value]
    if isinstance(value, dict):
        return {_filled(k, names): _filled(v, names) for k, v in value.items()}
    return value


@pytest.fixture(scope="module")
def own_checks() -> Iterator[list[tuple[str, str]]]:
    """(method, kind) of each OWN_CHECKS call's error, on a workspace with an entry and a proposal."""
    for daemon in daemon_in_tmp():
        ws = str(daemon.workspace)
        with RawConnection(daemon.socket, timeout=30) as conn:
            on = {"workspace": ws, "agentReadEnabled": True, "extractToolEnabled": True}
            conn.request(_request(0, "set_settings", on))
            entry = conn.request(_request(0, "add_entry", {"workspace": ws, "title": "T", "content": "c"}))
            proposal = conn.request(_request(0, "propose", {"workspace": ws, "title": "P", "content": "p"}))
            names = {
                "entry": entry["result"]["entry"]["id"],
                "proposal": proposal["result"]["proposal"]["id"],
            }
            drawn = []
            for number, (method, params) in enumerate(OWN_CHECKS, start=1):
                reply = conn.request(_request(number, method, {"workspace": ws, **_filled(params, names)}))
                assert "error" in reply, (method, reply)
                drawn.append((method, reply["error"]["data"]["kind"]))
        yield drawn


def test_the_errors_of_a_methods_own_checks_are_declared(own_checks: list[tuple[str, str]]) -> None:
    """Each refusal by a method's own check of a value has a kind the method declares."""
    undeclared = [(method, kind) for method, kind in own_checks if kind not in DECLARED[method]]
    assert not undeclared

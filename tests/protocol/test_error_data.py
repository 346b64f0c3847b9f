"""The fields of an error's `data` that protocol/openrpc.json documents (`x-dataFields`, which
the Node client types `error.data` from) are the fields a real daemon sends: each error a
client acts on is drawn from a real daemon, its data keys are documented and its values fit
their schemas; and the Node README reads only documented fields."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.robustness.helpers import BRIEF_BUSY_ENV
from tests.robustness.test_environment import ledger_locked_by_another_process
from tests.support import DaemonProcess, RawConnection, daemon_in_tmp

ROOT = Path(__file__).resolve().parents[2]
DOC = json.loads((ROOT / "protocol" / "openrpc.json").read_text())
FIELDS: dict[str, dict[str, Any]] = {
    error["data"]["kind"]: error.get("x-dataFields", {}) for error in DOC["components"]["errors"].values()
}
REPLY_CAP = 65_536
CONNECTION_CAP = 3


def _request(id_: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    request: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        request["params"] = params
    return request


class Caller:
    """One raw connection that returns each reply's result, or keeps its error's data."""

    def __init__(self, conn: RawConnection) -> None:
        self.conn = conn
        self.errors: list[tuple[str, dict[str, Any]]] = []

    def ok(self, method: str, params: dict[str, Any] | None = None) -> Any:
        reply = self.conn.request(_request(1, method, params))
        assert "error" not in reply, (method, reply)
        return reply["result"]

    def fail(self, method: str, params: dict[str, Any], kind: str) -> dict[str, Any]:
        reply = self.conn.request(_request(1, method, params))
        assert reply.get("error", {}).get("data", {}).get("kind") == kind, (method, reply)
        self.errors.append((method, reply["error"]["data"]))
        return dict(reply["error"]["data"])


def _conflicts(c: Caller, ws: str) -> None:
    """Every compare-and-swap and state conflict a client can meet (and the closed gate
    before them: which switch is off)."""
    c.fail("propose", {"workspace": ws, "title": "P", "content": "Ana drinks tea."}, "gate_closed")
    c.ok("set_settings", {"workspace": ws, "agentReadEnabled": True, "extractToolEnabled": True})
    c.fail("add_entry", {"workspace": ws, "title": "T", "content": "c", "expectedRevision": 1}, "conflict")
    proposal = c.ok("propose", {"workspace": ws, "title": "P", "content": "Ana drinks tea."})["proposal"]
    c.fail("approve", {"workspace": ws, "ids": [proposal["id"]], "expectedRevision": 1}, "conflict")
    c.fail("reject", {"workspace": ws, "ids": [proposal["id"]], "expectedRevision": 1}, "conflict")
    c.fail("remove_outside_text", {"workspace": ws, "expectedRevision": 1}, "conflict")
    sid = c.ok("open_session", {"workspace": ws})["sessionId"]
    c.ok(
        "append_events",
        {"workspace": ws, "sessionId": sid, "events": [{"type": "user_message", "text": "x"}]},
    )
    events = [{"type": "user_message", "text": "y"}]
    c.fail(
        "append_events", {"workspace": ws, "sessionId": sid, "events": events, "expectedSeq": 5}, "conflict"
    )
    c.fail(
        "set_working_state",
        {"workspace": ws, "sessionId": sid, "goals": ["g"], "expectedRevision": 9},
        "conflict",
    )
    c.fail("open_session", {"workspace": ws, "sessionId": sid, "incognito": True}, "conflict")
    c.ok("close_session", {"workspace": ws, "sessionId": sid})
    c.fail("append_events", {"workspace": ws, "sessionId": sid, "events": events}, "conflict")
    c.ok("delete_session", {"workspace": ws, "sessionId": sid})
    c.fail("open_session", {"workspace": ws, "sessionId": sid}, "conflict")


def _sizes(c: Caller, ws: str) -> None:
    """Values over their caps, as a client sends them: a title, a batch of events, a list
    of goals, a budget too small for the newest message."""
    c.fail("add_entry", {"workspace": ws, "title": "t" * 301, "content": "c"}, "too_large")
    sid = c.ok("open_session", {"workspace": ws})["sessionId"]
    events = [{"type": "user_message", "text": "x"}] * 10_001
    c.fail("append_events", {"workspace": ws, "sessionId": sid, "events": events}, "too_large")
    goals = [f"goal {i}" for i in range(9)]
    c.fail("set_working_state", {"workspace": ws, "sessionId": sid, "goals": goals}, "too_large")
    words = {"workspace": ws, "sessionId": sid, "events": [{"type": "user_message", "text": "word " * 400}]}
    c.ok("append_events", words)
    c.fail("build_context", {"workspace": ws, "sessionId": sid, "budgetTokens": 10}, "too_large")


def _compaction_and_evidence(c: Caller, ws: str) -> None:
    """A summary that fails its checks until the session's automatic compactions stop, and a
    consolidation with too little evidence."""
    sid = c.ok("open_session", {"workspace": ws})["sessionId"]
    turns = [
        {"type": "user_message" if i % 2 == 0 else "assistant_message", "text": "word " * 2000}
        for i in range(12)
    ]
    c.ok("append_events", {"workspace": ws, "sessionId": sid, "events": turns})
    bad = {"workspace": ws, "sessionId": sid, "mode": "semantic", "summary": "nope", "reason": "budget"}
    for _ in range(3):
        c.fail("compact", bad, "invalid_summary")
    c.fail("compact", bad, "circuit_open")
    c.fail("consolidate", {"workspace": ws, "tag": "deploy"}, "insufficient_evidence")


def _missing_things(c: Caller, ws: str) -> None:
    """Names of things that are not there, workspaces that cannot be one, an incognito
    session asked to record an episode."""
    c.fail("update_entry", {"workspace": ws, "id": "0123456789abcdef", "content": "x"}, "not_found")
    c.fail("approve", {"workspace": ws, "ids": ["0123456789abcdef"]}, "not_found")
    c.fail("get_manifest", {"workspace": ws, "sessionId": "nope"}, "not_found")
    c.fail("get_checkpoint", {"workspace": ws, "checkpointId": "nope"}, "not_found")
    c.fail("restore_backup", {"workspace": ws, "backupId": "1796000000000-000001-MEMORY"}, "not_found")
    c.fail("import_memories", {"workspace": ws, "path": "/nonexistent/export.json"}, "not_found")
    memory = Path(ws) / "memory"
    c.fail("read_state", {"workspace": str(memory)}, "invalid_workspace")
    c.fail("read_state", {"workspace": "relative"}, "invalid_workspace")
    sid = c.ok("open_session", {"workspace": ws, "incognito": True})["sessionId"]
    episode = {"workspace": ws, "sessionId": sid, "summary": "s", "sourceRefs": [], "tags": ["t"]}
    c.fail("record_episode", episode, "incognito_blocked")


def _reply_caps(c: Caller) -> None:
    """A result over the reply cap (it ran), and a batch tail that did not run."""
    c.fail("rpc.discover", {}, "reply_too_large")
    replies = c.conn.request([_request(2, "rpc.discover"), _request(3, "ping")])
    for reply in replies:
        assert reply["error"]["data"]["kind"] == "reply_too_large", reply
        c.errors.append(("batch", reply["error"]["data"]))


def _connection_cap(daemon: DaemonProcess, c: Caller) -> None:
    """A connection past the cap reads its one error line."""
    held: list[socket.socket] = []
    try:
        for _ in range(CONNECTION_CAP * 2):
            sock = socket.socket(socket.AF_UNIX)
            sock.settimeout(10)
            sock.connect(str(daemon.socket))
            held.append(sock)
            sock.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
            reply = json.loads(sock.makefile("rb").readline())
            if "error" in reply:
                assert reply["error"]["data"]["kind"] == "too_many_connections", reply
                c.errors.append(("connect", reply["error"]["data"]))
                return
        raise AssertionError("no connection was refused")
    finally:
        for sock in held:
            sock.close()


@pytest.fixture(scope="module")
def drawn() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Each (method, error data) drawn from one daemon with a small reply and connection cap."""
    env = {
        "MAKAD_MAX_REPLY_BYTES": str(REPLY_CAP),
        "MAKAD_MAX_CONNECTIONS": str(CONNECTION_CAP),
        **BRIEF_BUSY_ENV,  # the ledger locked by another process refuses sooner
    }
    for daemon in daemon_in_tmp(env):
        ws = str(daemon.workspace)
        with RawConnection(daemon.socket, timeout=30) as conn:
            c = Caller(conn)
            c.ok("add_entry", {"workspace": ws, "title": "Build", "content": "use make"})
            with ledger_locked_by_another_process(daemon):
                c.fail("add_entry", {"workspace": ws, "title": "Test", "content": "use pytest"}, "io_error")
            _conflicts(c, ws)
            _sizes(c, ws)
            _compaction_and_evidence(c, ws)
            _missing_things(c, ws)
            _reply_caps(c)
            _connection_cap(daemon, c)
        yield c.errors


@pytest.mark.slow
def test_every_data_field_sent_is_documented(drawn: list[tuple[str, dict[str, Any]]]) -> None:
    """Each error's data keys but `kind` are its kind's documented fields, and each value fits
    the field's schema."""
    for method, data in drawn:
        documented = FIELDS[data["kind"]]
        assert set(data) - {"kind"} <= set(documented), (method, data)
        for key, value in data.items():
            if key != "kind":
                jsonschema.validate(value, documented[key])


def test_the_calls_draw_the_fields_a_client_acts_on(drawn: list[tuple[str, dict[str, Any]]]) -> None:
    """The errors drawn carry the fields a client decides on: where to retry from, whether a
    memory file was already written, whether a dropped result ran, the cap it met."""
    seen = {(data["kind"], key) for _, data in drawn for key in data}
    assert {
        ("conflict", "currentRevision"),
        ("conflict", "currentSeq"),
        ("conflict", "reason"),
        ("conflict", "incognito"),
        ("io_error", "memoryWritten"),
        ("io_error", "written"),
        ("io_error", "revision"),
        ("reply_too_large", "ran"),
        ("too_many_connections", "limit"),
        ("gate_closed", "extractToolEnabled"),
        ("too_large", "limit"),
        ("too_large", "minimumTokens"),
        ("invalid_summary", "missingSections"),
        ("circuit_open", "consecutiveFailures"),
        ("insufficient_evidence", "minEpisodes"),
        ("not_found", "ids"),
        ("invalid_workspace", "reason"),
        ("incognito_blocked", "sessionId"),
    } <= seen
    ran = {data["ran"] for _, data in drawn if data["kind"] == "reply_too_large"}
    assert ran == {True, False}


def _error_class(kind: str) -> str:
    """The Node client's class for a kind (scripts/gen-types.mjs errorClassName)."""
    stem = kind.removesuffix("_error")
    return "".join(word[:1].upper() + word[1:] for word in stem.split("_") if word) + "Error"


def test_the_node_readme_reads_only_documented_error_fields() -> None:
    """Where the Node README reads `error.data.X` of a typed error, X is a documented field of
    that error's kind."""
    readme = (ROOT / "clients" / "node" / "README.md").read_text(encoding="utf-8")
    classes = {_error_class(kind): kind for kind in FIELDS}
    reads = re.findall(r"instanceof (\w+)\).*?error\.data(?:\.(\w+)|\[\"(\w+)\"\])", readme)
    assert reads
    for name, dotted, bracketed in reads:
        field = dotted or bracketed
        assert field in FIELDS[classes[name]], (name, field)


STALE = ("add_entry", "approve", "reject", "remove_outside_text", "set_working_state")


def test_a_stale_expected_revision_is_answered_alike(drawn: list[tuple[str, dict[str, Any]]]) -> None:
    """Every write refused for a stale expectedRevision — remove_outside_text with nothing to
    remove included — says the revision it expected and the one to retry from."""
    stale = {method: data for method, data in drawn if method in STALE and data["kind"] == "conflict"}
    assert set(stale) == set(STALE)
    for method, data in stale.items():
        assert {"currentRevision", "expectedRevision"} <= set(data), (method, data)

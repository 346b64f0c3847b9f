"""A ledger written before session ids were screened for secrets: a session stored under an
id that holds one is served under its stand-in (``redacted-…``) after the upgrade, by every
call, with its whole history, its hash chain verifying, and the raw id never answered."""

from __future__ import annotations

import itertools
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from maka.errors import RemoteError
from makad.core.chain import event_hash
from makad.core.redaction import identifier_stand_in
from makad.core.types import Event
from makad.service.identifiers import KEY_FILE
from makad.store.ledger.rows import event_values, search_body
from makad.store.ledger.schema import MIGRATIONS, migrate
from makad.store.workspaces import workspace_id
from tests.support import DaemonProcess

# The schema of the last release that stored session ids as the client gave them.
RELEASED_SCHEMA = 9
SECRET_ID = "AKIAIOSFODNN7EXAMPLE"
DELETED_ID = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
TURNS = [
    ("user_message", "the kumquat deploy fails on staging"),
    ("assistant_message", "looking at the kumquat pipeline"),
    ("user_message", "it times out after the migration step"),
    ("assistant_message", "raised the timeout of the migration step"),
    ("user_message", "now the smoke tests pass"),
    ("assistant_message", "good, tagging the release"),
    ("user_message", "and the changelog"),
    ("assistant_message", "written and pushed"),
]
# Long enough turns that a compaction has something to cover (its keep window is >= 1,000 tokens).
FILLER = " ".join(f"step{i}" for i in range(400))
_names = itertools.count()


def released_ledger(path: Path) -> None:
    """A ledger as the released schema wrote it: sessions stored under the ids given (one
    holding an AWS key id, one plain), their events chained under those ids, and the
    tombstone of a deleted session whose id held a GitHub token."""
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, MIGRATIONS[:RELEASED_SCHEMA])
    conn.execute("BEGIN")
    next_id = 1
    for sid, title in ((SECRET_ID, "deploy"), ("plain", "other")):
        link = ""
        for seq, (kind, text) in enumerate(TURNS, start=1):
            event = Event(
                session_id=sid, seq=seq, ts=1_000 + seq, type=kind, text=f"{text} {FILLER}", tokens=600
            )  # type: ignore[arg-type]
            link = event.hash = event_hash(link, event)
            conn.execute(
                "INSERT INTO events (id, session_id, seq, ts, type, text, tool_call_id, tool_name, meta,"
                " tokens, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (next_id, *event_values(event)),
            )
            conn.execute("INSERT INTO events_fts (rowid, body) VALUES (?, ?)", (next_id, search_body(event)))
            next_id += 1
        conn.execute(
            "INSERT INTO sessions (session_id, title, created_at, event_count, last_seq, last_hash)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (sid, title, 1_000, len(TURNS), len(TURNS), link),
        )
    conn.execute(
        "INSERT INTO working_state (session_id, state, revision, updated_at) VALUES (?, ?, 1, 1000)",
        (SECRET_ID, json.dumps({"goals": ["fix the deploy"], "revision": 1}).encode()),
    )
    conn.execute(
        "INSERT INTO tombstones (session_id, ts, event_count, last_hash) VALUES (?, 900, 3, 'ab')",
        (DELETED_ID,),
    )
    conn.execute("COMMIT")
    conn.close()


def prepare(daemon: DaemonProcess) -> tuple[str, Path]:
    """A workspace the daemon has not opened yet whose ledger the released schema wrote."""
    ws = daemon.root / f"w{next(_names)}"
    (ws / "memory").mkdir(parents=True, mode=0o700)
    data = daemon.data_dir / "workspaces" / workspace_id(ws.resolve())
    data.mkdir(parents=True, mode=0o700)
    released_ledger(data / "ledger.sqlite3")
    return str(ws), data / "ledger.sqlite3"


def stand_in(daemon: DaemonProcess, raw: str) -> str:
    return identifier_stand_in(raw, (daemon.data_dir / KEY_FILE).read_bytes())


def answered(value: Any) -> str:
    return json.dumps(value)


def test_a_session_stored_under_a_secret_id_is_served_under_its_stand_in(daemon: DaemonProcess) -> None:
    """After the upgrade list_sessions shows the stand-in, never the raw id; the history is read,
    searched, retrieved and appended to by the stand-in (or the raw id), every event verifies."""
    ws, _ = prepare(daemon)
    listed = daemon.call("list_sessions", {"workspace": ws})
    shown = stand_in(daemon, SECRET_ID)
    assert re.fullmatch(r"redacted-[0-9a-f]{16}", shown)
    assert SECRET_ID not in answered(listed)
    by_id = {s["sessionId"]: s for s in listed["sessions"]}
    assert set(by_id) == {shown, "plain"}
    assert (by_id[shown]["eventCount"], by_id[shown]["title"]) == (len(TURNS), "deploy")

    for named in (shown, SECRET_ID):
        read = daemon.call("read_events", {"workspace": ws, "sessionId": named})
        assert [e["text"] for e in read["events"]] == [f"{text} {FILLER}" for _, text in TURNS]
        assert all(e["verified"] for e in read["events"]), read
        assert {e["sessionId"] for e in read["events"]} == {shown}
        assert SECRET_ID not in answered(read)
    hits = daemon.call("search_history", {"workspace": ws, "query": "kumquat", "sessionId": shown})["hits"]
    assert sorted(h["ref"] for h in hits) == [f"event:{shown}:1", f"event:{shown}:2"]
    assert all(h["event"]["verified"] for h in hits)
    everywhere = daemon.call("search_history", {"workspace": ws, "query": "kumquat"})
    assert everywhere["hits"] and SECRET_ID not in answered(everywhere)
    [got] = daemon.call("retrieve", {"workspace": ws, "refs": [f"event:{shown}:1-{len(TURNS)}"]})["results"]
    assert got["ok"] and len(got["events"]) == len(TURNS)
    state = daemon.call("get_working_state", {"workspace": ws, "sessionId": shown})
    assert state["goals"] == ["fix the deploy"]

    added = daemon.call(
        "append_events",
        {"workspace": ws, "sessionId": shown, "events": [{"type": "user_message", "text": "kumquat again"}]},
    )
    assert added["firstSeq"] == len(TURNS) + 1
    read = daemon.call("read_events", {"workspace": ws, "sessionId": SECRET_ID})
    assert len(read["events"]) == len(TURNS) + 1 and all(e["verified"] for e in read["events"])
    daemon.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "historyRecallEnabled": True})
    compacted = daemon.call(
        "compact", {"workspace": ws, "sessionId": SECRET_ID, "mode": "checkpoint", "keepRecentTokens": 1}
    )
    pack = daemon.call(
        "build_context",
        {"workspace": ws, "sessionId": shown, "query": "kumquat timeout", "budgetTokens": 4000},
    )
    assert SECRET_ID not in answered(compacted) + answered(pack)
    assert f"event:{shown}:" in answered(pack)
    closed = daemon.call("close_session", {"workspace": ws, "sessionId": shown})
    assert closed["sessionId"] == shown and closed["closedAt"] is not None
    assert SECRET_ID not in daemon.log_text()


def test_the_rename_is_made_once_and_leaves_the_raw_id_only_where_the_chain_needs_it(
    daemon: DaemonProcess,
) -> None:
    """The ledger holds the stand-in in every table but the one the chain is verified with; a
    restart finds it done (same ids, same events, still verified); a deleted session's id
    stays refused under its stand-in; deleting the renamed session forgets the raw id too."""
    ws, ledger = prepare(daemon)
    daemon.call("list_sessions", {"workspace": ws})
    shown = stand_in(daemon, SECRET_ID)
    daemon.restart()
    listed = daemon.call("list_sessions", {"workspace": ws})
    assert {s["sessionId"] for s in listed["sessions"]} == {shown, "plain"}
    read = daemon.call("read_events", {"workspace": ws, "sessionId": shown})
    assert len(read["events"]) == len(TURNS) and all(e["verified"] for e in read["events"])
    with pytest.raises(RemoteError) as refused:
        daemon.call("open_session", {"workspace": ws, "sessionId": DELETED_ID})
    assert refused.value.data["kind"] == "conflict" and refused.value.data.get("reason") == "deleted"
    assert DELETED_ID not in answered(refused.value.data)

    conn = sqlite3.connect(ledger)
    try:
        for table in ("sessions", "events", "working_state", "tombstones"):
            ids = {row[0] for row in conn.execute(f"SELECT session_id FROM {table}")}
            assert SECRET_ID not in ids and DELETED_ID not in ids, (table, ids)
        assert conn.execute("SELECT count(*) FROM session_chain_ids").fetchone() == (1,)
    finally:
        conn.close()

    gone = daemon.call("delete_session", {"workspace": ws, "sessionId": shown})
    assert gone["sessionId"] == shown and gone["eventCount"] == len(TURNS)
    conn = sqlite3.connect(ledger)
    try:
        assert conn.execute("SELECT count(*) FROM session_chain_ids").fetchone() == (0,)
    finally:
        conn.close()
    assert SECRET_ID not in daemon.log_text()


SCOPED_MEMORY = (
    "# Maka Memory\n\n## Staging flag\n"
    "<!-- maka-memory: id=abc123 origin=manual createdAt=1 updatedAt=1 status=active tags= "
    f"scope=session session={SECRET_ID} source=event:{SECRET_ID}:2 -->\n"
    "the staging deploy needs the kumquat flag\n"
)


def test_memory_scoped_to_the_session_under_its_raw_id_still_reaches_it(daemon: DaemonProcess) -> None:
    """An entry MEMORY.md scopes to the session by its raw id reaches the session's context
    under the stand-in (and no other session's), and a proposal from the session may
    replace it; the agent is shown no raw id."""
    ws, _ = prepare(daemon)
    (Path(ws) / "memory" / "MEMORY.md").write_text(SCOPED_MEMORY)
    daemon.call(
        "set_settings",
        {"workspace": ws, "agentReadEnabled": True, "extractToolEnabled": True, "historyRecallEnabled": True},
    )
    daemon.call("list_sessions", {"workspace": ws})
    shown = stand_in(daemon, SECRET_ID)
    pack = daemon.call(
        "build_context",
        {"workspace": ws, "sessionId": shown, "query": "staging kumquat flag", "budgetTokens": 6000},
    )
    assert "the staging deploy needs the kumquat flag" in answered(pack)
    assert SECRET_ID not in answered(pack)
    other = daemon.call("open_session", {"workspace": ws})["sessionId"]
    elsewhere = daemon.call(
        "build_context",
        {"workspace": ws, "sessionId": other, "query": "staging kumquat flag", "budgetTokens": 6000},
    )
    assert "the staging deploy needs the kumquat flag" not in answered(elsewhere)
    proposed = daemon.call(
        "propose",
        {
            "workspace": ws,
            "title": "Staging flag",
            "content": "the staging deploy needs the kumquat and fig flags",
            "scope": "session",
            "sessionId": shown,
            "supersedes": "abc123",
        },
    )
    assert proposed["queued"] and SECRET_ID not in answered(proposed)
    daemon.call("approve", {"workspace": ws, "ids": [proposed["proposal"]["id"]]})
    memory = (Path(ws) / "memory" / "MEMORY.md").read_text()
    assert "the kumquat and fig flags" in memory and f"session={shown} supersedes=abc123" in memory

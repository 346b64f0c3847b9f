"""Sessions and the event ledger over the socket: durability, conflicts, search, incognito."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from maka import Client
from maka.errors import (
    Conflict,
    IncognitoBlocked,
    InvalidParams,
    MakaError,
    NotFound,
    TooLarge,
)
from makad.core.chain import first_bad_seq
from makad.core.types import Event
from makad.store.workspaces import workspace_id
from tests.support import DaemonProcess, RawConnection

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def ws_of(d: DaemonProcess) -> str:
    return str(d.workspace)


def db_path(d: DaemonProcess) -> Path:
    return d.data_dir / "workspaces" / workspace_id(d.workspace.resolve()) / "ledger.sqlite3"


def msg(text: str, kind: str = "user_message", **kw: Any) -> dict[str, Any]:
    return {"type": kind, "text": text, **kw}


def open_session(c: Client | DaemonProcess, ws: str, **kw: Any) -> str:
    sid: str = c.call("open_session", {"workspace": ws, **kw})["sessionId"]
    return sid


def append(c: Client | DaemonProcess, ws: str, sid: str, *texts: str, **kw: Any) -> dict[str, Any]:
    result: dict[str, Any] = c.call(
        "append_events", {"workspace": ws, "sessionId": sid, "events": [msg(t) for t in texts], **kw}
    )
    return result


def all_events(c: Client | DaemonProcess, ws: str, sid: str) -> list[Event]:
    raw = c.call("read_events", {"workspace": ws, "sessionId": sid, "limit": 10_000})
    assert not raw["hasMore"]
    return [Event(**{_snake(k): v for k, v in e.items()}) for e in raw["events"]]


def _snake(name: str) -> str:
    return "".join(f"_{ch.lower()}" if ch.isupper() else ch for ch in name)


def assert_chain_valid(c: Client | DaemonProcess, ws: str, sid: str) -> list[Event]:
    """Seqs 1..N without gaps, every hash chained, the head matching; retrieve agrees."""
    events = all_events(c, ws, sid)
    head = next(s for s in c.call("list_sessions", {"workspace": ws})["sessions"] if s["sessionId"] == sid)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert first_bad_seq(events, head["lastSeq"], head["lastHash"]) is None
    if events:
        (checked,) = c.call("retrieve", {"workspace": ws, "refs": [f"event:{sid}:1-{len(events)}"]})[
            "results"
        ]
        assert checked["ok"] and checked["mismatchedSeqs"] == []
    return events


def files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


# ---------------------------------------------------------------------- sessions


def test_session_lifecycle(shared_daemon: DaemonProcess) -> None:
    """open → append → read → close (appends refused) → reopen → list shows the head."""
    ws = ws_of(shared_daemon)
    opened = shared_daemon.call("open_session", {"workspace": ws, "title": "first"})
    sid = opened["sessionId"]
    assert opened["incognito"] is False and opened["lastSeq"] == 0 and len(sid) == 32
    assert append(shared_daemon, ws, sid, "hello", "world") == {"firstSeq": 1, "lastSeq": 2, "redactions": 0}
    page = shared_daemon.call("read_events", {"workspace": ws, "sessionId": sid, "limit": 1})
    assert [e["text"] for e in page["events"]] == ["hello"] and page["hasMore"] is True
    rest = shared_daemon.call("read_events", {"workspace": ws, "sessionId": sid, "afterSeq": 1})
    assert [e["text"] for e in rest["events"]] == ["world"] and rest["hasMore"] is False
    shared_daemon.call("close_session", {"workspace": ws, "sessionId": sid})
    with pytest.raises(Conflict) as closed:
        append(shared_daemon, ws, sid, "late")
    assert closed.value.data["reason"] == "closed"
    again = shared_daemon.call("open_session", {"workspace": ws, "sessionId": sid})
    assert again["closedAt"] is None and again["title"] == "first" and again["lastSeq"] == 2
    listed = shared_daemon.call("list_sessions", {"workspace": ws})["sessions"]
    assert [(s["sessionId"], s["eventCount"]) for s in listed] == [(sid, 2)]


def test_unknown_session_and_bad_params(shared_daemon: DaemonProcess) -> None:
    """Unknown sessions are not_found; bad ids, bad types and unknown keys are invalid_params."""
    ws = ws_of(shared_daemon)
    with shared_daemon.client() as c:
        with pytest.raises(NotFound):
            append(c, ws, "ghost", "x")
        with pytest.raises(NotFound):
            c.call("read_events", {"workspace": ws, "sessionId": "ghost"})
        with pytest.raises(InvalidParams):
            c.call("open_session", {"workspace": ws, "sessionId": "no spaces"})
        sid = open_session(c, ws)
        with pytest.raises(InvalidParams):
            c.call(
                "append_events",
                {"workspace": ws, "sessionId": sid, "events": [{"type": "shout", "text": "x"}]},
            )
        with pytest.raises(InvalidParams) as unknown:
            c.call(
                "append_events",
                {"workspace": ws, "sessionId": sid, "events": [{"type": "note", "text": "x", "colour": 1}]},
            )
        assert "colour" in unknown.value.data["reason"]
        with pytest.raises(InvalidParams):
            c.call("append_events", {"workspace": ws, "sessionId": sid, "events": []})


def test_append_caps_at_10000_events(shared_daemon: DaemonProcess) -> None:
    """10,000 events go in one request; a request of 10,001 is too_large and nothing is
    written (sent raw: the bundled clients split such a batch)."""
    ws = ws_of(shared_daemon)
    with shared_daemon.client() as c:
        sid = open_session(c, ws)
        assert append(c, ws, sid, *["e"] * 10_000)["lastSeq"] == 10_000
        params = {"workspace": ws, "sessionId": sid, "events": [msg("e")] * 10_001}
        with RawConnection(shared_daemon.socket, timeout=60) as conn:
            reply = conn.request({"jsonrpc": "2.0", "id": 1, "method": "append_events", "params": params})
        assert reply["error"]["data"]["kind"] == "too_large"
        assert reply["error"]["data"]["limit"] == 10_000
        assert (
            c.call("read_events", {"workspace": ws, "sessionId": sid, "afterSeq": 9_999})["lastSeq"] == 10_000
        )


# ---------------------------------------------------------------------- durability


def test_acknowledged_appends_survive_kill_9(daemon: DaemonProcess) -> None:
    """Concurrent clients' acknowledged appends all survive kill -9; chains stay valid."""
    ws = ws_of(daemon)
    shared = open_session(daemon, ws)
    own = [open_session(daemon, ws) for _ in range(2)]
    acked: list[tuple[str, int, list[str]]] = []
    for cycle in range(3):
        lock = threading.Condition()
        targets = [shared, shared, *own]

        def worker(index: int, sid: str, cycle: int = cycle, lock: threading.Condition = lock) -> None:
            n = 0
            try:
                with Client(str(daemon.socket), timeout=10) as c:
                    while True:
                        texts = [f"c{cycle}-w{index}-n{n}-k{k}" for k in range(1 + n % 3)]
                        result = append(c, ws, sid, *texts)
                        with lock:
                            acked.append((sid, result["firstSeq"], texts))
                            lock.notify_all()
                        n += 1
            except (MakaError, OSError):
                return  # the daemon was killed under us

        threads = [threading.Thread(target=worker, args=(i, sid)) for i, sid in enumerate(targets)]
        before = len(acked)
        for t in threads:
            t.start()
        with lock:
            assert lock.wait_for(lambda before=before: len(acked) >= before + 150, timeout=30)
        daemon.kill9()
        for t in threads:
            t.join(timeout=30)
        daemon.start()
        with daemon.client() as c:
            stored = {sid: {e.seq: e.text for e in assert_chain_valid(c, ws, sid)} for sid in (shared, *own)}
        for sid, first, texts in acked:
            assert [stored[sid].get(first + i) for i in range(len(texts))] == texts


def test_expected_seq_race_has_one_winner(shared_daemon: DaemonProcess) -> None:
    """Two clients appending with the same expectedSeq: one wins, the other gets conflict."""
    ws = ws_of(shared_daemon)
    sid = open_session(shared_daemon, ws)
    clients = [shared_daemon.client(), shared_daemon.client()]
    try:
        for round_ in range(10):
            seq = shared_daemon.call("read_events", {"workspace": ws, "sessionId": sid, "afterSeq": 10_000})[
                "lastSeq"
            ]
            barrier = threading.Barrier(2)
            outcomes: list[Any] = [None, None]

            def run(
                i: int,
                seq: int = seq,
                barrier: threading.Barrier = barrier,
                outcomes: list[Any] = outcomes,
                round_: int = round_,
            ) -> None:
                barrier.wait()
                try:
                    outcomes[i] = append(clients[i], ws, sid, f"r{round_}-{i}", expectedSeq=seq)
                except Conflict as exc:
                    outcomes[i] = exc

            threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wins = [o for o in outcomes if isinstance(o, dict)]
            losses = [o for o in outcomes if isinstance(o, Conflict)]
            assert len(wins) == 1 and len(losses) == 1
            assert wins[0]["firstSeq"] == seq + 1
            assert losses[0].data["currentSeq"] == wins[0]["lastSeq"]
            assert losses[0].data["expectedSeq"] == seq
    finally:
        for c in clients:
            c.close()
    assert len(assert_chain_valid(shared_daemon, ws, sid)) == 10


def test_request_id_retry_returns_the_first_result(daemon: DaemonProcess) -> None:
    """A retried append with the same requestId returns the first result, appends nothing."""
    ws = ws_of(daemon)
    for incognito in (False, True):
        sid = open_session(daemon, ws, incognito=incognito)
        first = append(daemon, ws, sid, f"once {TOKEN}", requestId="req-1")
        again = append(daemon, ws, sid, f"once {TOKEN}", requestId="req-1")
        assert first == again == {"firstSeq": 1, "lastSeq": 1, "redactions": 1}
        assert len(all_events(daemon, ws, sid)) == 1
    # Stored with the events: still there after a restart.
    sid = daemon.call("list_sessions", {"workspace": ws})["sessions"][-1]["sessionId"]
    daemon.restart()
    assert append(daemon, ws, sid, "other text", requestId="req-1")["lastSeq"] == 1


# ---------------------------------------------------------------------- privacy


def test_secrets_are_redacted_before_the_ledger(daemon: DaemonProcess) -> None:
    """A token in text or a meta value is replaced before it is stored; the reply counts it."""
    ws = ws_of(daemon)
    sid = open_session(daemon, ws)
    result = daemon.call(
        "append_events",
        {
            "workspace": ws,
            "sessionId": sid,
            "events": [
                msg(f"my key is {TOKEN}"),
                msg("ran it", "tool_result", toolCallId="t1", toolName="shell", meta={"env": f"T={TOKEN}"}),
            ],
        },
    )
    assert result["redactions"] == 2
    events = all_events(daemon, ws, sid)
    assert "[REDACTED:" in events[0].text and events[1].meta is not None
    assert TOKEN not in events[0].text and TOKEN not in events[1].meta["env"]
    state = daemon.call("set_working_state", {"workspace": ws, "sessionId": sid, "goals": [f"use {TOKEN}"]})
    assert state["redactions"] == 1 and TOKEN not in state["goals"][0]
    daemon.stop()
    assert files_containing(daemon.root, TOKEN.encode()) == []


def test_incognito_session_leaves_no_trace(daemon: DaemonProcess) -> None:
    """An incognito session's text never reaches a file, nor another session's search."""
    ws = ws_of(daemon)
    marker = "zebracorn" + "quartz7"
    public = open_session(daemon, ws)
    append(daemon, ws, public, "an ordinary public note")
    secret = daemon.call("open_session", {"workspace": ws, "incognito": True, "title": marker})
    sid = secret["sessionId"]
    assert secret["incognito"] is True
    result = append(daemon, ws, sid, f"the plan is {marker}", f"again {marker}", requestId=marker)
    assert result["lastSeq"] == 2
    daemon.call(
        "set_working_state",
        {"workspace": ws, "sessionId": sid, "goals": [marker], "notes": {"Workflow": marker}},
    )
    own = daemon.call("search_history", {"workspace": ws, "query": marker, "sessionId": sid})
    assert sorted(h["ref"] for h in own["hits"]) == [f"event:{sid}:1", f"event:{sid}:2"]
    assert daemon.call("search_history", {"workspace": ws, "query": marker})["hits"] == []
    assert (
        daemon.call("search_history", {"workspace": ws, "query": marker, "sessionId": public})["hits"] == []
    )
    (elsewhere,) = daemon.call(
        "retrieve", {"workspace": ws, "refs": [f"event:{sid}:1"], "sessionId": public}
    )["results"]
    assert elsewhere["events"] == [] and elsewhere["ok"] is False
    (mine,) = daemon.call("retrieve", {"workspace": ws, "refs": [f"event:{sid}:1-2"], "sessionId": sid})[
        "results"
    ]
    assert mine["ok"] and len(mine["events"]) == 2
    assert files_containing(daemon.root, marker.encode()) == []
    daemon.stop()
    assert files_containing(daemon.root, marker.encode()) == []
    daemon.start()
    with pytest.raises(NotFound):
        daemon.call("read_events", {"workspace": ws, "sessionId": sid})
    listed = daemon.call("list_sessions", {"workspace": ws})["sessions"]
    assert [s["sessionId"] for s in listed] == [public]


def test_workspace_incognito_makes_new_sessions_ephemeral(shared_daemon: DaemonProcess) -> None:
    """While the workspace is incognito, new sessions are in memory and persistent ones
    are read-only: appends are incognito_blocked and write nothing."""
    ws = ws_of(shared_daemon)
    kept = open_session(shared_daemon, ws)
    append(shared_daemon, ws, kept, "before incognito")
    shared_daemon.call("set_settings", {"workspace": ws, "incognito": True})
    with shared_daemon.client() as c:
        fresh = c.call("open_session", {"workspace": ws})
        assert fresh["incognito"] is True
        with pytest.raises(IncognitoBlocked):
            append(c, ws, kept, "during incognito")
        with pytest.raises(IncognitoBlocked):
            c.call("set_working_state", {"workspace": ws, "sessionId": kept, "goals": ["g"]})
        with pytest.raises(IncognitoBlocked):
            c.call("open_session", {"workspace": ws, "incognito": False})
        with pytest.raises(Conflict):
            c.call("open_session", {"workspace": ws, "sessionId": kept, "incognito": True})
        assert [e.text for e in all_events(c, ws, kept)] == ["before incognito"]
        assert append(c, ws, fresh["sessionId"], "ephemeral")["lastSeq"] == 1
    shared_daemon.call("set_settings", {"workspace": ws, "incognito": False})
    assert append(shared_daemon, ws, kept, "after")["lastSeq"] == 2
    assert append(shared_daemon, ws, fresh["sessionId"], "still ephemeral")["lastSeq"] == 2


def test_ledger_works_while_memory_is_disabled(shared_daemon: DaemonProcess) -> None:
    """enabled=false is about MEMORY.md: sessions still append, read and search."""
    ws = ws_of(shared_daemon)
    shared_daemon.call("set_settings", {"workspace": ws, "enabled": False})
    sid = open_session(shared_daemon, ws)
    append(shared_daemon, ws, sid, "recorded while memory is off")
    hits = shared_daemon.call("search_history", {"workspace": ws, "query": "recorded"})["hits"]
    assert [h["ref"] for h in hits] == [f"event:{sid}:1"]


def test_delete_session_forgets_and_tombstones(daemon: DaemonProcess) -> None:
    """delete_session erases events and state, refuses the id afterwards, works incognito."""
    ws = ws_of(daemon)
    marker = "okapi" + "flamingo9"
    gone = open_session(daemon, ws, sessionId="gone")
    append(daemon, ws, gone, f"forget {marker}", "and this")
    daemon.call("set_working_state", {"workspace": ws, "sessionId": gone, "goals": [marker]})
    deleted = daemon.call("delete_session", {"workspace": ws, "sessionId": gone})
    assert deleted["eventCount"] == 2 and deleted["incognito"] is False
    with daemon.client() as c:
        with pytest.raises(NotFound):
            c.call("read_events", {"workspace": ws, "sessionId": gone})
        with pytest.raises(Conflict) as reuse:
            c.call("open_session", {"workspace": ws, "sessionId": gone})
        assert reuse.value.data["reason"] == "deleted"
        assert c.call("search_history", {"workspace": ws, "query": marker})["hits"] == []
        incognito = open_session(c, ws, incognito=True)
        append(c, ws, incognito, "x")
        assert c.call("delete_session", {"workspace": ws, "sessionId": incognito})["incognito"]
        with pytest.raises(NotFound):
            c.call("read_events", {"workspace": ws, "sessionId": incognito})
    daemon.stop()
    assert files_containing(daemon.root, marker.encode()) == []


# ---------------------------------------------------------------------- search and retrieve

FIXTURE = {
    "en": [
        "We decided to migrate the billing service to PostgreSQL next sprint.",
        "The user prefers tabs over spaces in Python files.",
        "Lunch was pizza again.",
    ],
    "zh": [
        "我们决定下周把数据库迁移到新的服务器上。",
        "用户喜欢在代码里使用四个空格缩进。",
        "今天中午吃了饺子，味道不错。",
    ],
    "ja": [
        "来週、データベースを新しいサーバーに移行することにしました。",
        "東京の天気は晴れです。",
        "昼ご飯はラーメンでした。",
    ],
}


QUERIES = [
    ("billing database migration", "en", 1),
    ("tabs or spaces?", "en", 2),
    ("数据库迁移", "zh", 1),
    ("空格缩进", "zh", 2),
    ("饺子", "zh", 3),
    ("サーバー移行", "ja", 1),
    ("東京の天気", "ja", 2),
    ("ラーメン", "ja", 3),
]


def test_search_finds_english_chinese_and_japanese(shared_daemon: DaemonProcess) -> None:
    """search_history ranks the target event first in each language; sessionId scopes it."""
    ws = ws_of(shared_daemon)
    with shared_daemon.client() as c:
        for name, texts in FIXTURE.items():
            open_session(c, ws, sessionId=name)
            c.call(
                "append_events",
                {
                    "workspace": ws,
                    "sessionId": name,
                    "events": [msg(t, ts=1000 * (i + 1)) for i, t in enumerate(texts)],
                },
            )
        for query, lang, seq in QUERIES:
            hits = c.call("search_history", {"workspace": ws, "query": query})["hits"]
            assert hits and hits[0]["ref"] == f"event:{lang}:{seq}", query
            assert hits[0]["event"]["text"] == FIXTURE[lang][seq - 1]
            scoped = c.call("search_history", {"workspace": ws, "query": query, "sessionId": "en"})["hits"]
            assert all(h["event"]["sessionId"] == "en" for h in scoped)
            assert bool(scoped) == (lang == "en")


def test_search_time_window_and_limit(shared_daemon: DaemonProcess) -> None:
    """before/after bound event ts (exclusive); limit caps the hits."""
    ws = ws_of(shared_daemon)
    sid = open_session(shared_daemon, ws)
    shared_daemon.call(
        "append_events",
        {"workspace": ws, "sessionId": sid, "events": [msg(f"kiwi number {i}", ts=i) for i in range(1, 11)]},
    )

    def seqs(**kw: Any) -> list[int]:
        hits = shared_daemon.call("search_history", {"workspace": ws, "query": "kiwi", **kw})["hits"]
        return sorted(h["event"]["seq"] for h in hits)

    assert seqs(after=3, before=7) == [4, 5, 6]
    assert len(seqs(limit=2)) == 2
    with pytest.raises(InvalidParams):
        shared_daemon.call("search_history", {"workspace": ws, "query": "kiwi", "limit": 0})


def test_retrieve_detects_a_row_altered_behind_the_daemon(shared_daemon: DaemonProcess) -> None:
    """A stored event edited with sqlite3 comes back flagged; untouched refs still verify."""
    ws = ws_of(shared_daemon)
    sid = open_session(shared_daemon, ws, sessionId="s")
    append(shared_daemon, ws, sid, "one", "two", "three")
    conn = sqlite3.connect(db_path(shared_daemon))
    conn.execute("DROP TRIGGER IF EXISTS events_append_only")
    conn.execute("UPDATE events SET text = 'forged' WHERE session_id = 's' AND seq = 2")
    conn.commit()
    conn.close()
    results = shared_daemon.call(
        "retrieve",
        {"workspace": ws, "refs": ["event:s:3", "event:s:2", "event:s:1-3", "event:s:1", "event:s:7"]},
    )["results"]
    assert [r["ok"] for r in results] == [True, False, False, False, False]
    assert results[1]["mismatchedSeqs"] == [2] and results[1]["events"][0]["text"] == "forged"
    assert results[2]["mismatchedSeqs"] == [2]
    # seq 1 is intact, but its successor no longer chains onto it.
    assert results[3]["mismatchedSeqs"] == [] and results[3]["chainIntact"] is False
    assert results[4]["missingSeqs"] == [7]
    with pytest.raises(InvalidParams):
        shared_daemon.call("retrieve", {"workspace": ws, "refs": ["memory:abc"]})


# ---------------------------------------------------------------------- working state, manifests


def test_working_state_caps_and_revisions(shared_daemon: DaemonProcess) -> None:
    """Working state merges notes, enforces caps (too_large) and expectedRevision (conflict)."""
    ws = ws_of(shared_daemon)
    with shared_daemon.client() as c:
        for incognito in (False, True):
            sid = open_session(c, ws, incognito=incognito)
            base = {"workspace": ws, "sessionId": sid}
            assert c.call("get_working_state", base)["revision"] == 0
            first = c.call(
                "set_working_state",
                {**base, "goals": ["ship"], "notes": {"Workflow": "tdd", "Learnings": "x"}},
            )
            second = c.call(
                "set_working_state",
                {
                    **base,
                    "decisions": ["sqlite"],
                    "notes": {"Learnings": ""},
                    "expectedRevision": first["revision"],
                },
            )
            got = c.call("get_working_state", base)
            assert got == {k: v for k, v in second.items() if k != "redactions"}
            assert got["goals"] == ["ship"] and got["notes"] == {"Workflow": "tdd"}
            with pytest.raises(Conflict) as stale:
                c.call("set_working_state", {**base, "goals": [], "expectedRevision": 0})
            assert stale.value.data["currentRevision"] == second["revision"]
            for field, cap in (("goals", 8), ("openThreads", 12), ("decisions", 20)):
                with pytest.raises(TooLarge) as over:
                    c.call("set_working_state", {**base, field: ["x"] * (cap + 1)})
                assert over.value.data["limit"] == cap
            with pytest.raises(TooLarge):
                c.call("set_working_state", {**base, "notes": {"Worklog": "word " * 9_000}})
            with pytest.raises(InvalidParams):
                c.call("set_working_state", {**base, "notes": {"Diary": "x"}})
            assert c.call("get_working_state", base)["revision"] == second["revision"]


def test_get_manifest_returns_what_build_context_recorded(shared_daemon: DaemonProcess) -> None:
    """get_manifest is not_found before any build_context, then returns the call's record."""
    ws = ws_of(shared_daemon)
    sid = open_session(shared_daemon, ws)
    with pytest.raises(NotFound):
        shared_daemon.call("get_manifest", {"workspace": ws, "sessionId": sid})
    append(shared_daemon, ws, sid, "hello there")
    shared_daemon.call("build_context", {"workspace": ws, "sessionId": sid, "budgetTokens": 2_000})
    manifest = shared_daemon.call("get_manifest", {"workspace": ws, "sessionId": sid})
    assert manifest["sessionId"] == sid and isinstance(manifest["items"], list)
    with pytest.raises(NotFound):
        shared_daemon.call("get_manifest", {"workspace": ws, "sessionId": sid, "callId": "no-such-call"})
    same = shared_daemon.call(
        "get_manifest", {"workspace": ws, "sessionId": sid, "callId": manifest["callId"]}
    )
    assert same == manifest

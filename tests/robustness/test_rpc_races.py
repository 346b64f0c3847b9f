"""Concurrent RPC calls racing on one workspace of a real daemon: many clients at once,
repeated, with the outcome checked from the files and the ledger afterwards."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from maka import AsyncClient
from maka.errors import RemoteError
from makad.core import memory_format as fmt
from makad.store.workspaces import workspace_id
from tests.support import DaemonProcess, SharedDaemon

pytestmark = pytest.mark.anyio


@pytest.fixture
def own(shared_daemon: DaemonProcess, request: pytest.FixtureRequest) -> DaemonProcess:
    """The module's daemon with a fresh workspace folder of this test's own."""
    folder = shared_daemon.workspace / request.node.name[:40]
    folder.mkdir()
    return SharedDaemon(shared_daemon, folder)


Call = tuple[str, dict[str, Any]]


async def at_once(d: DaemonProcess, calls: list[Call]) -> list[Any]:
    """Each call on its own connection, all started together; a RemoteError is returned
    in the call's place."""
    out: list[Any] = [None] * len(calls)

    async def one(i: int, method: str, params: dict[str, Any]) -> None:
        async with AsyncClient(str(d.socket), timeout=60) as client:
            try:
                out[i] = await client.call(method, params)
            except RemoteError as exc:
                out[i] = exc

    async with anyio.create_task_group() as tg:
        for i, (method, params) in enumerate(calls):
            tg.start_soon(one, i, method, params)
    return out


async def read_until(d: DaemonProcess, w: str, done: anyio.Event, failed: list[str]) -> None:
    """read_state on one connection, again and again until ``done``; failures kept."""
    async with AsyncClient(str(d.socket), timeout=60) as client:
        while not done.is_set():
            try:
                await client.call("read_state", {"workspace": w})
            except RemoteError as exc:
                failed.append(f"{exc.message} {exc.data}")


def failures(results: list[Any]) -> list[str]:
    return [f"{r.message} {r.data}" for r in results if isinstance(r, RemoteError)]


def open_sections(path: Path) -> list[fmt.Section]:
    doc = fmt.parse(path.read_text(encoding="utf-8")) if path.exists() else fmt.new_document()
    return [s for s in doc.sections if s.entry.status in ("review_required", "draft")]


async def test_a_new_workspace_used_by_many_clients_at_once_is_one_workspace(
    own: DaemonProcess,
) -> None:
    """The first writes on a fresh folder (entries added, sessions opened) while other
    clients keep reading it, so calls arrive as the first write binds the folder's id:
    every call succeeds, every entry and session is there afterwards, and no data
    directory is retired."""
    d = own
    for round_ in range(3):
        folder = d.workspace / f"fresh{round_}"
        folder.mkdir()
        w = str(folder)
        writes: list[Call] = [("open_session", {"workspace": w}) for _ in range(8)]
        writes += [
            ("add_entry", {"workspace": w, "title": f"Entry {i}", "content": f"fact {i}"}) for i in range(8)
        ]
        done = anyio.Event()
        read_failures: list[str] = []
        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(read_until, d, w, done, read_failures)
            results = await at_once(d, writes)
            done.set()
        assert failures(results) == [] and read_failures == []
        added = sorted(f"Entry {i}" for i in range(8))
        state = d.call("read_state", {"workspace": w, "includeEntries": True})
        assert sorted(e["title"] for e in state["entries"]) == added
        memory = fmt.parse((folder / "memory" / "MEMORY.md").read_text(encoding="utf-8"))
        assert sorted(s.entry.title for s in memory.sections) == added
        sessions = d.call("list_sessions", {"workspace": w})["sessions"]
        assert {s["sessionId"] for s in sessions} == {r["sessionId"] for r in results[:8]}
    assert not (d.data_dir / "retired").exists()


async def test_a_proposal_racing_the_rejection_of_its_content_is_not_queued(
    own: DaemonProcess,
) -> None:
    """Clients propose and import the content of a proposal while it is being rejected:
    each is answered as the open duplicate (before the rejection) or as previously
    rejected (after it), never queued again, and PENDING.md holds no open proposal
    afterwards."""
    d = own
    w = str(d.workspace)
    d.call("set_settings", {"workspace": w, "agentReadEnabled": True, "extractToolEnabled": True})
    for round_ in range(10):
        content = f"a fact the user turns down, number {round_}"
        first = d.call("propose", {"workspace": w, "title": "Turned down", "content": content})
        proposal = first["proposal"]["id"]
        again = ("propose", {"workspace": w, "title": "Turned down", "content": content})
        imported = ("import_memories", {"workspace": w, "data": f"{content}\n", "format": "text"})
        results = await at_once(
            d,
            [("reject", {"workspace": w, "ids": [proposal], "reason": "no"}), *[again, imported] * 10],
        )
        assert failures(results) == []
        assert results[0]["rejected"] == [proposal]
        assert [r["proposal"]["id"] for r in results[1::2] if r["queued"]] == []
        assert [r["imported"] for r in results[2::2] if r["imported"]] == []
        assert open_sections(d.workspace / "memory" / "PENDING.md") == []


def turns(first: int, count: int) -> list[dict[str, Any]]:
    """``count`` long turns, user and assistant by turns, numbered from ``first``."""
    return [
        {"type": "assistant_message" if i % 2 else "user_message", "text": f"plan {i} " + "word " * 300}
        for i in range(first, first + count)
    ]


def shown_seqs(pack: dict[str, Any]) -> list[int]:
    return [int(m["sourceId"].rsplit(":", 1)[1]) for m in pack["messages"]]


async def test_compaction_then_deletion_racing_build_context(own: DaemonProcess) -> None:
    """A session compacted while clients append and build context: every pack shows the
    checkpoint it names (or none) and then every event after it, without a gap; the
    chain verifies and the checkpoint covers what it says. Then the session deleted
    while clients build context and append: the ledger keeps no event, checkpoint,
    manifest or shown-memory row of it, only its tombstone."""
    from soaklib import verify

    d = own
    w = str(d.workspace)
    d.call("set_settings", {"workspace": w, "agentReadEnabled": True})
    d.call("add_entry", {"workspace": w, "title": "Plan", "content": "the launch plan is in the blue folder"})
    for _ in range(4):
        sid = d.call("open_session", {"workspace": w})["sessionId"]
        d.call("append_events", {"workspace": w, "sessionId": sid, "events": turns(0, 12)})
        pack = {"workspace": w, "sessionId": sid, "query": "launch plan", "budgetTokens": 30000}
        compact = {"workspace": w, "sessionId": sid, "mode": "checkpoint", "keepRecentTokens": 1000}
        results = await at_once(
            d,
            [
                *[("compact", compact)] * 2,
                *[("build_context", pack)] * 6,
                *[
                    ("append_events", {"workspace": w, "sessionId": sid, "events": turns(12 + 2 * i, 2)})
                    for i in range(4)
                ],
            ],
        )
        # (the second compaction finds nothing to cover unless appends came in between)
        assert failures(results[2:]) == []
        compacted = [r for r in results[:2] if not isinstance(r, RemoteError)]
        assert compacted and {r.data["kind"] for r in results[:2] if isinstance(r, RemoteError)} <= {
            "invalid_params"
        }
        with d.client() as client:
            info = client.call("list_sessions", {"workspace": w})["sessions"][0]
            check = verify.check_session(client, w, info)
        assert check.problems == [] and len(check.events) == 12 + 8
        assert sorted(c["checkpointId"] for c in check.checkpoints) == sorted(
            c["checkpointId"] for c in compacted
        )
        covered = {f"checkpoint:{c['checkpointId']}": c["coverage"]["toSeq"] for c in check.checkpoints}
        for built in results[2:8]:
            summary = [s for s in built["segments"] if s["kind"] == "summary"]
            named = [ref for s in summary for ref in s["sourceIds"] if ref in covered]
            floor = covered[named[0]] if named else 0
            seqs = shown_seqs(built)
            # Right after the checkpoint it names, at a user turn: every event up to at least
            # the last one there before the calls, none twice, none skipped.
            assert seqs and seqs[0] == floor + 1 and seqs[0] % 2 == 1
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) and seqs[-1] >= 12
        late = {"workspace": w, "sessionId": sid, "events": [{"type": "user_message", "text": "late"}]}
        results = await at_once(
            d,
            [
                ("delete_session", {"workspace": w, "sessionId": sid}),
                *[("build_context", pack)] * 6,
                ("append_events", late),
            ],
        )
        assert {r.data["kind"] for r in results if isinstance(r, RemoteError)} <= {"not_found"}
    ledger = d.data_dir / "workspaces" / workspace_id(d.workspace.resolve()) / "ledger.sqlite3"
    conn = sqlite3.connect(ledger)
    try:
        deleted = "SELECT session_id FROM tombstones"
        assert conn.execute(f"SELECT count(*) FROM ({deleted})").fetchone() == (4,)
        for table in ("events", "checkpoints", "manifest_calls", "manifest_shown", "working_state"):
            rows = conn.execute(f"SELECT count(*) FROM {table} WHERE session_id IN ({deleted})").fetchone()
            assert rows == (0,), table
    finally:
        conn.close()


async def test_copies_of_one_request_in_flight_at_once_all_get_its_result(
    own: DaemonProcess,
) -> None:
    """A retry may arrive while the first attempt is still running (a client that timed
    out and asked again): ten copies of a call with one requestId at once all get the
    first attempt's result, and its effect happens once, for add_entry, propose,
    approve, update_entry, reject and delete_entry."""
    d = own
    w = str(d.workspace)
    d.call("set_settings", {"workspace": w, "agentReadEnabled": True, "extractToolEnabled": True})

    async def copies(method: str, params: dict[str, Any], request_id: str) -> list[Any]:
        results = await at_once(d, [(method, {"workspace": w, **params, "requestId": request_id})] * 10)
        assert failures(results) == [], method
        assert all(r == results[0] for r in results), method
        return results

    for round_ in range(3):
        added = await copies(
            "add_entry", {"title": "Added", "content": f"added once {round_}"}, f"add-{round_}"
        )
        entry = added[0]["entry"]["id"]
        proposed = await copies(
            "propose", {"title": "P", "content": f"proposed once {round_}"}, f"p-{round_}"
        )
        assert proposed[0]["queued"]
        approved = await copies("approve", {"ids": [proposed[0]["proposal"]["id"]]}, f"a-{round_}")
        await copies("update_entry", {"id": entry, "content": f"updated once {round_}"}, f"u-{round_}")
        doomed = d.call("propose", {"workspace": w, "title": "R", "content": f"rejected once {round_}"})
        await copies("reject", {"ids": [doomed["proposal"]["id"]]}, f"r-{round_}")
        await copies("delete_entry", {"id": approved[0]["approved"][0]["entry"]["id"]}, f"d-{round_}")
    memory = fmt.parse((d.workspace / "memory" / "MEMORY.md").read_text(encoding="utf-8"))
    assert sorted(s.entry.content for s in memory.sections) == [f"updated once {i}" for i in range(3)]
    assert open_sections(d.workspace / "memory" / "PENDING.md") == []


async def test_one_proposal_raced_by_duplicates_then_by_approvals_and_rejections(own: DaemonProcess) -> None:
    """20 clients propose the same content at once: one proposal is queued and every
    answer names it. Then five approvals and five rejections of it at once: exactly one
    call wins, the files show its outcome alone and the lineage records it once."""
    d = own
    w = str(d.workspace)
    d.call("set_settings", {"workspace": w, "agentReadEnabled": True, "extractToolEnabled": True})
    for round_ in range(4):
        content = f"the build cache lives in /var/cache/build, round {round_}"
        proposed = await at_once(
            d, [("propose", {"workspace": w, "title": f"T{i}", "content": content}) for i in range(20)]
        )
        assert failures(proposed) == []
        assert sum(r["queued"] for r in proposed) == 1
        p = proposed[0]["proposal"]["id"]
        assert {r["proposal"]["id"] for r in proposed} == {p}
        assert [s.entry.id for s in open_sections(d.workspace / "memory" / "PENDING.md")] == [p]
        outcome = await at_once(
            d,
            [("approve", {"workspace": w, "ids": [p]})] * 5 + [("reject", {"workspace": w, "ids": [p]})] * 5,
        )
        approved = [r for r in outcome[:5] if not isinstance(r, RemoteError)]
        rejected = [r for r in outcome[5:] if not isinstance(r, RemoteError) and r["rejected"]]
        assert len(approved) + len(rejected) == 1
        assert {r.data["kind"] for r in outcome if isinstance(r, RemoteError)} <= {"not_found"}
        memory_file = d.workspace / "memory" / "MEMORY.md"  # none yet when the first round rejects
        memory = fmt.parse(memory_file.read_text(encoding="utf-8") if memory_file.exists() else "")
        assert [s.entry.content for s in memory.sections].count(content) == len(approved)
        assert open_sections(d.workspace / "memory" / "PENDING.md") == []
        actions = [e["action"] for e in d.call("memory_history", {"workspace": w, "id": p})["events"]]
        assert actions.count("approved") + actions.count("rejected") == 1


async def test_concurrent_writes_each_get_their_own_revision(own: DaemonProcess) -> None:
    """30 writes at once (entries added, proposals queued, a setting flipped): each
    answer carries a revision of its own, and read_state afterwards shows every entry and
    proposal at a revision no lower than any of them."""
    d = own
    w = str(d.workspace)
    d.call("set_settings", {"workspace": w, "agentReadEnabled": True, "extractToolEnabled": True})
    calls: list[Call] = [
        ("add_entry", {"workspace": w, "title": f"A{i}", "content": f"added {i}"}) for i in range(16)
    ]
    calls += [("propose", {"workspace": w, "title": f"P{i}", "content": f"proposed {i}"}) for i in range(10)]
    calls += [("set_settings", {"workspace": w, "historyRecallEnabled": i % 2 == 0}) for i in range(4)]
    results = await at_once(d, calls)
    assert failures(results) == []
    revisions = [r["revision"] for r in results[:26]]
    assert len(set(revisions)) == 26
    state = d.call("read_state", {"workspace": w, "includeEntries": True})
    assert {e["title"] for e in state["entries"]} == {f"A{i}" for i in range(16)}
    assert state["pendingCount"] == 10 and state["revision"] >= max(revisions)


async def incognito_client(
    d: DaemonProcess, sid: str, i: int, switched: anyio.Event, leaks: list[str]
) -> None:
    """One client's reads and writes, again and again until two rounds of them began after
    ``switched``; notes each of those that got memory back or wrote."""
    w = str(d.workspace)
    after = 0
    while after < 2:
        begun_after = switched.is_set()
        text = f"client {i} at {anyio.current_time()}"
        pack, state, added, appended = await at_once(
            d,
            [
                (
                    "build_context",
                    {"workspace": w, "sessionId": sid, "query": "vault code", "budgetTokens": 2000},
                ),
                ("read_state", {"workspace": w, "includeEntries": True}),
                ("add_entry", {"workspace": w, "title": text, "content": text}),
                (
                    "append_events",
                    {"workspace": w, "sessionId": sid, "events": [{"type": "user_message", "text": text}]},
                ),
            ],
        )
        if begun_after:
            after += 1
            leaks += [m for m, r in (("build_context", pack), ("read_state", state)) if "xyzzy" in str(r)]
            leaks += [
                m
                for m, r in (("add_entry", added), ("append_events", appended))
                if not isinstance(r, RemoteError)
            ]


async def test_nothing_begun_after_incognito_was_acknowledged_reads_or_writes(own: DaemonProcess) -> None:
    """Clients build context, read state, add entries and append events while incognito
    is switched on: every call sent after the switch was acknowledged returns no memory
    and writes nothing (incognito_blocked), whatever ran before it."""
    d = own
    w = str(d.workspace)
    d.call("set_settings", {"workspace": w, "agentReadEnabled": True})
    d.call("add_entry", {"workspace": w, "title": "Vault", "content": "the vault code is xyzzy-42"})
    sid = d.call("open_session", {"workspace": w})["sessionId"]
    for _ in range(3):
        d.call("set_settings", {"workspace": w, "incognito": False})
        switched = anyio.Event()
        leaks: list[str] = []
        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(incognito_client, d, sid, i, switched, leaks)
            await at_once(d, [("set_settings", {"workspace": w, "incognito": True})])
            switched.set()
        assert leaks == []

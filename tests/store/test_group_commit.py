"""Group commit: concurrent appends share one transaction; each caller sees what it would alone.

A group is made deterministic by holding the ledger's write transaction while the
appends queue up behind it: released, the head of the queue commits them all at once.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from makad.core.chain import MAX_APPEND_EVENTS
from makad.core.types import AppendResult, EventInput
from makad.errors import Conflict, InvalidParams, IOFailure, NotFound, TooLarge
from makad.store.ledger import Ledger, group_commit, sessions
from makad.store.ledger.sessions import AppendCall


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    led = Ledger(tmp_path / "l.db")
    try:
        yield led
    finally:
        led.close()


def one(text: str) -> list[EventInput]:
    return [EventInput(type="user_message", text=text)]


Outcome = AppendResult | BaseException


def queued_together(ledger: Ledger, calls: list[Callable[[], AppendResult]]) -> list[Outcome]:
    """Run ``calls`` in threads while the write lock is held, release it once all of them
    are queued (the first waits for the lock, the rest in the queue), and return each
    call's result or exception."""
    outcomes: list[Outcome | None] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            outcomes[index] = calls[index]()
        except BaseException as exc:  # compared by the test
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    with ledger.transaction():
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 10
        while len(ledger._append_queue) < len(calls):  # every call waiting its turn
            assert time.monotonic() < deadline, "the appends never queued"
            time.sleep(0.001)
    for thread in threads:
        thread.join(timeout=10)
    assert all(o is not None for o in outcomes)
    return [o for o in outcomes if o is not None]


def appender(ledger: Ledger, sid: str, text: str, **kw: Any) -> Callable[[], AppendResult]:
    return lambda: ledger.append_events(sid, one(text), **kw)


def test_appends_queued_together_share_one_commit(ledger: Ledger) -> None:
    """Eight appends to eight sessions queued behind a write: one commit, each its own seq 1."""
    sids = [ledger.open_session().session_id for _ in range(8)]
    commits = ledger.append_commits
    outcomes = queued_together(ledger, [appender(ledger, sid, f"t{i}") for i, sid in enumerate(sids)])
    assert outcomes == [AppendResult(first_seq=1, last_seq=1, redactions=0)] * 8
    assert ledger.append_commits == commits + 1
    for i, sid in enumerate(sids):
        assert [e.text for e in ledger.read_events(sid)] == [f"t{i}"]
        assert ledger.verify_chain(sid) == (True, None)


def test_a_refused_append_leaves_the_rest_of_its_group(ledger: Ledger) -> None:
    """A closed session, an unknown one and a stale expectedSeq are refused inside the group;
    nothing of them is stored, and the appends around them commit."""
    good = ledger.open_session().session_id
    closed = ledger.open_session().session_id
    ledger.close_session(closed)
    ledger.append_events(good, one("first"))
    outcomes = queued_together(
        ledger,
        [
            appender(ledger, good, "a"),
            appender(ledger, closed, "never"),
            appender(ledger, "s-missing", "never"),
            appender(ledger, good, "stale", expected_seq=0),
            appender(ledger, good, "b", expected_seq=2),
        ],
    )
    assert outcomes[0] == AppendResult(first_seq=2, last_seq=2, redactions=0)
    assert isinstance(outcomes[1], Conflict) and outcomes[1].details["reason"] == "closed"
    assert isinstance(outcomes[2], NotFound)
    assert isinstance(outcomes[3], Conflict) and outcomes[3].details["currentSeq"] == 2
    assert outcomes[4] == AppendResult(first_seq=3, last_seq=3, redactions=0)
    assert [e.text for e in ledger.read_events(good)] == ["first", "a", "b"]
    assert ledger.read_events(closed) == []
    assert ledger.verify_chain(good) == (True, None)


def test_same_expected_seq_in_one_group_has_exactly_one_winner(ledger: Ledger) -> None:
    """Eight appends expecting the same seq, committed together: one wins, seven get
    conflict naming the winner's seq."""
    sid = ledger.open_session().session_id
    ledger.append_events(sid, one("zero"))
    outcomes = queued_together(ledger, [appender(ledger, sid, f"w{i}", expected_seq=1) for i in range(8)])
    wins = [o for o in outcomes if isinstance(o, AppendResult)]
    assert wins == [AppendResult(first_seq=2, last_seq=2, redactions=0)]
    conflicts = [o for o in outcomes if isinstance(o, Conflict)]
    assert len(conflicts) == 7 and all(c.details["currentSeq"] == 2 for c in conflicts)
    assert len(ledger.read_events(sid)) == 2


def test_expected_seq_stays_exact_under_free_running_concurrency(ledger: Ledger) -> None:
    """Rounds of eight threads released at once with the session's current seq: each round
    has exactly one winner, and the session grows by one event a round."""
    sid = ledger.open_session().session_id
    for round_ in range(15):
        barrier = threading.Barrier(8)
        wins: list[int] = []
        conflicts: list[int] = []

        def race(
            i: int,
            expected: int = round_,
            barrier: threading.Barrier = barrier,
            wins: list[int] = wins,
            conflicts: list[int] = conflicts,
        ) -> None:
            barrier.wait()
            try:
                wins.append(
                    ledger.append_events(sid, one(f"r{expected}-{i}"), expected_seq=expected).last_seq
                )
            except Conflict as exc:
                conflicts.append(exc.details["currentSeq"])

        threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)
        assert wins == [round_ + 1] and conflicts == [round_ + 1] * 7
    assert ledger.verify_chain(sid) == (True, None)


def test_concurrent_sessions_keep_their_order_and_share_commits(ledger: Ledger) -> None:
    """Sixteen threads each appending 25 events one by one to its own session, and two
    more sharing a session: every session in call order, chains valid, fewer commits
    than calls."""
    own = [ledger.open_session().session_id for _ in range(16)]
    shared = ledger.open_session().session_id
    commits, committed = ledger.append_commits, ledger.appends_committed
    shared_seqs: dict[int, list[int]] = {0: [], 1: []}

    def writer(i: int) -> None:
        for n in range(25):
            ledger.append_events(own[i], one(f"{i}-{n}"))

    def sharer(i: int) -> None:
        for n in range(25):
            shared_seqs[i].append(ledger.append_events(shared, one(f"s{i}-{n}")).first_seq)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(16)]
    threads += [threading.Thread(target=sharer, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    calls = 18 * 25
    for i, sid in enumerate(own):
        assert [e.text for e in ledger.read_events(sid)] == [f"{i}-{n}" for n in range(25)]
        assert ledger.verify_chain(sid) == (True, None)
    events = {e.seq: e.text for e in ledger.read_events(shared)}
    assert sorted(events) == list(range(1, 51))
    for i, seqs in shared_seqs.items():  # each sharer's events in its own call order
        assert seqs == sorted(seqs) and [events[s] for s in seqs] == [f"s{i}-{n}" for n in range(25)]
    assert ledger.verify_chain(shared) == (True, None)
    assert ledger.appends_committed - committed == calls
    assert ledger.append_commits - commits < calls


def test_append_many_answers_each_call_as_it_would_be_answered_alone(ledger: Ledger) -> None:
    """One batch mixing good appends, refusals of every kind, a request id sent twice and
    the same expectedSeq twice: each call gets its own answer, in order, and only the
    accepted ones are stored, in one commit."""
    good, other = ledger.open_session().session_id, ledger.open_session().session_id
    closed = ledger.open_session().session_id
    ledger.close_session(closed)
    commits = ledger.append_commits
    outcomes = ledger.append_many(
        [
            AppendCall(good, one("a")),
            AppendCall(closed, one("never")),
            AppendCall("s-missing", one("never")),
            AppendCall(good, []),
            AppendCall(good, one("x") * (MAX_APPEND_EVENTS + 1)),
            AppendCall(other, one("once"), request_id="r1"),
            AppendCall(other, one("once again"), request_id="r1"),
            AppendCall(good, one("b"), expected_seq=1),
            AppendCall(good, one("late"), expected_seq=1),
        ]
    )
    assert outcomes[0] == AppendResult(first_seq=1, last_seq=1, redactions=0)
    assert isinstance(outcomes[1], Conflict) and outcomes[1].details["reason"] == "closed"
    assert isinstance(outcomes[2], NotFound)
    assert isinstance(outcomes[3], InvalidParams)
    assert isinstance(outcomes[4], TooLarge)
    assert outcomes[5] == outcomes[6] == AppendResult(first_seq=1, last_seq=1, redactions=0)
    assert outcomes[7] == AppendResult(first_seq=2, last_seq=2, redactions=0)
    assert isinstance(outcomes[8], Conflict) and outcomes[8].details["currentSeq"] == 2
    assert [e.text for e in ledger.read_events(good)] == ["a", "b"]
    assert [e.text for e in ledger.read_events(other)] == ["once"]
    assert ledger.read_events(closed) == []
    assert ledger.append_commits == commits + 1
    assert ledger.verify_chain(good) == (True, None) and ledger.verify_chain(other) == (True, None)


def test_a_group_indexes_its_stored_appends_and_nothing_of_a_refused_one(ledger: Ledger) -> None:
    """The search bodies of a group are indexed once, after its savepoints: every stored
    append is found by its own word, a refused append's word by nothing, and the full-text
    index passes SQLite's integrity check."""
    sids = [ledger.open_session().session_id for _ in range(6)]
    words = [f"zebrafish{chr(97 + i)}" for i in range(6)]
    calls = [AppendCall(sid, one(f"{word} swims")) for sid, word in zip(sids, words, strict=True)]
    calls[3] = AppendCall(sids[3], one(f"{words[3]} swims"), expected_seq=7)  # stale: refused
    outcomes = ledger.append_many(calls)
    assert isinstance(outcomes[3], Conflict)
    for i, word in enumerate(words):
        hits = [h.event.session_id for h in ledger.search_history(word)]
        assert hits == ([] if i == 3 else [sids[i]]), word
    with ledger.transaction() as conn:
        conn.execute("INSERT INTO events_fts (events_fts) VALUES ('integrity-check')")


def test_a_batch_queues_with_threads_appending_alone(ledger: Ledger) -> None:
    """A batch queued behind a write alongside lone appends from threads: all of them share
    one commit and each session stays in call order."""
    sids = [ledger.open_session().session_id for _ in range(3)]
    batch = [AppendCall(sids[0], one("b0")), AppendCall(sids[1], one("b1")), AppendCall(sids[0], one("b2"))]
    commits = ledger.append_commits
    outcomes = queued_together(
        ledger, [appender(ledger, sids[2], "alone"), lambda: ledger.append_many(batch)[2]]
    )
    assert outcomes == [
        AppendResult(first_seq=1, last_seq=1, redactions=0),
        AppendResult(first_seq=2, last_seq=2, redactions=0),
    ]
    assert [e.text for e in ledger.read_events(sids[0])] == ["b0", "b2"]
    assert ledger.append_commits == commits + 1


@pytest.mark.parametrize("where", ["chain_events", "index_bodies"])
def test_a_failure_inside_a_group_runs_each_append_alone(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A SQLite error in the middle of a group (while its appends are chained, or once
    their events and heads are written) rolls it all back; each append then runs alone and lands
    exactly once (the error is injected: a real one cannot be timed)."""
    sids = [ledger.open_session().session_id for _ in range(4)]
    module = sessions if where == "chain_events" else group_commit  # where each is called
    real = getattr(module, where)
    failed: list[str] = []

    def flaky(*args: Any) -> Any:
        if not failed and (where == "index_bodies" or args[0].session_id == sids[2]):
            failed.append(where)
            raise sqlite3.OperationalError("disk I/O error")
        return real(*args)

    monkeypatch.setattr(module, where, flaky)
    outcomes = queued_together(ledger, [appender(ledger, sid, f"t{i}") for i, sid in enumerate(sids)])
    assert failed == [where]
    assert outcomes == [AppendResult(first_seq=1, last_seq=1, redactions=0)] * 4
    for i, sid in enumerate(sids):
        assert [e.text for e in ledger.read_events(sid)] == [f"t{i}"]
        assert ledger.verify_chain(sid) == (True, None)
    assert [h.event.session_id for h in ledger.search_history("t2")] == [sids[2]]


def test_a_group_that_cannot_write_answers_every_caller(tmp_path: Path) -> None:
    """The ledger file removed while appends wait: each is refused (ledger_missing), none
    hangs, and nothing is acknowledged."""
    path = tmp_path / "l.db"
    led = Ledger(path)
    try:
        sids = [led.open_session().session_id for _ in range(4)]
        calls = [appender(led, sid, "x") for sid in sids]
        outcomes: list[Outcome] = []
        threads = [threading.Thread(target=lambda c=c: outcomes.append(_outcome(c))) for c in calls]
        with led.transaction():
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + 10
            while len(led._append_queue) < len(calls):
                assert time.monotonic() < deadline
                time.sleep(0.001)
            path.unlink()
        for thread in threads:
            thread.join(timeout=10)
        assert len(outcomes) == 4
        assert all(isinstance(o, IOFailure) and o.details["reason"] == "ledger_missing" for o in outcomes)
    finally:
        led.close()


def _outcome(call: Callable[[], AppendResult]) -> Outcome:
    try:
        return call()
    except BaseException as exc:  # compared by the test
        return exc


_GROUP_WRITER = """
import sys, threading
from pathlib import Path
import structlog
structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout is the acks
from makad.faults import Faults
from makad.store.ledger import Ledger
from makad.core.types import EventInput
from makad.store.ledger.sessions import AppendCall
led = Ledger(Path(sys.argv[1]), faults=Faults(point=sys.argv[2]))
sids = [led.open_session().session_id for _ in range(8)]
out = threading.Lock()
for sid in sids:  # alone, so acknowledged before any group: the kill comes after these
    (r,) = led.append_many([AppendCall(sid, [EventInput(type="note", text=f"{sid}-0")])])
    sys.stdout.write(f"{sid} {r.first_seq}\\n")
sys.stdout.flush()
def write(sid):
    for n in range(1, 100_000):
        r = led.append_events(sid, [EventInput(type="note", text=f"{sid}-{n}")])
        with out:
            sys.stdout.write(f"{sid} {r.first_seq}\\n")
            sys.stdout.flush()
def write_batches(pair):  # as the service's append queue does: one call, many appends
    for n in range(1, 100_000):
        calls = [AppendCall(sid, [EventInput(type="note", text=f"{sid}-{n}")]) for sid in pair]
        results = led.append_many(calls)
        with out:
            for sid, r in zip(pair, results):
                sys.stdout.write(f"{sid} {r.first_seq}\\n")
            sys.stdout.flush()
if sys.argv[3] == "batches":
    threads = [threading.Thread(target=write_batches, args=(sids[i:i + 2],)) for i in range(0, 8, 2)]
else:
    threads = [threading.Thread(target=write, args=(sid,)) for sid in sids]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


@pytest.mark.parametrize("writers", ["threads", "batches"])
@pytest.mark.parametrize("point", ["append_group_before_commit", "append_group_after_commit"])
def test_acknowledged_appends_survive_a_kill_inside_a_group(tmp_path: Path, point: str, writers: str) -> None:
    """A process killed at a fault point inside a group commit (8 threads appending one
    call at a time, or 4 threads appending two sessions a call with ``append_many``): every
    append that returned is stored at its seq, chains verify; killed after the COMMIT, the
    unanswered group (two or more) is stored too."""
    path = tmp_path / "l.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        [sys.executable, "-c", _GROUP_WRITER, str(path), point, writers],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == -9, proc.stderr  # killed by the fault point, not an exit
    complete = proc.stdout.split("\n")[:-1]  # the kill may cut the last line short
    acked = [(sid, int(seq)) for sid, seq in (line.split() for line in complete)]
    led = Ledger(path)
    try:
        stored = 0
        for sid in {info.session_id for info in led.list_sessions()}:
            events = led.read_events(sid)
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            assert [e.text for e in events] == [f"{sid}-{n}" for n in range(len(events))]
            assert led.verify_chain(sid) == (True, None)
            stored += len(events)
        for sid, seq in acked:
            assert len(led.read_events(sid, after_seq=seq - 1, limit=1)) == 1, (sid, seq)
        assert len(acked) >= 8
        assert stored >= len(acked) + (2 if point == "append_group_after_commit" else 0)
    finally:
        led.close()


_TRICKY_TEXTS = [
    'quotes " and \\ backslashes \\u0041',
    "controls \t\n\r\x01\x1f\x7f and separators \u2028\u2029",
    "non-ASCII: é ß 東京大学 🔑 \ufeff",
    "",
]


@pytest.mark.parametrize("texts", [_TRICKY_TEXTS, ["with a NUL \x00 inside", "a literal \\u0000"]])
def test_a_group_stores_every_text_and_number_exactly(ledger: Ledger, texts: list[str]) -> None:
    """Texts with quotes, backslashes, control characters, NUL, non-ASCII and an empty
    one, with meta and tool fields and 64-bit numbers, appended in one group: each is read back as written, with the column types a lone append
    writes, chains verify, and each is found by search."""
    texts = [*texts, "zebrafishq"]
    sids = [ledger.open_session().session_id for _ in texts]
    edge = (1 << 63) - 1
    calls = [
        AppendCall(
            sid,
            [
                EventInput(
                    type="tool_call",
                    text=text,
                    ts=edge if i == 0 else -edge if i == 1 else None,
                    tool_call_id=f"call-{text[:4]}",
                    tool_name=f"tool {text[-3:]}",
                    meta={f"k{text[:3]}": text, "plain": "v"},
                    tokens=edge if i == 0 else None,
                )
            ],
        )
        for i, (sid, text) in enumerate(zip(sids, texts, strict=True))
    ]
    outcomes = ledger.append_many(calls)
    assert outcomes == [AppendResult(first_seq=1, last_seq=1, redactions=0)] * len(calls)
    for call, sid in zip(calls, sids, strict=True):
        (stored,) = ledger.read_events(sid)
        sent = call.events[0]
        assert (stored.text, stored.tool_call_id, stored.tool_name, stored.meta) == (
            sent.text,
            sent.tool_call_id,
            sent.tool_name,
            sent.meta,
        )
        assert sent.ts is None or stored.ts == sent.ts
        assert sent.tokens is None or stored.tokens == sent.tokens
        assert ledger.verify_chain(sid) == (True, None)
    with ledger.snapshot() as conn:
        types = conn.execute(
            "SELECT DISTINCT typeof(id), typeof(seq), typeof(ts), typeof(tokens), typeof(text) FROM events"
        ).fetchall()
    assert types == [("integer", "integer", "integer", "integer", "text")]
    assert [h.event.session_id for h in ledger.search_history("zebrafishq")] == [sids[-1]]


def test_a_number_sqlite_cannot_hold_fails_only_its_own_append(ledger: Ledger) -> None:
    """A ts past 64 bits inside a group: that call gets the error a lone append gets
    (nothing of it stored), the others of the group are stored."""
    sids = [ledger.open_session().session_id for _ in range(3)]
    calls = [AppendCall(sid, one(f"t{i}")) for i, sid in enumerate(sids)]
    calls[1] = AppendCall(sids[1], [EventInput(type="note", text="far future", ts=1 << 63)])
    outcomes = ledger.append_many(calls)
    assert isinstance(outcomes[1], OverflowError)
    assert outcomes[0] == outcomes[2] == AppendResult(first_seq=1, last_seq=1, redactions=0)
    assert ledger.read_events(sids[1]) == []
    assert [e.text for e in ledger.read_events(sids[2])] == ["t2"]

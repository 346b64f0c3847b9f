"""A workspace whose semantic indexing keeps failing, in a real makad process: it is
retried with a doubling wait, the traceback is logged once, status says so, and it is
released once idle like any other.

Needs numpy and the ``wordllama`` package (a static model: it loads in well under a second);
skipped, saying so, without them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from makad.service.embeddings import INDEX_RETRY_MAX_S, INDEX_RETRY_S, retry_delay
from tests.e2e.test_idle_workspaces import CAP, folder, wait_released
from tests.support import DaemonProcess

# How long the test waits for the indexer to reach a state before giving up (not a timing
# assertion: it fails only if the state never comes).
WAIT_S = 60.0
REFUSE = "CREATE TRIGGER refuse_vectors BEFORE INSERT ON event_vectors BEGIN SELECT RAISE(ABORT, 'vectors refused'); END"


@pytest.fixture
def semantic_daemon(short_tmp: Path) -> Iterator[DaemonProcess]:
    if importlib.util.find_spec("numpy") is None or importlib.util.find_spec("wordllama") is None:
        pytest.skip("needs numpy and wordllama: pip install numpy; pip install --no-deps wordllama")
    d = DaemonProcess(short_tmp, env={"MAKAD_EMBEDDING_MODEL": "wordllama"})
    d.start()
    try:
        yield d
    finally:
        d.stop()


def semantic_status(d: DaemonProcess) -> dict[str, Any]:
    status: dict[str, Any] = d.call("status")["semantic"]
    return status


def wait_for(d: DaemonProcess, check: Any) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        status = semantic_status(d)
        if check(status):
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.1)


def append(d: DaemonProcess, session: str, text: str) -> None:
    events = [{"type": "user_message", "text": text}]
    d.call("append_events", {"workspace": str(d.workspace), "sessionId": session, "events": events})


def log_records(d: DaemonProcess, event: str) -> list[dict[str, Any]]:
    records = []
    for line in d.log_text().splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and record.get("event") == event:
                records.append(record)
    return records


def test_retry_delay_doubles_up_to_the_cap() -> None:
    """The wait after n failures in a row is INDEX_RETRY_S · 2^(n-1), at most INDEX_RETRY_MAX_S."""
    assert [retry_delay(n) for n in (1, 2, 3)] == [INDEX_RETRY_S, 2 * INDEX_RETRY_S, 4 * INDEX_RETRY_S]
    assert retry_delay(10) == retry_delay(10_000) == INDEX_RETRY_MAX_S


def test_failing_indexing_backs_off_logs_once_and_shows_in_status(semantic_daemon: DaemonProcess) -> None:
    """Vector writes refused by the ledger: each failure doubles the wait, the traceback is
    logged for the first only (a one-line warning after), status.semantic lists the workspace
    with its error and says so in its message; once writes work again the workspace
    catches up and the failure is gone from status."""
    d = semantic_daemon
    ws = str(d.workspace)
    session = d.call("open_session", {"workspace": ws})["sessionId"]
    append(d, session, "We walked along the river.")
    wait_for(d, lambda s: s["state"] == "ready" and s["caughtUp"])
    (ledger,) = (d.data_dir / "workspaces").rglob("ledger.sqlite3")
    with contextlib.closing(sqlite3.connect(ledger)) as conn, conn:
        conn.execute(REFUSE)
    append(d, session, "The bridge was closed for repairs.")

    status = wait_for(d, lambda s: any(f["attempts"] >= 2 for f in s["indexFailures"]))
    (failure,) = status["indexFailures"]
    assert failure["workspace"] == ws and "vectors refused" in failure["error"]
    assert failure["retryAfterMs"] == round(retry_delay(failure["attempts"]) * 1000)
    assert status["state"] == "ready" and not status["caughtUp"]
    assert ws in status["message"] and "vectors refused" in status["message"]
    first = log_records(d, "semantic_index_failed")
    again = log_records(d, "semantic_index_still_failing")
    assert len(first) == 1 and "vectors refused" in json.dumps(first[0]["exception"])
    assert len(again) == failure["attempts"] - 1 >= 1
    assert all("exception" not in r and "vectors refused" in r["error"] for r in again)

    with contextlib.closing(sqlite3.connect(ledger)) as conn, conn:
        conn.execute("DROP TRIGGER refuse_vectors")
    status = wait_for(d, lambda s: s["caughtUp"])
    assert status["indexFailures"] == [] and status["message"] is None
    assert status["eventsIndexed"] == 2
    assert len(log_records(d, "semantic_index_recovered")) == 1


@pytest.fixture
def releasing_semantic(short_tmp: Path) -> Iterator[DaemonProcess]:
    """A wordllama daemon keeping two ledgers open that releases a workspace once idle."""
    if importlib.util.find_spec("numpy") is None or importlib.util.find_spec("wordllama") is None:
        pytest.skip("needs numpy and wordllama: pip install numpy; pip install --no-deps wordllama")
    d = DaemonProcess(
        short_tmp,
        env={
            "MAKAD_EMBEDDING_MODEL": "wordllama",
            "MAKAD_MAX_OPEN_WORKSPACES": str(CAP),
            "MAKAD_WORKSPACE_RELEASE_MS": "1",
            # The attention keeper reads a session once it is idle this long (it is kept meanwhile).
            "MAKAD_BEHAVIOR_IDLE_MS": "2000",
        },
    )
    d.start()
    try:
        yield d
    finally:
        d.stop()


def test_a_workspace_whose_indexing_keeps_failing_is_still_released(
    releasing_semantic: DaemonProcess,
) -> None:
    """A workspace whose vector writes keep failing is released once idle like any other
    (status stops listing its failure); once writes work again, its next call indexes what
    was left, the vectors stored before loaded from its ledger."""
    d = releasing_semantic
    ws = folder(d)
    d.call("add_entry", {"workspace": ws, "title": "River", "content": "We walked along the river."})
    session = d.call("open_session", {"workspace": ws})["sessionId"]
    events = [{"type": "user_message", "text": "We walked along the river."}]
    d.call("append_events", {"workspace": ws, "sessionId": session, "events": events})
    wait_for(d, lambda s: s["state"] == "ready" and s["caughtUp"])
    (ledger,) = (d.data_dir / "workspaces").rglob("ledger.sqlite3")
    with contextlib.closing(sqlite3.connect(ledger)) as conn, conn:
        conn.execute(REFUSE)
    events = [{"type": "user_message", "text": "The bridge was closed for repairs."}]
    d.call("append_events", {"workspace": ws, "sessionId": session, "events": events})
    wait_for(d, lambda s: [f["workspace"] for f in s["indexFailures"]] == [ws])

    wait_released(d, ws, "released while its indexing fails")

    assert semantic_status(d)["indexFailures"] == []
    with contextlib.closing(sqlite3.connect(ledger)) as conn, conn:
        conn.execute("DROP TRIGGER refuse_vectors")
    d.call("read_state", {"workspace": ws})
    status = wait_for(d, lambda s: s["caughtUp"])
    assert status["indexFailures"] == [] and status["eventsIndexed"] == 2

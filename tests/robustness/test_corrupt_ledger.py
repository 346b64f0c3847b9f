"""A corrupt ledger never makes MEMORY.md unusable: the daemon moves it aside (kept), starts
a fresh one, says so in read_state and status, and keeps serving."""

from __future__ import annotations

import itertools
import random
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from maka.errors import RemoteError
from makad.core.types import EventInput
from makad.store.ledger import Ledger
from makad.store.ledger.recovery import REVISION_KEY
from makad.store.ledger.schema import SCHEMA_VERSION
from makad.store.workspaces import workspace_id
from tests.support import DaemonProcess, ping_ok

MEMORY = "# Maka Memory\n\n## Build\nuse make\n\n## Style\nfour spaces\n"
_names = itertools.count()


def prepare(data_root: Path, parent: Path) -> tuple[Path, Path]:
    """A workspace the daemon has not opened yet, as a previous run would have left it:
    MEMORY.md and a data directory whose ledger has switches on and history."""
    ws = parent / f"w{next(_names)}"
    (ws / "memory").mkdir(parents=True, mode=0o700)
    (ws / "memory" / "MEMORY.md").write_text(MEMORY)
    data = data_root / "workspaces" / workspace_id(ws.resolve())
    ledger = Ledger(data / "ledger.sqlite3")
    ledger.put_settings_json({"agentReadEnabled": True, "historyRecallEnabled": True, REVISION_KEY: 12})
    ledger.open_session("s")
    ledger.append_events(
        "s", [EventInput(type="user_message", text=f"turn {i} on the build") for i in range(300)]
    )
    ledger.close()
    return ws, data / "ledger.sqlite3"


def warning_kinds(found: list[dict[str, Any]], workspace: str | None = None) -> list[str]:
    return [w["kind"] for w in found if workspace is None or w.get("workspace") == workspace]


def moved_aside(ledger: Path) -> list[Path]:
    return sorted(
        p for p in ledger.parent.iterdir() if ".corrupt-" in p.name and not p.name.endswith(("-wal", "-shm"))
    )


def set_aside(ledger: Path) -> list[Path]:
    """The ledger files set aside as damaged or as a newer makad's (a flip in the header's
    schema version reads as one)."""
    newer = [
        p for p in ledger.parent.iterdir() if ".newer-" in p.name and not p.name.endswith(("-wal", "-shm"))
    ]
    return sorted([*moved_aside(ledger), *newer])


def test_a_garbage_header_is_reset_and_reported(daemon: DaemonProcess) -> None:
    """A ledger whose header is garbage: read_state still serves MEMORY.md, warns
    ledger_reset, the switches are back at their defaults (they lived in the ledger), status
    lists the reset, the damaged file is kept, writes work, and a restart is clean."""
    ws, ledger = prepare(daemon.data_dir, daemon.root)
    damaged = b"NOT A DATABASE" * 8 + ledger.read_bytes()[112:]
    ledger.write_bytes(damaged)
    w = str(ws)
    state = daemon.call("read_state", {"workspace": w, "includeEntries": True})
    assert state["status"] == "ok" and [e["title"] for e in state["entries"]] == ["Build", "Style"]
    assert warning_kinds(state["warnings"]) == ["ledger_reset"]
    assert state["agentReadEnabled"] is False and state["revision"] >= 1
    assert warning_kinds(daemon.call("status")["warnings"], w) == ["ledger_reset"]
    [kept] = moved_aside(ledger)
    assert kept.read_bytes() == damaged
    daemon.call("add_entry", {"workspace": w, "title": "After", "content": "still writable"})
    assert daemon.call("list_sessions", {"workspace": w})["sessions"] == []
    daemon.restart()
    assert daemon.call("read_state", {"workspace": w})["entryCount"] == 3


def test_a_ledger_cut_short_while_running_is_reset_at_the_first_error(daemon: DaemonProcess) -> None:
    """The ledger file truncated under the running daemon: the first call that reaches the
    damage resets it and is answered on the fresh ledger (the session is gone: not_found),
    MEMORY.md is untouched, and read_state reports the reset."""
    w = str(daemon.workspace)
    daemon.call("add_entry", {"workspace": w, "title": "Keep", "content": "me"})
    sid = daemon.call("open_session", {"workspace": w})["sessionId"]
    daemon.call(
        "append_events",
        {
            "workspace": w,
            "sessionId": sid,
            "events": [{"type": "user_message", "text": f"event {i}"} for i in range(2000)],
        },
    )
    daemon.restart()  # a clean stop checkpoints the WAL into the database file
    daemon.call("read_events", {"workspace": w, "sessionId": sid, "limit": 1})
    data = daemon.data_dir / "workspaces" / workspace_id(daemon.workspace.resolve())
    ledger = data / "ledger.sqlite3"
    memory_before = (daemon.workspace / "memory" / "MEMORY.md").read_bytes()
    ledger.write_bytes(ledger.read_bytes()[: ledger.stat().st_size // 2])
    try:
        daemon.call("read_events", {"workspace": w, "sessionId": sid, "afterSeq": 1990})
        raise AssertionError("the session survived a cut ledger")
    except RemoteError as exc:
        assert exc.kind == "not_found"
    state = daemon.call("read_state", {"workspace": w})
    assert state["status"] == "ok" and warning_kinds(state["warnings"]) == ["ledger_reset"]
    assert (daemon.workspace / "memory" / "MEMORY.md").read_bytes() == memory_before
    assert moved_aside(ledger)
    assert daemon.proc is not None and daemon.proc.poll() is None


def damage(data: bytes, how: str, rng: random.Random, flips: int) -> bytes:
    if how == "truncate":
        return data[: rng.randrange(len(data))]
    buf = bytearray(data)
    span = len(buf) if how == "flip" else min(len(buf), 4096)
    for _ in range(flips):
        buf[rng.randrange(span)] ^= 1 << rng.randrange(8)
    return bytes(buf)


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get_settings", {}),
    ("list_sessions", {}),
    ("read_events", {"sessionId": "s", "afterSeq": 250}),
    ("search_history", {"query": "build"}),
    ("retrieve", {"refs": ["event:s:1-20"]}),
    ("build_context", {"sessionId": "s", "budgetTokens": 2000, "query": "build"}),
    ("list_proposals", {}),
    ("memory_history", {"id": "x"}),
]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    how=st.sampled_from(["flip", "header", "truncate"]),
    seed=st.integers(0, 2**32),
    flips=st.integers(1, 30),
    wal=st.booleans(),
)
def test_random_damage_never_blocks_memory(
    shared_daemon: DaemonProcess, how: str, seed: int, flips: int, wal: bool
) -> None:
    """Random bit flips, a first page full of flips, or a truncation at any length (and maybe
    a WAL of random bytes): read_state serves MEMORY.md, add_entry writes it, no call is an
    internal error, a reset is reported in read_state and status with the file kept, and
    the switches are on only if the ledger was not reset."""
    d = shared_daemon
    ws, ledger = prepare(d.data_dir, d.root)
    rng = random.Random(seed)
    ledger.write_bytes(damage(ledger.read_bytes(), how, rng, flips))
    if wal:
        ledger.with_name("ledger.sqlite3-wal").write_bytes(rng.randbytes(32 * 1024))
    w = str(ws)
    state = d.call("read_state", {"workspace": w, "includeEntries": True})
    assert state["status"] == "ok" and [e["title"] for e in state["entries"]] == ["Build", "Style"]
    d.call("add_entry", {"workspace": w, "title": "New", "content": "written after the damage"})
    for method, params in CALLS:
        try:
            d.call(method, {"workspace": w, **params})
        except RemoteError as exc:
            assert exc.kind in ("not_found", "invalid_params"), (method, exc.kind, exc.data)
    state = d.call("read_state", {"workspace": w, "includeEntries": True})
    assert len(state["entries"]) == 3
    reset = "ledger_reset" in warning_kinds(state["warnings"])
    assert reset == bool(set_aside(ledger))
    assert reset == ("ledger_reset" in warning_kinds(d.call("status")["warnings"], w))
    if reset:
        assert state["agentReadEnabled"] is False
    shutil.rmtree(ws)


def test_after_all_that_the_daemon_restarts_cleanly(shared_daemon: DaemonProcess) -> None:
    """No crash loop: the daemon that saw every damaged ledger above is alive, stops cleanly
    and starts again on the same data directory, serving."""
    d = shared_daemon
    assert d.proc is not None and d.proc.poll() is None
    assert ping_ok(d.socket)
    d.restart()
    assert ping_ok(d.socket)
    assert '"request_crashed"' not in d.log_text()


def test_a_ledger_from_a_newer_makad_is_kept_unchanged_and_said_so(daemon: DaemonProcess) -> None:
    """A ledger a newer makad wrote (a schema version past this one's), as after a downgrade:
    MEMORY.md is still served, the file is kept byte for byte under a name that says it is
    newer rather than corrupt, and the warning says so — which schema, which file, and how to
    get it back."""
    ws, ledger = prepare(daemon.data_dir, daemon.root)
    conn = sqlite3.connect(ledger)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    written = ledger.read_bytes()
    state = daemon.call("read_state", {"workspace": str(ws), "includeEntries": True})
    assert [e["title"] for e in state["entries"]] == ["Build", "Style"]
    [warning] = state["warnings"]
    assert warning["kind"] == "ledger_reset"
    kept = [
        p for p in ledger.parent.iterdir() if ".newer-" in p.name and not p.name.endswith(("-wal", "-shm"))
    ]
    assert [p.read_bytes() for p in kept] == [written]
    assert moved_aside(ledger) == []
    message = warning["message"]
    assert "newer makad" in message and "corrupt" not in message
    assert f"schema {SCHEMA_VERSION + 1}" in message and f"up to {SCHEMA_VERSION}" in message
    assert kept[0].name in message and "ledger.sqlite3" in message

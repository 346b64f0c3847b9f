"""A spent disk quota (EDQUOT) is a full disk on every write path of a real daemon: the
ledger's writes (which SQLite reports as a plain I/O error), MEMORY.md and its backups,
and a restart. The quota is simulated by ``quota_shim.c`` loaded with LD_PRELOAD (it
fails the writes of files below the daemon's data and workspace folders with EDQUOT, as
the kernel does), since a real quota needs a filesystem mounted with one; skipped,
saying so, without a C compiler or on a system without LD_PRELOAD."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from maka.errors import RemoteError
from tests.support import DaemonProcess

SHIM = Path(__file__).with_name("quota_shim.c")


@pytest.fixture
def quota_daemon(short_tmp: Path) -> Iterator[tuple[DaemonProcess, Path]]:
    """A daemon whose data and workspace folders are out of quota while the flag file exists."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not sys.platform.startswith("linux") or compiler is None:
        pytest.skip("simulating a spent quota needs Linux's LD_PRELOAD and a C compiler (cc)")
    library = short_tmp / "quota_shim.so"
    built = subprocess.run(
        [compiler, "-shared", "-fPIC", "-o", str(library), str(SHIM), "-ldl"], capture_output=True, text=True
    )
    if built.returncode != 0:
        pytest.skip(f"the quota shim does not build here: {built.stderr.strip()[:200]}")
    flag = short_tmp / "quota-spent"
    d = DaemonProcess(short_tmp)
    d.extra_env = {
        "LD_PRELOAD": str(library),
        "MAKAD_TEST_QUOTA_FLAG": str(flag),
        "MAKAD_TEST_QUOTA_DIRS": f"{d.data_dir}:{d.workspace}",
    }
    d.start()
    try:
        yield d, flag
    finally:
        d.stop()


def refused(d: DaemonProcess, method: str, params: dict[str, object]) -> dict[str, object]:
    with pytest.raises(RemoteError) as info:
        d.call(method, params)
    assert info.value.kind == "io_error", info.value
    return info.value.data


def test_a_spent_quota_is_disk_full_on_every_write_path(quota_daemon: tuple[DaemonProcess, Path]) -> None:
    """With the quota spent, a ledger write (append, settings, a new session) is io_error
    disk_full naming EDQUOT, as a memory file write is, with MEMORY.md unchanged;
    status warns disk_full naming EDQUOT; build_context still answers (not_recorded), and
    everything works once room is back."""
    d, flag = quota_daemon
    ws = str(d.workspace)
    d.call("add_entry", {"workspace": ws, "title": "Deploys", "content": "We deploy on Fridays."})
    session = d.call("open_session", {"workspace": ws})["sessionId"]
    memory = (d.workspace / "memory" / "MEMORY.md").read_bytes()
    event = {"type": "user_message", "text": "Where do we deploy?"}
    flag.touch()

    appended = refused(d, "append_events", {"workspace": ws, "sessionId": session, "events": [event]})
    settings = refused(d, "set_settings", {"workspace": ws, "agentReadEnabled": True})
    opened = refused(d, "open_session", {"workspace": ws})
    added = refused(d, "add_entry", {"workspace": ws, "title": "More", "content": "Another fact."})
    pack = d.call("build_context", {"workspace": ws, "sessionId": session, "budgetTokens": 500})

    warned = [(w["kind"], "EDQUOT" in w["message"]) for w in d.call("status")["warnings"]]

    for data in (appended, settings, opened, added):
        assert data["reason"] == "disk_full" and data["errno"] == "EDQUOT", data
    assert warned == [("disk_full", True)]
    assert (d.workspace / "memory" / "MEMORY.md").read_bytes() == memory
    assert "not_recorded" in [w["kind"] for w in pack["warnings"]]
    flag.unlink()
    assert d.call("append_events", {"workspace": ws, "sessionId": session, "events": [event]})["lastSeq"] == 1


def test_a_restart_with_the_quota_spent_reads_the_ledger_read_only(
    quota_daemon: tuple[DaemonProcess, Path],
) -> None:
    """Restarted with the quota spent, a workspace's ledger opens read-only as on a full
    disk (read_state warns ledger_read_only, a write is disk_full), and takes writes again
    once room is back."""
    d, flag = quota_daemon
    ws = str(d.workspace)
    d.call("add_entry", {"workspace": ws, "title": "Deploys", "content": "We deploy on Fridays."})
    session = d.call("open_session", {"workspace": ws})["sessionId"]
    d.stop()
    flag.touch()
    d.start()

    warnings = [w["kind"] for w in d.call("read_state", {"workspace": ws})["warnings"]]
    event = {"type": "user_message", "text": "Still there?"}
    appended = refused(d, "append_events", {"workspace": ws, "sessionId": session, "events": [event]})

    assert "ledger_read_only" in warnings
    assert appended["reason"] == "disk_full"
    flag.unlink()
    assert d.call("append_events", {"workspace": ws, "sessionId": session, "events": [event]})["lastSeq"] == 1


def _saved_with_quota_spent(d: DaemonProcess, flag: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the entry added, read_state's answer) once the user saved an edit of it while no
    ledger write gets through (the data directory's quota spent, the user's folder not)."""
    ws = str(d.workspace)
    added = d.call("add_entry", {"workspace": ws, "title": "Deploys", "content": "We deploy on Fridays."})
    d.stop()
    d.extra_env["MAKAD_TEST_QUOTA_DIRS"] = str(d.data_dir)
    d.start()
    d.call("read_state", {"workspace": ws})
    flag.touch()
    path = d.workspace / "memory" / "MEMORY.md"
    saved = path.with_name("MEMORY.md.tmp")  # saved as editors do: a new file renamed over it
    saved.write_text(path.read_text().replace("Fridays", "Tuesdays"))
    saved.replace(path)
    state = d.call("read_state", {"workspace": ws})
    assert "Tuesdays" in state["content"] and state["revision"] > added["revision"]
    return added, state


def _last_step(d: DaemonProcess, entry_id: str) -> tuple[str, str | None]:
    history = d.call("memory_history", {"workspace": str(d.workspace), "id": entry_id})
    step = history["events"][-1]
    return step["actor"], (step["data"] or {}).get("via")


def test_a_users_edit_taken_in_with_the_quota_spent_is_recorded_once_room_is_back(
    quota_daemon: tuple[DaemonProcess, Path],
) -> None:
    """The user saves MEMORY.md while no ledger write gets through: reads serve the save at
    a new revision, and its lineage step and that revision are written with the ledger's
    next write once room is back (here a session opened), no restart."""
    d, flag = quota_daemon
    ws = str(d.workspace)
    added, state = _saved_with_quota_spent(d, flag)
    refused(d, "open_session", {"workspace": ws})
    flag.unlink()
    d.call("open_session", {"workspace": ws})
    d.kill9()
    d.proc = None
    d.start()

    assert _last_step(d, added["entry"]["id"]) == ("user", "external_edit")
    assert d.call("read_state", {"workspace": ws})["revision"] == state["revision"]


def test_a_users_edit_taken_in_with_the_quota_spent_is_recorded_at_a_clean_stop(
    quota_daemon: tuple[DaemonProcess, Path],
) -> None:
    """With no write after room is back, a clean stop writes what the save's take-in kept
    for the ledger's next write: the next start has its lineage step and revision."""
    d, flag = quota_daemon
    ws = str(d.workspace)
    added, state = _saved_with_quota_spent(d, flag)
    flag.unlink()
    d.stop()
    d.start()

    assert _last_step(d, added["entry"]["id"]) == ("user", "external_edit")
    assert d.call("read_state", {"workspace": ws})["revision"] == state["revision"]

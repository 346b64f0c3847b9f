"""build_context and get_attention on a full data disk: the pack and the attention state are
served from what can be read, the record of what was shown is skipped and the reply says
so (``not_recorded``), a later pack repeats what an unrecorded one showed rather than
taking it as seen, and once space is freed the next call records again. Both with the
ledger open for writing when the disk fills, and with the ledger opened read-only by a
daemon started on a full disk."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from maka.errors import RemoteError
from tests.cli.helpers import run_maka
from tests.e2e.test_attention import attention_segment, previous_session
from tests.robustness.helpers import fill_disk, remote_error, tiny_tmpfs
from tests.support import DaemonProcess


@pytest.fixture
def disk(short_tmp: Path) -> Iterator[DaemonProcess]:
    """A daemon whose data directory is a small tmpfs, with one entry."""
    yield from _on_tiny_disk(short_tmp, {})


@pytest.fixture
def deriving(short_tmp: Path) -> Iterator[DaemonProcess]:
    """As ``disk``, with sessions turned into behavior records as soon as they are idle."""
    yield from _on_tiny_disk(short_tmp, {"MAKAD_BEHAVIOR_IDLE_MS": "1"})


def _on_tiny_disk(short_tmp: Path, env: dict[str, str]) -> Iterator[DaemonProcess]:
    with tiny_tmpfs(short_tmp / "data", 2048):
        d = DaemonProcess(short_tmp, env)
        d.start()
        try:
            w = str(d.workspace)
            d.call("set_settings", {"workspace": w, "agentReadEnabled": True})
            d.call("add_entry", {"workspace": w, "title": "Build", "content": "use make to deploy"})
            yield d
        finally:
            d.stop()


def _session(d: DaemonProcess) -> str:
    w = str(d.workspace)
    sid = str(d.call("open_session", {"workspace": w})["sessionId"])
    event = {"type": "user_message", "text": "the deploy script is flaky"}
    d.call("append_events", {"workspace": w, "sessionId": sid, "events": [event]})
    return sid


def _pack(d: DaemonProcess, sid: str | None, budget: int) -> dict[str, Any]:
    params: dict[str, Any] = {"workspace": str(d.workspace), "budgetTokens": budget}
    if sid is not None:
        params["sessionId"] = sid
    return dict(d.call("build_context", params))


def _kinds(reply: dict[str, Any]) -> list[str]:
    return [w["kind"] for w in reply["warnings"]]


def _memory_text(pack: dict[str, Any]) -> str:
    return "".join(s["text"] for s in pack["segments"] if s["kind"] == "memory")


def _recorded(d: DaemonProcess, sid: str, call_id: str) -> bool:
    """Whether the call's manifest is in the ledger (else get_manifest is not_found)."""
    params = {"workspace": str(d.workspace), "sessionId": sid, "callId": call_id}
    with d.client() as client:
        try:
            client.call("get_manifest", params)
        except RemoteError as exc:
            assert exc.kind == "not_found"
            return False
    return True


def test_a_disk_filling_up_still_serves_packs_unrecorded_and_records_once_freed(
    disk: DaemonProcess,
) -> None:
    """The disk fills while the ledger is open for writing: build_context serves memory and
    history with a not_recorded warning and no manifest; a later pack shows the entry again
    (not taken as already shown); `maka context` prints the warning; a user level whose
    ledger cannot be made is left out, not a failure; MEMORY.md is untouched; once space
    is freed the next pack is recorded and the one after it counts the entry as shown."""
    d = disk
    sid = _session(d)
    memory = (d.workspace / "memory" / "MEMORY.md").read_bytes()
    filler = fill_disk(d.data_dir)
    first = _pack(d, sid, 800)
    assert "use make to deploy" in _memory_text(first)
    assert [m["content"] for m in first["messages"]] == ["the deploy script is flaky"]
    assert _kinds(first) == ["not_recorded"]
    assert "disk" in first["warnings"][0]["message"]
    assert not _recorded(d, sid, first["callId"])
    second = _pack(d, sid, 900)
    assert "use make to deploy" in _memory_text(second) and _kinds(second) == ["not_recorded"]
    unmade = remote_error(d, "read_state", {"workspace": "@user"})  # its ledger has no room
    assert (unmade.kind, unmade.data.get("reason")) == ("io_error", "disk_full")
    shown = run_maka(d, "context", "-s", sid, "-b", "700")
    assert shown.returncode == 0 and "use make to deploy" in shown.stdout
    assert "maka: warning: the disk of makad's data directory is full" in shown.stderr
    sessionless = _pack(d, None, 800)
    assert "use make to deploy" in _memory_text(sessionless) and _kinds(sessionless) == []
    assert (d.workspace / "memory" / "MEMORY.md").read_bytes() == memory
    filler.unlink()
    third = _pack(d, sid, 1000)
    assert _kinds(third) == [] and _recorded(d, sid, third["callId"])
    fourth = _pack(d, sid, 1100)
    assert "use make to deploy" not in _memory_text(fourth)  # shown by the third, as it is


def _drop_attention_state(data_dir: Path) -> None:
    """The ledgers as a crash before the attention keeper stored its first state leaves them."""
    for path in data_dir.rglob("*.sqlite3"):
        conn = sqlite3.connect(path)
        try:
            conn.execute("DELETE FROM attention_state")
            conn.commit()
        finally:
            conn.close()


def _suggest_once_derived(d: DaemonProcess, sid: str) -> dict[str, Any]:
    """suggest's reply once the attention keeper has derived a state (or after 10 s)."""
    deadline = time.monotonic() + 10
    while True:
        suggested = dict(d.call("suggest", {"workspace": str(d.workspace), "sessionId": sid}))
        if suggested["silenced"] != "not_derived" or time.monotonic() > deadline:
            return suggested
        time.sleep(0.05)


def test_a_read_only_ledger_still_serves_packs_and_attention(disk: DaemonProcess) -> None:
    """Started again on a full disk (ledger read-only, no attention state stored yet, a
    session whose records cannot be written): the attention keeper still derives the state,
    kept in memory, so suggest answers from it; build_context serves the pack with
    not_recorded, get_attention derives the state without storing it (not_recorded, which
    `maka attention` prints), search_history answers; once space is freed
    build_context is recorded and get_attention stores its state (no warning)."""
    d = disk
    w = str(d.workspace)
    sid = _session(d)
    d.stop()
    _drop_attention_state(d.data_dir)
    filler = fill_disk(d.data_dir)
    d.start({"MAKAD_BEHAVIOR_IDLE_MS": "1"})  # the session is idle: due to be read
    assert "ledger_read_only" in _kinds(d.call("read_state", {"workspace": w}))
    suggested = _suggest_once_derived(d, sid)
    assert suggested["enabled"] is True and suggested["silenced"] is None
    pack = _pack(d, sid, 800)
    assert "use make to deploy" in _memory_text(pack)
    assert [m["content"] for m in pack["messages"]] == ["the deploy script is flaky"]
    assert _kinds(pack) == ["not_recorded"]
    assert not _recorded(d, sid, pack["callId"])
    again = _pack(d, sid, 900)
    assert "use make to deploy" in _memory_text(again) and _kinds(again) == ["not_recorded"]
    attention = d.call("get_attention", {"workspace": w})
    assert attention["enabled"] is True and attention["computedAt"] > 0
    assert _kinds(attention) == ["not_recorded"]
    shown = run_maka(d, "attention")
    assert shown.returncode == 0 and "not stored" in shown.stderr
    hits = d.call("search_history", {"workspace": w, "query": "deploy"})["hits"]
    assert [h["event"]["text"] for h in hits] == ["the deploy script is flaky"]
    refused = remote_error(d, "add_entry", {"workspace": w, "title": "T", "content": "not now"})
    assert (refused.kind, refused.data.get("reason")) == ("io_error", "disk_full")
    filler.unlink()
    recorded = _pack(d, sid, 1000)
    assert _kinds(recorded) == [] and _recorded(d, sid, recorded["callId"])
    attention = d.call("get_attention", {"workspace": w})
    assert attention["enabled"] is True and _kinds(attention) == []


def test_a_sessions_unrecorded_first_pack_still_shows_attention_once(deriving: DaemonProcess) -> None:
    """The first pack of a session, unrecorded on a full disk, shows the attention state; a
    retry of it shows the same, the session's next pack does not repeat it, nor does the
    first pack recorded once space is freed."""
    d = deriving
    w = str(d.workspace)
    previous_session(d, w)
    sid = _session(d)
    filler = fill_disk(d.data_dir)
    first = _pack(d, sid, 4000)
    segment = attention_segment(first)
    assert segment is not None and "wire the new date parser" in segment["text"]
    assert _kinds(first) == ["not_recorded"]
    assert _pack(d, sid, 4000) == first
    assert attention_segment(_pack(d, sid, 4100)) is None
    filler.unlink()
    recorded = _pack(d, sid, 4200)
    assert attention_segment(recorded) is None and _kinds(recorded) == []

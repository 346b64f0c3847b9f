"""Ids of proposals already decided, and entry ids given where a proposal id goes, as the
user types them (whole or the short form lists print) against a real daemon."""

from __future__ import annotations

from typing import Any

import pytest

from maka.errors import InvalidParams, NotFound
from tests.cli.helpers import call
from tests.support import DaemonProcess


def _decided(d: DaemonProcess) -> dict[str, str]:
    """An approved proposal (kept), the entry it became, and a rejected one (dropped)."""
    call(d, "set_settings", agentReadEnabled=True, extractToolEnabled=True)
    kept = call(d, "propose", title="Staging port", content="Staging listens on 5433.")["proposal"]["id"]
    dropped = call(d, "propose", title="Likes tabs", content="The user likes tabs.")["proposal"]["id"]
    entry = call(d, "approve", ids=[kept])["approved"][0]["entry"]["id"]
    call(d, "reject", ids=[dropped], reason="not true")
    return {"kept": kept, "entry": entry, "dropped": dropped}


def _memory(d: DaemonProcess) -> str:
    return (d.workspace / "memory" / "MEMORY.md").read_text()


def test_memory_history_takes_a_unique_prefix(shared_daemon: DaemonProcess) -> None:
    """memory_history given the short id a list prints answers for the whole id."""
    ids = _decided(shared_daemon)
    history: dict[str, Any] = call(shared_daemon, "memory_history", id=ids["kept"][:12])
    assert history["id"] == ids["kept"]
    assert any(e["action"] == "approved" and e["entryId"] == ids["entry"] for e in history["events"])


def test_memory_history_refuses_an_ambiguous_or_unknown_prefix(shared_daemon: DaemonProcess) -> None:
    """A prefix of several ids is invalid_params naming them; one of none is not_found."""
    ids = [
        call(shared_daemon, "add_entry", title=f"T{i}", content=f"content number {i}")["entry"]["id"]
        for i in range(40)
    ]
    shared = next(c for c in sorted({i[0] for i in ids}) if sum(i.startswith(c) for i in ids) > 1)
    with pytest.raises(InvalidParams) as ambiguous:
        call(shared_daemon, "memory_history", id=shared)
    data = ambiguous.value.data or {}
    assert data.get("reason") == "ambiguous_id"
    assert {i for i in ids if i.startswith(shared)} <= set(data.get("candidates", []))
    with pytest.raises(NotFound):
        call(shared_daemon, "memory_history", id="0123456789abcdef")

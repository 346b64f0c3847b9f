"""Ids of proposals already decided, and entry ids given where a proposal id goes, as the
user types them (whole or the short form lists print) against a real daemon."""

from __future__ import annotations

from typing import Any

import pytest

from maka.errors import InvalidParams, NotFound
from tests.cli.helpers import call, run_maka
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


def test_show_of_an_approved_proposals_short_id_shows_the_entry(shared_daemon: DaemonProcess) -> None:
    """memory show with the short id `maka pending` printed names the entry the proposal
    became and shows it."""
    ids = _decided(shared_daemon)
    shown = run_maka(shared_daemon, "memory", "show", ids["kept"][:12])
    assert shown.returncode == 0, shown.stderr
    first = shown.stdout.splitlines()[0]
    assert "approved" in first and ids["entry"] in first
    assert "Staging listens on 5433." in shown.stdout


@pytest.mark.parametrize("command", ["archive", "delete", "pin", "edit"])
def test_a_change_given_an_approved_proposals_id_names_the_entry_and_changes_nothing(
    shared_daemon: DaemonProcess, command: str
) -> None:
    """archive/delete/pin/edit given an approved proposal's id exit 1, name the entry it
    became with the command to run on it, and leave MEMORY.md as it was."""
    ids = _decided(shared_daemon)
    before = _memory(shared_daemon)
    extra = {"edit": ["--title", "New"], "delete": ["--yes"]}.get(command, [])
    result = run_maka(shared_daemon, "memory", command, ids["kept"][:12], *extra)
    assert result.returncode == 1, result.stdout
    assert "approved as entry" in result.stderr and f"memory {command} {ids['entry'][:12]}" in result.stderr
    assert _memory(shared_daemon) == before


def test_a_rejected_proposals_id_says_it_was_rejected_and_why(shared_daemon: DaemonProcess) -> None:
    """memory delete given a rejected proposal's id says it was rejected, with the reason."""
    ids = _decided(shared_daemon)
    result = run_maka(shared_daemon, "memory", "delete", ids["dropped"][:12], "--yes")
    assert result.returncode == 1
    assert "rejected" in result.stderr and "not true" in result.stderr


def test_approve_given_an_entry_id_says_it_is_an_entry_already(shared_daemon: DaemonProcess) -> None:
    """approve/reject given an entry's id (whole or short) say it is an entry in MEMORY.md,
    already approved, instead of an unexplained not_found."""
    ids = _decided(shared_daemon)
    for command in ("approve", "reject"):
        for given in (ids["entry"], ids["entry"][:12]):
            result = run_maka(shared_daemon, command, given)
            assert result.returncode == 1, result.stdout
            assert "is an entry in MEMORY.md" in result.stderr and "not a proposal" in result.stderr
            assert ids["kept"][:12] in result.stderr


def test_approve_given_an_already_approved_proposal_names_its_entry(shared_daemon: DaemonProcess) -> None:
    """approve given a proposal approved before says so and names the entry it became."""
    ids = _decided(shared_daemon)
    result = run_maka(shared_daemon, "approve", ids["kept"][:12])
    assert result.returncode == 1
    assert "already approved" in result.stderr and ids["entry"][:12] in result.stderr

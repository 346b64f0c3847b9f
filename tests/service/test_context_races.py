"""Reads while other calls commit to the same workspace, in process: each answer is
one consistent view, never newer than what it shows."""

from __future__ import annotations

from typing import Any

import pytest

from makad.core import compaction as plan_core
from makad.core.types import Checkpoint, Coverage, EventInput
from makad.service.context import ContextService
from makad.service.proposals import ProposalService
from makad.store.ledger import Ledger
from tests.service.conftest import InProcessDaemon

pytestmark = pytest.mark.anyio


def turns(first: int, count: int) -> list[dict[str, Any]]:
    """``count`` events from seq ``first``: user messages at odd seqs, replies at even."""
    return [
        {"type": "user_message" if seq % 2 else "assistant_message", "text": f"turn {seq}"}
        for seq in range(first, first + count)
    ]


async def test_a_compaction_committing_during_build_context_hides_no_live_event(
    served: InProcessDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends and a compaction commit just as build_context looks the session up: the
    pack shows the checkpoint it read and every live event after it, none missing."""
    real = Ledger.latest_checkpoint
    armed: list[str] = []

    def meanwhile(ledger: Ledger, session_id: str) -> Checkpoint | None:
        if armed and session_id == armed[0]:
            armed.clear()  # another client's appends, then its compaction of events 1-14
            ledger.append_events(session_id, [EventInput(**e) for e in turns(11, 10)])
            covered = ledger.read_events(session_id, after_seq=0, limit=14)
            ledger.add_checkpoint(
                Checkpoint(
                    checkpoint_id="cp-meanwhile",
                    session_id=session_id,
                    boundary_seq=14,
                    coverage=Coverage(from_seq=1, to_seq=14),
                    covered_hash=plan_core.covered_hash(covered),
                    summary="# Current Goal\n- the turns so far\n",
                    summary_tokens=8,
                    preserved_from_seq=15,
                    mode="semantic",
                    reason="manual",
                    created_at=covered[-1].ts + 1,
                )
            )
        return real(ledger, session_id)

    monkeypatch.setattr(Ledger, "latest_checkpoint", meanwhile)
    async with served.client() as c:
        ws = str(served.workspace)
        sid = (await c.call("open_session", workspace=ws))["sessionId"]
        await c.call("append_events", workspace=ws, sessionId=sid, events=turns(1, 10))
        armed.append(sid)
        pack = await c.call("build_context", workspace=ws, sessionId=sid, budgetTokens=4000)
    assert not armed
    summary = [s for s in pack["segments"] if s["kind"] == "summary"]
    assert "checkpoint:cp-meanwhile" in summary[0]["sourceIds"]
    assert [m["sourceId"] for m in pack["messages"]] == [f"event:{sid}:{seq}" for seq in range(15, 21)]


async def test_a_pack_never_claims_a_revision_newer_than_the_memory_it_shows(
    served: InProcessDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry added while build_context is under way (after it took its memory
    snapshot): the pack either shows the entry or names a revision from before it, so a
    client comparing revisions knows to build again."""
    real = ContextService._user_level
    added: list[dict[str, Any]] = []

    async def meanwhile(service: ContextService) -> Any:
        if not added:
            async with served.client() as other:
                added.append(
                    await other.call("add_entry", workspace=ws, title="Fresh", content="the new fact is kiwi")
                )
        return await real(service)

    ws = str(served.workspace)
    async with served.client() as c:
        await c.call("set_settings", workspace=ws, agentReadEnabled=True)
        await c.call("add_entry", workspace=ws, title="Old", content="the old fact is apple")
        monkeypatch.setattr(ContextService, "_user_level", meanwhile)
        pack = await c.call("build_context", workspace=ws, query="fact", budgetTokens=2000)
    assert added and "apple" in str(pack["segments"])
    assert "kiwi" in str(pack["segments"]) or pack["revision"] < added[0]["revision"]


async def test_list_proposals_never_names_a_revision_newer_than_its_list(
    served: InProcessDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proposal queued while list_proposals works out similar entries: the answer either
    lists it or names a revision from before it."""
    real = ProposalService._similar
    queued: list[dict[str, Any]] = []
    ws = str(served.workspace)

    async def meanwhile(*args: Any, **kwargs: Any) -> Any:
        if not queued:
            async with served.client() as other:
                queued.append(await other.call("propose", workspace=ws, title="Fresh", content="kiwi"))
        return await real(*args, **kwargs)

    async with served.client() as c:
        await c.call("set_settings", workspace=ws, agentReadEnabled=True, extractToolEnabled=True)
        await c.call("propose", workspace=ws, title="Old", content="apple")
        monkeypatch.setattr(ProposalService, "_similar", meanwhile)
        listed = await c.call("list_proposals", workspace=ws)
    assert queued
    titles = [p["proposal"]["title"] for p in listed["proposals"]]
    assert "Old" in titles
    assert "Fresh" in titles or listed["revision"] < queued[0]["revision"]

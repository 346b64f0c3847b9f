"""propose is the agent's path: its origin param takes only extracted, the extract gate
applies to every agent proposal, approval keeps the origin the ledger recorded, and the workspace's
defaultDecayDays reaches approved proposals and imports too."""

from __future__ import annotations

import time
from typing import Any

import pytest

from maka.errors import RemoteError
from makad.core import memory_format as fmt
from tests.support import DaemonProcess

OTHER_ORIGINS = ("manual", "unknown", "imported")
DAY_MS = 86_400_000


def ws(d: DaemonProcess) -> str:
    return str(d.workspace)


def files(d: DaemonProcess) -> tuple[bytes | None, bytes | None]:
    mem = d.workspace / "memory"
    return tuple(
        p.read_bytes() if p.exists() else None  # type: ignore[return-value]
        for p in (mem / "MEMORY.md", mem / "PENDING.md")
    )


def refused(d: DaemonProcess, params: dict[str, Any]) -> RemoteError:
    """The error ``propose`` answers, checking that neither file changed."""
    before = files(d)
    with pytest.raises(RemoteError) as info:
        d.call("propose", {"workspace": ws(d), "title": "T", **params})
    assert files(d) == before
    return info.value


def settings(d: DaemonProcess, **values: Any) -> None:
    d.call("set_settings", {"workspace": ws(d), **values})


def memory(d: DaemonProcess) -> dict[str, fmt.Entry]:
    path = d.workspace / "memory" / "MEMORY.md"
    return {e.content: e for e in fmt.entries(fmt.parse(path.read_text()))} if path.exists() else {}


def test_a_closed_gate_refuses_agent_proposals(shared_daemon: DaemonProcess) -> None:
    """With extractToolEnabled or agentReadEnabled off, propose (origin extracted, given or
    not) is gate_closed and nothing is written; another origin is refused before any gate."""
    for read, extract in ((False, False), (True, False), (False, True)):
        settings(shared_daemon, agentReadEnabled=read, extractToolEnabled=extract)
        for params in ({"origin": "extracted"}, {}):
            error = refused(shared_daemon, {"content": "agent text", **params})
            assert error.kind == "gate_closed", (read, extract, params)
        for origin in OTHER_ORIGINS:
            error = refused(shared_daemon, {"content": f"claims {origin}", "origin": origin})
            assert error.kind == "invalid_params", (read, extract, origin)
    assert shared_daemon.call("list_proposals", {"workspace": ws(shared_daemon)})["proposals"] == []


def test_incognito_refuses_agent_proposals(shared_daemon: DaemonProcess) -> None:
    """An incognito workspace refuses propose with incognito_blocked; nothing is written."""
    settings(shared_daemon, agentReadEnabled=True, extractToolEnabled=True, incognito=True)
    assert refused(shared_daemon, {"content": "private", "origin": "extracted"}).kind == "incognito_blocked"
    for origin in OTHER_ORIGINS:
        assert refused(shared_daemon, {"content": "private", "origin": origin}).kind == "invalid_params"


def test_user_and_import_origins_are_not_propose_params(shared_daemon: DaemonProcess) -> None:
    """origin manual, unknown, imported (or anything but extracted) is invalid_params at
    $.origin naming the one allowed value, and nothing is queued; extracted is queued."""
    settings(shared_daemon, agentReadEnabled=True, extractToolEnabled=True)
    for origin in (*OTHER_ORIGINS, "EXTRACTED"):
        error = refused(shared_daemon, {"content": f"pretends to be {origin}", "origin": origin})
        assert error.kind == "invalid_params"
        assert error.data["path"] == "$.origin" and error.data["allowed"] == ["extracted"]
    queued = shared_daemon.call("propose", {"workspace": ws(shared_daemon), "title": "T", "content": "agent"})
    assert queued["queued"] and queued["proposal"]["origin"] == "extracted"
    listed = shared_daemon.call("list_proposals", {"workspace": ws(shared_daemon)})["proposals"]
    assert [p["proposal"]["origin"] for p in listed] == ["extracted"]


def test_approved_agent_text_never_reads_manual(shared_daemon: DaemonProcess) -> None:
    """An agent proposal whose PENDING.md comment was rewritten to origin=manual is approved
    as extracted (the ledger recorded who queued it), edited or not; a proposal the user
    typed into PENDING.md by hand keeps the origin its comment gives."""
    settings(shared_daemon, agentReadEnabled=True, extractToolEnabled=True)
    ids = [
        shared_daemon.call(
            "propose", {"workspace": ws(shared_daemon), "title": "T", "content": f"agent text {i}"}
        )["proposal"]["id"]
        for i in range(2)
    ]
    pending = shared_daemon.workspace / "memory" / "PENDING.md"
    forged = pending.read_text().replace("origin=extracted", "origin=manual")
    hand = (
        "\n## Typed by the user\n<!-- maka-memory: id=handtyped0000001 origin=manual "
        "createdAt=1 updatedAt=1 status=review_required tags= -->\nuser words\n"
    )
    pending.write_text(forged + hand)
    assert "origin=extracted" not in pending.read_text()
    shared_daemon.call("approve", {"workspace": ws(shared_daemon), "ids": [ids[0], "handtyped0000001"]})
    shared_daemon.call(
        "approve",
        {
            "workspace": ws(shared_daemon),
            "ids": [ids[1]],
            "edits": {ids[1]: {"content": "agent text, edited by the user"}},
        },
    )
    entries = memory(shared_daemon)
    assert entries["agent text 0"].origin == "extracted"
    assert entries["agent text, edited by the user"].origin == "extracted"
    assert entries["user words"].origin == "manual"
    assert [e.origin for e in entries.values()].count("manual") == 1


def test_imported_comes_from_import_memories_and_survives_approval(shared_daemon: DaemonProcess) -> None:
    """import_memories queues origin imported (the gate does not apply: the user imports);
    approving keeps it imported even if PENDING.md was rewritten to say manual."""
    shared_daemon.call(
        "import_memories",
        {
            "workspace": ws(shared_daemon),
            "format": "markdown",
            "data": "# Notes\n\n## Tools\n- the user deploys with make\n",
        },
    )
    listed = shared_daemon.call("list_proposals", {"workspace": ws(shared_daemon)})["proposals"]
    assert [p["proposal"]["origin"] for p in listed] == ["imported"]
    pending = shared_daemon.workspace / "memory" / "PENDING.md"
    pending.write_text(pending.read_text().replace("origin=imported", "origin=manual"))
    shared_daemon.call("approve", {"workspace": ws(shared_daemon), "ids": [listed[0]["proposal"]["id"]]})
    assert [e.origin for e in memory(shared_daemon).values()] == ["imported"]


def test_default_decay_applies_to_approved_proposals_and_imports(shared_daemon: DaemonProcess) -> None:
    """defaultDecayDays gives approved proposals and approved imports their decay, like
    add_entry (an import's counted from the approval); a proposal's own decayTtlMs wins;
    without the setting nothing decays."""
    settings(shared_daemon, agentReadEnabled=True, extractToolEnabled=True)
    plain = shared_daemon.call(
        "propose", {"workspace": ws(shared_daemon), "title": "T", "content": "before the setting"}
    )["proposal"]["id"]
    shared_daemon.call("approve", {"workspace": ws(shared_daemon), "ids": [plain]})
    assert memory(shared_daemon)["before the setting"].decay_ttl_ms is None

    settings(shared_daemon, defaultDecayDays=2)
    agent = shared_daemon.call(
        "propose", {"workspace": ws(shared_daemon), "title": "T", "content": "an agent memory"}
    )["proposal"]["id"]
    own = shared_daemon.call(
        "propose",
        {"workspace": ws(shared_daemon), "title": "T", "decayTtlMs": 5_000, "content": "has its own decay"},
    )["proposal"]["id"]
    shared_daemon.call(
        "import_memories",
        {
            "workspace": ws(shared_daemon),
            "format": "markdown",
            "data": "# Notes\n\n## Tools\n- an imported memory\n",
        },
    )
    imported = [
        p["proposal"]["id"]
        for p in shared_daemon.call("list_proposals", {"workspace": ws(shared_daemon)})["proposals"]
        if p["proposal"]["origin"] == "imported"
    ]
    before = int(time.time() * 1000)
    shared_daemon.call("approve", {"workspace": ws(shared_daemon), "ids": [agent, own, *imported]})
    after = int(time.time() * 1000)
    shared_daemon.call(
        "add_entry", {"workspace": ws(shared_daemon), "title": "T", "content": "the user's own"}
    )
    entries = memory(shared_daemon)
    assert entries["an agent memory"].decay_ttl_ms == 2 * DAY_MS
    # An import keeps its (import-time) date; its decay still ends two days after approval.
    kept = entries["an imported memory"]
    assert kept.created_at <= before and kept.decay_ttl_ms is not None
    assert before + 2 * DAY_MS <= kept.created_at + kept.decay_ttl_ms <= after + 2 * DAY_MS
    assert entries["the user's own"].decay_ttl_ms == 2 * DAY_MS
    assert entries["has its own decay"].decay_ttl_ms == 5_000
    assert entries["before the setting"].decay_ttl_ms is None

"""One ``approve`` of hundreds of proposals, over the socket, into a MEMORY.md the user typed
in part: every proposal lands in MEMORY.md once, PENDING.md keeps none of them, and the
entries that were there keep their bytes and their ids."""

from __future__ import annotations

import pytest

from maka.errors import RemoteError
from makad.core import memory_format as fmt
from makad.errors import echoed
from tests.support import DaemonProcess

PROPOSALS = 300


def _typed_memory() -> str:
    """A MEMORY.md with daemon-style entries, a repeated id and entries typed by hand."""
    parts = ["# Maka Memory\n\n"]
    for n in range(200):
        if n % 50 == 5:
            parts.append(f"## Typed {n}\nA note typed by hand, {n}.\n\n")
            continue
        entry_id = "00000000000000aa" if n % 60 == 1 else f"{n:016x}"
        parts.append(
            f"## Entry {n}\n<!-- maka-memory: id={entry_id} createdAt=1 updatedAt=1 status=active -->\n"
            f"Known fact {n}.\n\n"
        )
    return "".join(parts)


def test_approving_hundreds_of_proposals_in_one_call_lands_every_one(
    shared_daemon: DaemonProcess,
) -> None:
    """Hundreds of imported proposals approved by one ``approve`` (as ``maka approve --all``
    sends it): each is an active entry of MEMORY.md once, none is left in PENDING.md, the
    lineage records each approval, and the entries already there are untouched."""
    d = shared_daemon
    ws = str(d.workspace)
    memory_path = d.workspace / "memory" / "MEMORY.md"
    memory_path.parent.mkdir(parents=True, exist_ok=True)
    typed = _typed_memory()
    memory_path.write_text(typed)
    before = fmt.parse(typed)
    data = "\n".join(f"Imported fact number {n} about the project." for n in range(PROPOSALS))
    imported = d.call("import_memories", {"workspace": ws, "data": data, "format": "chatgpt"})
    assert len(imported["imported"]) == PROPOSALS, imported.get("errors")
    ids = [p["proposal"]["id"] for p in d.call("list_proposals", {"workspace": ws})["proposals"]]
    assert len(ids) == PROPOSALS

    result = d.call("approve", {"workspace": ws, "ids": ids}, timeout=120)

    assert [a["proposalId"] for a in result["approved"]] == ids
    new_ids = [a["entry"]["id"] for a in result["approved"]]
    after = fmt.parse(memory_path.read_text())
    by_id = {s.entry.id: s for s in after.sections}
    assert len(set(new_ids)) == PROPOSALS and all(by_id[i].entry.status == "active" for i in new_ids)
    contents = sorted(by_id[i].entry.content for i in new_ids)
    assert contents == sorted(f"Imported fact number {n} about the project." for n in range(PROPOSALS))
    assert [s.entry.id for s in after.sections[: len(before.sections)]] == [
        s.entry.id for s in before.sections
    ]
    assert [s.entry for s in after.sections[: len(before.sections)]] == [s.entry for s in before.sections]
    pending_path = d.workspace / "memory" / "PENDING.md"
    left = (
        {e.id for e in fmt.entries(fmt.parse(pending_path.read_text()))} if pending_path.exists() else set()
    )
    assert not left & set(ids)
    assert d.call("list_proposals", {"workspace": ws})["proposals"] == []
    history = d.call("memory_history", {"workspace": ws, "id": new_ids[-1]})
    assert history["approvedBy"] == "user"


def test_approving_or_rejecting_many_unknown_ids_is_a_short_not_found(shared_daemon: DaemonProcess) -> None:
    """An approve naming one open proposal among 30,000 ids that name none is not_found
    listing the first 20 (a long one cut to 200 characters) and counting them all; the
    proposal stays in PENDING.md, and a reject of a long unknown id is cut the same way."""
    d = shared_daemon
    ws = str(d.workspace)
    imported = d.call("import_memories", {"workspace": ws, "data": "A fact to review.", "format": "chatgpt"})
    (proposal,) = [p["proposal"]["id"] for p in d.call("list_proposals", {"workspace": ws})["proposals"]]
    long_id = "x" * 5_000
    unknown = [long_id] + [f"p-{n:030x}" for n in range(29_999)]
    pending = (d.workspace / "memory" / "PENDING.md").read_bytes()

    with pytest.raises(RemoteError) as approving:
        d.call("approve", {"workspace": ws, "ids": [proposal, *unknown]}, timeout=120)
    with pytest.raises(RemoteError) as rejecting:
        d.call("reject", {"workspace": ws, "ids": [long_id]})

    assert imported["imported"]
    assert approving.value.kind == "not_found"
    assert approving.value.data["ids"] == [echoed(long_id), *unknown[1:20]]
    assert approving.value.data["missingCount"] == 30_000
    assert rejecting.value.kind == "not_found" and rejecting.value.data["ids"] == [echoed(long_id)]
    assert "missingCount" not in rejecting.value.data
    assert (d.workspace / "memory" / "PENDING.md").read_bytes() == pending

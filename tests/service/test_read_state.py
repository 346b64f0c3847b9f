"""The read_state shell in process: what the files hold, as the daemon shows it."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from makad.service import memory as memory_service
from tests.service.conftest import InProcessDaemon

pytestmark = pytest.mark.anyio


async def test_an_added_entry_shows_with_a_new_revision(served: InProcessDaemon) -> None:
    """add_entry's entry is in the next read_state, whose revision moved past the last one."""
    async with served.client() as c:
        ws = str(served.workspace)
        first = await c.call("read_state", workspace=ws, includeEntries=True)
        await c.call("add_entry", workspace=ws, title="Deploys", content="On Tuesdays.", tags=["ops"])
        second = await c.call("read_state", workspace=ws, includeEntries=True)
    assert (first["entryCount"], second["entryCount"]) == (0, 1)
    assert [e["title"] for e in second["entries"]] == ["Deploys"]
    assert second["revision"] > first["revision"]


async def test_a_hand_edit_is_what_the_next_read_shows(served: InProcessDaemon) -> None:
    """A user's edit of MEMORY.md on disk replaces what read_state showed before (no stale cache)."""
    async with served.client() as c:
        ws = str(served.workspace)
        await c.call("add_entry", workspace=ws, title="Deploys", content="On Tuesdays.")
        shown = await c.call("read_state", workspace=ws, includeEntries=True, includeConfidence=True)
        path = served.workspace / "memory" / "MEMORY.md"
        path.write_text(path.read_text(encoding="utf-8").replace("On Tuesdays.", "On Fridays."), "utf-8")
        edited = await c.call("read_state", workspace=ws, includeEntries=True, includeConfidence=True)
    assert "On Tuesdays." in shown["content"] and "On Fridays." in edited["content"]
    assert [e["content"] for e in edited["entries"]] == ["On Fridays."]
    assert set(edited["confidence"]) == {e["id"] for e in edited["entries"]}


async def test_one_read_state_is_one_version_of_the_file(
    served: InProcessDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry added while read_state works out confidence: the answer's entries, text,
    sha256, counts and revision all describe one version of MEMORY.md."""
    real = memory_service.confidence_map
    added: list[Any] = []
    ws = str(served.workspace)

    async def meanwhile(*args: Any) -> Any:
        if not added:
            async with served.client() as other:
                added.append(await other.call("add_entry", workspace=ws, title="Fresh", content="kiwi"))
        return await real(*args)

    async with served.client() as c:
        await c.call("add_entry", workspace=ws, title="Old", content="apple")
        monkeypatch.setattr(memory_service, "confidence_map", meanwhile)
        state = await c.call("read_state", workspace=ws, includeEntries=True, includeConfidence=True)
    assert added
    titles = [e["title"] for e in state["entries"]]
    headings = [line[3:] for line in state["content"].splitlines() if line.startswith("## ")]
    assert titles == headings and state["entryCount"] == len(titles)
    assert state["sha256"] == hashlib.sha256(state["content"].encode()).hexdigest()
    assert ("Fresh" in titles) == (state["revision"] >= added[0]["revision"])

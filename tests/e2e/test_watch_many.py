"""Many watched folders: subscriptions arriving one after another restart the watch
together, and a hand edit in any of them, made while they arrive or after, is heard."""

from __future__ import annotations

import os
import time
from pathlib import Path

from maka import Client
from tests.support import DaemonProcess

FOLDERS = 60


def save_by_hand(ws: Path, extra: str) -> None:
    memory = ws / "memory" / "MEMORY.md"
    tmp = memory.with_name(".MEMORY.md.swp")
    tmp.write_text(memory.read_text() + extra)
    os.replace(tmp, memory)


def heard(sub: Client, wanted: set[str], seconds: float = 30.0) -> set[str]:
    """The workspaces of ``wanted`` a memory_changed notification named within ``seconds``."""
    got: set[str] = set()
    deadline = time.monotonic() + seconds
    notes = sub.notifications()
    while got != wanted and time.monotonic() < deadline:
        try:
            note = next(notes)
        except TimeoutError:
            continue
        if note.get("method") == "memory_changed" and note["params"].get("cause") == "external_edit":
            got.add(note["params"]["workspace"])
    return got


def test_edits_in_many_subscribed_folders_are_heard(module_daemon: DaemonProcess) -> None:
    """Sixty folders subscribed one after another on one connection: an edit by hand in the
    first, made while the later subscriptions arrive, and edits in the first, a middle and
    the last one after, each reach the subscriber as an external edit."""
    folders = [module_daemon.root / f"many{i}" for i in range(FOLDERS)]
    for ws in folders:
        ws.mkdir()
        module_daemon.call("add_entry", {"workspace": str(ws), "title": "Kept", "content": "by the daemon"})
    with module_daemon.client() as sub:
        for i, ws in enumerate(folders):
            sub.call("subscribe", {"workspace": str(ws)})
            if i == FOLDERS // 2:
                save_by_hand(folders[0], "\n## During\nwhile the watch restarts\n")
        first = str(folders[0].resolve())
        assert heard(sub, {first}) == {first}
        chosen = [folders[0], folders[FOLDERS // 2], folders[-1]]
        for ws in chosen:
            save_by_hand(ws, "\n## After\nonce all are watched\n")
        wanted = {str(ws.resolve()) for ws in chosen}
        assert heard(sub, wanted) == wanted
    state = module_daemon.call("read_state", {"workspace": str(folders[0]), "includeEntries": True})
    assert [e["title"] for e in state["entries"]] == ["Kept", "During", "After"]

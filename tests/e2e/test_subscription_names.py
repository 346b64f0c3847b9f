"""Subscriptions answer, and notify, under the name the client used for the workspace.

A client matches notifications to its subscription by the ``workspace`` it subscribed
with: "@user", a symlink to the folder, a path with a trailing slash. The reply and every
notification carry that name, never the folder path the daemon resolved it to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from maka import Client
from tests.support import DaemonProcess

USER = "@user"


def next_note(sub: Client, method: str = "memory_changed") -> dict[str, Any]:
    for note in sub.notifications():
        if note["method"] == method:
            return dict(note["params"])
    raise AssertionError("notifications ended")


def test_subscribing_to_the_user_level_answers_and_notifies_as_at_user(module_daemon: DaemonProcess) -> None:
    """subscribe {"workspace": "@user"} answers "@user" (not its folder), as its notifications do."""
    d = module_daemon
    with Client(str(d.socket), timeout=10) as sub:
        reply = sub.call("subscribe", {"workspace": USER})
        assert reply["workspace"] == USER
        d.call("add_entry", {"workspace": USER, "title": "Named", "content": "as subscribed"})
        assert next_note(sub)["workspace"] == USER
        assert sub.call("unsubscribe", {"workspace": USER})["workspace"] == USER


def test_other_spellings_are_answered_and_notified_as_spelled(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """A symlink and a trailing slash: the reply and the notifications say each as sent."""
    link = new_ws.parent / f"{new_ws.name}-link"
    link.symlink_to(new_ws)
    for spelling in (str(link), f"{new_ws}/"):
        with Client(str(module_daemon.socket), timeout=10) as sub:
            assert sub.call("subscribe", {"workspace": spelling})["workspace"] == spelling
            module_daemon.call("add_entry", {"workspace": str(new_ws), "title": spelling, "content": "x"})
            note = next_note(sub)
            assert note["workspace"] == spelling
            assert note["revision"] == sub.call("read_state", {"workspace": spelling})["revision"]


def test_one_connection_subscribed_under_two_names_hears_both(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """Two spellings on one connection: each gets its notification; unsubscribing by either
    spelling ends both (the workspace is unsubscribed)."""
    spellings = {str(new_ws), f"{new_ws}/."}
    with Client(str(module_daemon.socket), timeout=10) as sub:
        for spelling in spellings:
            sub.call("subscribe", {"workspace": spelling})
        module_daemon.call("add_entry", {"workspace": str(new_ws), "title": "Both", "content": "x"})
        assert {next_note(sub)["workspace"], next_note(sub)["workspace"]} == spellings
        sub.call("unsubscribe", {"workspace": f"{new_ws}/"})
        module_daemon.call("add_entry", {"workspace": str(new_ws), "title": "Neither", "content": "y"})
        sub.call("ping")  # the write's notification would have arrived before this reply
        assert [n for n in sub.drain_notifications() if n["method"] == "memory_changed"] == []


def test_import_progress_names_the_workspace_as_the_importer_did(module_daemon: DaemonProcess) -> None:
    """import_memories {progress: true} on "@user" reports progress for "@user"."""
    d = module_daemon
    d.call("set_settings", {"workspace": USER, "enabled": True})
    data = json.dumps([{"title": f"Imported {i}", "content": f"imported fact {i}"} for i in range(3)])
    with Client(str(d.socket), timeout=20) as c:
        c.call("import_memories", {"workspace": USER, "data": data, "progress": True})
        progress = [n["params"] for n in c.drain_notifications() if n["method"] == "import_progress"]
    assert progress and {p["workspace"] for p in progress} == {USER}

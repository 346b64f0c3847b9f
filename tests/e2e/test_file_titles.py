"""What the daemon writes into the files' frames: each file's own title, no empty tokens."""

from __future__ import annotations

from tests.support import DaemonProcess


def test_pending_md_has_its_own_title(shared_daemon: DaemonProcess) -> None:
    """A new PENDING.md is titled as the proposal queue, MEMORY.md as memory; an empty
    PENDING.md saved by the user gets the queue's title at the next proposal."""
    ws = str(shared_daemon.workspace)
    shared_daemon.call(
        "set_settings", {"workspace": ws, "agentReadEnabled": True, "extractToolEnabled": True}
    )
    shared_daemon.call("propose", {"workspace": ws, "title": "Deploys", "content": "On Tuesdays."})
    shared_daemon.call("add_entry", {"workspace": ws, "title": "Editor", "content": "helix"})
    memory = shared_daemon.workspace / "memory"
    assert (memory / "PENDING.md").read_text().startswith("# Maka Pending Proposals\n\n## Deploys\n")
    assert (memory / "MEMORY.md").read_text().startswith("# Maka Memory\n\n## Editor\n")
    (view,) = shared_daemon.call("list_proposals", {"workspace": ws})["proposals"]
    shared_daemon.call("reject", {"workspace": ws, "ids": [view["proposal"]["id"]]})
    (memory / "PENDING.md").write_text("")
    shared_daemon.call("propose", {"workspace": ws, "title": "Shell", "content": "fish"})
    assert (memory / "PENDING.md").read_text().startswith("# Maka Pending Proposals\n\n## Shell\n")


def test_an_old_pending_title_still_reads_and_stays(shared_daemon: DaemonProcess) -> None:
    """A PENDING.md an older version titled `# Maka Memory` reads as before, and a new
    proposal leaves its title as it is (the daemon never rewrites the preamble)."""
    ws = str(shared_daemon.workspace)
    memory = shared_daemon.workspace / "memory"
    memory.mkdir()
    (memory / "PENDING.md").write_text(
        "# Maka Memory\n\n## Old proposal\n<!-- maka-memory: id=p1 origin=extracted createdAt=1 "
        "updatedAt=1 status=review_required tags= -->\nfrom an older makad\n"
    )
    shared_daemon.call(
        "set_settings", {"workspace": ws, "agentReadEnabled": True, "extractToolEnabled": True}
    )
    shared_daemon.call("propose", {"workspace": ws, "title": "New one", "content": "queued now"})
    listed = shared_daemon.call("list_proposals", {"workspace": ws})["proposals"]
    assert [v["proposal"]["title"] for v in listed] == ["Old proposal", "New one"]
    assert listed[0]["proposal"]["tags"] == []
    text = (memory / "PENDING.md").read_text()
    assert text.startswith("# Maka Memory\n\n## Old proposal\n")
    assert "status=review_required tags= -->\nfrom an older makad" in text  # read, kept as written


def test_no_empty_tags_token_is_written(shared_daemon: DaemonProcess) -> None:
    """Entries and proposals without tags carry no `tags=` token; with tags they do."""
    ws = str(shared_daemon.workspace)
    shared_daemon.call("add_entry", {"workspace": ws, "title": "Bare", "content": "no tags"})
    shared_daemon.call("add_entry", {"workspace": ws, "title": "Tagged", "content": "some", "tags": ["ops"]})
    shared_daemon.call("import_memories", {"workspace": ws, "data": "- one fact\n", "format": "markdown"})
    memory = shared_daemon.workspace / "memory"
    text = (memory / "MEMORY.md").read_text() + (memory / "PENDING.md").read_text()
    assert "tags= " not in text and "tags=-->" not in text
    assert "status=active tags=ops -->" in text

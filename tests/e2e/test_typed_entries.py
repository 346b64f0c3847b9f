"""Entries typed by hand into MEMORY.md keep their identity across the user's edits,
over the real socket and the CLI: the id, the lineage, the dates, the refs to them."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

from tests.cli.helpers import MAKA, run_maka
from tests.cli.test_watch import wait_for_line
from tests.e2e.sessions_support import append, open_session
from tests.support import DaemonProcess

HEAD = "# Maka Memory\n\n"


def memory_file(ws: Path) -> Path:
    path = ws / "memory" / "MEMORY.md"
    path.parent.mkdir(exist_ok=True)
    return path


def save(path: Path, *sections: tuple[str, str]) -> None:
    """Save the file as an editor does (a temp file renamed over it: a new inode)."""
    tmp = path.with_name(".MEMORY.md.swp~")
    tmp.write_text(HEAD + "\n".join(f"## {title}\n{body}\n" for title, body in sections), encoding="utf-8")
    os.replace(tmp, path)


def entries(d: DaemonProcess, ws: Path | str) -> list[dict[str, Any]]:
    state = d.call("read_state", {"workspace": str(ws), "includeEntries": True, "includeArchived": True})
    found: list[dict[str, Any]] = state["entries"]
    return found


def by_title(d: DaemonProcess, ws: Path | str) -> dict[str, dict[str, Any]]:
    return {e["title"]: e for e in entries(d, ws)}


def steps(d: DaemonProcess, ws: Path | str, entry_id: str) -> list[tuple[str, str, str | None]]:
    events = d.call("memory_history", {"workspace": str(ws), "id": entry_id})["events"]
    return [(e["action"], e["actor"], (e.get("data") or {}).get("via")) for e in events]


def test_a_typo_fixed_in_the_editor_is_the_same_entry_edited(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """Typed in a save, then its content fixed, then its title: one id throughout; `maka
    watch` says added, then changed (never removed); the lineage says it was typed into
    MEMORY.md and edited there; the CLI calls it hand-typed; export carries its dates."""
    path = memory_file(new_ws)
    save(path, ("Seed", "kept"))
    entries(module_daemon, new_ws)  # the daemon has read the file: what follows are saves
    ws = str(new_ws)
    with subprocess.Popen(
        [*MAKA, "--socket", str(module_daemon.socket), "-w", ws, "watch", "-n", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stderr is not None and proc.stdout is not None
        threading.Timer(30, proc.kill).start()
        assert proc.stderr.readline().startswith(f"watching {ws}")
        save(path, ("Seed", "kept"), ("Editor", "The user edits in hleix."))
        added = wait_for_line(proc, "'Editor'")
        first = by_title(module_daemon, ws)["Editor"]
        save(path, ("Seed", "kept"), ("Editor", "The user edits in helix."))
        fixed = wait_for_line(proc, "'Editor'")
        save(path, ("Seed", "kept"), ("The editor", "The user edits in helix."))
        retitled = wait_for_line(proc, "'The editor'")
        rest, _ = proc.communicate(timeout=20)
    assert added.strip().startswith("added ") and first["id"][:12] in added
    assert fixed.strip().startswith("changed ") and retitled.strip().startswith("changed ")
    assert "removed" not in added + fixed + retitled + rest
    now = by_title(module_daemon, ws)["The editor"]
    assert now["id"] == first["id"] and now["content"] == "The user edits in helix."
    assert now["createdAt"] == first["createdAt"] > 0 and now["updatedAt"] > now["createdAt"]
    assert steps(module_daemon, ws, now["id"]) == [
        ("added", "user", "external_edit"),
        ("edited", "user", "external_edit"),
        ("edited", "user", "external_edit"),
    ]
    assert path.read_text(encoding="utf-8").count("maka-memory") == 0  # the file is the user's

    listing = run_maka(module_daemon, "memory", "list", "-w", ws, workspace=False)
    [row] = [line for line in listing.stdout.splitlines() if "The editor" in line]
    assert "hand-typed" in row and "unknown" not in row
    shown = run_maka(module_daemon, "memory", "show", now["id"][:12], "-w", ws, workspace=False)
    assert "hand-typed" in shown.stdout and "added by user, typed into MEMORY.md" in shown.stdout
    assert "edited by user in MEMORY.md" in shown.stdout

    exported = json.loads(module_daemon.call("export_memories", {"workspace": ws, "format": "json"})["data"])
    [out] = [e for e in exported["entries"] if e["id"] == now["id"]]
    assert (out["createdAt"], out["updatedAt"]) == (now["createdAt"], now["updatedAt"])
    markdown = module_daemon.call("export_memories", {"workspace": ws, "format": "markdown"})["data"]
    assert f"createdAt={now['createdAt']}" in markdown


def test_title_and_content_changed_in_one_save_make_a_new_entry(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """Nothing of the entry is left: the old id is deleted by the user, a new one added."""
    path = memory_file(new_ws)
    save(path, ("Editor", "helix"))
    old = entries(module_daemon, new_ws)[0]["id"]
    save(path, ("Shell", "fish"))
    (new,) = entries(module_daemon, new_ws)
    assert new["id"] != old
    assert ("deleted", "user", "external_edit") in steps(module_daemon, new_ws, old)
    assert steps(module_daemon, new_ws, new["id"]) == [("added", "user", "external_edit")]


def test_two_entries_with_one_title_keep_their_own_ids(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """Two sections titled alike: editing the second changes neither id, nor the first (whose
    only history is that the daemon found it in the file)."""
    path = memory_file(new_ws)
    save(path, ("Notes", "first"), ("Notes", "second"))
    a, b = (e["id"] for e in entries(module_daemon, new_ws))
    save(path, ("Notes", "first"), ("Notes", "second, with a typo fixed"))
    after = entries(module_daemon, new_ws)
    assert [e["id"] for e in after] == [a, b]
    assert after[1]["content"] == "second, with a typo fixed"
    assert steps(module_daemon, new_ws, a) == []  # in the file before the daemon first read it
    shown = run_maka(module_daemon, "memory", "show", a, "-w", str(new_ws), workspace=False)
    assert "first seen in the file, typed by hand" in shown.stdout


def test_deleted_then_typed_again_is_the_entry_it_was(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """An entry deleted in one save and pasted back in the next is the same entry again."""
    path = memory_file(new_ws)
    save(path, ("Kept", "k"), ("Pasted", "p"))
    ids = [e["id"] for e in entries(module_daemon, new_ws)]
    save(path, ("Kept", "k"))
    assert [e["id"] for e in entries(module_daemon, new_ws)] == ids[:1]
    save(path, ("Kept", "k"), ("Pasted", "p"))
    assert [e["id"] for e in entries(module_daemon, new_ws)] == ids


def test_refs_to_a_hand_typed_entry_stay_valid_after_an_edit(shared_daemon: DaemonProcess) -> None:
    """A pack showed memory:<id>; after a typo fix the next pack shows the fixed text under
    the same ref, the one after that leaves it out as already shown, the first call's
    manifest still names it, and a proposal superseding that id archives the edited entry."""
    d, ws = shared_daemon, str(shared_daemon.workspace)
    d.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "extractToolEnabled": True})
    path = memory_file(d.workspace)
    save(path, ("Deploys", "Deploys go out on Tusedays."))
    sid = open_session(d)
    append(d, sid, [{"type": "user_message", "text": "when do deploys go out?"}])
    params = {"workspace": ws, "sessionId": sid, "budgetTokens": 4000}
    first = d.call("build_context", params)
    (entry_id,) = (e["id"] for e in entries(d, ws))
    ref = f"memory:{entry_id}"
    assert ref in _memory_refs(first)
    save(path, ("Deploys", "Deploys go out on Tuesdays."))
    second = d.call("build_context", params)
    assert ref in _memory_refs(second)
    assert "Tuesdays" in next(s["text"] for s in second["segments"] if s["kind"] == "memory")
    append(d, sid, [{"type": "user_message", "text": "and on holidays?"}])
    third = d.call("build_context", params)  # unchanged since the second: not repeated
    reasons = {c["sourceId"]: c["reason"] for c in third["trace"]["candidates"] if c["kind"] == "memory"}
    # Not repeated; an entry that only fills room (it matches nothing) is not even listed.
    assert ref not in _memory_refs(third) and reasons.get(ref, "already_shown") == "already_shown"
    manifest = d.call("get_manifest", {"workspace": ws, "sessionId": sid, "callId": first["callId"]})
    assert ref in [item["sourceId"] for item in manifest["items"]]
    proposal = d.call(
        "propose",
        {
            "workspace": ws,
            "title": "Deploys",
            "content": "Deploys go out on Wednesdays now.",
            "supersedes": entry_id,
        },
    )["proposal"]
    d.call("approve", {"workspace": ws, "ids": [proposal["id"]]})
    old = next(e for e in entries(d, ws) if e["id"] == entry_id)
    assert old["status"] == "archived" and old["content"] == "Deploys go out on Tuesdays."


def _memory_refs(pack: dict[str, Any]) -> list[str]:
    return [ref for s in pack["segments"] if s["kind"] == "memory" for ref in s["sourceIds"]]


def test_a_hand_typed_entry_keeps_its_id_across_restarts(daemon: DaemonProcess) -> None:
    """Edited, then the daemon restarted, then edited while it was down: one id."""
    path = memory_file(daemon.workspace)
    save(path, ("Editor", "helix"), ("Other", "o"))
    first = entries(daemon, daemon.workspace)[0]
    save(path, ("Editor", "helix, always"), ("Other", "o"))
    assert entries(daemon, daemon.workspace)[0]["id"] == first["id"]
    daemon.restart()
    assert entries(daemon, daemon.workspace)[0]["id"] == first["id"]
    daemon.stop()
    save(path, ("Editor", "helix, always, in tmux"), ("Other", "o"))
    daemon.start()
    again = entries(daemon, daemon.workspace)[0]
    assert again["id"] == first["id"] and again["createdAt"] == first["createdAt"]
    assert again["content"] == "helix, always, in tmux"


def test_a_hand_typed_user_level_entry_keeps_its_id(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """The user level is a workspace like any other: its hand-typed entry survives a typo fix,
    and a workspace's pack shows it under the same @user ref."""
    module_daemon.call("set_settings", {"workspace": "@user", "enabled": True, "agentReadEnabled": True})
    path = Path(module_daemon.call("read_state", {"workspace": "@user"})["path"])
    path.parent.mkdir(parents=True, exist_ok=True)
    save(path, ("Spelling", "Answers in British Enlgish."))
    before = {e["title"]: e["id"] for e in entries(module_daemon, "@user")}["Spelling"]
    save(path, ("Spelling", "Answers in British English."))
    after = by_title(module_daemon, "@user")["Spelling"]
    assert after["id"] == before and after["content"] == "Answers in British English."
    ws = str(new_ws)
    module_daemon.call("set_settings", {"workspace": ws, "agentReadEnabled": True})
    pack = module_daemon.call(
        "build_context", {"workspace": ws, "budgetTokens": 4000, "query": "British spelling"}
    )
    assert f"memory:@user/{before}" in _memory_refs(pack)
    path.unlink()


def test_a_save_from_a_buffer_older_than_a_daemon_edit_continues_the_entry(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """The daemon wrote a hand-typed entry's comment (a tag added with `maka memory edit`)
    while the editor held the file; the editor then saves its old buffer with a typo fixed
    in that entry: it is still the one entry, under its id, with the user's text."""
    path = memory_file(new_ws)
    save(path, ("Editor", "The user edits in hleix."), ("Other", "o"))
    (entry, _) = entries(module_daemon, new_ws)
    module_daemon.call("update_entry", {"workspace": str(new_ws), "id": entry["id"], "tags": ["tools"]})
    assert f"id={entry['id']}" in path.read_text(encoding="utf-8")
    save(path, ("Editor", "The user edits in helix."), ("Other", "o"))
    after = entries(module_daemon, new_ws)
    assert after[0]["id"] == entry["id"] and len(after) == 2
    assert after[0]["content"] == "The user edits in helix."
    assert ("deleted", "user", "external_edit") not in steps(module_daemon, new_ws, entry["id"])

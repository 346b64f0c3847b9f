"""Approving a near duplicate offers to replace (supersede) or merge with the entry it resembles."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from maka.errors import InvalidParams
from tests.cli.helpers import MAKA, Pty, editor_script, run_maka
from tests.support import DaemonProcess

OLD = "The user prefers tabs for indentation in Go code."
NEW = "The user prefers tabs for indentation in all Go code."


@pytest.fixture
def ws(module_daemon: DaemonProcess, new_ws: Path) -> Path:
    """A fresh workspace where agents may propose."""
    module_daemon.call(
        "set_settings", {"workspace": str(new_ws), "agentReadEnabled": True, "extractToolEnabled": True}
    )
    return new_ws


def call(d: DaemonProcess, ws: Path, method: str, **params: Any) -> Any:
    return d.call(method, {"workspace": str(ws), **params})


def near_duplicate(d: DaemonProcess, ws: Path) -> tuple[str, str]:
    """(the entry, a proposal the daemon lists as similar to it)."""
    entry_id: str = call(d, ws, "add_entry", title="Indentation", content=OLD)["entry"]["id"]
    pid: str = call(d, ws, "propose", title="Tabs", content=NEW)["proposal"]["id"]
    (view,) = call(d, ws, "list_proposals")["proposals"]
    assert view["similarTo"] == [entry_id]
    return entry_id, pid


def entries(d: DaemonProcess, ws: Path) -> dict[str, dict[str, Any]]:
    state = call(d, ws, "read_state", includeEntries=True, includeArchived=True)
    return {e["content"]: e for e in state["entries"]}


def test_approve_edit_may_supersede_an_active_entry(module_daemon: DaemonProcess, ws: Path) -> None:
    """approve with edits.supersedes archives that entry in the same write."""
    entry_id, pid = near_duplicate(module_daemon, ws)
    result = call(module_daemon, ws, "approve", ids=[pid], edits={pid: {"supersedes": entry_id}})
    assert result["approved"][0]["superseded"] == entry_id
    now = entries(module_daemon, ws)
    assert now[OLD]["status"] == "archived" and now[NEW]["status"] == "active"
    assert now[NEW]["supersedes"] == entry_id


def test_supersedes_must_name_an_active_entry(module_daemon: DaemonProcess, ws: Path) -> None:
    """A supersedes edit naming no active entry is invalid_params and nothing is approved."""
    _, pid = near_duplicate(module_daemon, ws)
    with module_daemon.client() as c, pytest.raises(InvalidParams) as caught:
        c.call("approve", {"workspace": str(ws), "ids": [pid], "edits": {pid: {"supersedes": "f" * 16}}})
    assert caught.value.data["path"] == f"$.edits.{pid}.supersedes"
    assert len(call(module_daemon, ws, "list_proposals")["proposals"]) == 1


def test_cli_approve_names_the_near_duplicate_and_the_way_to_replace_it(
    module_daemon: DaemonProcess, ws: Path
) -> None:
    """`maka approve` of a near duplicate says how to supersede or merge instead; --supersedes does."""
    entry_id, pid = near_duplicate(module_daemon, ws)
    plain = run_maka(module_daemon, "approve", pid, "-w", str(ws), workspace=False)
    assert plain.returncode == 0
    assert f"--supersedes {entry_id[:12]}" in plain.stderr and f"maka -w {ws} review" in plain.stderr
    assert entries(module_daemon, ws)[OLD]["status"] == "active"  # plain approve keeps both


def test_cli_approve_supersedes_by_prefix(module_daemon: DaemonProcess, ws: Path) -> None:
    """`maka approve ID --supersedes ENTRY` (a prefix) replaces the entry."""
    entry_id, pid = near_duplicate(module_daemon, ws)
    result = run_maka(
        module_daemon, "approve", pid, "--supersedes", entry_id[:6], "-w", str(ws), workspace=False
    )
    assert result.returncode == 0, result.stderr
    assert "archived" in result.stdout
    assert entries(module_daemon, ws)[OLD]["status"] == "archived"


def test_review_replace_key(module_daemon: DaemonProcess, ws: Path) -> None:
    """In review, `u` approves the proposal and archives the similar entry it replaces."""
    entry_id, _ = near_duplicate(module_daemon, ws)
    result = run_maka(module_daemon, "review", "-w", str(ws), workspace=False, input="u\n")
    assert result.returncode == 0, result.stderr
    assert "[u]se instead" in result.stdout and "[m]erge" in result.stdout
    now = entries(module_daemon, ws)
    assert now[OLD]["status"] == "archived" and now[NEW]["supersedes"] == entry_id


def test_review_merge_key_edits_both_into_one(
    module_daemon: DaemonProcess, ws: Path, short_tmp: Path
) -> None:
    """In review, `m` opens the editor on both texts; the saved text replaces the entry."""
    entry_id, _ = near_duplicate(module_daemon, ws)
    seen = short_tmp / "seen.txt"
    editor = editor_script(
        short_tmp,
        f"pathlib.Path({str(seen)!r}).write_text(text)\n"
        "body = text.split('---\\n', 1)[0] + '--- content below this line (empty content cancels) ---\\n'\n"
        "path.write_text(body + 'Tabs in all Go code, C too.\\n')",
    )
    result = run_maka(
        module_daemon,
        "review",
        "-w",
        str(ws),
        workspace=False,
        input="m\n",
        env={"EDITOR": editor, "VISUAL": ""},
    )
    assert result.returncode == 0, result.stderr
    opened = seen.read_text()
    assert OLD in opened and NEW in opened  # both texts offered for merging
    now = entries(module_daemon, ws)
    assert now[OLD]["status"] == "archived"
    merged = now["Tabs in all Go code, C too."]
    assert merged["status"] == "active" and merged["supersedes"] == entry_id
    assert NEW not in now  # the proposal's own text was merged, not added too


def test_review_without_similar_entries_offers_no_replace(module_daemon: DaemonProcess, ws: Path) -> None:
    """A proposal like nothing in MEMORY.md gets the usual keys; `u` is just unknown there."""
    call(module_daemon, ws, "propose", title="Editor", content="The user's editor is helix.")
    result = run_maka(module_daemon, "review", "-w", str(ws), workspace=False, input="u\nq\n")
    assert "[u]se instead" not in result.stdout
    assert len(call(module_daemon, ws, "list_proposals")["proposals"]) == 1


def test_approve_on_a_terminal_asks_about_the_near_duplicate(module_daemon: DaemonProcess, ws: Path) -> None:
    """On a terminal, `maka approve` of a near duplicate asks first; `u` supersedes the entry."""
    entry_id, pid = near_duplicate(module_daemon, ws)
    env = {**os.environ, "COLUMNS": "120", "TERM": "dumb", "MAKA_NO_AUTOSTART": "1"}
    pty = Pty([*MAKA, "--socket", str(module_daemon.socket), "approve", pid[:8], "-w", str(ws)], env)
    shown = pty.expect("[s]kip [?] ")
    assert "Similar entries:" in shown and "Indentation" in shown
    pty.send("u")
    code, rest = pty.wait()
    assert code == 0 and "which it replaces" in rest
    assert entries(module_daemon, ws)[OLD]["status"] == "archived"
    assert entries(module_daemon, ws)[NEW]["supersedes"] == entry_id

"""read_state warns about memory it cannot see: a misplaced file, text outside any entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cli.helpers import run_maka
from tests.support import DaemonProcess


def read_state(d: DaemonProcess, new_ws: Path) -> dict[str, Any]:
    state: dict[str, Any] = d.call("read_state", {"workspace": str(new_ws), "includeEntries": True})
    return state


def kinds(state: dict[str, Any]) -> list[str]:
    return [w["kind"] for w in state["warnings"]]


def test_memory_md_at_the_root_is_named(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """A MEMORY.md beside memory/ instead of inside it gives misplaced_file naming where it belongs."""
    (new_ws / "MEMORY.md").write_text("# Notes\n\n## Tabs\nUse tabs.\n")
    state = read_state(module_daemon, new_ws)
    assert state["entryCount"] == 0
    (warning,) = [w for w in state["warnings"] if w["kind"] == "misplaced_file"]
    assert "memory/MEMORY.md" in warning["message"] and "line" not in warning


def test_pending_md_at_the_root_is_named_too(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """PENDING.md at the root is reported the same way."""
    (new_ws / "PENDING.md").write_text("## A proposal\ntext\n")
    state = read_state(module_daemon, new_ws)
    assert any(w["kind"] == "misplaced_file" and "PENDING.md" in w["message"] for w in state["warnings"])


def test_root_file_beside_a_used_memory_file_is_not_reported(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """With entries in memory/MEMORY.md, a root MEMORY.md (another tool's) is left alone."""
    module_daemon.call("add_entry", {"workspace": str(new_ws), "title": "T", "content": "c"})
    (new_ws / "MEMORY.md").write_text("## Someone else's\nfile\n")
    assert "misplaced_file" not in kinds(read_state(module_daemon, new_ws))


def test_a_directory_named_memory_md_is_not_a_file(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """Only a file at the root is misplaced; a folder of that name is not."""
    (new_ws / "MEMORY.md").mkdir()
    assert "misplaced_file" not in kinds(read_state(module_daemon, new_ws))


def test_bullets_before_the_first_entry_are_reported_by_line(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """CLAUDE.md-style bullets outside any `## ` section give text_outside_entries with their lines."""
    memory = new_ws / "memory"
    memory.mkdir()
    (memory / "MEMORY.md").write_text(
        "# Project memory\n\n<!-- a comment\nover lines -->\n- uses pnpm\n- deploys on Fridays\n\nSome prose.\n"
    )
    state = read_state(module_daemon, new_ws)
    assert state["entryCount"] == 0
    found = [w for w in state["warnings"] if w["kind"] == "text_outside_entries"]
    assert [w["line"] for w in found] == [5, 6, 8]
    assert all("## " in w["message"] for w in found)


def test_text_before_entries_is_reported_and_entries_still_read(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """Stray text above real entries is named; the entries below are read as usual."""
    memory = new_ws / "memory"
    memory.mkdir()
    (memory / "MEMORY.md").write_text("# Maka Memory\n\nstray line\n\n## Tabs\nUse tabs.\n")
    state = read_state(module_daemon, new_ws)
    assert state["entryCount"] == 1
    assert [w.get("line") for w in state["warnings"] if w["kind"] == "text_outside_entries"] == [3]


def test_a_clean_file_has_no_warnings(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """A file the daemon wrote (header, entries) warns about nothing."""
    module_daemon.call("add_entry", {"workspace": str(new_ws), "title": "Tabs", "content": "Use tabs."})
    assert read_state(module_daemon, new_ws)["warnings"] == []


def test_many_stray_lines_are_summed_up(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """Past ten lines, one more warning counts the rest (the reply stays small)."""
    memory = new_ws / "memory"
    memory.mkdir()
    (memory / "MEMORY.md").write_text("".join(f"- fact {i}\n" for i in range(50)))
    found = [w for w in read_state(module_daemon, new_ws)["warnings"] if w["kind"] == "text_outside_entries"]
    assert len(found) == 11 and "line" not in found[-1] and "40 more" in found[-1]["message"]


def test_cli_prints_each_warning_with_the_fix(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """`maka memory list` prints the warnings on stderr, each kind with how to fix it."""
    (new_ws / "MEMORY.md").write_text("- uses pnpm\n")
    result = run_maka(module_daemon, "memory", "list", "-w", str(new_ws), workspace=False)
    assert result.returncode == 0 and "No entries." in result.stdout
    assert "misplaced_file" not in result.stdout
    assert "MEMORY.md" in result.stderr and "mv MEMORY.md memory/" in result.stderr
    memory = new_ws / "memory"
    memory.mkdir()
    (new_ws / "MEMORY.md").rename(memory / "MEMORY.md")
    moved = run_maka(module_daemon, "memory", "list", "-w", str(new_ws), workspace=False)
    assert "line 1" in moved.stderr and "## " in moved.stderr

"""read_state warns about memory it cannot see: a misplaced file, text outside any entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from maka.errors import Conflict, InvalidParams
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
    assert result.returncode == 0 and result.stdout.startswith("No entries in ")
    assert "misplaced_file" not in result.stdout
    assert "MEMORY.md" in result.stderr and "mv MEMORY.md memory/" in result.stderr
    memory = new_ws / "memory"
    memory.mkdir()
    (new_ws / "MEMORY.md").rename(memory / "MEMORY.md")
    moved = run_maka(module_daemon, "memory", "list", "-w", str(new_ws), workspace=False)
    assert "line 1" in moved.stderr and "## " in moved.stderr


STRAY = (
    "# My notes\r\n\r\n"
    "- Use tabs in Go code\r\n"
    "- The staging DB is heron\r\n"
    "  (refreshed on Sundays)\r\n"
    "- A thought not imported\r\n"
    "<!-- kept: a comment -->\r\n"
    "Some prose.\r\n\r\n"
    "## Existing\r\nAn entry typed by hand.\r\n"
)


def stray_memory(module_daemon: DaemonProcess, new_ws: Path) -> Path:
    """MEMORY.md with bullets above its entry; the first two imported and approved, the
    third waiting nowhere (not imported)."""
    memory = new_ws / "memory"
    memory.mkdir()
    path = memory / "MEMORY.md"
    path.write_bytes(STRAY.encode())
    data = "- Use tabs in Go code\n- The staging DB is heron\n  (refreshed on Sundays)\n"
    imported = module_daemon.call(
        "import_memories", {"workspace": str(new_ws), "data": data, "format": "markdown"}
    )["imported"]
    module_daemon.call("approve", {"workspace": str(new_ws), "ids": imported})
    return path


def test_imported_lines_above_the_entries_can_be_removed(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """remove_outside_text: a dry run names the imported lines (a bullet with its
    continuation) and where their memory is; the removal takes out exactly those lines,
    keeps the title, the comment, the prose, the line endings and every entry, the
    warnings for them are gone, and `maka undo` brings them back."""
    path = stray_memory(module_daemon, new_ws)
    before = path.read_bytes()
    ws = str(new_ws)
    plan = module_daemon.call("remove_outside_text", {"workspace": ws, "dryRun": True})
    assert [(r["line"], r["where"]) for r in plan["removed"]] == [(3, "memory"), (4, "memory"), (5, "memory")]
    assert [(k["line"], k["where"]) for k in plan["kept"]] == [(6, "not_imported"), (8, "not_imported")]
    assert path.read_bytes() == before  # a dry run writes nothing
    done = module_daemon.call(
        "remove_outside_text", {"workspace": ws, "lines": [3, 4, 5], "expectedRevision": plan["revision"]}
    )
    assert [r["line"] for r in done["removed"]] == [3, 4, 5] and not done["dryRun"]
    assert path.read_bytes().decode() == (
        "# My notes\r\n\r\n- A thought not imported\r\n<!-- kept: a comment -->\r\nSome prose.\r\n\r\n"
        "## Existing\r\nAn entry typed by hand.\r\n"
        + before.decode().split("An entry typed by hand.\r\n", 1)[1]
    )
    state = read_state(module_daemon, new_ws)
    assert [w["line"] for w in state["warnings"] if w["kind"] == "text_outside_entries"] == [3, 5]
    assert state["entryCount"] == 3
    undone = run_maka(module_daemon, "undo", "-w", ws, workspace=False)
    assert undone.returncode == 0, undone.stderr
    assert path.read_bytes() == before  # the backup kept for the write brings the lines back


def test_removal_refuses_what_it_cannot_vouch_for(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """A line that was not imported is refused by number (invalid_params naming it), a
    stale revision is a conflict, and in both cases the file is untouched."""
    path = stray_memory(module_daemon, new_ws)
    ws = str(new_ws)
    before = path.read_bytes()
    plan = module_daemon.call("remove_outside_text", {"workspace": ws, "dryRun": True})
    with pytest.raises(InvalidParams) as refused:
        module_daemon.call("remove_outside_text", {"workspace": ws, "lines": [3, 6]})
    assert refused.value.data["lines"] == [6]
    module_daemon.call("add_entry", {"workspace": ws, "title": "Later", "content": "moved the revision"})
    changed = path.read_bytes()
    with pytest.raises(Conflict):
        module_daemon.call("remove_outside_text", {"workspace": ws, "expectedRevision": plan["revision"]})
    assert path.read_bytes() == changed and changed.startswith(before.split(b"## Existing")[0])


def test_cli_tidy_offers_and_asks(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """`maka memory list` says the stray lines were imported and names `maka memory tidy`;
    tidy off a terminal without -y only shows them; with -y it removes them."""
    path = stray_memory(module_daemon, new_ws)
    before = path.read_bytes()
    listed = run_maka(module_daemon, "memory", "list", "-w", str(new_ws), workspace=False)
    tidy = f"`maka -w {new_ws} memory tidy`"
    assert f"3 of these lines were imported already: {tidy} removes them" in listed.stderr
    shown = run_maka(module_daemon, "memory", "tidy", "-w", str(new_ws), workspace=False)
    assert shown.returncode == 0 and f"Nothing removed: run `maka -w {new_ws} memory tidy -y`" in shown.stdout
    assert "- The staging DB is heron" in shown.stdout and "in MEMORY.md" in shown.stdout
    assert path.read_bytes() == before
    done = run_maka(module_daemon, "memory", "tidy", "-y", "-w", str(new_ws), workspace=False)
    assert done.returncode == 0 and "Removed 3 lines" in done.stdout
    assert b"Use tabs in Go code\r\n- The staging" not in path.read_bytes()


def test_stray_lines_that_are_not_utf8_are_listed_and_tidied(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """A cp1252 bullet above the entries: `maka memory list` and remove_outside_text answer
    (the line's text read as cp1252, no internal error), `maka memory tidy --import -y`
    queues and removes it, and every other byte of the file stays as it was."""
    memory = new_ws / "memory"
    memory.mkdir()
    path = memory / "MEMORY.md"
    entry = b"## Caf\xe9 hours\nOpen at n\xe9un.\n"
    path.write_bytes(b"# Notes\n\n- The caf\xe9 opens at nine\n\n" + entry)
    ws = str(new_ws)
    listed = run_maka(module_daemon, "memory", "list", "-w", ws, workspace=False)
    assert listed.returncode == 0, listed.stderr
    assert "Café hours" in listed.stdout and "line 3" in listed.stderr
    plan = module_daemon.call("remove_outside_text", {"workspace": ws, "dryRun": True})
    assert plan["removed"] == [] and [(k["line"], k["text"]) for k in plan["kept"]] == [
        (3, "- The café opens at nine")
    ]
    done = run_maka(module_daemon, "memory", "tidy", "--import", "-y", "-w", ws, workspace=False)
    assert done.returncode == 0, done.stderr
    assert path.read_bytes() == b"# Notes\n\n" + entry
    (waiting,) = module_daemon.call("list_proposals", {"workspace": ws})["proposals"]
    assert waiting["proposal"]["content"] == "The café opens at nine"


def test_sections_of_pending_md_not_waiting_for_review_are_named(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """A section typed into PENDING.md without `status=review_required` (or one left
    `active` there) is no proposal: list_proposals names each by line, read_state once, and
    the file keeps it; the proposal beside them is listed."""
    memory = new_ws / "memory"
    memory.mkdir()
    path = memory / "PENDING.md"
    path.write_text(
        "# Maka Pending Proposals\r\n\r\n## Typed by hand\r\nno comment at all\r\n\r\n"
        "## Waiting\r\n<!-- maka-memory: id=w1 origin=extracted status=review_required -->\r\nok\r\n\r\n"
        "## Left active\r\n<!-- maka-memory: id=a1 origin=extracted status=active -->\r\nactive\r\n"
    )
    before = path.read_bytes()
    listed = module_daemon.call("list_proposals", {"workspace": str(new_ws)})
    assert [p["proposal"]["id"] for p in listed["proposals"]] == ["w1"]
    named = [(w["kind"], w.get("line")) for w in listed["warnings"]]
    assert named == [("not_a_proposal", 3), ("not_a_proposal", 10)]
    assert "Typed by hand" in listed["warnings"][0]["message"]
    assert "status=review_required" in listed["warnings"][0]["message"]
    state = read_state(module_daemon, new_ws)
    (warning,) = [w for w in state["warnings"] if w["kind"] == "not_a_proposal"]
    assert "line" not in warning and "3, 10" in warning["message"] and state["pendingCount"] == 1
    assert path.read_bytes() == before


def test_a_pending_md_over_its_cap_is_named_not_shown_empty(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """A PENDING.md over the size cap lists no proposal: list_proposals and read_state say
    why with pending_safe_mode (its size and the cap), not an empty queue without a word;
    the file keeps its bytes, and read_state still reads MEMORY.md."""
    memory = new_ws / "memory"
    memory.mkdir()
    (memory / "MEMORY.md").write_text("# Maka Memory\n\n## Tabs\nUse tabs.\n")
    path = memory / "PENDING.md"
    path.write_text(
        "## Big\n<!-- maka-memory: id=b1 origin=extracted status=review_required -->\n" + "z" * 140_000 + "\n"
    )
    before = path.read_bytes()
    listed = module_daemon.call("list_proposals", {"workspace": str(new_ws)})
    assert listed["proposals"] == []
    (warning,) = [w for w in listed["warnings"] if w["kind"] == "pending_safe_mode"]
    assert str(len(before)) in warning["message"] and "131072" in warning["message"]
    state = read_state(module_daemon, new_ws)
    assert state["status"] == "ok" and state["entryCount"] == 1
    assert "pending_safe_mode" in kinds(state)
    path.write_text("")
    assert "pending_safe_mode" not in kinds(read_state(module_daemon, new_ws))

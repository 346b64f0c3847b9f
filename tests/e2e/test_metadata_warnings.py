"""read_state warns about hand-typed metadata it does not understand, and keeps it as typed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cli.helpers import run_maka
from tests.support import DaemonProcess

# Line numbers below: the heading of each entry, then its comment on the next line.
TYPED = (
    "# Maka Memory\n"
    "\n"
    "## Deploys happen on Tuesdays\n"  # 3
    "<!-- maka-memory: id=aaaa000000000001 status=actve -->\n"  # 4
    "Never on Fridays.\n"
    "\n"
    "## Package manager\n"  # 7
    "<!-- maka-memory: stauts=archived tag=ops -->\n"  # 8
    "Prefers pnpm.\n"
    "\n"
    "## Staging database\n"  # 11
    "<!-- maka-memory: confidence=1.5 createdAt=2024-01-01 -->\n"  # 12
    "It is called heron.\n"
    "\n"
    "## Another deploy note\n"  # 15
    "<!-- maka-memory: id=aaaa000000000001 status=active status=archived -->\n"  # 16
    "Tag releases first.\n"
    "\n"
    "## Reviewed\n"  # 19
    "<!-- maka-memory: reviewer=ann confidence=high tags=pinned -->\n"  # 20
    "Own keys and valid values warn about nothing.\n"
)


def write_memory(ws: Path, text: str) -> Path:
    memory = ws / "memory"
    memory.mkdir()
    path = memory / "MEMORY.md"
    path.write_text(text)
    return path


def read_state(d: DaemonProcess, ws: Path) -> dict[str, Any]:
    state: dict[str, Any] = d.call("read_state", {"workspace": str(ws), "includeEntries": True})
    return state


def messages(state: dict[str, Any], kind: str, line: int) -> list[str]:
    return [w["message"] for w in state["warnings"] if w["kind"] == kind and w.get("line") == line]


def test_each_misunderstood_token_is_named_on_its_line(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """An unknown status, a misspelt key, a confidence out of range, an unparseable date, a
    repeated key and a repeated id each give a warning on the comment's line naming the
    entry, the token, what the daemon did and the closest valid spelling."""
    write_memory(new_ws, TYPED)
    state = read_state(module_daemon, new_ws)
    (status,) = messages(state, "unknown_value", 4)
    assert "Deploys happen on Tuesdays" in status and "status=actve" in status
    assert "reads as active" in status and "did you mean status=active?" in status
    stauts, tag = messages(state, "unknown_key", 8)
    assert "Package manager" in stauts and "stauts=archived" in stauts and "did you mean status=" in stauts
    assert "tag=ops" in tag and "did you mean tags=" in tag
    confidence, created = messages(state, "unknown_value", 12)
    assert "Staging database" in confidence and "confidence=1.5" in confidence and "0 to 1" in confidence
    assert "createdAt=2024-01-01" in created and "createdAt=1704067200000" in created
    (repeated,) = messages(state, "duplicate_key", 16)
    assert "Another deploy note" in repeated and "status=archived" in repeated
    (same_id,) = messages(state, "duplicate_id", 16)
    assert "aaaa000000000001" in same_id and "Deploys happen on Tuesdays" in same_id and "line 3" in same_id
    assert not [w for w in state["warnings"] if w.get("line") == 20]


def test_the_entries_still_read_as_before_and_the_file_is_untouched(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """The warnings change nothing: the typo'd status still reads as active, the first of a
    repeated key wins, and the file keeps every byte (the daemon rewrites nothing)."""
    path = write_memory(new_ws, TYPED)
    state = read_state(module_daemon, new_ws)
    entries = {e["title"]: e for e in state["entries"]}
    assert entries["Deploys happen on Tuesdays"]["status"] == "active"
    assert entries["Another deploy note"]["status"] == "active"
    assert entries["Package manager"]["status"] == "active" and entries["Package manager"]["tags"] == []
    assert state["entryCount"] == 5
    assert path.read_text() == TYPED


def test_a_file_the_daemon_wrote_warns_about_nothing(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """Entries added, pinned, archived and given a decay through the API have no metadata warning."""
    ws = str(new_ws)
    first = module_daemon.call("add_entry", {"workspace": ws, "title": "A", "content": "a", "tags": ["ops"]})
    module_daemon.call("add_entry", {"workspace": ws, "title": "B", "content": "b", "decayTtlMs": 86_400_000})
    module_daemon.call("archive_entry", {"workspace": ws, "id": first["entry"]["id"]})
    assert read_state(module_daemon, new_ws)["warnings"] == []


def test_an_unclosed_comment_and_a_token_without_a_value_are_bad_metadata(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """A comment missing its `-->` and a bare word in it warn `bad_metadata` on the comment line."""
    write_memory(
        new_ws,
        "## Open comment\n<!-- maka-memory: tags=ops\nText.\n\n## Bare word\n<!-- maka-memory: pinned -->\nMore.\n",
    )
    state = read_state(module_daemon, new_ws)
    (unclosed,) = messages(state, "bad_metadata", 2)
    (bare,) = messages(state, "bad_metadata", 6)
    assert "-->" in unclosed and "Open comment" in unclosed
    assert "pinned" in bare and "Bare word" in bare


def test_many_problems_are_summed_up(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """Past ten warnings of a kind, one more without a line counts the rest."""
    write_memory(
        new_ws, "".join(f"## Entry {i}\n<!-- maka-memory: status=actve -->\nText {i}.\n\n" for i in range(30))
    )
    found = [w for w in read_state(module_daemon, new_ws)["warnings"] if w["kind"] == "unknown_value"]
    assert len(found) == 11 and "line" not in found[-1] and "20 more" in found[-1]["message"]


def test_memory_list_prints_the_warnings(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """`maka memory list` lists the entries and prints each metadata warning on stderr with a fix."""
    write_memory(new_ws, TYPED)
    result = run_maka(module_daemon, "memory", "list", "-w", str(new_ws), workspace=False)
    assert result.returncode == 0, result.stderr
    assert "Deploys happen on Tuesdays" in result.stdout
    assert "status=actve" in result.stderr and "did you mean status=active?" in result.stderr
    assert "fix:" in result.stderr and "FORMAT.md" in result.stderr


def test_hand_typed_dates_makad_cannot_use_are_named_and_kept(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """Epoch seconds, an impossible date and a slashed date each warn on their line with the
    milliseconds meant, `maka memory list` prints them with a fix, and the file keeps every byte."""
    typed = (
        "## Seconds\n<!-- maka-memory: updatedAt=1733500000 -->\nA.\n\n"  # 2
        "## Impossible\n<!-- maka-memory: createdAt=2026-13-45 -->\nB.\n\n"  # 6
        "## Slashed\n<!-- maka-memory: createdAt=12/04/2026 -->\nC.\n"  # 10
    )
    path = write_memory(new_ws, typed)
    state = read_state(module_daemon, new_ws)
    (seconds,) = messages(state, "unlikely_date", 2)
    assert "did you mean updatedAt=1733500000000 (2024-12-06)?" in seconds
    (impossible,) = messages(state, "unknown_value", 6)
    assert "makad reads Unix milliseconds" in impossible
    (slashed,) = messages(state, "unknown_value", 10)
    assert "(2026-04-12) or createdAt=" in slashed
    assert path.read_text() == typed


def test_memory_list_gives_the_fix_for_a_date_in_seconds(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """A date in seconds alone is printed by `maka memory list` with the fix for metadata comments."""
    write_memory(new_ws, "## Seconds\n<!-- maka-memory: createdAt=1733500000 -->\nA.\n")
    result = run_maka(module_daemon, "memory", "list", "-w", str(new_ws), workspace=False)
    assert result.returncode == 0, result.stderr
    assert "createdAt=1733500000000" in result.stderr and "fix: edit the metadata comment" in result.stderr


def test_memory_show_prints_the_warnings_about_that_entry(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """`maka memory show ID` prints the warnings about that entry's comment (with the fix),
    not the other entries'; read_state gives each its entryId."""
    write_memory(new_ws, TYPED)
    state = read_state(module_daemon, new_ws)
    assert {w.get("entryId") for w in state["warnings"] if w.get("line") == 4} == {"aaaa000000000001"}
    result = run_maka(module_daemon, "memory", "show", "aaaa000000000001", "-w", str(new_ws), workspace=False)
    assert result.returncode == 0, result.stderr
    assert "did you mean status=active?" in result.stderr and "fix:" in result.stderr
    assert "stauts" not in result.stderr and "confidence=1.5" not in result.stderr

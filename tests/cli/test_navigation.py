"""Finding the workspace like git, --version, -w anywhere, and "did you mean" for typos."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import makad
from tests.cli.helpers import run_maka
from tests.support import DaemonProcess


def maka(d: DaemonProcess, *args: str, cwd: Path | None = None, input: str = "") -> tuple[int, str, str]:
    result = run_maka(d, *args, cwd=cwd, workspace=False, input=input, env={"MAKA_WORKSPACE": ""})
    return result.returncode, result.stdout, result.stderr


def add(d: DaemonProcess, new_ws: Path, title: str, content: str) -> str:
    entry_id: str = d.call("add_entry", {"workspace": str(new_ws), "title": title, "content": content})[
        "entry"
    ]["id"]
    return entry_id


def test_a_subdirectory_finds_the_workspace_above(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """From a subfolder, maka reads and writes the workspace above it, never a stray one."""
    add(module_daemon, new_ws, "Root fact", "kept at the root")
    deep = new_ws / "src" / "pkg"
    deep.mkdir(parents=True)
    code, out, _ = maka(module_daemon, "memory", "list", cwd=deep)
    assert code == 0 and "Root fact" in out
    code, out, err = maka(module_daemon, "memory", "add", "From below", "added in src/pkg", cwd=deep)
    assert code == 0, err
    assert "added in src/pkg" in (new_ws / "memory" / "MEMORY.md").read_text()
    assert not (deep / "memory").exists() and not (new_ws / "src" / "memory").exists()


def test_a_git_repository_is_a_workspace_root(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """A folder holding .git is the workspace of everything below it, before its first memory."""
    (new_ws / ".git").mkdir()
    deep = new_ws / "a" / "b"
    deep.mkdir(parents=True)
    code, _, err = maka(module_daemon, "memory", "add", "Repo fact", "in the repository", cwd=deep)
    assert code == 0, err
    assert (new_ws / "memory" / "MEMORY.md").is_file() and not (deep / "memory").exists()


def test_workspace_option_before_the_command(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path
) -> None:
    """-w/--workspace works before the command as well as after it."""
    add(module_daemon, new_ws, "Front", "given before the command")
    for flag in ("-w", "--workspace"):
        code, out, _ = maka(module_daemon, flag, str(new_ws), "memory", "list", cwd=short_tmp)
        assert code == 0 and "Front" in out
    code, out, _ = maka(module_daemon, "-w", str(short_tmp), "memory", "list", "-w", str(new_ws))
    assert "Front" in out  # the one after the command wins


def test_version_needs_no_daemon(short_tmp: Path) -> None:
    """maka --version prints the version and exits 0 without any daemon."""
    result = subprocess.run(
        [sys.executable, "-m", "maka.cli", "--socket", str(short_tmp / "none.sock"), "--version"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0 and makad.__version__ in result.stdout


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        (["stauts"], "status"),
        (["memory", "lsit"], "list"),
        (["pendng"], "pending"),
        (["sesions"], "sessions"),
    ],
)
def test_a_mistyped_command_suggests_the_right_one(
    module_daemon: DaemonProcess, argv: list[str], suggestion: str
) -> None:
    """A command or action that does not exist is a usage error that names the closest one."""
    code, out, err = maka(module_daemon, *argv)
    assert code == 2 and out == ""
    assert f"did you mean '{suggestion}'?" in err


def test_a_mistyped_setting_suggests_the_key_and_changes_nothing(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """An unknown settings key is refused before anything is sent, naming the key meant."""
    code, _, err = maka(module_daemon, "settings", "agentreadenabled=on", "-w", str(new_ws))
    assert code == 2 and "did you mean 'agentReadEnabled'?" in err
    code, _, err = maka(module_daemon, "settings", "agentReadEnable=on", "-w", str(new_ws))
    assert code == 2 and "did you mean 'agentReadEnabled'?" in err
    assert module_daemon.call("get_settings", {"workspace": str(new_ws)})["agentReadEnabled"] is False


def test_a_hand_written_entry_is_found_without_its_h_prefix(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """An entry typed by hand (id h-…) is found by the hex part of its id alone."""
    memory = new_ws / "memory"
    memory.mkdir()
    (memory / "MEMORY.md").write_text("# Notes\n\n## Uses helix\nThe user edits in helix.\n")
    code, out, _ = maka(module_daemon, "--json", "memory", "list", "-w", str(new_ws))
    (entry,) = json.loads(out)["entries"]
    assert entry["id"].startswith("h-")
    code, out, err = maka(module_daemon, "memory", "show", entry["id"][2:10], "-w", str(new_ws))
    assert code == 0, err
    assert "Uses helix" in out


def test_an_unknown_id_suggests_a_close_one(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """An id that matches nothing still reaches the daemon (not_found) and names the id meant."""
    entry_id = add(module_daemon, new_ws, "Close", "close enough")
    typo = entry_id[:3] + ("0" if entry_id[3] != "0" else "1") + entry_id[4:12]
    code, _, err = maka(module_daemon, "memory", "archive", typo, "-w", str(new_ws))
    assert code == 1 and "not_found" in err
    assert f"did you mean {entry_id[:12]}" in err


def test_a_gone_hand_typed_id_is_not_taken_for_another_by_its_h(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """An h- id matching nothing (an entry deleted since) whose hex part is only half like a
    known one's gets no "did you mean" on the strength of the h- they share; a typo in the
    hex part of an h- id still names the entry meant."""
    memory = new_ws / "memory"
    memory.mkdir()
    (memory / "MEMORY.md").write_text("## Uses helix\nThe user edits in helix.\n")
    code, out, _ = maka(module_daemon, "--json", "memory", "list", "-w", str(new_ws))
    (entry,) = json.loads(out)["entries"]
    hex_part = entry["id"][2:]
    # Two of four hex characters in place: with the two of "h-" it would read as close.
    spare = [c for c in "0123456789abcdef" if c not in hex_part[:4]]
    other = hex_part[0] + spare[0] + hex_part[2] + spare[1]
    code, _, err = maka(module_daemon, "memory", "archive", f"h-{other}", "-w", str(new_ws))
    assert code == 1 and "not_found" in err and "did you mean" not in err, err
    typo = hex_part[:2] + ("0" if hex_part[2] != "0" else "1") + hex_part[3:10]
    code, _, err = maka(module_daemon, "memory", "archive", f"h-{typo}", "-w", str(new_ws))
    assert code == 1 and f"did you mean {entry['id'][:12]}" in err, err

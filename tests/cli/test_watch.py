"""`maka watch` streams the daemon's notifications."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

from maka.cli.watch import Snapshots, describe
from tests.cli.helpers import MAKA, call, run_maka
from tests.support import DaemonProcess


def test_watch_prints_each_notification_as_json(shared_daemon: DaemonProcess) -> None:
    """watch --json -n 2 prints one JSON notification per line, then exits 0."""
    proc = subprocess.Popen(
        [
            *MAKA,
            "--socket",
            str(shared_daemon.socket),
            "watch",
            "--json",
            "-n",
            "2",
            "-w",
            str(shared_daemon.workspace),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None and proc.stdout is not None
    assert proc.stderr.readline().startswith(f"watching {shared_daemon.workspace} (revision ")
    call(shared_daemon, "add_entry", title="T", content="watched")
    call(shared_daemon, "set_settings", agentReadEnabled=True)
    out, _ = proc.communicate(timeout=20)
    notes = [json.loads(line) for line in out.splitlines()]
    assert proc.returncode == 0
    assert [n["method"] for n in notes] == ["memory_changed", "settings_changed"]
    assert notes[0]["params"]["workspace"] == str(shared_daemon.workspace)
    assert notes[0]["params"]["cause"] == "daemon"


def test_describe_is_one_readable_line() -> None:
    """A notification reads as time, method, revision and cause (and workspace when asked)."""
    note = {
        "method": "memory_changed",
        "params": {"workspace": "/w", "revision": 7, "cause": "external_edit"},
    }
    line = describe(note, 1_700_000_000_000, show_workspace=True)
    assert line.split()[2:] == ["memory_changed", "rev", "7", "external_edit", "/w"]
    assert "/w" not in describe(note, 1_700_000_000_000, show_workspace=False)


def test_watch_says_which_entries_changed(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """Each memory_changed line is followed by the entries it added, changed, archived or removed."""
    ws = str(new_ws)
    kept = module_daemon.call("add_entry", {"workspace": ws, "title": "Kept", "content": "stays"})["entry"]
    with subprocess.Popen(
        [*MAKA, "--socket", str(module_daemon.socket), "-w", ws, "watch", "-n", "5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:  # closes its pipes at the end
        assert proc.stderr is not None and proc.stdout is not None
        threading.Timer(30, proc.kill).start()  # a watch that misses a line must not hang the suite
        assert proc.stderr.readline().startswith(f"watching {ws} (revision ")  # -w before the command
        added = module_daemon.call("add_entry", {"workspace": ws, "title": "Fresh", "content": "new"})[
            "entry"
        ]
        wait_for_line(proc, "added 'Fresh'")
        module_daemon.call("archive_entry", {"workspace": ws, "id": kept["id"]})
        wait_for_line(proc, "archived 'Kept'")
        module_daemon.call("update_entry", {"workspace": ws, "id": added["id"], "content": "newer"})
        wait_for_line(proc, "changed 'Fresh'")
        memory = new_ws / "memory" / "MEMORY.md"
        text = memory.read_text()
        save(memory, text + "\n## Typed\nby hand\n")  # the user types an entry
        wait_for_line(proc, "added 'Typed'")
        save(memory, text)  # and deletes it by hand
        wait_for_line(proc, "removed 'Typed'")
        proc.wait(timeout=20)
        assert proc.returncode == 0


def save(path: Path, text: str) -> None:
    """Save as most editors do, in one rename: an in-place write can be seen half done
    (the file empty), which is one more notification than this test counts."""
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(text)
    os.replace(temp, path)


def wait_for_line(proc: subprocess.Popen[str], text: str) -> str:
    """Read stdout until a line holds ``text`` (the test's timeout bounds the wait)."""
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        assert line, f"watch ended before {text!r}"
        if text in line:
            return line


class _Files:
    """A daemon's answers frozen at one moment: what watch reads when a notification
    arrives after the files moved on (a race a real daemon cannot be made to lose)."""

    def __init__(self, entries: list[dict[str, object]], proposals: list[dict[str, object]]) -> None:
        self.entries, self.proposals = entries, proposals

    def call(self, method: str, params: dict[str, object]) -> dict[str, object]:
        if method == "read_state":
            return {"status": "ok", "entries": self.entries}
        return {
            "proposals": [{"proposal": p, "note": "returned-after-a-save-lacked-it"} for p in self.proposals]
        }


def test_watch_names_a_return_its_readings_missed() -> None:
    """An entry approved and returned between two readings: the notification's ``returned``
    still gets its line, with the title from PENDING.md and the reason."""
    returned = {"id": "0a53267e789e5fba", "title": "kept", "content": "c"}
    snapshots = Snapshots(_Files([{"id": "seed", "title": "Seed", "content": "s"}], [returned]))  # type: ignore[arg-type]
    snapshots.remember("/w")
    note = {
        "method": "memory_changed",
        "params": {"workspace": "/w", "revision": 3, "cause": "external_edit", "returned": [returned["id"]]},
    }
    assert snapshots.changes(note) == [
        "returned 'kept' (0a53267e789e) to PENDING.md: a save lacked it (an editor buffer older than "
        "the daemon's write?)"
    ]


def test_a_count_of_zero_or_less_is_a_usage_error(shared_daemon: DaemonProcess) -> None:
    """`maka watch -n 0` (or a negative count) exits 2 naming the number, instead of
    watching forever as if no count were given."""
    for count in ("0", "-3"):
        result = run_maka(shared_daemon, "watch", "-n", count)
        assert result.returncode == 2, (count, result.stderr)
        assert "not a whole number from 1 up" in result.stderr


def test_user_after_the_command_watches_the_user_level_beside_the_workspace(
    shared_daemon: DaemonProcess,
) -> None:
    """`maka watch -w DIR --user` subscribes to both, and an entry added at the user level
    is printed under its workspace, @user."""
    proc = subprocess.Popen(
        [
            *MAKA,
            "--socket",
            str(shared_daemon.socket),
            "watch",
            "-n",
            "1",
            "-w",
            str(shared_daemon.workspace),
            "--user",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    watching = [proc.stderr.readline(), proc.stderr.readline()]
    assert watching[0].startswith(f"watching {shared_daemon.workspace} ") and watching[1].startswith(
        "watching @user "
    )
    call(shared_daemon, "add_entry", workspace="@user", title="Spelling", content="British English")
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "@user" in out and "added 'Spelling'" in out

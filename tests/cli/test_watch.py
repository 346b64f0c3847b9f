"""`maka watch` streams the daemon's notifications."""

from __future__ import annotations

import json
import subprocess

from maka.cli.watch import describe
from tests.cli.helpers import MAKA, call
from tests.support import DaemonProcess


def test_watch_prints_each_notification_as_json(daemon: DaemonProcess) -> None:
    """watch --json -n 2 prints one JSON notification per line, then exits 0."""
    proc = subprocess.Popen(
        [*MAKA, "--socket", str(daemon.socket), "watch", "--json", "-n", "2", "-w", str(daemon.workspace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None and proc.stdout is not None
    assert proc.stderr.readline().startswith(f"watching {daemon.workspace} (revision ")
    call(daemon, "add_entry", title="T", content="watched")
    call(daemon, "set_settings", agentReadEnabled=True)
    out, _ = proc.communicate(timeout=20)
    notes = [json.loads(line) for line in out.splitlines()]
    assert proc.returncode == 0
    assert [n["method"] for n in notes] == ["memory_changed", "settings_changed"]
    assert notes[0]["params"]["workspace"] == str(daemon.workspace)
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

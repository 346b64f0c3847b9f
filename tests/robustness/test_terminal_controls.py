"""Terminal control sequences an agent recorded (a session title, event text, a tool name,
working-state goals, an episode's summary) never reach the user's terminal raw through
`maka`: an escape sequence there could set the clipboard (OSC 52), retitle the window,
clear the screen or hide lines of the output. `maka` shows each control character as a
visible escape (``\\x1b``) instead; JSON output escapes them as JSON does."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import MAKA, run_maka
from tests.support import DaemonProcess

# OSC 52 (set the clipboard), clear screen, a colour, a C1 CSI, OSC 0 (window title), a
# carriage return that would let the rest of the line overwrite what came before it.
HOSTILE = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[31mEVIL\x9b31m\x1b]0;pwned\x07 tail\rfake"
WORD = "parserbug"
# What no output of `maka` may hold: C0 controls but tab and line feed (a carriage return
# only before a line feed), DEL and the C1 controls.
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")


@pytest.fixture
def recorded(served: DaemonProcess) -> DaemonProcess:
    """A workspace whose closed session carries HOSTILE in every text an agent chooses."""
    ws = str(served.workspace)
    served.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "historyRecallEnabled": True})
    sid = served.call("open_session", {"workspace": ws, "title": f"title {HOSTILE}"})["sessionId"]
    served.call(
        "append_events",
        {
            "workspace": ws,
            "sessionId": sid,
            "events": [
                {"type": "user_message", "text": f"fix the {WORD} {HOSTILE}"},
                {
                    "type": "tool_call",
                    "text": f"pytest {HOSTILE}",
                    "toolCallId": "1",
                    "toolName": f"sh{HOSTILE}",
                },
                {
                    "type": "tool_result",
                    "text": f"Error: {HOSTILE}",
                    "toolCallId": "1",
                    "toolName": f"sh{HOSTILE}",
                },
            ],
        },
    )
    served.call("set_working_state", {"workspace": ws, "sessionId": sid, "goals": [f"goal {WORD} {HOSTILE}"]})
    served.call("close_session", {"workspace": ws, "sessionId": sid})
    served.call(
        "record_episode",
        {
            "workspace": ws,
            "sessionId": sid,
            "summary": f"summary {HOSTILE}".replace("\r", " "),
            "sourceRefs": [f"event:{sid}:1"],
        },
    )
    return served


def _assert_shown_not_raw(output: str) -> None:
    raw = RAW_CONTROL.findall(output)
    assert not raw, f"raw control characters reached the terminal: {raw[:5]!r}"
    assert "\\x1b]52;c;" in output, "the hostile text is shown, escaped, not dropped"


@pytest.mark.parametrize(
    "command",
    [
        ("sessions",),
        ("search", WORD),
        ("attention",),
        ("episodes",),
        ("context", "--query", WORD),
    ],
)
def test_recorded_control_characters_are_shown_escaped(
    recorded: DaemonProcess, command: tuple[str, ...]
) -> None:
    """Each command showing recorded text prints its control characters as visible escapes."""
    result = run_maka(recorded, *command)
    assert result.returncode == 0, result.stderr
    _assert_shown_not_raw(result.stdout + result.stderr)


def test_the_real_entry_point_escapes_them_too(recorded: DaemonProcess) -> None:
    """`maka sessions` run as its own process prints no raw control character."""
    done = subprocess.run(
        [
            *MAKA,
            "--socket",
            str(recorded.socket),
            "--no-autostart",
            "-w",
            str(recorded.workspace),
            "sessions",
        ],
        capture_output=True,
        check=False,
        cwd=Path(sys.prefix),
    )
    assert done.returncode == 0, done.stderr
    _assert_shown_not_raw(done.stdout.decode("utf-8") + done.stderr.decode("utf-8"))


def test_json_output_escapes_them_as_json(recorded: DaemonProcess) -> None:
    """--json output carries the same text, every control character a JSON escape."""
    result = run_maka(recorded, "--json", "sessions")
    assert result.returncode == 0, result.stderr
    assert not RAW_CONTROL.findall(result.stdout)
    assert "\\u001b]52;c;" in result.stdout

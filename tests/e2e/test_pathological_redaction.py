"""An event built to cost the secret scanner most per character (keyword values rejected
one after another on one long line, in the text and in its unescaped view; empty quoted
values before ``;``; words that could open an option; dense ``password=…`` lines; token
starts cut by path separators) is appended, redacted off the event loop while a second
connection's pings are answered, and stored exactly as ``redact`` makes it."""

from __future__ import annotations

import sqlite3

import pytest

from makad.core.redaction import redact
from tests.e2e.test_loop_responsive import PINGS_DURING_REDACTION, _pings_while, _request
from tests.support import DaemonProcess

TOKEN = "sk-ant-api03-" + "x7Kq9" * 8


def pathological_text() -> str:
    """About 600 KB of the costliest shapes, with secrets among them."""
    return (
        "pwd=\\/" * 20_000
        + f"\napi_key={TOKEN}\n"
        + "pwd='';" * 20_000
        + "\n"
        + "pwd-" * 20_000
        + "\n"
        + "".join(f"password=hunter{i}x9\n" for i in range(10_000))
        + "sk-\\/" * 20_000
        + f" {TOKEN}"
    )


@pytest.mark.slow
def test_a_pathological_event_is_redacted_while_pings_are_answered(daemon: DaemonProcess) -> None:
    """``append_events`` with ``pathological_text``: pings are answered before the reply,
    and the stored text is the text redacted (no token, no ``hunter…x9`` password)."""
    ws = str(daemon.workspace)
    daemon.call("open_session", {"workspace": ws, "sessionId": "costly"})
    text = pathological_text()
    event = {"type": "tool_result", "text": text, "toolCallId": "c", "toolName": "t"}
    answered, reply = _pings_while(
        daemon, _request("append_events", {"workspace": ws, "sessionId": "costly", "events": [event]})
    )
    assert reply["result"]["lastSeq"] == 1, reply
    assert answered >= PINGS_DURING_REDACTION
    (ledger,) = (daemon.data_dir / "workspaces").glob("*/ledger.sqlite3")
    conn = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    try:
        (stored,) = conn.execute("SELECT text FROM events WHERE session_id = 'costly'").fetchone()
    finally:
        conn.close()
    assert TOKEN not in stored and "hunter17x9" not in stored
    assert stored == redact(text).text

"""What an error repeats of the caller's input: each string in its data is bounded to
ECHO_LIMIT characters, marked with an ellipsis and the full length, whatever was sent."""

from __future__ import annotations

import json
from typing import Any

import pytest

from makad.errors import ECHO_LIMIT, echoed
from tests.support import DaemonProcess, RawConnection

LONG = "q" * 100_000


def test_echoed_keeps_short_text_and_cuts_long_text() -> None:
    """A string up to ECHO_LIMIT characters is repeated whole; a longer one as its first
    ECHO_LIMIT characters, an ellipsis and its length."""
    assert echoed("entry-1") == "entry-1"
    assert echoed("x" * ECHO_LIMIT) == "x" * ECHO_LIMIT
    assert echoed("x" * (ECHO_LIMIT + 1)) == "x" * ECHO_LIMIT + f"… ({ECHO_LIMIT + 1} characters)"


@pytest.mark.parametrize(
    ("method", "params", "kind", "field"),
    [
        ("memory_history", {"id": LONG}, "not_found", "id"),
        ("archive_entry", {"id": LONG}, "not_found", "id"),
        ("restore_backup", {"backupId": LONG}, "not_found", "backupId"),
        ("read_events", {"sessionId": LONG}, "not_found", "sessionId"),
        ("get_manifest", {"sessionId": "s", "callId": LONG}, "not_found", "callId"),
        ("get_checkpoint", {"checkpointId": LONG}, "not_found", "checkpointId"),
    ],
)
def test_an_error_repeats_a_long_input_cut_short(
    shared_daemon: DaemonProcess, method: str, params: dict[str, Any], kind: str, field: str
) -> None:
    """A 100,000-character id the daemon cannot find comes back in the error's data cut to
    its first ECHO_LIMIT characters with its length; data.kind and the field stay."""
    ws = str(shared_daemon.workspace)
    shared_daemon.call("open_session", {"workspace": ws, "sessionId": "s"})
    with RawConnection(shared_daemon.socket) as c:
        reply = c.request(
            {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"workspace": ws, **params}}
        )
    error = reply["error"]
    assert error["data"]["kind"] == kind, error
    assert error["data"][field] == "q" * ECHO_LIMIT + "… (100000 characters)", str(error)[:500]
    assert len(json.dumps(error)) < 2_000


def test_a_long_event_ref_is_cut_short_in_the_error(shared_daemon: DaemonProcess) -> None:
    """retrieve of a malformed 100,000-character ref is refused naming it cut short."""
    ws = str(shared_daemon.workspace)
    with RawConnection(shared_daemon.socket) as c:
        reply = c.request(
            {"jsonrpc": "2.0", "id": 1, "method": "retrieve", "params": {"workspace": ws, "refs": [LONG]}}
        )
    error = reply["error"]
    assert error["data"]["kind"] == "invalid_params", error
    assert LONG not in json.dumps(error)
    assert len(json.dumps(error)) < 2_000

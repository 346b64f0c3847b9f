"""Session notes the daemon keeps itself (Session Memory), over the socket."""

from __future__ import annotations

import time
from typing import Any

from tests.e2e.sessions_support import append, open_session
from tests.support import DaemonProcess


def ws(d: DaemonProcess) -> str:
    return str(d.workspace)


def _tool_turn(i: int, filler: str, failed: bool = False) -> list[dict[str, Any]]:
    call = f"call-{i}"
    result = (
        f"Error: FileNotFoundError: src/missing_{i}.py does not exist"
        if failed
        else f"def handler_{i}(): pass  # {filler}"
    )
    return [
        {"type": "user_message", "text": f"Request {i}: update the handler in src/pkg/mod_{i}.py"},
        {"type": "assistant_message", "text": f"Reading src/pkg/mod_{i}.py. {filler}"},
        {
            "type": "tool_call",
            "text": f'{{"path": "src/pkg/mod_{i}.py"}}',
            "toolCallId": call,
            "toolName": "read_file",
        },
        {
            "type": "tool_result",
            "text": result,
            "toolCallId": call,
            "toolName": "read_file",
            **({"meta": {"isError": "true"}} if failed else {}),
        },
    ]


def _notes_when(d: DaemonProcess, sid: str, ready: Any, timeout_s: float = 30.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while True:
        notes: dict[str, str] = d.call("get_working_state", {"workspace": ws(d), "sessionId": sid})["notes"]
        if ready(notes) or time.monotonic() > deadline:
            return notes
        time.sleep(0.05)


def test_the_daemon_keeps_session_notes(daemon: DaemonProcess) -> None:
    """After ~15k tokens with tool calls and a failed result the notes hold the paths and the
    error; a client-written section stays as the client wrote it; notes survive compaction."""
    sid = open_session(daemon)
    client_worklog = "My own worklog: nothing to see."
    daemon.call(
        "set_working_state", {"workspace": ws(daemon), "sessionId": sid, "notes": {"Worklog": client_worklog}}
    )
    filler = " ".join(f"detail{k}" for k in range(60))
    turns: list[dict[str, Any]] = []
    for i in range(40):
        turns += _tool_turn(i, filler, failed=i == 7)
    turns[20 * 4]["text"] = "Actually, the handlers must also log their input"  # a restatement
    for start in range(0, len(turns), 40):  # many appends, as an agent makes them
        append(daemon, sid, turns[start : start + 40])
    notes = _notes_when(daemon, sid, lambda n: "Files and Functions" in n)
    task = notes["Task specification"]
    assert "The request (event:" in task and "Request 0: update the handler in src/pkg/mod_0.py" in task
    assert "Restated (event:" in task and "must also log their input" in task and "Request 5:" not in task
    assert "read_file" in notes["Learnings"] and "src/missing_7.py" in notes["Learnings"]
    assert "worked (event:" in notes["Learnings"]
    (result,) = notes["Key results"].splitlines()[1:]  # only the results the session ended on
    assert result.startswith("- read_file: def handler_39(): pass") and f"(event:{sid}:160)" in result
    assert "Workflow" not in notes  # the client's section: never derived
    files = notes["Files and Functions"]
    assert "src/pkg/mod_39.py" in files and f"event:{sid}:" in files
    errors = notes["Errors & Corrections"]
    assert "src/missing_7.py" in errors and "fixed at event:" in errors
    assert notes["Worklog"] == client_worklog
    assert "Request 39" in notes["Current State"]
    assert all(
        section.startswith("(derived by makad") for name, section in notes.items() if name != "Worklog"
    )
    daemon.call(
        "compact", {"workspace": ws(daemon), "sessionId": sid, "mode": "checkpoint", "keepRecentTokens": 500}
    )
    more: list[dict[str, Any]] = []
    for i in range(40, 70):
        more += _tool_turn(i, filler)
    for start in range(0, len(more), 40):
        append(daemon, sid, more[start : start + 40])

    def updated(n: dict[str, str]) -> bool:  # notes are rewritten every ~5,000 tokens
        return "mod_5" in n.get("Files and Functions", "")

    later = _notes_when(daemon, sid, updated)
    assert updated(later)
    assert "src/missing_7.py" in later["Errors & Corrections"]
    assert later["Worklog"] == client_worklog


def test_an_incognito_session_gets_notes_in_memory_only(daemon: DaemonProcess) -> None:
    """Incognito sessions get their notes too, and nothing of them reaches the ledger file."""
    sid = open_session(daemon, incognito=True)
    filler = " ".join(f"detail{k}" for k in range(60))
    turns: list[dict[str, Any]] = []
    for i in range(40):
        turns += _tool_turn(i, filler, failed=i == 3)
    for start in range(0, len(turns), 40):
        append(daemon, sid, turns[start : start + 40])
    notes = _notes_when(daemon, sid, lambda n: "Files and Functions" in n)
    assert "src/missing_3.py" in notes["Errors & Corrections"]
    stored = b"".join(p.read_bytes() for p in daemon.data_dir.rglob("ledger.sqlite3*"))
    assert b"src/missing_3.py" not in stored and b"mod_39" not in stored


def test_session_notes_name_a_failure_by_what_says_it_failed(shared_daemon: DaemonProcess) -> None:
    """A failed run whose output opens with "running 3 tests", and one that is a Python
    traceback after log lines, are noted in Errors & Corrections by the runner's verdict
    and by the exception, as the attention state names them — not by their first line."""
    sid = open_session(shared_daemon)
    filler = " ".join(f"detail{k}" for k in range(60))
    turns: list[dict[str, Any]] = []
    outputs = {
        "cargo test lexer": "running 3 tests\ntest idents ... FAILED\n\ntest result: FAILED. 2 passed; 1 failed\n",
        "alembic upgrade head": "INFO  [alembic] Context impl.\nTraceback (most recent call last):\n"
        '  File "env.py", line 8, in <module>\nsqlalchemy.exc.OperationalError: duplicate column\n',
    }
    for n, (command, output) in enumerate(outputs.items()):
        turns += [
            {"type": "user_message", "text": f"Run {command}"},
            {"type": "tool_call", "text": command, "toolCallId": f"f{n}", "toolName": "bash"},
            {
                "type": "tool_result",
                "text": output,
                "toolCallId": f"f{n}",
                "toolName": "bash",
                "meta": {"exit_code": "1"},
            },
        ]
    for i in range(40):
        turns += _tool_turn(i, filler)
    for start in range(0, len(turns), 40):
        append(shared_daemon, sid, turns[start : start + 40])
    # Both failures noted (by their verdict and exception: neither line says "alembic").
    notes = _notes_when(
        shared_daemon,
        sid,
        lambda n: all(part in n.get("Errors & Corrections", "") for part in ("FAILED.", "OperationalError")),
    )
    errors = notes["Errors & Corrections"]
    assert "test result: FAILED. 2 passed; 1 failed" in errors, errors
    assert "sqlalchemy.exc.OperationalError: duplicate column" in errors, errors
    assert "running 3 tests" not in errors and "Context impl" not in errors

"""Helpers for tests that drive sessions: open, append scripted turns with tool calls."""

from __future__ import annotations

import json
from typing import Any

from tests.support import DaemonProcess


def open_session(d: DaemonProcess, **kw: Any) -> str:
    sid: str = d.call("open_session", {"workspace": str(d.workspace), **kw})["sessionId"]
    return sid


def append(d: DaemonProcess, sid: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = d.call(
        "append_events", {"workspace": str(d.workspace), "sessionId": sid, "events": events}
    )
    return result


def scripted_turns(turns: int, start: int = 0, words: int = 30) -> list[dict[str, Any]]:
    """User asks, assistant answers and calls a tool, the tool answers: 4 events a turn."""
    out: list[dict[str, Any]] = []
    filler = " ".join(f"word{k}" for k in range(words))
    for i in range(start, start + turns):
        call_id = f"call-{i}"
        out += [
            {"type": "user_message", "text": f"Goal {i}: please fix module_{i}.py. {filler}"},
            {"type": "assistant_message", "text": f"Looking at module_{i}.py now. {filler}"},
            {
                "type": "tool_call",
                "text": json.dumps({"path": f"src/module_{i}.py"}),
                "toolCallId": call_id,
                "toolName": "read_file",
            },
            {
                "type": "tool_result",
                "text": f"contents of module_{i}.py {filler}",
                "toolCallId": call_id,
                "toolName": "read_file",
            },
        ]
    return out


def check_history_shape(messages: list[dict[str, Any]]) -> None:
    """Invariant 6: starts at a user turn; every tool result follows its call and vice versa."""
    if not messages:
        return
    assert messages[0]["role"] == "user"
    open_calls: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        for call in message.get("toolCalls") or []:
            open_calls.add(call["id"])
        if message["role"] == "tool":
            assert message["toolCallId"] in open_calls
            answered.add(message["toolCallId"])
    assert open_calls == answered

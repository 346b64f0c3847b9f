"""`maka mcp` on the wire: raw JSON-RPC lines on its stdin, as any MCP host may send them.

The SDK's own client (tests/cli/mcp_session.py) only sends what it can serialize; these
tests write the bytes themselves, against a real daemon.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from maka.mcp_text import ECHO_LIMIT
from tests.cli.helpers import call
from tests.cli.mcp_session import mcp_host
from tests.support import DaemonProcess

pytestmark = pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
REPLY_TIMEOUT_S = 20.0  # a bound that turns a missing reply into a failure, not a hang


class RawHost:
    """`maka mcp` as a subprocess, written to and read from line by line."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.others: list[dict[str, Any]] = []  # what came while waiting for another reply
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, message: dict[str, Any] | list[dict[str, Any]] | bytes) -> None:
        assert self.proc.stdin is not None
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def reply(self, request_id: int | str) -> dict[str, Any]:
        """The response to ``request_id`` (every line on stdout must be JSON-RPC)."""
        for message in self.others:
            if message.get("id") == request_id:
                self.others.remove(message)
                return message
        while True:
            try:
                line = self.lines.get(timeout=REPLY_TIMEOUT_S)
            except queue.Empty:
                raise AssertionError(f"no reply to request {request_id}") from None
            message: dict[str, Any] = json.loads(line)
            assert message["jsonrpc"] == "2.0", message
            if message.get("id") == request_id:
                return message
            self.others.append(message)

    def request(self, request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.reply(request_id)

    def initialize(self, version: str = "2025-06-18") -> dict[str, Any]:
        params = {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        }
        result: dict[str, Any] = self.request(0, "initialize", params)["result"]
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result


@contextmanager
def raw_bridge(d: DaemonProcess) -> Iterator[RawHost]:
    command = [sys.executable, "-m", "maka.cli", "--socket", str(d.socket), "mcp", "-w", str(d.workspace)]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        yield RawHost(proc)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()


def tool_call(request_id: int, name: str, arguments_json: str) -> bytes:
    """A tools/call line with the arguments written as raw JSON text."""
    return (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call",'
        f'"params":{{"name":"{name}","arguments":{arguments_json}}}}}'
    ).encode()


def test_lone_surrogates_in_arguments_get_an_answer(shared_daemon: DaemonProcess) -> None:
    """A call whose strings hold a lone UTF-16 surrogate escape (valid JSON, as a JavaScript
    host writes a string cut in the middle of an emoji) is answered, the surrogate read as
    U+FFFD like an invalid UTF-8 byte; the server carries on."""
    call(shared_daemon, "set_settings", agentReadEnabled=True, historyRecallEnabled=True)
    with raw_bridge(shared_daemon) as h:
        h.initialize()
        h.send(tool_call(1, "memory_search", r'{"query":"deploy \ud83d"}'))
        found = h.reply(1)["result"]
        assert not found.get("isError"), found
        h.send(
            tool_call(
                2, "session_record", r'{"turns":[{"role":"user","text":"ship it \ud83d\ude80 now \udc80!"}]}'
            )
        )
        recorded = h.reply(2)["result"]
        assert not recorded.get("isError"), recorded
        assert h.request(3, "ping") == {"jsonrpc": "2.0", "id": 3, "result": {}}
    (event,) = call(shared_daemon, "search_history", query="ship")["hits"]
    assert "ship it \U0001f680 now \ufffd!" in json.dumps(event, ensure_ascii=False)


def test_unknown_resource_is_resource_not_found(shared_daemon: DaemonProcess) -> None:
    """resources/read or resources/subscribe of a URI the server does not serve is the
    spec's "Resource not found" error (-32002) naming the URI, not an error without a code
    or a subscription to nothing."""
    with raw_bridge(shared_daemon) as h:
        h.initialize()
        error = h.request(1, "resources/read", {"uri": "maka://memory/NOPE.md"})["error"]
        assert error["code"] == -32002, error
        assert "maka://memory/NOPE.md" in json.dumps(error)
        refused = h.request(4, "resources/subscribe", {"uri": "maka://memory/NOPE.md"})
        assert refused.get("error", {}).get("code") == -32002, refused
        assert h.request(5, "resources/subscribe", {"uri": "maka://memory/MEMORY.md"})["result"] == {}
        assert "result" in h.request(2, "resources/read", {"uri": "maka://memory/MEMORY.md"})


@pytest.mark.anyio
async def test_a_daemon_that_does_not_answer_is_a_timeout_tool_error(daemon: DaemonProcess) -> None:
    """With makad stuck (stopped), a tool call ends after `maka --timeout` seconds as the
    tool error `timeout: …` saying so; once makad answers again, so do the tools."""
    call(daemon, "set_settings", agentReadEnabled=True)
    assert daemon.proc is not None
    async with mcp_host(daemon.socket, "--timeout", "2", workspace=daemon.workspace) as h:
        assert not (await h.tool("memory_search", query="deploy"))[0]
        os.kill(daemon.proc.pid, signal.SIGSTOP)
        try:
            is_error, text = await h.tool("memory_search", query="deploy")
        finally:
            os.kill(daemon.proc.pid, signal.SIGCONT)
        assert is_error and text.startswith("timeout: makad did not answer within 2 s"), text
        is_error, text = await h.tool("memory_search", query="deploy")
    assert not is_error, text


@pytest.mark.slow
def test_protocol_versions_and_unknown_methods(shared_daemon: DaemonProcess) -> None:
    """initialize answers a version the host asked for when it is one the server speaks
    (2024-11-05 and later), else one it does speak; an unknown method is -32601 and the
    server carries on."""
    for asked in ("2024-11-05", "2025-03-26", "2025-06-18"):
        with raw_bridge(shared_daemon) as h:
            assert h.initialize(asked)["protocolVersion"] == asked
    with raw_bridge(shared_daemon) as h:
        answered = h.initialize("2099-01-01")["protocolVersion"]
        assert answered in ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"), answered
        assert h.request(1, "no/such/method")["error"]["code"] == -32601
        assert h.request(2, "prompts/list")["error"]["code"] == -32601  # no prompts capability
        assert h.request(3, "ping") == {"jsonrpc": "2.0", "id": 3, "result": {}}


def test_a_call_cancelled_while_it_is_sent_leaves_the_next_call_working(daemon: DaemonProcess) -> None:
    """A host cancels (notifications/cancelled) a large call while the bridge is still
    writing it to makad: the call gets no reply, as the spec says, and the next call is
    answered normally (the cancelled one never leaves half a message on the connection)."""
    assert daemon.proc is not None
    with raw_bridge(daemon) as h:
        h.initialize()
        first = {"turns": [{"role": "user", "text": "before"}]}  # the session is open: a record sends at once
        assert "result" in h.request(1, "tools/call", {"name": "session_record", "arguments": first})
        big = {"turns": [{"role": "user", "text": "word " * 1_000_000}]}
        os.kill(daemon.proc.pid, signal.SIGSTOP)  # its socket fills: the write blocks midway
        try:
            h.send(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "session_record", "arguments": big},
                }
            )
            h.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
            assert h.request(3, "ping")["result"] == {}
            time.sleep(0.5)  # the cancellation reaches the call
        finally:
            os.kill(daemon.proc.pid, signal.SIGCONT)
        after = h.request(
            4,
            "tools/call",
            {"name": "session_record", "arguments": {"turns": [{"role": "user", "text": "after"}]}},
        )
        assert not after["result"].get("isError"), after
        assert "Recorded 1 turn in" in after["result"]["content"][0]["text"]
        assert h.request(5, "ping")["result"] == {}
    assert not [m for m in h.others if m.get("id") == 2]


def test_a_batch_is_answered_request_by_request(shared_daemon: DaemonProcess) -> None:
    """A JSON-RPC batch (the 2025-03-26 revision allows hosts to send them) gets every
    request in it answered, each by its id, and its notifications are taken."""
    with raw_bridge(shared_daemon) as h:
        h.initialize("2025-03-26")
        h.send(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "memory_list", "arguments": {}},
                },
                {"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"_meta": {"note": "cut \ud83d"}}},
            ]
        )
        assert h.reply(1)["result"] == {}
        listed = h.reply(2)["result"]
        assert "Agent read is off" in listed["content"][0]["text"], listed
        assert h.reply(4)["result"] == {}  # a lone surrogate in a batch too
        assert h.request(3, "ping")["result"] == {}


DEEP = 100_000
# Deep enough that Python's parser takes it but copying it through a recursive function
# would pass the interpreter's recursion limit.
NEAR_LIMIT = 950


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b"[" * DEEP + b"]" * DEEP, id="batch-of-nested-arrays"),
        pytest.param(b'[{"a":' + b"[" * DEEP + b"]" * DEEP + b"}]", id="batch-member-nested"),
        pytest.param(
            b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"_meta":{"s":"\\ud800","a":'
            + b"[" * DEEP
            + b"]" * DEEP
            + b"}}}",
            id="lone-surrogate-and-nesting",
        ),
        pytest.param(
            b"[" + b'{"a":' * NEAR_LIMIT + b"1" + b"}" * NEAR_LIMIT + b"]", id="batch-near-the-limit"
        ),
        pytest.param(
            b'{"s":"\\ud800","a":' + b"[" * NEAR_LIMIT + b"]" * NEAR_LIMIT + b"}",
            id="lone-surrogate-near-the-limit",
        ),
    ],
)
def test_a_deeply_nested_line_leaves_the_bridge_serving(shared_daemon: DaemonProcess, line: bytes) -> None:
    """A line nested deeper than Python's parser or its recursion limit takes (a batch, or a
    line with a lone surrogate escape, which the bridge reads before the SDK does) is
    refused or left unanswered like any unreadable line: the bridge keeps reading, and the
    next request is answered."""
    with raw_bridge(shared_daemon) as h:
        h.initialize()
        h.send(line)
        assert h.request(8, "ping")["result"] == {}
        assert h.proc.poll() is None


def nested_ping(request_id: str, depth: int, id_last: bool = False) -> bytes:
    """A ping whose params hold arrays nested ``depth`` deep; ``request_id``: the raw JSON
    of its id ("" for none), written before the params or, with ``id_last``, after them."""
    deep = b'{"_meta":{"a":' + b"[" * depth + b"]" * depth + b"}}"
    member = f'"id":{request_id},'.encode() if request_id else b""
    if id_last:
        return b'{"jsonrpc":"2.0","method":"ping","params":' + deep + b"," + member.rstrip(b",") + b"}"
    return b'{"jsonrpc":"2.0",' + member + b'"method":"ping","params":' + deep + b"}"


@pytest.mark.parametrize(
    ("line", "expected_id"),
    [
        pytest.param(nested_ping("11", 300), 11, id="nested-past-the-parser-limit"),
        pytest.param(nested_ping('"deep"', DEEP), "deep", id="nested-past-the-recursion-limit"),
        pytest.param(nested_ping("12", 300, id_last=True), 12, id="id-after-the-nesting"),
        pytest.param(
            nested_ping("13", DEEP, id_last=True), 13, id="id-after-nesting-past-the-recursion-limit"
        ),
        pytest.param(b'{"jsonrpc":"2.0","id":14,"method":"ping",', 14, id="cut-short"),
        pytest.param(b'{"jsonrpc":"2.0","id":15,"method":5}', 15, id="no-message-shape"),
    ],
)
def test_a_request_the_server_cannot_read_gets_an_error_reply(
    shared_daemon: DaemonProcess, line: bytes, expected_id: int | str
) -> None:
    """A request the server cannot read (nested deeper than its parser takes, not JSON, or
    JSON of no message's shape) is answered at once with a JSON-RPC error (-32700 parse
    error or -32600 invalid request) carrying its id, as the host waits for one; the
    bridge keeps serving."""
    with raw_bridge(shared_daemon) as h:
        h.initialize()
        h.send(line)
        reply = h.reply(expected_id)
        assert reply["error"]["code"] in (-32700, -32600), reply
        assert h.request(16, "ping")["result"] == {}


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(nested_ping("", 300), id="nested-notification"),
        pytest.param(nested_ping("", DEEP), id="notification-nested-past-the-recursion-limit"),
        pytest.param(b'{"jsonrpc":"2.0","method":"notifications/x","params":{"a":"\\', id="cut-notification"),
        pytest.param(
            b'{"jsonrpc":"2.0","method":"x","params":{"id":3,"a":' + b"[" * 300 + b"]" * 300 + b"}}",
            id="id-not-at-the-top",
        ),
    ],
)
def test_a_notification_the_server_cannot_read_gets_no_reply(
    shared_daemon: DaemonProcess, line: bytes
) -> None:
    """A line the server cannot read that names no id at its top level (a notification)
    is answered with nothing; the next request is answered."""
    with raw_bridge(shared_daemon) as h:
        h.initialize()
        h.send(line)
        assert h.request(17, "ping")["result"] == {}
        assert h.others == [], h.others


LONG_INPUT = "q" * 100_000


def test_what_the_bridge_repeats_of_a_long_input_is_cut_short(shared_daemon: DaemonProcess) -> None:
    """A 100,000-character input the bridge names back (an unknown resource, tool, method
    or attention section, a query or tag that found nothing, an id or ref it cannot
    resolve) is repeated as its first ECHO_LIMIT characters and its length, not whole."""
    call(shared_daemon, "set_settings", agentReadEnabled=True, historyRecallEnabled=True)
    cut = "q" * ECHO_LIMIT + "… (100000 characters)"
    with raw_bridge(shared_daemon) as h:
        h.initialize()
        asks: list[tuple[str, dict[str, Any]]] = [
            ("resources/read", {"uri": "maka://memory/" + LONG_INPUT}),
            ("resources/subscribe", {"uri": LONG_INPUT}),
            ("tools/call", {"name": LONG_INPUT, "arguments": {}}),
            (LONG_INPUT, {}),
            *(
                ("tools/call", {"name": name, "arguments": arguments})
                for name, arguments in [
                    ("memory_attention", {"section": LONG_INPUT}),
                    ("memory_search", {"query": LONG_INPUT}),
                    ("memory_list", {"tag": LONG_INPUT}),
                    ("history_search", {"query": LONG_INPUT}),
                    ("memory_resolve", {"refs": [LONG_INPUT]}),
                    ("memory_resolve", {"refs": ["event:" + LONG_INPUT + ":1"]}),
                ]
            ),
        ]
        for request_id, (method, params) in enumerate(asks, start=30):
            answer = h.request(request_id, method, params)
            written = json.dumps(answer, ensure_ascii=False)
            assert LONG_INPUT not in written, (method, params.get("name"), written[:300])
            assert len(written) < 3_000, (method, written[:300])
        assert cut in written or "Not found" in written
        assert h.request(99, "ping")["result"] == {}

"""Pathological request shapes against a live socket: a million keys, a million elements,
deep nesting near and past the decoder's limit, lists far over a method's cap. Each is
refused with a stable error (or answered), another client's pings are answered while it
is handled, and the daemon keeps serving."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from makad.rpc.value_cap import MAX_MESSAGE_VALUES
from tests.support import DaemonProcess, RawConnection, ping_ok

MILLION = 1_000_000


def _request(method: str, params: str | None = None, id_: str = "1") -> bytes:
    body = f'{{"jsonrpc":"2.0","id":{id_},"method":"{method}"'
    if params is not None:
        body += f',"params":{params}'
    return (body + "}").encode()


def _members(n: int) -> str:
    return "{" + ",".join(f'"k{i}":0' for i in range(n)) + "}"


@contextmanager
def pinging(d: DaemonProcess) -> Iterator[list[Any]]:
    """Pings from another connection, one after another, for as long as the block runs;
    the list holds their replies."""
    replies: list[Any] = []
    done = threading.Event()

    def run() -> None:
        with RawConnection(d.socket, timeout=60) as conn:
            n = 0
            while not done.is_set() or not replies:
                n += 1
                replies.append(conn.request({"jsonrpc": "2.0", "id": n, "method": "ping"}))

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield replies
    finally:
        done.set()
        thread.join(60)


def _exchange(d: DaemonProcess, payload: bytes) -> Any:
    with RawConnection(d.socket, timeout=120) as conn:
        conn.send(payload)
        return conn.recv_message()


def _assert_pongs(replies: list[Any]) -> None:
    assert replies and all(r.get("result") == "pong" for r in replies)


@pytest.mark.parametrize(
    "shape",
    [
        "million_keys_params",
        "million_keys_request",
        "million_keys_duplicated",
        "million_elements",
        "meta_keys",
    ],
)
def test_a_message_over_the_value_cap_is_refused_unread(shared_daemon: DaemonProcess, shape: str) -> None:
    """More values than the cap, whatever the shape: -32600 too_large with the limit and id
    null, the connection closed; pings from another client are answered meanwhile."""
    w = json.dumps(str(shared_daemon.workspace))
    payload = {
        "million_keys_params": lambda: _request("ping", _members(MILLION)),
        "million_keys_request": lambda: _request("ping")[:-1] + b"," + _members(MILLION).encode()[1:],
        "million_keys_duplicated": lambda: _request("ping", _members(MILLION)[:-1] + ',"k0":1}'),
        "million_elements": lambda: _request(
            "retrieve", f'{{"workspace":{w},"refs":[' + ",".join(['"event:s:1"'] * MILLION) + "]}"
        ),
        "meta_keys": lambda: _request(
            "append_events",
            f'{{"workspace":{w},"sessionId":"s","events":[{{"type":"user","text":"x","meta":{_members(MILLION)}}}]}}',
        ),
    }[shape]()
    with pinging(shared_daemon) as pongs, RawConnection(shared_daemon.socket, timeout=120) as conn:
        conn.send(payload)
        reply = conn.recv_message()
        assert conn.at_eof()
    assert reply["id"] is None
    assert reply["error"]["code"] == -32600
    assert reply["error"]["data"]["kind"] == "too_large"
    assert reply["error"]["data"]["limit"] == MAX_MESSAGE_VALUES
    _assert_pongs(pongs)
    assert ping_ok(shared_daemon.socket)


def test_requests_before_an_over_cap_message_are_answered(shared_daemon: DaemonProcess) -> None:
    """The requests written before a message over the value cap are answered, then its
    error; nothing after it runs."""
    big = _request("ping", _members(MAX_MESSAGE_VALUES + 1))
    with RawConnection(shared_daemon.socket, timeout=120) as conn:
        conn.send_raw(
            _request("ping", None, '"a"') + b"\n" + big + b"\n" + _request("ping", None, '"b"') + b"\n"
        )
        first, second = conn.recv_message(), conn.recv_message()
        assert conn.at_eof()
    assert first == {"jsonrpc": "2.0", "result": "pong", "id": "a"}
    assert second["error"]["data"]["kind"] == "too_large" and second["id"] is None


def test_the_value_cap_holds_with_content_length_framing(shared_daemon: DaemonProcess) -> None:
    """With Content-Length framing too: a ping before is answered, then the message over
    the value cap gets too_large in that framing, and the connection is closed."""
    with RawConnection(shared_daemon.socket, framing="lsp", timeout=120) as conn:
        conn.send(_request("ping", None, '"first"'))
        conn.send(_request("ping", _members(MAX_MESSAGE_VALUES + 1)))
        first, second = conn.recv_message(), conn.recv_message()
        assert conn.at_eof()
    assert first["result"] == "pong" and first["id"] == "first"
    assert second["error"]["data"] == {
        "kind": "too_large",
        "reason": f"message holds more than {MAX_MESSAGE_VALUES} values",
        "limit": MAX_MESSAGE_VALUES,
        "cap": "maxMessageValues",
    }


def test_commas_and_brackets_inside_strings_are_not_values(shared_daemon: DaemonProcess) -> None:
    """A string of a million commas, colons, brackets and escaped quotes is one value: the
    request runs and echoes its id."""
    text = '\\",:[{\\\\' * (MILLION // 4)
    reply = _exchange(shared_daemon, _request("ping", None, f'"{text}"') + b"\n")
    assert reply["result"] == "pong"
    assert reply["id"] == json.loads(f'"{text}"')


def test_a_string_of_millions_of_escaped_quotes_and_colons_is_one_value(shared_daemon: DaemonProcess) -> None:
    """An id of 14 MB of escaped quotes and colons (what a key looks like in text): the
    request runs and echoes it; pings from another client are answered meanwhile."""
    text = '\\":' * 5_000_000
    with pinging(shared_daemon) as pongs:
        reply = _exchange(shared_daemon, _request("ping", None, f'"{text}"') + b"\n")
    assert reply["result"] == "pong"
    assert reply["id"] == json.loads(f'"{text}"')
    _assert_pongs(pongs)


def test_a_message_at_the_value_cap_runs(shared_daemon: DaemonProcess) -> None:
    """Exactly as many values as the cap: decoded and answered (ping takes no params:
    invalid_params naming the first unknown one)."""
    # The request object's 4 members and the params object's k members.
    reply = _exchange(shared_daemon, _request("ping", _members(MAX_MESSAGE_VALUES - 4)) + b"\n")
    assert reply["id"] == 1
    assert reply["error"]["data"]["kind"] == "invalid_params"
    assert "k0" in reply["error"]["data"]["reason"]


@pytest.mark.parametrize("depth", [500, 900, 990, 1_000, 5_000, 200_000])
@pytest.mark.parametrize("where", ["params", "meta", "batch", "id"])
def test_nesting_at_any_depth_never_crashes(shared_daemon: DaemonProcess, depth: int, where: str) -> None:
    """Arrays or objects nested up to and far past the decoder's limit, in params, an event's
    meta, a batch or the id: one JSON-RPC error, and the daemon keeps serving."""
    w = json.dumps(str(shared_daemon.workspace))
    arrays = "[" * depth + "]" * depth
    objects = '{"a":' * depth + "0" + "}" * depth
    payload = {
        "params": _request("ping", f'{{"x":{arrays}}}'),
        "meta": _request(
            "append_events",
            f'{{"workspace":{w},"sessionId":"s","events":[{{"type":"user","text":"x","meta":{objects}}}]}}',
        ),
        "batch": arrays.encode(),
        "id": _request("ping", None, objects),
    }[where]
    with pinging(shared_daemon) as pongs:
        reply = _exchange(shared_daemon, payload + b"\n")
    if isinstance(reply, list):
        [reply] = reply
    assert reply["error"]["code"] in {-32700, -32600, -32602}
    assert isinstance(reply["error"]["data"]["kind"], str)
    _assert_pongs(pongs)
    assert ping_ok(shared_daemon.socket)
    assert "request_crashed" not in shared_daemon.log_text()


def test_retrieve_with_more_refs_than_events_it_returns_is_too_large(shared_daemon: DaemonProcess) -> None:
    """More refs than retrieve ever returns events: too_large with the limit and the count
    of refs, before any ref is read."""
    w = json.dumps(str(shared_daemon.workspace))
    refs = ",".join(f'"event:s{i}:1"' for i in range(50_000))
    reply = _exchange(shared_daemon, _request("retrieve", f'{{"workspace":{w},"refs":[{refs}]}}') + b"\n")
    data = reply["error"]["data"]
    assert data["kind"] == "too_large" and data["limit"] == 10_000 and data["count"] == 50_000


def test_working_state_lists_over_their_cap_are_refused_before_reading(shared_daemon: DaemonProcess) -> None:
    """50,000 goals (the cap is 8): too_large naming the field, the limit and the count."""
    w = json.dumps(str(shared_daemon.workspace))
    session = shared_daemon.call("open_session", {"workspace": str(shared_daemon.workspace)})["sessionId"]
    goals = ",".join(['"g"'] * 50_000)
    params = f'{{"workspace":{w},"sessionId":"{session}","goals":[{goals}]}}'
    data = _exchange(shared_daemon, _request("set_working_state", params) + b"\n")["error"]["data"]
    assert data == {"kind": "too_large", "field": "goals", "limit": 8, "count": 50_000}


def test_many_unknown_note_sections_are_named_in_a_short_reply(shared_daemon: DaemonProcess) -> None:
    """50,000 unknown note sections: invalid_params listing a few of them and the allowed
    ones, in a reply of a few kilobytes."""
    w = json.dumps(str(shared_daemon.workspace))
    session = shared_daemon.call("open_session", {"workspace": str(shared_daemon.workspace)})["sessionId"]
    notes = ",".join(f'"n{i}":"x"' for i in range(50_000))
    params = f'{{"workspace":{w},"sessionId":"{session}","notes":{{{notes}}}}}'
    with RawConnection(shared_daemon.socket, timeout=120) as conn:
        conn.send(_request("set_working_state", params))
        conn.buffer = b""
        while b"\n" not in conn.buffer:
            conn.buffer += conn.sock.recv(65536)
        raw = conn.buffer.partition(b"\n")[0]
    data = json.loads(raw)["error"]["data"]
    assert data["kind"] == "invalid_params"
    assert data["sections"][0] == "n0" and "goal" not in data["sections"]
    assert len(raw) < 8_192


def test_batches_of_ten_thousand_leave_room_for_others(shared_daemon: DaemonProcess) -> None:
    """A batch of 10,000 calls and one of 10,000 notifications: the calls are all answered,
    and another client's pings are answered meanwhile."""
    w = str(shared_daemon.workspace)
    calls = [
        {"jsonrpc": "2.0", "id": i, "method": "get_settings", "params": {"workspace": w}}
        for i in range(10_000)
    ]
    notes = [{"jsonrpc": "2.0", "method": "status"}] * 10_000
    with pinging(shared_daemon) as pongs, RawConnection(shared_daemon.socket, timeout=120) as conn:
        replies = conn.request(calls)
        conn.send(json.dumps(notes))
        after = conn.request({"jsonrpc": "2.0", "id": "after", "method": "ping"})
    assert sorted(r["id"] for r in replies) == list(range(10_000))
    assert all("result" in r for r in replies)
    assert after["result"] == "pong"
    _assert_pongs(pongs)


def test_ten_thousand_full_events_fit_under_the_value_cap(shared_daemon: DaemonProcess) -> None:
    """10,000 events, each with type, text, ts, toolName, toolCallId and two meta entries:
    one append_events, all appended."""
    w = str(shared_daemon.workspace)
    sid = shared_daemon.call("open_session", {"workspace": w})["sessionId"]
    event = {
        "type": "tool_result",
        "text": "ok",
        "ts": 1_700_000_000_000,
        "toolName": "bash",
        "toolCallId": "c1",
        "meta": {"exitCode": "0", "cwd": "/"},
    }
    params = {"workspace": w, "sessionId": sid, "events": [event] * 10_000}
    with RawConnection(shared_daemon.socket, timeout=120) as conn:
        reply = conn.request({"jsonrpc": "2.0", "id": 1, "method": "append_events", "params": params})
    assert reply["result"]["lastSeq"] - reply["result"]["firstSeq"] == 9_999


@pytest.mark.parametrize("depth", [0, 700])
def test_a_key_given_twice_in_a_large_message_is_refused(shared_daemon: DaemonProcess, depth: int) -> None:
    """A key twice among 50,000 members (and under 700 levels of nesting): -32600 naming it,
    the request's id kept; pings from another client are answered meanwhile."""
    inner = _members(50_000)[:-1] + ',"k7":1}'
    params = '{"x":' + "[" * depth + inner + "]" * depth + "}"
    with pinging(shared_daemon) as pongs:
        reply = _exchange(shared_daemon, _request("ping", params, '"dup"') + b"\n")
    assert reply["id"] == "dup"
    assert reply["error"]["data"]["kind"] == "invalid_request"
    assert "'k7'" in reply["error"]["data"]["reason"]
    _assert_pongs(pongs)

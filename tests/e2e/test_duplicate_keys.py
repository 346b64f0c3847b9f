"""A key given twice in any object of a request is refused (-32600), never "last one wins".

A filter in front of the daemon that reads the first of two ``method`` (or ``workspace``)
keys would otherwise let through what the daemon then runs. Over the socket, in both
framings, and against the dispatcher's pure check with generated payloads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from makad.rpc.dispatch import Dispatcher, Prepared
from tests.support import DaemonProcess, RawConnection, ping_ok


@pytest.fixture(params=["ndjson", "lsp"])
def conn(request: pytest.FixtureRequest, module_daemon: DaemonProcess) -> Iterator[RawConnection]:
    with RawConnection(module_daemon.socket, request.param) as c:
        yield c


def exchange(conn: RawConnection, text: str) -> Any:
    conn.send(text)
    return conn.recv_message()


def assert_refused(reply: dict[str, Any], key: str, id_: Any) -> None:
    assert reply["error"]["code"] == -32600, reply
    assert reply["error"]["data"]["kind"] == "invalid_request"
    assert repr(key) in reply["error"]["data"]["reason"]
    assert reply["id"] == id_


def test_two_method_keys_are_refused_and_nothing_runs(
    conn: RawConnection, module_daemon: DaemonProcess
) -> None:
    """{"method": "ping", "method": "shutdown"} is -32600 with its id; the daemon does not stop."""
    reply = exchange(conn, '{"jsonrpc":"2.0","method":"ping","method":"shutdown","id":7}')
    assert_refused(reply, "method", 7)
    assert ping_ok(module_daemon.socket)
    assert exchange(conn, '{"jsonrpc":"2.0","method":"ping","id":8}')["result"] == "pong"


@pytest.mark.parametrize(
    "text",
    [
        '{"jsonrpc":"2.0","method":"ping","\\u006dethod":"shutdown","id":7}',  # an escaped spelling
        '{"jsonrpc":"2.0", "method" : "ping" ,\t "method"\t:"shutdown","id":7}',  # whitespace
        '{"method":"shutdown","jsonrpc":"2.0","id":7,"method":"ping"}',  # apart
        '{"jsonrpc":"2.0","jsonrpc":"2.0","method":"ping","id":7}',  # the same value twice
        '{"jsonrpc":"2.0","method":"ping","params":{},"params":{"x":1},"id":7}',
    ],
)
def test_every_spelling_of_a_top_level_duplicate_is_refused(conn: RawConnection, text: str) -> None:
    """Escapes, whitespace, distance and equal values do not hide a key given twice."""
    reply = exchange(conn, text)
    assert reply["error"]["code"] == -32600, reply
    assert reply["id"] == 7


def test_a_duplicated_id_is_answered_with_a_null_id(conn: RawConnection) -> None:
    """When "id" itself is the key given twice the reply cannot pick one: its id is null."""
    reply = exchange(conn, '{"jsonrpc":"2.0","method":"ping","id":1,"id":2}')
    assert_refused(reply, "id", None)


def test_a_duplicate_key_in_params_is_refused_before_the_method_runs(
    conn: RawConnection, module_daemon: DaemonProcess, tmp_path: Path
) -> None:
    """params with "workspace" twice: -32600 naming it, and neither workspace is written."""
    first, second = module_daemon.root / "dupA", module_daemon.root / "dupB"
    first.mkdir(exist_ok=True)
    second.mkdir(exist_ok=True)
    a, b = json.dumps(str(first)), json.dumps(str(second))
    text = (
        '{"jsonrpc":"2.0","method":"add_entry","id":3,"params":{"workspace":' + a + ',"workspace":' + b + ","
        '"title":"t","content":"c"}}'
    )
    reply = exchange(conn, text)
    assert reply["error"]["code"] == -32600
    assert "'workspace'" in reply["error"]["data"]["reason"]
    assert "an object of the request" in reply["error"]["data"]["reason"]
    assert reply["id"] == 3
    assert not (first / "memory").exists() and not (second / "memory").exists()


def test_a_duplicate_deep_inside_params_is_refused(conn: RawConnection, module_daemon: DaemonProcess) -> None:
    """A key twice in an object nested inside params (a turn of append_events) is refused too."""
    text = (
        '{"jsonrpc":"2.0","method":"append_events","id":4,"params":{"workspace":'
        + json.dumps(str(module_daemon.workspace))
        + ',"sessionId":"s","events":[{"type":"user_message","text":"a","text":"b"}]}}'
    )
    reply = exchange(conn, text)
    assert_refused(reply, "text", 4)


def test_a_batch_refuses_only_the_element_with_a_duplicate(conn: RawConnection) -> None:
    """In a batch, the element with a key twice gets -32600 with its id; the others run."""
    text = (
        '[{"jsonrpc":"2.0","method":"ping","id":1},'
        '{"jsonrpc":"2.0","method":"ping","method":"shutdown","id":2},'
        '{"jsonrpc":"2.0","method":"ping","id":3}]'
    )
    replies = {r["id"]: r for r in exchange(conn, text)}
    assert replies[1]["result"] == "pong" and replies[3]["result"] == "pong"
    assert_refused(replies[2], "method", 2)


@pytest.mark.parametrize(
    "params",
    [
        {"text": 'a "quoted": colon, a URL http://x:80/y and a time 12:30'},
        {"text": '{"method":"shutdown","method":"x"}'},  # JSON with duplicates, as a string
        {"a": {"same": 1}, "b": {"same": 2}, "same": [{"same": 3}, {"same": 4}]},
    ],
)
def test_keys_repeated_only_across_objects_or_inside_strings_are_accepted(
    conn: RawConnection, params: dict[str, Any]
) -> None:
    """The same key in different objects, and keys inside string values, are no duplicates."""
    body = {"jsonrpc": "2.0", "method": "ping", "id": 5, "params": params}
    reply = exchange(conn, json.dumps(body))
    assert reply["id"] == 5
    assert reply["error"]["code"] == -32602  # ping takes no such params: they reached it


# --- the pure check, over generated payloads ----------------------------------------------

KEYS = st.sampled_from(["a", "b", "method", "id", "k:", 'q"', "x y", "é"])
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from(["", ":", '":', "a", '{"a":1}', "\\"])
)


def _objects(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # An object as its list of members: a key may come twice.
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(st.tuples(KEYS, children), max_size=4).map(lambda pairs: ("object", pairs)),
    )


VALUES = st.recursive(SCALARS, _objects, max_leaves=12)


def _has_duplicate(value: Any) -> bool:
    if isinstance(value, tuple):
        keys = [k for k, _ in value[1]]
        return len(keys) != len(set(keys)) or any(_has_duplicate(v) for _, v in value[1])
    if isinstance(value, list):
        return any(_has_duplicate(v) for v in value)
    return False


SPACES = st.sampled_from(["", "", " ", "\n", "\t ", "\r\n"])


def _render(value: Any, draw: Any) -> str:
    if isinstance(value, tuple):
        members = []
        for key, inner in value[1]:
            spelled = json.dumps(key, ensure_ascii=draw(st.booleans()))
            if draw(st.booleans()) and key:
                spelled = '"' + "".join(f"\\u{ord(c):04x}" for c in key) + '"'
            members.append(f"{spelled}{draw(SPACES)}:{draw(SPACES)}{_render(inner, draw)}")
        return "{" + ",".join(f"{draw(SPACES)}{m}" for m in members) + "}"
    if isinstance(value, list):
        return "[" + ",".join(f"{draw(SPACES)}{_render(v, draw)}" for v in value) + "]"
    return json.dumps(value)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(KEYS, VALUES), max_size=4), st.data())
def test_prepare_refuses_exactly_the_payloads_with_a_key_twice(members: list[Any], data: Any) -> None:
    """Whatever the spelling (escapes, spaces, nesting, colons and quotes in strings), a
    request is refused iff some object in it has a key twice."""
    request = ("object", [("jsonrpc", "2.0"), ("method", "ping"), ("id", 1), ("params", ("object", members))])
    payload = _render(request, data.draw).encode()
    prepared = Dispatcher({}, {}).prepare(payload)
    if _has_duplicate(request):
        assert isinstance(prepared, bytes), payload
        assert msgspec.json.decode(prepared)["error"]["code"] == -32600
    else:
        assert isinstance(prepared, Prepared), (payload, prepared)

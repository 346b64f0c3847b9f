"""The JSON-RPC 2.0 specification's examples, adapted to makad, in both framings."""

from __future__ import annotations

import json

import pytest

from tests.support import DaemonProcess, RawConnection

FRAMINGS = ["ndjson", "lsp"]


@pytest.fixture(params=FRAMINGS)
def conn(request: pytest.FixtureRequest, shared_daemon: DaemonProcess):  # type: ignore[no-untyped-def]
    """A fresh connection in either framing to the module's daemon (no test here changes
    state outside its own workspace, so one daemon serves them all)."""
    with RawConnection(shared_daemon.socket, request.param) as c:
        yield c


def test_call_with_named_params(conn: RawConnection) -> None:
    """A call with by-name params gets its result and id back."""
    reply = conn.request({"jsonrpc": "2.0", "method": "ping", "params": {}, "id": 1})
    assert reply == {"jsonrpc": "2.0", "result": "pong", "id": 1}


def test_call_without_params_and_string_id(conn: RawConnection) -> None:
    """Params may be omitted; a string id is echoed."""
    reply = conn.request({"jsonrpc": "2.0", "method": "ping", "id": "abc"})
    assert reply == {"jsonrpc": "2.0", "result": "pong", "id": "abc"}


def test_positional_params_are_invalid(conn: RawConnection) -> None:
    """Positional params to a method that takes none give -32602."""
    reply = conn.request({"jsonrpc": "2.0", "method": "ping", "params": [42, 23], "id": 2})
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"]["kind"] == "invalid_params"
    assert reply["id"] == 2


def test_notification_gets_no_reply(conn: RawConnection) -> None:
    """A notification is processed without a reply: the next reply is for the next call."""
    conn.send(json.dumps({"jsonrpc": "2.0", "method": "ping"}))
    reply = conn.request({"jsonrpc": "2.0", "method": "ping", "id": 7})
    assert reply["id"] == 7


def test_unknown_method(conn: RawConnection) -> None:
    """A method that does not exist gives -32601 with a stable kind."""
    reply = conn.request({"jsonrpc": "2.0", "method": "foobar", "id": "1"})
    assert reply == {
        "jsonrpc": "2.0",
        "id": "1",
        "error": {
            "code": -32601,
            "message": "Method not found",
            "data": {"kind": "method_not_found", "method": "foobar"},
        },
    }


def test_invalid_json(conn: RawConnection) -> None:
    """Invalid JSON gives -32700 with a null id."""
    conn.send('{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]')
    reply = conn.recv_message()
    assert reply["error"]["code"] == -32700
    assert reply["id"] is None


def test_invalid_request_object(conn: RawConnection) -> None:
    """A request whose method is not a string gives -32600 with a null id."""
    reply = conn.request({"jsonrpc": "2.0", "method": 1, "params": "bar"})
    assert reply["error"]["code"] == -32600
    assert reply["id"] is None


def test_batch_with_invalid_json(conn: RawConnection) -> None:
    """A batch that is not valid JSON gives one -32700."""
    conn.send('[{"jsonrpc": "2.0", "method": "ping", "params": {}, "id": "1"},{"jsonrpc": "2.0", "method"]')
    reply = conn.recv_message()
    assert isinstance(reply, dict)
    assert reply["error"]["code"] == -32700


def test_empty_batch(conn: RawConnection) -> None:
    """An empty array gives a single -32600, not an array."""
    reply = conn.request([])
    assert isinstance(reply, dict)
    assert reply["error"]["code"] == -32600
    assert reply["id"] is None


def test_batch_of_one_non_request(conn: RawConnection) -> None:
    """[1] gives an array holding one -32600."""
    reply = conn.request([1])
    assert isinstance(reply, list) and len(reply) == 1
    assert reply[0]["error"]["code"] == -32600 and reply[0]["id"] is None


def test_batch_of_three_non_requests(conn: RawConnection) -> None:
    """[1,2,3] gives three -32600 errors, one per element."""
    reply = conn.request([1, 2, 3])
    assert [r["error"]["code"] for r in reply] == [-32600, -32600, -32600]


def test_mixed_batch(conn: RawConnection) -> None:
    """A mixed batch answers each call, skips notifications and flags the invalid element."""
    reply = conn.request(
        [
            {"jsonrpc": "2.0", "method": "ping", "params": {}, "id": "1"},
            {"jsonrpc": "2.0", "method": "ping", "params": {}},
            {"jsonrpc": "2.0", "method": "ping", "params": [42, 23], "id": "2"},
            {"foo": "boo"},
            {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
            {"jsonrpc": "2.0", "method": "status", "id": "9"},
        ]
    )
    by_id = {r["id"]: r for r in reply if r["id"] is not None}
    assert len(reply) == 5
    assert by_id["1"]["result"] == "pong"
    assert by_id["2"]["error"]["code"] == -32602
    assert by_id["5"]["error"]["code"] == -32601
    assert by_id["9"]["result"]["pid"] > 0
    nulls = [r for r in reply if r["id"] is None]
    assert len(nulls) == 1 and nulls[0]["error"]["code"] == -32600


def test_all_notification_batch_gets_no_reply(conn: RawConnection) -> None:
    """A batch of notifications gets no reply at all."""
    conn.send(json.dumps([{"jsonrpc": "2.0", "method": "ping"}, {"jsonrpc": "2.0", "method": "status"}]))
    reply = conn.request({"jsonrpc": "2.0", "method": "ping", "id": 99})
    assert reply["id"] == 99


def test_wrong_param_type_reports_the_path(conn: RawConnection) -> None:
    """Unknown or mistyped params give -32602 with the validation path in data."""
    reply = conn.request({"jsonrpc": "2.0", "method": "status", "params": {"x": 1}, "id": 3})
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"]["path"] == "$"
    assert "x" in reply["error"]["data"]["reason"]


def test_empty_positional_params_are_invalid(conn: RawConnection) -> None:
    """An empty params array is still positional: -32602."""
    reply = conn.request({"jsonrpc": "2.0", "method": "ping", "params": [], "id": 4})
    assert reply["error"]["code"] == -32602


def test_a_value_outside_an_enum_names_the_allowed_ones(
    conn: RawConnection, shared_daemon: DaemonProcess
) -> None:
    """A value outside a field's fixed set is -32602 with data.allowed listing the set; the daemon serves on."""
    params = {"workspace": str(shared_daemon.workspace), "format": "yaml"}
    reply = conn.request({"jsonrpc": "2.0", "method": "export_memories", "params": params, "id": 5})
    data = reply["error"]["data"]
    assert reply["error"]["code"] == -32602 and data["kind"] == "invalid_params"
    assert data["path"] == "$.format" and data["allowed"] == ["json", "markdown"]
    typed = conn.request(
        {"jsonrpc": "2.0", "method": "export_memories", "params": {**params, "format": 3}, "id": 6}
    )
    assert typed["error"]["data"]["path"] == "$.format" and "allowed" not in typed["error"]["data"]
    assert conn.request({"jsonrpc": "2.0", "method": "ping", "id": 7})["result"] == "pong"


def test_null_params_to_a_method_that_needs_some_names_them(conn: RawConnection) -> None:
    """params null (or absent, or {}) to propose is -32602 "propose needs params: …" with
    data.required and data.missing; nothing is queued and the daemon serves on."""
    for request in (
        {"jsonrpc": "2.0", "method": "propose", "params": None, "id": 8},
        {"jsonrpc": "2.0", "method": "propose", "id": 8},
        {"jsonrpc": "2.0", "method": "propose", "params": {}, "id": 8},
    ):
        reply = conn.request(request)
        error = reply["error"]
        assert reply["id"] == 8 and error["code"] == -32602, request
        assert error["message"] == "propose needs params: workspace, title, content"
        assert error["data"]["kind"] == "invalid_params" and error["data"]["path"] == "$"
        assert error["data"]["required"] == error["data"]["missing"] == ["workspace", "title", "content"]
    some = conn.request(
        {"jsonrpc": "2.0", "method": "propose", "params": {"workspace": "/tmp", "title": "T"}, "id": 9}
    )["error"]
    assert some["message"] == "Invalid params" and some["data"]["missing"] == ["content"]


def test_null_params_to_a_method_that_takes_none_is_a_call(conn: RawConnection) -> None:
    """params null to ping or status (no required params) is answered as a call without params."""
    assert conn.request({"jsonrpc": "2.0", "method": "ping", "params": None, "id": 10})["result"] == "pong"
    status = conn.request({"jsonrpc": "2.0", "method": "status", "params": None, "id": 11})
    assert "result" in status, status


def test_params_of_another_type_is_an_invalid_request(conn: RawConnection) -> None:
    """params that is a string or a number is still -32600 (neither object, array nor null)."""
    for params in ("x", 3, True):
        reply = conn.request({"jsonrpc": "2.0", "method": "ping", "params": params, "id": 12})
        assert reply["error"]["code"] == -32600 and "null" in reply["error"]["data"]["reason"]


def test_an_error_echoes_at_most_a_cut_of_a_huge_key_value_or_method(conn: RawConnection) -> None:
    """A megabyte unknown key, enum value or method name comes back cut to 200 characters,
    an ellipsis and the whole length."""
    huge = "k" * 1_000_000
    cases = [
        ({"method": "status", "params": {huge: 1}}, "reason"),
        ({"method": "export_memories", "params": {"workspace": "/", "format": huge}}, "reason"),
        ({"method": huge}, "method"),
    ]
    for number, (request, field) in enumerate(cases):
        reply = conn.request({"jsonrpc": "2.0", "id": number, **request})
        echoed = reply["error"]["data"][field]
        assert "k… (" in echoed and echoed.endswith(" characters)") and echoed.count("k") <= 200, echoed[:80]
        assert len(json.dumps(reply)) < 1000
    assert conn.request({"jsonrpc": "2.0", "method": "ping", "id": 9})["result"] == "pong"


def test_a_batch_of_null_params_answers_only_the_requests_with_an_id(conn: RawConnection) -> None:
    """Null-params notifications in a batch get no answer; its null-params request says which params it needs."""
    conn.send(
        json.dumps(
            [
                {"jsonrpc": "2.0", "method": "propose", "params": None},
                {"jsonrpc": "2.0", "method": "ping", "params": None},
                {"jsonrpc": "2.0", "method": "propose", "params": None, "id": "p"},
                {"jsonrpc": "2.0", "method": "propose", "params": []},
                {"jsonrpc": "2.0", "method": "ping", "params": None, "id": "q"},
            ]
        )
    )
    reply = {r["id"]: r for r in conn.recv_message()}
    assert set(reply) == {"p", "q"}
    assert reply["p"]["error"]["data"]["missing"] == ["workspace", "title", "content"]
    assert reply["q"]["result"] == "pong"

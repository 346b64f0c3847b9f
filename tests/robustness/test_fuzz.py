"""Hostile input against a live socket: random bytes, cut frames, odd ids, deep nesting,
wrong types in every field of every method (from protocol/openrpc.json), absurd budgets,
path-traversal workspaces and 10,000-element batches. The daemon never crashes, answers
each malformed request with a spec error, and a fresh connection still gets pong."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from makad.errors import echoed
from tests.support import DaemonProcess, RawConnection, ping_ok

DOC = json.loads((Path(__file__).resolve().parents[2] / "protocol" / "openrpc.json").read_text())
SCHEMAS: dict[str, Any] = DOC["components"]["schemas"]
# -32000 … -32099 are the daemon's domain errors; the rest are JSON-RPC's own.
SPEC_CODES = {-32700, -32600, -32601, -32602}
NEVER_FUZZED = {"shutdown"}  # a well-formed call would end the module's daemon
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
JSON_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")


# --------------------------------------------------------------------- schemas


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = SCHEMAS[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def accepted(schema: dict[str, Any]) -> set[str]:
    """The JSON types a schema accepts ("any" when it does not say)."""
    schema = resolve(schema)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return set().union(*(accepted(s) for s in schema[key]))
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        return {
            {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}[type(v)]
            for v in values
        }
    kind = schema.get("type")
    if kind is None:
        return {"any"}
    kinds = set(kind) if isinstance(kind, list) else {kind}
    return kinds | ({"integer"} if "number" in kinds else set())


def non_null(schema: dict[str, Any]) -> dict[str, Any]:
    schema = resolve(schema)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return non_null(next(s for s in schema[key] if resolve(s).get("type") != "null"))
    return schema


def dummy(name: str, schema: dict[str, Any], workspace: str) -> Any:
    """A value of the right type (and within bounds) for a field."""
    schema = non_null(schema)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if name == "workspace":
        return workspace
    if kind == "string":
        return "fz"
    if kind == "integer":
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0) + 1)
        return min(max(low, 1), schema.get("maximum", 1 << 30))
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        props = schema.get("properties", {})
        return {k: dummy(k, props[k], workspace) for k in schema.get("required", [])}
    return None


def params_schema(method: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {p["name"]: p["schema"] for p in method["params"]},
        "required": [p["name"] for p in method["params"] if p.get("required")],
    }


def field_paths() -> Iterator[tuple[str, tuple[Any, ...], dict[str, Any], str]]:
    """(method, path into params, schema at that path, the error path the daemon reports)
    for every field of every method, one level into arrays and maps of objects."""
    for method in DOC["methods"]:
        if method["name"] in NEVER_FUZZED:
            continue
        for param in method["params"]:
            name, schema = param["name"], param["schema"]
            yield method["name"], (name,), schema, f"$.{name}"
            inner = non_null(schema)
            items = inner.get("items") or inner.get("additionalProperties")
            if not isinstance(items, dict):
                continue
            key, shown = (0, "[0]") if "items" in inner else ("k", "[...]")
            element = resolve(items)
            if element.get("type") == "object" and "properties" in element:
                for sub, sub_schema in element["properties"].items():
                    yield (method["name"], (name, key, sub), sub_schema, f"$.{name}{shown}.{sub}")
            elif "items" in inner:
                yield method["name"], (name, 0), items, f"$.{name}[0]"


FIELDS = list(field_paths())
METHODS = {m["name"]: m for m in DOC["methods"]}


def wrong_values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values a field must refuse: every JSON type it does not accept (and bad enum values)."""
    ok = accepted(schema)
    if "any" in ok:
        return st.nothing()
    options: list[st.SearchStrategy[Any]] = []
    if "null" not in ok:
        options.append(st.none())
    if "boolean" not in ok:
        options.append(st.booleans())
    if "integer" not in ok:
        options.append(st.integers(-(2**70), 2**70))
    if "number" not in ok:
        options.append(st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != int(x)))
    if "string" not in ok:
        options.append(st.text(max_size=12))
    if "array" not in ok:
        options.append(st.lists(st.integers(), max_size=3))
    if "object" not in ok:
        options.append(st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))
    enum = non_null(schema).get("enum")
    if enum is not None and all(isinstance(v, str) for v in enum):
        options.append(st.text(max_size=12).filter(lambda s: s not in enum))
    return st.one_of(options) if options else st.nothing()


def sample_wrong(schema: dict[str, Any]) -> list[Any]:
    """One fixed wrong value per refused JSON type (for the exhaustive sweep)."""
    ok = accepted(schema)
    if "any" in ok:
        return []
    table = {
        "null": None,
        "boolean": True,
        "integer": 7,
        "number": 2.5,
        "string": "wrong",
        "array": [1],
        "object": {"k": 1},
    }
    out = [v for t, v in table.items() if t not in ok and not (t == "integer" and "number" in ok)]
    enum = non_null(schema).get("enum")
    if enum is not None and all(isinstance(v, str) for v in enum):
        out.append("not-a-member")
    return out


def build(method: str, path: tuple[Any, ...], value: Any, workspace: str) -> dict[str, Any]:
    """Params with every required field well typed and ``value`` placed at ``path``."""
    params: dict[str, Any] = dummy("", params_schema(METHODS[method]), workspace)
    name = path[0]
    if len(path) == 1:
        params[name] = value
        return params
    schema = non_null(next(p["schema"] for p in METHODS[method]["params"] if p["name"] == name))
    items = resolve(schema.get("items") or schema.get("additionalProperties") or {})
    element = dummy("", items, workspace)
    if len(path) == 3:
        element[path[2]] = value
    else:
        element = value
    params[name] = [element] if "items" in schema else {path[1]: element}
    return params


# ------------------------------------------------------------------- plumbing


def exchange(d: DaemonProcess, payload: bytes, timeout: float = 20.0) -> list[Any]:
    """Send raw bytes, half-close, and read every reply until the daemon closes."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect(str(d.socket))
    try:
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        data = b""
        while True:
            try:
                chunk = sock.recv(1 << 16)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    finally:
        sock.close()
    return split_replies(data)


def split_replies(data: bytes) -> list[Any]:
    out: list[Any] = []
    if data.startswith(b"Content-Length"):
        while data:
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int(head.split(b":", 1)[1])
            out.append(json.loads(rest[:length]))
            data = rest[length:]
        return out
    return [json.loads(line) for line in data.split(b"\n") if line.strip()]


def assert_spec_error(reply: Any) -> None:
    """A JSON-RPC 2.0 error object with a spec code and a string kind; never internal."""
    assert reply["jsonrpc"] == "2.0" and "result" not in reply
    error = reply["error"]
    assert error["code"] in SPEC_CODES or -32099 <= error["code"] <= -32000, error
    assert isinstance(error["data"]["kind"], str) and error["data"]["kind"] != "internal"


@pytest.fixture(autouse=True)
def no_internal_error_logged(shared_daemon: DaemonProcess) -> Iterator[None]:
    """After each test, in whatever order they run, the module's daemon has logged no
    internal error (request_crashed): the test that caused one fails in its teardown."""
    yield
    assert '"request_crashed"' not in shared_daemon.log_text()


def healthy(d: DaemonProcess) -> None:
    assert d.proc is not None and d.proc.poll() is None, "the daemon died"
    assert ping_ok(d.socket)


# ------------------------------------------------------------------------ bytes


@FUZZ
@given(
    st.one_of(
        st.binary(min_size=1, max_size=4096),
        st.binary(max_size=512).map(lambda b: b"{" + b),
        st.binary(max_size=512).map(lambda b: b"Content-Length: " + b),
        st.lists(st.binary(max_size=64), max_size=8).map(lambda parts: b"\n".join(parts) + b"\n"),
    )
)
def test_random_bytes(shared_daemon: DaemonProcess, payload: bytes) -> None:
    """Random bytes get only spec error replies (or a close), then pong on a new connection."""
    for reply in exchange(shared_daemon, payload):
        assert_spec_error(reply)
    healthy(shared_daemon)


@FUZZ
@given(st.data())
def test_truncated_frames(shared_daemon: DaemonProcess, data: st.DataObject) -> None:
    """A request cut anywhere (NDJSON or Content-Length) and the connection closed: no
    reply other than a spec error, and the daemon carries on."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "read_state",
            "params": {"workspace": str(shared_daemon.workspace)},
        }
    ).encode()
    lsp = data.draw(st.booleans())
    frame = b"Content-Length: %d\r\n\r\n" % len(body) + body if lsp else body + b"\n"
    cut = data.draw(st.integers(0, len(frame) - 1))
    for reply in exchange(shared_daemon, frame[:cut]):
        assert_spec_error(reply)
    healthy(shared_daemon)


# -------------------------------------------------------------------- envelopes


@FUZZ
@given(
    st.one_of(
        st.integers(-(2**200), 2**200),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=300),
        st.integers(1, 1_000_000).map(lambda n: "i" * n),
    )
)
def test_any_valid_id_is_echoed(shared_daemon: DaemonProcess, request_id: Any) -> None:
    """Numbers of any size and strings of any length come back as the reply's id."""
    with RawConnection(shared_daemon.socket) as conn:
        reply = conn.request({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
    assert reply.get("result") == "pong" and reply["id"] == request_id


@pytest.mark.parametrize("request_id", [True, [1], {"a": 1}, [[[[1]]]]])
def test_ids_of_the_wrong_type_are_invalid_requests(shared_daemon: DaemonProcess, request_id: Any) -> None:
    """Booleans, arrays and objects are not ids: -32600 with id null."""
    with RawConnection(shared_daemon.socket) as conn:
        reply = conn.request({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
    assert reply["error"]["code"] == -32600 and reply["id"] is None


@pytest.mark.parametrize("where", ["params", "id", "method", "batch"])
def test_deep_nesting_anywhere(shared_daemon: DaemonProcess, where: str) -> None:
    """10,000 levels of nesting in params, id, method or a batch: one spec error each."""
    deep = "[" * 10_000 + "]" * 10_000
    workspace = json.dumps(str(shared_daemon.workspace))
    payload = {
        "params": f'{{"jsonrpc":"2.0","id":1,"method":"read_state","params":{{"workspace":{workspace},"x":{deep}}}}}',
        "id": f'{{"jsonrpc":"2.0","id":{deep},"method":"ping"}}',
        "method": f'{{"jsonrpc":"2.0","id":1,"method":{deep}}}',
        "batch": deep,
    }[where]
    [reply] = exchange(shared_daemon, payload.encode() + b"\n")
    if isinstance(reply, list):
        [reply] = reply
    assert_spec_error(reply)
    healthy(shared_daemon)


def test_a_batch_of_10000_is_answered_in_full(shared_daemon: DaemonProcess) -> None:
    """10,000 pings in one batch: 10,000 answers with their ids; 10,000 non-requests:
    10,000 errors; 10,000 notifications: no reply at all."""
    with RawConnection(shared_daemon.socket, timeout=60) as conn:
        replies = conn.request([{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(10_000)])
        assert sorted(r["id"] for r in replies) == list(range(10_000))
        assert {r["result"] for r in replies} == {"pong"}
        errors = conn.request(list(range(10_000)))
        assert len(errors) == 10_000 and {e["error"]["code"] for e in errors} == {-32600}
        conn.send(json.dumps([{"jsonrpc": "2.0", "method": "ping"}] * 10_000))
        assert conn.request({"jsonrpc": "2.0", "id": "after", "method": "ping"})["id"] == "after"
    healthy(shared_daemon)


def test_10001_events_are_too_large_and_10000_fit(shared_daemon: DaemonProcess) -> None:
    """append_events takes up to 10,000 events; one more is too_large and appends nothing."""
    w = str(shared_daemon.workspace)
    sid = shared_daemon.call("open_session", {"workspace": w})["sessionId"]
    events = [{"type": "user_message", "text": f"e{i}"} for i in range(10_001)]
    with RawConnection(shared_daemon.socket, timeout=60) as conn:
        too_many = conn.request(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "append_events",
                "params": {"workspace": w, "sessionId": sid, "events": events},
            }
        )
        assert too_many["error"]["data"]["kind"] == "too_large"
        fits = conn.request(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "append_events",
                "params": {"workspace": w, "sessionId": sid, "events": events[:10_000]},
            }
        )
    assert fits["result"]["lastSeq"] == 10_000


# ------------------------------------------------------------------------ params


def test_every_field_of_every_method_refuses_every_wrong_type(shared_daemon: DaemonProcess) -> None:
    """For each field (one level into arrays and maps of objects) and each JSON type it
    does not accept: -32602 invalid_params naming that field's path."""
    w = str(shared_daemon.workspace)
    cases = [
        (method, expected, build(method, path, value, w))
        for method, path, schema, expected in FIELDS
        for value in sample_wrong(schema)
    ]
    assert len({c[0] for c in cases}) >= len(METHODS) - len(NEVER_FUZZED) - 3
    with RawConnection(shared_daemon.socket, timeout=60) as conn:
        conn.send_raw(
            b"".join(
                json.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": p}).encode() + b"\n"
                for i, (m, _, p) in enumerate(cases)
            )
        )
        replies = {r["id"]: r for r in (conn.recv_message() for _ in cases)}
    for i, (method, expected, params) in enumerate(cases):
        error = replies[i].get("error")
        assert error is not None, (method, params)
        assert (error["code"], error["data"]["kind"]) == (-32602, "invalid_params"), (method, params)
        assert error["data"]["path"].startswith(expected), (method, expected, error["data"])
    healthy(shared_daemon)


@FUZZ
@given(st.data())
def test_random_wrong_values_in_any_field(shared_daemon: DaemonProcess, data: st.DataObject) -> None:
    """Hypothesis picks a method, a field and a value of a type it refuses: -32602."""
    method, path, schema, expected = data.draw(
        st.sampled_from([f for f in FIELDS if "any" not in accepted(f[2])])
    )
    value = data.draw(wrong_values(schema))
    params = build(method, path, value, str(shared_daemon.workspace))
    with RawConnection(shared_daemon.socket) as conn:
        reply = conn.request({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert reply["error"]["code"] == -32602, (method, params, reply)
    assert reply["error"]["data"]["path"].startswith(expected)


@pytest.mark.parametrize("method", sorted(set(METHODS) - NEVER_FUZZED))
def test_missing_and_unknown_params_are_refused(shared_daemon: DaemonProcess, method: str) -> None:
    """Every method: an unknown key is -32602; a missing required field is -32602."""
    w = str(shared_daemon.workspace)
    base = dummy("", params_schema(METHODS[method]), w)
    with RawConnection(shared_daemon.socket) as conn:
        unknown = conn.request(
            {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**base, "noSuchParam": 1}}
        )
        assert unknown["error"]["code"] == -32602
        for name in [p["name"] for p in METHODS[method]["params"] if p.get("required")]:
            partial = {k: v for k, v in base.items() if k != name}
            missing = conn.request({"jsonrpc": "2.0", "id": 2, "method": method, "params": partial})
            assert missing["error"]["code"] == -32602, (method, name)


@pytest.mark.parametrize(
    "budget", [-1, -(2**63), 2**31, 2**63 - 1, 2**64, 10**30, 1.5, 1e308, "1000", None, True, [], {}]
)
def test_absurd_budgets(shared_daemon: DaemonProcess, budget: Any) -> None:
    """build_context with an absurd budget: invalid_params (or too_large), never a crash."""
    with RawConnection(shared_daemon.socket) as conn:
        reply = conn.request(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "build_context",
                "params": {"workspace": str(shared_daemon.workspace), "budgetTokens": budget},
            }
        )
    assert reply["error"]["data"]["kind"] in ("invalid_params", "too_large")
    assert_spec_error(reply)


def test_tiny_budgets_are_kept(shared_daemon: DaemonProcess) -> None:
    """Budgets of 0 and 1 are answered within themselves (or too_large with a session)."""
    w = str(shared_daemon.workspace)
    sid = shared_daemon.call("open_session", {"workspace": w})["sessionId"]
    shared_daemon.call(
        "append_events",
        {"workspace": w, "sessionId": sid, "events": [{"type": "user_message", "text": "hello there"}]},
    )
    for params in ({"budgetTokens": 0}, {"budgetTokens": 1}, {"budgetTokens": 1, "sessionId": sid}):
        with RawConnection(shared_daemon.socket) as conn:
            reply = conn.request(
                {"jsonrpc": "2.0", "id": 1, "method": "build_context", "params": {"workspace": w, **params}}
            )
        if "error" in reply:
            assert reply["error"]["data"]["kind"] == "too_large"
        else:
            assert reply["result"]["totalTokens"] <= params["budgetTokens"]


# -------------------------------------------------------------------- traversal


@FUZZ
@given(
    st.lists(
        st.sampled_from(["..", ".", "", "ws", "memory", "etc", "x" * 200, "\x00", "%2e%2e", "~"]), max_size=8
    )
)
def test_path_traversal_workspaces(shared_daemon: DaemonProcess, parts: list[str]) -> None:
    """Workspaces spelled with .., //, NULs, long or relative segments resolve to a real
    directory or get invalid_workspace; reading them creates nothing anywhere."""
    root = shared_daemon.root
    before = sorted(p.name for p in root.iterdir())
    # The machine's own /memory (if it has one) is not ours to judge: only its change is.
    top_before = sorted(p.name for p in Path("/").iterdir())
    for raw in ("/".join([str(root), *parts]), "/".join(parts)):
        with RawConnection(shared_daemon.socket) as conn:
            reply = conn.request(
                {"jsonrpc": "2.0", "id": 1, "method": "read_state", "params": {"workspace": raw}}
            )
        if "error" in reply:
            assert reply["error"]["data"]["kind"] == "invalid_workspace", reply
        else:
            assert Path(reply["result"]["path"]).parent.name == "memory"
    assert sorted(p.name for p in root.iterdir()) == before
    assert not (root / "memory").exists()
    assert sorted(p.name for p in Path("/").iterdir()) == top_before


def test_traversal_in_ids_and_paths_stays_inside(shared_daemon: DaemonProcess) -> None:
    """`..` in a workspace spelling writes only under the directory it resolves to; `..`
    in session, backup, checkpoint ids and import paths is refused without touching files."""
    root = shared_daemon.root
    (root / "sibling").mkdir(exist_ok=True)
    spelled = f"{shared_daemon.workspace}/../sibling/./"
    added = shared_daemon.call("add_entry", {"workspace": spelled, "title": "T", "content": "c"})
    assert added["entry"]["id"] in (root / "sibling" / "memory" / "MEMORY.md").read_text()
    w = str(shared_daemon.workspace)
    attempts = [
        ("open_session", {"workspace": w, "sessionId": "../../etc/passwd"}, "invalid_params"),
        ("restore_backup", {"workspace": w, "backupId": "../../../../etc/passwd"}, "not_found"),
        ("get_checkpoint", {"workspace": w, "checkpointId": "../../x"}, "not_found"),
        ("import_memories", {"workspace": w, "path": "../../etc/passwd"}, "invalid_params"),
        ("read_events", {"workspace": w, "sessionId": "../x"}, None),
    ]
    for method, params, kind in attempts:
        with RawConnection(shared_daemon.socket) as conn:
            reply = conn.request({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        assert "error" in reply, (method, reply)
        assert_spec_error(reply)
        if kind is not None:
            assert reply["error"]["data"]["kind"] == kind, (method, reply)
    healthy(shared_daemon)


# Past what SQLite and a memory file's metadata hold (a signed 64-bit integer).
PAST_64_BITS = [2**63, -(2**63) - 1, 10**30]


def test_integers_past_64_bits_in_any_field(shared_daemon: DaemonProcess) -> None:
    """Every integer field of every method (one level into arrays and objects) holding a
    value past 64 bits, with a real session behind sessionId: a result or a spec or domain
    error, never internal (a seq, a time or a decay used to reach SQLite and overflow)."""
    w = str(shared_daemon.workspace)
    sid = shared_daemon.call("open_session", {"workspace": w})["sessionId"]
    shared_daemon.call(
        "append_events", {"workspace": w, "sessionId": sid, "events": [{"type": "note", "text": "x"}]}
    )
    cases = []
    for method, path, schema, _ in FIELDS:
        if "integer" not in accepted(schema):
            continue
        for value in PAST_64_BITS:
            params = build(method, path, value, w)
            if "sessionId" in params:
                params["sessionId"] = sid
            cases.append((method, params))
    assert {"read_events", "list_episodes", "record_episode", "add_entry"} <= {m for m, _ in cases}
    with RawConnection(shared_daemon.socket, timeout=60) as conn:
        for i, (method, params) in enumerate(cases):
            reply = conn.request({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
            if "error" in reply:
                assert reply["error"]["data"]["kind"] != "internal", (method, params)
                assert_spec_error(reply)
    healthy(shared_daemon)


def test_event_refs_with_huge_seqs_are_invalid_params(shared_daemon: DaemonProcess) -> None:
    """An event ref whose seq does not fit 64 bits (20 digits, 5,000 digits, or a range
    ending there) in retrieve or record_episode: invalid_params naming the ref (cut to its
    first 200 characters and its length when longer)."""
    w = str(shared_daemon.workspace)
    sid = shared_daemon.call("open_session", {"workspace": w})["sessionId"]
    shared_daemon.call(
        "append_events", {"workspace": w, "sessionId": sid, "events": [{"type": "note", "text": "x"}]}
    )
    refs = [f"event:{sid}:{2**64}", f"event:{sid}:{'9' * 5000}", f"event:{sid}:1-{2**63}"]
    with RawConnection(shared_daemon.socket) as conn:
        for i, ref in enumerate(refs):
            for method, params in (
                ("retrieve", {"refs": [ref]}),
                ("record_episode", {"sessionId": sid, "summary": "did it", "sourceRefs": [ref]}),
            ):
                reply = conn.request(
                    {"jsonrpc": "2.0", "id": i, "method": method, "params": {"workspace": w, **params}}
                )
                assert reply["error"]["data"]["kind"] == "invalid_params", (method, ref, reply)
                assert reply["error"]["data"]["ref"] == echoed(ref)
    healthy(shared_daemon)


def test_after_all_of_the_above_no_internal_error_was_logged(shared_daemon: DaemonProcess) -> None:
    """(Last in the module.) After everything above: the daemon is alive, pong answers, and it never logged an
    internal error (request_crashed)."""
    healthy(shared_daemon)
    assert '"request_crashed"' not in shared_daemon.log_text()

"""big_requests: what one pathological request costs everyone else. For each shape (a
million keys, deep nesting, a million-element list, a million ``\\u`` escapes, 100k-digit
numbers, keys given twice, huge ids, batches of 10,000, a 4 MB tool output of random
base64 or hex) and for the methods that take lists, one connection sends the request
while a second pings in a closed loop: the longest ping wait, the daemon's CPU seconds
for the request, its reply (kind and size), and whether the daemon still answers
afterwards. ``--holds``: how long preparing each shape keeps other threads from the
interpreter, measured in-process (``holds``).

    PYTHONPATH=.:clients/python:scripts .venv/bin/python scripts/benchmarks/big_requests.py \\
        [--holds] [--quick] [SHAPE...]
"""

from __future__ import annotations

import base64
import json
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import Daemon, cpu_seconds
from benchmarks.import_ping import Line, ping_once


def _request(method: str, params: Any = None, id_: str = "1") -> bytes:
    """A request as bytes; ``params`` already JSON text (so shapes json.dumps cannot
    build, or would build slowly, are written directly)."""
    body = f'{{"jsonrpc":"2.0","id":{id_},"method":"{method}"'
    if params is not None:
        body += f',"params":{params}'
    return (body + "}\n").encode()


def _members(n: int, value: str = "0") -> str:
    return "{" + ",".join(f'"k{i}":{value}' for i in range(n)) + "}"


def _array(n: int, item: str) -> str:
    return "[" + ",".join([item] * n) + "]"


def _nested(depth: int, open_: str, close: str, inner: str = "0") -> str:
    return open_ * depth + inner + close * depth


# The session the blob shapes append to, opened before the shapes run (the other shapes'
# session is not: they measure the request, not the append).
BLOB_SESSION = '"blobs"'


def _random_base64(chars: int) -> str:
    return base64.b64encode(random.Random(1).randbytes(chars * 3 // 4)).decode()


def _random_hex(chars: int) -> str:
    return random.Random(1).randbytes(chars // 2).hex()


def _tool_output(text: str) -> str:
    return json.dumps({"type": "tool_result", "toolCallId": "c", "toolName": "t", "text": text})


def shapes(ws: str, quick: bool) -> dict[str, Callable[[], bytes]]:
    """Each shape's request, built on demand (some are 12 MB)."""
    n = 20_000 if quick else 1_000_000
    deep = 5_000 if quick else 1_000_000
    digits = 1_000 if quick else 100_000
    batch = 500 if quick else 10_000
    under = 5_000 if quick else 99_990  # just under the value cap (100,000)
    blob = 64 * 1024 if quick else 4 * 2**20
    w = json.dumps(ws)
    session = '"s1"'

    def ws_params(rest: str) -> str:
        return f'{{"workspace":{w},{rest}}}'

    return {
        "million_keys_params": lambda: _request("ping", _members(n)),
        "million_keys_request": lambda: (
            b'{"jsonrpc":"2.0","id":1,"method":"ping",' + _members(n).encode()[1:] + b"\n"
        ),
        "million_keys_duplicate": lambda: _request("ping", _members(n)[:-1] + ',"k0":1}'),
        "keys_under_cap": lambda: _request("ping", _members(under)),
        "keys_under_cap_duplicate": lambda: _request("ping", _members(under)[:-1] + ',"k0":1}'),
        "objects_under_cap": lambda: _request("ping", '{"x":' + _array(under, "{}") + "}"),
        "deep_arrays_params": lambda: _request("ping", '{"x":' + _nested(deep, "[", "]") + "}"),
        "deep_arrays_top": lambda: _nested(deep, "[", "]").encode() + b"\n",
        "deep_objects_params": lambda: _request("ping", _nested(deep, '{"a":', "}")),
        "deep_arrays_1000_params": lambda: _request("ping", '{"x":' + _nested(1000, "[", "]") + "}"),
        "deep_objects_1000_meta": lambda: _request(
            "append_events",
            ws_params(
                f'"sessionId":{session},"events":[{{"type":"user","text":"x","meta":'
                + _nested(1000, '{"a":', "}", '"v"')
                + "}]"
            ),
        ),
        "million_array_params": lambda: _request("ping", '{"x":' + _array(n, "0") + "}"),
        "million_u_escapes": lambda: _request("ping", '{"x":"' + "\\u00e9" * n + '"}'),
        "million_u_escapes_propose": lambda: _request(
            "propose", ws_params('"title":"t","content":"' + "\\u00e9" * n + '"')
        ),
        "number_100k_digits_params": lambda: _request("ping", '{"x":' + "9" * digits + "}"),
        "number_100k_digits_id": lambda: _request("ping", None, "9" * digits),
        "number_100k_digits_frac_id": lambda: _request("ping", None, "0." + "9" * digits),
        "escaped_colons_id": lambda: _request("ping", None, '"' + '\\":' * (n * 5) + '"'),
        "huge_string_id": lambda: _request("ping", None, '"' + "x" * (n * 10) + '"'),
        "batch_calls": lambda: (
            "[" + ",".join(f'{{"jsonrpc":"2.0","id":{i},"method":"ping"}}' for i in range(batch)) + "]\n"
        ).encode(),
        "batch_status_calls": lambda: (
            "[" + ",".join(f'{{"jsonrpc":"2.0","id":{i},"method":"status"}}' for i in range(batch)) + "]\n"
        ).encode(),
        "batch_notifications": lambda: (
            "[" + ",".join(['{"jsonrpc":"2.0","method":"ping"}'] * batch) + "]\n"
        ).encode(),
        "batch_get_settings": lambda: (
            "["
            + ",".join(
                f'{{"jsonrpc":"2.0","id":{i},"method":"get_settings","params":{{"workspace":{w}}}}}'
                for i in range(batch)
            )
            + "]\n"
        ).encode(),
        "propose_tags": lambda: _request(
            "propose", ws_params('"title":"t","content":"c","tags":' + _array(n, '"t"'))
        ),
        "propose_source_refs": lambda: _request(
            "propose", ws_params('"title":"t","content":"c","sourceRefs":' + _array(n, '"event:s1:1"'))
        ),
        "append_events_million": lambda: _request(  # over 16 MiB: the size cap
            "append_events",
            ws_params(f'"sessionId":{session},"events":' + _array(n, '{"type":"user","text":"x"}')),
        ),
        "append_events_meta_keys": lambda: _request(
            "append_events",
            ws_params(
                f'"sessionId":{session},"events":[{{"type":"user","text":"x","meta":'
                + _members(n, '"v"')
                + "}]"
            ),
        ),
        # A tool output of random base64 (an image, an archive) or hex: the secret scan's
        # costliest text per byte.
        "append_random_base64_4mb": lambda: _request(
            "append_events",
            ws_params(f'"sessionId":{BLOB_SESSION},"events":[' + _tool_output(_random_base64(blob)) + "]"),
        ),
        "append_random_hex_4mb": lambda: _request(
            "append_events",
            ws_params(f'"sessionId":{BLOB_SESSION},"events":[' + _tool_output(_random_hex(blob)) + "]"),
        ),
        "retrieve_refs": lambda: _request("retrieve", ws_params('"refs":' + _array(n, '"event:s1:1"'))),
        "retrieve_range_refs": lambda: _request(
            "retrieve", ws_params('"refs":' + _array(n, '"event:s1:1-999999999"'))
        ),
        "working_state_goals": lambda: _request(
            "set_working_state", ws_params(f'"sessionId":{session},"goals":' + _array(n, '"g"'))
        ),
        "working_state_notes": lambda: _request(
            "set_working_state", ws_params(f'"sessionId":{session},"notes":' + _members(n, '"n"'))
        ),
        "approve_ids": lambda: _request("approve", ws_params('"ids":' + _array(n, '"0123456789abcdef"'))),
        "reject_ids": lambda: _request("reject", ws_params('"ids":' + _array(n, '"0123456789abcdef"'))),
        "list_episodes_ids": lambda: _request("list_episodes", ws_params('"ids":' + _array(n, '"e"'))),
        "import_json_million": lambda: _request(
            "import_memories",
            ws_params('"format":"mem0","data":' + json.dumps(_array(n // 4, '{"memory":"m"}'))),
        ),
        "import_json_deep": lambda: _request(
            "import_memories", ws_params('"format":"mem0","data":' + json.dumps(_nested(deep, "[", "]")))
        ),
    }


def _summary(raw: bytes) -> dict[str, Any]:
    try:
        reply = json.loads(raw)
    except (ValueError, RecursionError):
        return {"reply": "unparsable", "bytes": len(raw)}
    if isinstance(reply, list):
        kinds: dict[str, int] = {}
        for item in reply:
            key = item.get("error", {}).get("data", {}).get("kind", "error") if "error" in item else "result"
            kinds[key] = kinds.get(key, 0) + 1
        return {"reply": kinds, "bytes": len(raw)}
    if "error" in reply:
        err = reply["error"]
        return {"reply": err.get("data", {}).get("kind"), "code": err["code"], "bytes": len(raw)}
    return {"reply": "result", "bytes": len(raw)}


def attack(
    daemon: Daemon, pinger: Line, payload: bytes, expect_reply: bool, wait_s: float = 2.0
) -> dict[str, Any]:
    """Send ``payload`` on its own connection and ping from ``pinger`` until its reply
    comes (or ``wait_s`` passes for a batch of notifications, which gets none)."""
    assert daemon.proc is not None
    attacker = Line(str(daemon.socket))
    got: dict[str, Any] = {}

    def send_and_read() -> None:
        try:
            attacker.sock.sendall(payload)
            if not expect_reply:
                time.sleep(wait_s)
                got["raw"] = b"(no reply expected)"
                return
            while b"\n" not in attacker.buffer:
                chunk = attacker.sock.recv(1 << 20)
                if not chunk:
                    got["raw"] = b"(closed)"
                    return
                attacker.buffer += chunk
            got["raw"] = attacker.buffer.partition(b"\n")[0]
        except OSError as exc:
            got["raw"] = f"({exc.__class__.__name__})".encode()

    cpu0 = cpu_seconds(daemon.proc.pid)
    started = time.perf_counter()
    thread = threading.Thread(target=send_and_read)
    thread.start()
    worst = 0.0
    pings = 0
    while thread.is_alive():
        worst = max(worst, ping_once(pinger))
        pings += 1
    took = time.perf_counter() - started
    time.sleep(0.05)  # work the reply left behind (a batch's tail) shows in the CPU figure
    cpu = cpu_seconds(daemon.proc.pid) - cpu0
    attacker.close()
    raw = got.get("raw", b"")
    summary = _summary(raw) if raw.startswith((b"{", b"[")) else {"reply": raw.decode()}
    alive = daemon.proc.poll() is None and ping_once(pinger) < 5
    return {
        "mib": round(len(payload) / 2**20, 2),
        "max_ping_ms": round(worst * 1000, 1),
        "pings": pings,
        "took_s": round(took, 2),
        "cpu_s": round(cpu, 2),
        **summary,
        "alive": alive,
    }


def idle_max_ms(pinger: Line, seconds: float) -> float:
    """The longest ping wait over ``seconds`` with nothing else sent: the machine's own
    noise, to read the figures under attack against."""
    worst = 0.0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        worst = max(worst, ping_once(pinger))
    return round(worst * 1000, 1)


def run(quick: bool, only: list[str] | None = None, repeats: int = 3) -> dict[str, Any]:
    """Each shape ``repeats`` times: the run with the median longest ping wait is kept."""
    report: dict[str, Any] = {}
    with Daemon() as daemon:
        ws = str(daemon.workspace)
        pinger = Line(str(daemon.socket))
        try:
            # The workspace opened first: its first call's cost is not any shape's.
            pinger.send(_request("get_settings", json.dumps({"workspace": ws})))
            pinger.reply()
            pinger.send(
                _request("open_session", json.dumps({"workspace": ws, "sessionId": json.loads(BLOB_SESSION)}))
            )
            pinger.reply()
            idle = [idle_max_ms(pinger, 1.0) for _ in range(repeats)]
            report["idle_max_ping_ms"] = sorted(idle)[len(idle) // 2]
            for name, build in shapes(ws, quick).items():
                if only and name not in only:
                    continue
                payload = build()
                runs = [
                    attack(daemon, pinger, payload, name != "batch_notifications") for _ in range(repeats)
                ]
                runs.sort(key=lambda r: r["max_ping_ms"])
                report[name] = runs[len(runs) // 2]
        finally:
            pinger.close()
    return {"big_requests": report}


def holds(quick: bool, only: list[str] | None = None, repeats: int = 5) -> dict[str, Any]:
    """In this process, without a daemon: the longest time a 1 ms ticker thread waited for
    the interpreter while another thread prepared each shape as the daemon does for a large
    message (the value cap's count when the tree has one, then ``Dispatcher.prepare``).
    Less noisy than pings on a shared machine: the best of ``repeats`` runs is kept."""
    from makad.rpc.dispatch import Dispatcher
    from makad.wire.catalogue import CATALOGUE

    try:
        from makad.rpc.value_cap import over_cap
    except ImportError:  # a tree without the value cap

        def over_cap(payload: bytes) -> bool:
            return False

    async def unused(params: Any, peer: Any) -> None:
        return None

    dispatcher = Dispatcher(CATALOGUE, {name: unused for name in CATALOGUE})

    def prepare(payload: bytes) -> None:
        if not over_cap(payload):
            dispatcher.prepare(payload)

    report: dict[str, Any] = {}
    for name, build in shapes("/tmp", quick).items():
        if only and name not in only:
            continue
        payload = build()[:-1]
        best_gap, best_cpu = float("inf"), float("inf")
        for _ in range(repeats):
            done = threading.Event()
            gap = [0.0]

            def tick(done: threading.Event = done, gap: list[float] = gap) -> None:
                last = time.perf_counter()
                while not done.is_set():
                    time.sleep(0.001)
                    now = time.perf_counter()
                    gap[0] = max(gap[0], now - last)
                    last = now

            ticker = threading.Thread(target=tick)
            ticker.start()
            cpu0 = time.thread_time()
            prepare(payload)
            cpu = time.thread_time() - cpu0
            done.set()
            ticker.join()
            best_gap, best_cpu = min(best_gap, gap[0]), min(best_cpu, cpu)
        report[name] = {"hold_ms": round(best_gap * 1000, 1), "prepare_cpu_ms": round(best_cpu * 1000, 1)}
    return {"big_request_holds": report}


if __name__ == "__main__":
    import sys

    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    mode = holds if "--holds" in sys.argv else run
    print(json.dumps(mode("--quick" in sys.argv, args or None), indent=2))

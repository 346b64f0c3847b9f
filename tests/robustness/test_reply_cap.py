"""The reply cap: no request or batch makes the daemon build a reply past it, and a big
reply does not starve other connections."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from makad.settings import DEFAULT_MAX_REPLY_BYTES
from tests.support import DaemonProcess, RawConnection, daemon_in_tmp

SMALL_CAP = 64 * 1024


def discover(id_: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "rpc.discover", "id": id_}


def ping(id_: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "ping", "id": id_}


def raw_reply(conn: RawConnection, payload: bytes) -> bytes:
    """Send one NDJSON message (if any) and return the raw bytes of the next reply line."""
    if payload:
        conn.send_raw(payload + b"\n")
    chunks = [conn.buffer]
    while b"\n" not in chunks[-1]:
        chunk = conn.sock.recv(1 << 20)
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
    line, _, conn.buffer = b"".join(chunks).partition(b"\n")
    return line


def kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(field)


def assert_capped_batch(replies: list[dict[str, Any]], limit: int) -> None:
    """Results (or ordinary errors) first; from the first reply_too_large on, only
    reply_too_large, every one after it not run."""
    kinds = [r.get("error", {}).get("data", {}).get("kind") for r in replies]
    if "reply_too_large" not in kinds:
        return
    first = kinds.index("reply_too_large")
    assert set(kinds[first:]) == {"reply_too_large"}
    for reply in replies[first:]:
        assert reply["error"]["code"] == -32006 and reply["error"]["data"]["limit"] == limit
    assert all(r["error"]["data"]["ran"] is False for r in replies[first + 1 :])


@pytest.fixture(scope="module")
def small_cap_daemon() -> Iterator[DaemonProcess]:
    """A daemon whose replies are capped at 64 KiB (the OpenRPC document is larger)."""
    yield from daemon_in_tmp({"MAKAD_MAX_REPLY_BYTES": str(SMALL_CAP)})


def test_478_kib_of_discover_gets_a_capped_reply_and_others_keep_being_served(daemon: DaemonProcess) -> None:
    """The batch that built a 739 MiB reply: its reply is at most the cap, the results
    that fit come first, every other element is reply_too_large; another client's pings
    are answered all along, and the daemon's peak memory stays far from the old 1.5 GiB."""
    one = len(json.dumps(discover(10_000), separators=(",", ":"))) + 1
    count = 478 * 1024 // one
    batch = json.dumps([discover(i) for i in range(count)], separators=(",", ":")).encode()
    assert proc_alive(daemon)
    latencies: list[float] = []
    done = threading.Event()

    def pinger() -> None:
        with RawConnection(daemon.socket, timeout=60) as other:
            i = 0
            while not done.is_set():
                started = time.perf_counter()
                assert other.request(ping(i))["result"] == "pong"
                latencies.append(time.perf_counter() - started)
                i += 1

    thread = threading.Thread(target=pinger)
    thread.start()
    try:
        with RawConnection(daemon.socket, timeout=120) as conn:
            started = time.perf_counter()
            line = raw_reply(conn, batch)
            elapsed = time.perf_counter() - started
    finally:
        done.set()
        thread.join()
    assert daemon.proc is not None
    peak_mib = kib(daemon.proc.pid, "VmHWM") / 1024
    replies = json.loads(line)
    assert len(line) <= DEFAULT_MAX_REPLY_BYTES
    assert [r["id"] for r in replies] == list(range(count))
    assert "result" in replies[0]
    assert replies[-1]["error"]["data"] == {
        "kind": "reply_too_large",
        "limit": DEFAULT_MAX_REPLY_BYTES,
        "ran": False,
    }
    assert_capped_batch(replies, DEFAULT_MAX_REPLY_BYTES)
    assert latencies, "the other client was never answered"
    assert peak_mib < 512
    print(
        json.dumps(
            {
                "batch_bytes": len(batch),
                "elements": count,
                "reply_bytes": len(line),
                "results": sum("result" in r for r in replies),
                "batch_s": round(elapsed, 3),
                "daemon_peak_rss_mib": round(peak_mib, 1),
                "other_pings": len(latencies),
                "other_ping_max_ms": round(max(latencies) * 1000, 1),
            }
        )
    )


def proc_alive(d: DaemonProcess) -> bool:
    return d.proc is not None and d.proc.poll() is None


def test_one_reply_past_the_cap_is_an_error_and_the_connection_goes_on(
    small_cap_daemon: DaemonProcess,
) -> None:
    """A single request whose result is over the cap: -32006 reply_too_large (it ran);
    the same connection keeps working."""
    with RawConnection(small_cap_daemon.socket) as conn:
        reply = conn.request(discover("big"))
        assert reply["id"] == "big"
        assert reply["error"]["code"] == -32006
        assert reply["error"]["data"] == {"kind": "reply_too_large", "limit": SMALL_CAP, "ran": True}
        assert conn.request(ping(2))["result"] == "pong"


def test_the_requests_after_the_one_past_the_cap_are_not_run(small_cap_daemon: DaemonProcess) -> None:
    """[ping, discover, add_entry, notification]: pong, then reply_too_large (ran), then
    reply_too_large (not run) — and the add_entry after the overflow wrote nothing."""
    ws = str(small_cap_daemon.workspace)
    add = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "add_entry",
        "params": {"workspace": ws, "title": "never", "content": "not run past the cap"},
    }
    with RawConnection(small_cap_daemon.socket) as conn:
        replies = conn.request([ping(1), discover(2), add, {"jsonrpc": "2.0", "method": "ping"}])
    assert [r["id"] for r in replies] == [1, 2, 3]
    assert replies[0]["result"] == "pong"
    assert replies[1]["error"]["data"]["ran"] is True
    assert replies[2]["error"]["data"] == {"kind": "reply_too_large", "limit": SMALL_CAP, "ran": False}
    memory = small_cap_daemon.workspace / "memory" / "MEMORY.md"
    assert not memory.exists() or "not run past the cap" not in memory.read_text()


def test_a_batch_too_long_to_answer_within_the_cap_gets_one_error(small_cap_daemon: DaemonProcess) -> None:
    """5,000 pings cannot be answered in 64 KiB even as errors: one reply_too_large
    object (id null) instead, small, and the connection goes on."""
    with RawConnection(small_cap_daemon.socket) as conn:
        line = raw_reply(conn, json.dumps([ping(i) for i in range(5_000)]).encode())
        reply = json.loads(line)
        assert isinstance(reply, dict) and reply["id"] is None
        assert reply["error"]["data"]["kind"] == "reply_too_large"
        assert reply["error"]["data"]["ran"] is False
        assert len(line) < 1024
        assert conn.request(ping("after"))["result"] == "pong"


ELEMENTS = st.one_of(
    st.builds(ping, st.integers(0, 10**6)),
    st.builds(discover, st.integers(0, 10**6)),
    st.builds(lambda i: {"jsonrpc": "2.0", "method": "status", "id": i}, st.text(max_size=40)),
    st.builds(ping, st.text(min_size=1_000, max_size=3_000)),
    st.just({"jsonrpc": "2.0", "method": "ping"}),
    st.just({"jsonrpc": "2.0", "method": "no_such_method", "id": "nsm"}),
    st.sampled_from([1, "x", None, {}, []]),
)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(ELEMENTS, min_size=1, max_size=60))
def test_any_batch_reply_stays_within_the_cap(small_cap_daemon: DaemonProcess, batch: list[Any]) -> None:
    """For any mix of small, large, invalid and notification elements: the reply (one
    array, or one error object) is at most the cap, every answered element is answered
    once, and reply_too_large only ever ends the array."""
    answered = [e for e in batch if not (isinstance(e, dict) and "id" not in e and e.get("method") == "ping")]
    with RawConnection(small_cap_daemon.socket) as conn:
        conn.send(json.dumps(batch))
        conn.send(json.dumps(ping(-1)))  # no generated id is negative
        # The batch's reply (if any) and the marker's, in either order.
        lines = [raw_reply(conn, b"") for _ in range(2 if answered else 1)]
    [marker] = [x for x in lines if json.loads(x) == {"jsonrpc": "2.0", "result": "pong", "id": -1}]
    lines.remove(marker)
    if not answered:
        return
    [line] = lines
    assert len(line) <= SMALL_CAP
    reply = json.loads(line)
    if isinstance(reply, dict):
        assert reply["error"]["data"]["kind"] == "reply_too_large" and reply["id"] is None
        return
    assert len(reply) == len(answered)
    assert_capped_batch(reply, SMALL_CAP)

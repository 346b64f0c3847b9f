"""An append_events of more events than one message may carry: the clients send it in
consecutive parts, in order, and say plainly which part landed when one fails."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from maka import AsyncClient, Client
from maka.append_parts import append, count_values, plan
from maka.errors import AppendPartlyDone, InvalidParams, TooLarge
from maka.generated import LIMITS
from makad.openrpc import LIMITS as DAEMON_LIMITS
from makad.rpc.value_cap import count_values as daemon_count_values
from tests.support import DaemonProcess, daemon_in_tmp

pytestmark = pytest.mark.anyio


def notes(count: int, meta: int = 0, start: int = 0) -> list[dict[str, Any]]:
    """``count`` note events numbered from ``start``, each with ``meta`` meta entries."""
    extra = {"meta": {f"k{j}": "v" for j in range(meta)}} if meta else {}
    return [{"type": "note", "text": f"e{i}", **extra} for i in range(start, start + count)]


def texts(c: Client, ws: str, session: str) -> list[str]:
    """Every event text of the session, in seq order."""
    out: list[str] = []
    after = 0
    while True:
        page = c.call("read_events", workspace=ws, sessionId=session, afterSeq=after, limit=10_000)
        out += [e["text"] for e in page["events"]]
        if not page["hasMore"]:
            return out
        after = page["events"][-1]["seq"]


def open_session(c: Client, ws: str) -> str:
    return str(c.call("open_session", workspace=ws)["sessionId"])


def test_generated_limits_are_the_daemons() -> None:
    """The clients' generated caps are the ones the daemon enforces."""
    assert LIMITS == DAEMON_LIMITS


def test_client_counts_values_as_the_daemon_does() -> None:
    """The client's count of a message's values equals the daemon's for the same bytes."""
    message = {
        "jsonrpc": "2.0",
        "method": "append_events",
        "id": 7,
        "params": {
            "workspace": "/w",
            "sessionId": "s",
            "events": [*notes(3, meta=2), {"type": "note", "text": "a,[{", "meta": {}}],
        },
    }
    assert count_values(message) == daemon_count_values(msgspec.json.encode(message))


def test_small_append_is_one_request() -> None:
    """A call within every cap is sent as it is, in one request."""
    assert plan({"workspace": "/w", "sessionId": "s", "events": notes(10)}) == [(0, 10)]


BIG_EVENTS = [{"type": "note", "text": "x" * (1 << 20)} for _ in range(40)]


@pytest.mark.parametrize(
    "events", [notes(12_000, meta=20), notes(25_000), BIG_EVENTS], ids=["values", "count", "bytes"]
)
def test_parts_fit_every_cap(events: list[dict[str, Any]]) -> None:
    """Each planned part holds at most the events, values and bytes one message may carry."""
    params = {"workspace": "/w", "sessionId": "s", "events": events}
    parts = plan(params)
    assert len(parts) > 1 and parts[0][0] == 0 and parts[-1][1] == len(events)
    for (_, end), (next_start, _) in itertools.pairwise(parts):
        assert end == next_start
    for start, end in parts:
        message = {
            "jsonrpc": "2.0",
            "method": "append_events",
            "id": 2**62,
            "params": {**params, "events": params["events"][start:end]},
        }
        encoded = msgspec.json.encode(message)
        assert end - start <= LIMITS["maxAppendEvents"]
        assert daemon_count_values(encoded) <= LIMITS["maxMessageValues"]
        assert len(encoded) < LIMITS["maxMessageBytes"]


def test_a_refused_parts_index_counts_in_the_whole_list() -> None:
    """An error naming an event of a later part names it by its place in the whole list."""
    calls: list[int] = []

    def call(method: str, params: dict[str, Any]) -> Any:
        calls.append(len(params["events"]))
        if len(calls) == 2:
            raise TooLarge(-32006, "event 3 is over 8388608 bytes as JSON", {"kind": "too_large", "index": 3})
        return {"firstSeq": 1, "lastSeq": 10_000}

    with pytest.raises(AppendPartlyDone) as caught:
        append(call, {"workspace": "/w", "sessionId": "s", "events": notes(10_010)})
    assert calls == [10_000, 10]
    assert isinstance(caught.value.error, TooLarge) and caught.value.error.data["index"] == 10_003
    assert "event 10003 is over" in str(caught.value.error) and "event 10003 is over" in str(caught.value)
    assert "event 3 " not in str(caught.value)


def test_many_small_events_land_in_order(shared_daemon: DaemonProcess) -> None:
    """More events than the per-call cap (10,000) are appended by one call, in order."""
    ws = str(shared_daemon.workspace)
    with shared_daemon.client() as c:
        session = open_session(c, ws)
        result = c.call("append_events", workspace=ws, sessionId=session, events=notes(10_050))
        assert (result["firstSeq"], result["lastSeq"]) == (1, 10_050)
        assert texts(c, ws, session) == [f"e{i}" for i in range(10_050)]


def test_events_rich_in_meta_land_without_closing_the_connection(shared_daemon: DaemonProcess) -> None:
    """3,000 events of 40 meta entries each (over the value cap as one message) all land."""
    ws = str(shared_daemon.workspace)
    with shared_daemon.client() as c:
        session = open_session(c, ws)
        result = c.call("append_events", workspace=ws, sessionId=session, events=notes(3_000, meta=40))
        assert result["lastSeq"] == 3_000
        page = c.call("read_events", workspace=ws, sessionId=session, afterSeq=2_999, limit=1)
        assert page["events"][0]["meta"] == {f"k{j}": "v" for j in range(40)}


def test_retry_with_request_id_appends_nothing_twice(shared_daemon: DaemonProcess) -> None:
    """A split call retried with the same requestId returns the same seqs and appends nothing."""
    ws = str(shared_daemon.workspace)
    with shared_daemon.client() as c:
        session = open_session(c, ws)
        params = {
            "workspace": ws,
            "sessionId": session,
            "events": notes(3_000, meta=40),
            "requestId": "batch-1",
        }
        first = c.call("append_events", params)
        again = c.call("append_events", params)
        assert first == again == {"firstSeq": 1, "lastSeq": 3_000, "redactions": 0}
        assert c.call("read_events", workspace=ws, sessionId=session, limit=1)["lastSeq"] == 3_000


def test_expected_seq_is_carried_from_part_to_part(shared_daemon: DaemonProcess) -> None:
    """With expectedSeq each later part expects where the previous one ended: all land."""
    ws = str(shared_daemon.workspace)
    with shared_daemon.client() as c:
        session = open_session(c, ws)
        c.call("append_events", workspace=ws, sessionId=session, events=notes(2))
        result = c.call(
            "append_events",
            workspace=ws,
            sessionId=session,
            events=notes(3_000, meta=40, start=2),
            expectedSeq=2,
        )
        assert (result["firstSeq"], result["lastSeq"]) == (3, 3_002)
        assert texts(c, ws, session) == [f"e{i}" for i in range(3_002)]


def test_part_refused_after_one_landed_says_which(shared_daemon: DaemonProcess) -> None:
    """When the second part is refused, the error says the first 10,000 landed and the rest did not."""
    ws = str(shared_daemon.workspace)
    events = notes(10_005)
    events[10_002] = {"type": "not_a_type", "text": "bad"}
    with shared_daemon.client() as c:
        session = open_session(c, ws)
        with pytest.raises(AppendPartlyDone) as caught:
            c.call("append_events", workspace=ws, sessionId=session, events=events)
        err = caught.value
        assert (err.appended, err.total, err.first_seq, err.last_seq) == (10_000, 10_005, 1, 10_000)
        assert not err.failed_part_unknown and isinstance(err.error, InvalidParams)
        assert err.error.data["path"] == "$.events[10002].type"
        assert "the first 10000 of 10005 events were appended" in str(err) and "events[10000:]" in str(err)
        assert c.call("read_events", workspace=ws, sessionId=session, limit=1)["lastSeq"] == 10_000


def test_one_event_over_the_value_cap_is_refused_before_sending(shared_daemon: DaemonProcess) -> None:
    """An event no message can carry is refused by the client, naming the cap; nothing is sent
    and the connection stays open."""
    ws = str(shared_daemon.workspace)
    with shared_daemon.client() as c:
        session = open_session(c, ws)
        with pytest.raises(TooLarge) as caught:
            c.call(
                "append_events",
                workspace=ws,
                sessionId=session,
                events=[
                    *notes(3),
                    {"type": "note", "text": "x", "meta": {f"k{j}": "" for j in range(100_001)}},
                ],
            )
        assert caught.value.data["index"] == 3 and caught.value.data["limit"] == 100_000
        assert "100000" in str(caught.value) and "nothing was sent" in str(caught.value)
        connection = c._sock
        assert c.call("read_events", workspace=ws, sessionId=session)["lastSeq"] == 0
        assert c._sock is connection


def test_event_just_under_the_cap_as_sent_but_over_it_as_stored_is_refused_before_sending(
    shared_daemon: DaemonProcess,
) -> None:
    """An event the daemon measures over maxEventBytes (its absent fields count as null) is
    refused by the client before any part lands, not after the first part was appended."""
    ws = str(shared_daemon.workspace)
    big = {"type": "note", "text": "x" * (LIMITS["maxEventBytes"] - 40)}
    assert len(msgspec.json.encode(big)) < LIMITS["maxEventBytes"]
    with shared_daemon.client() as c:
        session = open_session(c, ws)
        with pytest.raises(TooLarge) as caught:
            c.call("append_events", workspace=ws, sessionId=session, events=[*notes(10_000), big])
        assert caught.value.data["index"] == 10_000 and caught.value.data["clientSide"] is True
        assert c.call("read_events", workspace=ws, sessionId=session)["lastSeq"] == 0


async def test_async_client_splits_too(shared_daemon: DaemonProcess) -> None:
    """The async client appends more events than the per-call cap in one call, in order."""
    ws = str(shared_daemon.workspace)
    async with AsyncClient(str(shared_daemon.socket)) as c:
        session = (await c.call("open_session", workspace=ws))["sessionId"]
        result = await c.call("append_events", workspace=ws, sessionId=session, events=notes(10_001))
        assert (result["firstSeq"], result["lastSeq"]) == (1, 10_001)
        last = await c.call("read_events", workspace=ws, sessionId=session, afterSeq=9_999)
        assert [e["text"] for e in last["events"]] == ["e9999", "e10000"]


async def test_async_partial_failure_says_which(shared_daemon: DaemonProcess) -> None:
    """The async client reports a refused second part as the sync one does."""
    ws = str(shared_daemon.workspace)
    events = notes(10_001)
    events[10_000] = {"type": "not_a_type", "text": "bad"}
    async with AsyncClient(str(shared_daemon.socket)) as c:
        session = (await c.call("open_session", workspace=ws))["sessionId"]
        with pytest.raises(AppendPartlyDone) as caught:
            await c.call("append_events", workspace=ws, sessionId=session, events=events, requestId="r")
        assert caught.value.appended == 10_000
        assert "same requestId appends no part twice" in str(caught.value)


@pytest.fixture(scope="module")
def small_cap_daemon() -> Iterator[DaemonProcess]:
    """A daemon whose messages are capped at 64 KiB."""
    yield from daemon_in_tmp({"MAKAD_MAX_MESSAGE_BYTES": str(64 * 1024)})


def refs_over_value_cap() -> list[str]:
    return [f"event:s:{i}" for i in range(100_001)]


def test_message_over_the_value_cap_is_a_clear_error_sync(shared_daemon: DaemonProcess) -> None:
    """A message over the value cap (not an append) raises TooLarge saying why, and the
    next call opens a new connection and works."""
    with shared_daemon.client() as c:
        with pytest.raises(TooLarge) as caught:
            c.call("retrieve", workspace=str(shared_daemon.workspace), refs=refs_over_value_cap())
        assert caught.value.data["limit"] == 100_000
        assert "more than 100000 values" in str(caught.value)
        assert c.call("ping") == "pong"


async def test_message_over_the_value_cap_is_a_clear_error_async(shared_daemon: DaemonProcess) -> None:
    """The async client: the same clear TooLarge, and the next call works."""
    async with AsyncClient(str(shared_daemon.socket)) as c:
        with pytest.raises(TooLarge) as caught:
            await c.call("retrieve", workspace=str(shared_daemon.workspace), refs=refs_over_value_cap())
        assert "more than 100000 values" in str(caught.value)
        assert await c.call("ping") == "pong"


def test_message_over_the_byte_cap_names_the_cap(small_cap_daemon: DaemonProcess, tmp_path: Path) -> None:
    """A message over the daemon's byte cap raises TooLarge with data.limit, the cap in bytes,
    and data.cap naming it; the next call works."""
    ws = str(small_cap_daemon.workspace)
    with small_cap_daemon.client() as c:
        with pytest.raises(TooLarge) as caught:
            c.call("retrieve", workspace=ws, refs=["event:s:" + "9" * 1_000] * 100)
        assert caught.value.data["limit"] == 64 * 1024
        assert caught.value.data["cap"] == "maxMessageBytes"
        assert f"message exceeds {64 * 1024} bytes" in str(caught.value)
        assert c.call("ping") == "pong"


SMALL_CAP = 64 * 1024


def wide_notes(count: int, size: int = 2_000) -> list[dict[str, Any]]:
    """``count`` note events of ``size`` bytes of text, numbered from 0."""
    return [{"type": "note", "text": f"e{i} " + "x" * size} for i in range(count)]


def test_status_reports_the_caps_it_enforces(
    small_cap_daemon: DaemonProcess, shared_daemon: DaemonProcess
) -> None:
    """status.limits is the daemon's own byte cap as started, with the fixed caps beside it."""
    with small_cap_daemon.client() as c:
        limits = c.call("status")["limits"]
    assert limits["maxMessageBytes"] == SMALL_CAP
    assert {k: limits[k] for k in ("maxMessageValues", "maxAppendEvents", "maxEventBytes")} == {
        k: LIMITS[k] for k in ("maxMessageValues", "maxAppendEvents", "maxEventBytes")
    }
    with shared_daemon.client() as c:
        assert c.call("status")["limits"]["maxMessageBytes"] == LIMITS["maxMessageBytes"]


def test_append_over_a_smaller_byte_cap_is_cut_again_and_lands(small_cap_daemon: DaemonProcess) -> None:
    """200 events of 2 KB (one message at the default caps) all land, in order, under a 64 KiB cap."""
    ws = str(small_cap_daemon.workspace)
    with small_cap_daemon.client() as c:
        session = open_session(c, ws)
        events = wide_notes(200)
        result = c.call("append_events", workspace=ws, sessionId=session, events=events, expectedSeq=0)
        assert (result["firstSeq"], result["lastSeq"]) == (1, 200)
        assert texts(c, ws, session) == [e["text"] for e in events]
        assert c._limits["maxMessageBytes"] == SMALL_CAP


def test_retry_after_learning_the_cap_appends_nothing_twice(small_cap_daemon: DaemonProcess) -> None:
    """With a requestId, the same call again (by the client that learned the cap, or by a new
    one that learns it again) returns the same seqs and appends nothing."""
    ws = str(small_cap_daemon.workspace)
    with small_cap_daemon.client() as c:
        session = open_session(c, ws)
        # Over the default per-call cap too: parts at the defaults, each cut again.
        params = {"workspace": ws, "sessionId": session, "events": notes(10_050), "requestId": "cut-1"}
        first = c.call("append_events", params)
        again = c.call("append_events", params)
    with small_cap_daemon.client() as fresh:
        third = fresh.call("append_events", params)
        assert first == again == third and (first["firstSeq"], first["lastSeq"]) == (1, 10_050)
        assert fresh.call("read_events", workspace=ws, sessionId=session, limit=1)["lastSeq"] == 10_050


def test_retry_of_a_cut_append_refused_midway_appends_nothing_twice(small_cap_daemon: DaemonProcess) -> None:
    """A cut append whose later piece is refused says how many landed; retrying it on a new
    client appends none of those again."""
    ws = str(small_cap_daemon.workspace)
    events = wide_notes(200)
    events[150] = {"type": "not_a_type", "text": "bad"}
    with small_cap_daemon.client() as c:
        session = open_session(c, ws)
        params = {"workspace": ws, "sessionId": session, "events": events, "requestId": "cut-2"}
        with pytest.raises(AppendPartlyDone) as caught:
            c.call("append_events", params)
        landed = caught.value.appended
        assert 0 < landed <= 150 and isinstance(caught.value.error, InvalidParams)
    with small_cap_daemon.client() as fresh:
        with pytest.raises(AppendPartlyDone) as again:
            fresh.call("append_events", params)
        assert again.value.appended == landed
        assert fresh.call("read_events", workspace=ws, sessionId=session, limit=1)["lastSeq"] == landed


@pytest.mark.parametrize("before", [3, 10_003], ids=["first part", "later part"])
def test_event_over_the_learned_cap_is_refused_with_that_cap(
    small_cap_daemon: DaemonProcess, before: int
) -> None:
    """An event larger than the daemon's byte cap is refused naming that cap and the event's
    place in the whole list (in data.index and the message alike); nothing lands."""
    ws = str(small_cap_daemon.workspace)
    with small_cap_daemon.client() as c:
        session = open_session(c, ws)
        events = [*notes(before), {"type": "note", "text": "x" * 100_000}]
        with pytest.raises(TooLarge) as caught:
            c.call("append_events", workspace=ws, sessionId=session, events=events)
        assert caught.value.data["limit"] == SMALL_CAP and caught.value.data["index"] == before
        assert str(caught.value).startswith(f"event {before} is")
        assert c.call("read_events", workspace=ws, sessionId=session, limit=1)["lastSeq"] == 0


async def test_async_client_cuts_again_at_the_daemons_cap(small_cap_daemon: DaemonProcess) -> None:
    """The async client learns the smaller byte cap too: every event lands once, in order."""
    ws = str(small_cap_daemon.workspace)
    events = wide_notes(200)
    async with AsyncClient(str(small_cap_daemon.socket)) as c:
        session = (await c.call("open_session", workspace=ws))["sessionId"]
        params = {"workspace": ws, "sessionId": session, "events": events, "requestId": "cut-3"}
        result = await c.call("append_events", params)
        assert (result["firstSeq"], result["lastSeq"]) == (1, 200)
        assert await c.call("append_events", params) == result
    with small_cap_daemon.client() as sync:
        assert texts(sync, ws, session) == [e["text"] for e in events]


def test_a_cap_learned_from_a_daemon_since_restarted_with_the_default_does_not_refuse(
    daemon: DaemonProcess,
) -> None:
    """A client that learned a daemon's smaller byte cap, then meets that daemon restarted
    with the default cap, sends an event over the old cap and it lands (before, the client
    refused it itself for as long as it lived)."""
    ws = str(daemon.workspace)
    daemon.restart({"MAKAD_MAX_MESSAGE_BYTES": str(SMALL_CAP)})
    big = {"type": "note", "text": "x" * 100_000}
    with daemon.client() as c:
        session = open_session(c, ws)
        c.call("append_events", workspace=ws, sessionId=session, events=wide_notes(200))
        assert c._limits["maxMessageBytes"] == SMALL_CAP
        with pytest.raises(TooLarge) as caught:  # still that cap: refused, naming it
            c.call("append_events", workspace=ws, sessionId=session, events=[big])
        assert caught.value.data["limit"] == SMALL_CAP
        daemon.restart({"MAKAD_MAX_MESSAGE_BYTES": str(LIMITS["maxMessageBytes"])})
        result = c.call("append_events", workspace=ws, sessionId=session, events=[big])
        assert result["firstSeq"] == result["lastSeq"] == 201

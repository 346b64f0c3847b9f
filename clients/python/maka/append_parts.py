"""``append_events`` with more events than one message may carry, sent in consecutive parts.

The daemon refuses a message over ``LIMITS["maxMessageBytes"]`` bytes or holding more than
``LIMITS["maxMessageValues"]`` JSON values (and closes the connection), and an
``append_events`` of more than ``LIMITS["maxAppendEvents"]`` events. A call within all
three is sent as it is; a larger one is cut, in order, into the fewest parts that each fit,
sent one after the other. Each part is atomic; the whole is not. With a ``requestId`` each
part gets its own (``<requestId>:part<k>of<n>``), so retrying the whole call appends no
part twice; with an ``expectedSeq`` each later part expects the seq the one before it
ended on, so no other append lands between them. A part that fails after some have
landed raises ``AppendPartlyDone``, saying how many events landed.

Values are counted as the daemon counts them (``makad.rpc.value_cap``): each array element
and object member is one, an empty array or object one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, NoReturn

import msgspec

from maka.errors import AppendPartlyDone, MakaError, RemoteError, TooLarge
from maka.generated_methods import LIMITS

METHOD: Final = "append_events"
# The request's envelope beyond its params: "jsonrpc", "method", "id" (at most 20 digits),
# the framing's newline, and a part's requestId suffix.
ENVELOPE_SLACK_BYTES: Final = 160

_encoder = msgspec.json.Encoder()
# The daemon measures an event as JSON with every field present (an absent one as null):
# the bytes those fields add when the client leaves them out.
_EVENT_FIELDS: Final = ("type", "text", "ts", "toolCallId", "toolName", "meta", "tokens")


def event_bytes(event: Any, encoded: int) -> int:
    """The bytes of ``event`` (``encoded`` bytes as sent) as the daemon measures it against
    ``maxEventBytes``."""
    if not isinstance(event, dict):
        return encoded
    return encoded + sum(len(f',"{name}":null') for name in _EVENT_FIELDS if name not in event)


def count_values(value: Any) -> int:
    """The JSON values ``value`` holds, as the daemon counts them: each array element and
    object member one, an empty array or object one (a scalar: none)."""
    if isinstance(value, dict):
        children: Any = value.values()
    elif isinstance(value, list | tuple):
        children = value
    else:
        return 0
    total = max(len(children), 1)
    for child in children:
        if isinstance(child, dict | list | tuple):
            total += count_values(child)
    return total


def _structure_bound(encoded: bytes) -> int:
    """At least the values in ``encoded`` (commas and brackets within strings count too)."""
    return encoded.count(b",") + encoded.count(b"[") + encoded.count(b"{")


def plan(params: dict[str, Any]) -> list[tuple[int, int]]:
    """The ``(start, end)`` slices of ``params["events"]`` to send, in order: one for a call
    within every cap. An event no message can carry raises ``TooLarge`` before anything
    is sent."""
    events = params.get("events")
    if not isinstance(events, list | tuple) or not events:
        return [(0, len(events) if isinstance(events, list | tuple) else 0)]
    max_bytes = LIMITS["maxMessageBytes"] - ENVELOPE_SLACK_BYTES
    max_values = LIMITS["maxMessageValues"]
    max_events = LIMITS["maxAppendEvents"]
    whole = _encoder.encode(params)
    # The envelope's own values: 4 members ("jsonrpc", "method", "id", "params").
    if len(events) <= max_events and len(whole) <= max_bytes and 4 + _structure_bound(whole) <= max_values:
        return [(0, len(events))]
    bare = {**params, "events": []}
    base_bytes = len(_encoder.encode(bare)) + ENVELOPE_SLACK_BYTES
    base_values = 4 + count_values(bare) - 1  # the empty array's one: its events count instead
    return _cut(events, LIMITS["maxMessageBytes"] - base_bytes, max_values - base_values, max_events)


def _cut(events: Sequence[Any], room_bytes: int, room_values: int, max_events: int) -> list[tuple[int, int]]:
    parts: list[tuple[int, int]] = []
    start = used_bytes = used_values = 0
    for index, event in enumerate(events):
        encoded = len(_encoder.encode(event))
        size = encoded + 1  # its comma
        values = 1 + count_values(event)
        _check_alone(index, event, encoded, size, values, room_bytes, room_values)
        count = index - start
        if count and (
            count == max_events or used_bytes + size > room_bytes or used_values + values > room_values
        ):
            parts.append((start, index))
            start, used_bytes, used_values = index, 0, 0
        used_bytes += size
        used_values += values
    parts.append((start, len(events)))
    return parts


def _check_alone(
    index: int, event: Any, encoded: int, size: int, values: int, room_bytes: int, room_values: int
) -> None:
    """``TooLarge`` for an event that no request can carry (nothing has been sent)."""
    max_event = LIMITS["maxEventBytes"]
    measured = event_bytes(event, encoded)
    if values > room_values:
        _refuse(
            index,
            f"holds {values} JSON values; a message holds at most {LIMITS['maxMessageValues']}",
            LIMITS["maxMessageValues"],
            values,
        )
    if measured > max_event:
        _refuse(
            index,
            f"is {measured} bytes as JSON (its absent fields as null); an event is at most {max_event}",
            max_event,
            measured,
        )
    if size > room_bytes:
        limit = LIMITS["maxMessageBytes"]
        _refuse(index, f"is {encoded} bytes as JSON; a message is at most {limit}", limit, encoded)


def _refuse(index: int, what: str, limit: int, actual: int) -> NoReturn:
    raise TooLarge(
        -32006,
        f"event {index} {what}: nothing was sent",
        {"kind": "too_large", "index": index, "limit": limit, "actual": actual, "clientSide": True},
    )


def _part_params(
    params: dict[str, Any], parts: list[tuple[int, int]], k: int, last_seq: int | None
) -> dict[str, Any]:
    start, end = parts[k]
    part = {**params, "events": params["events"][start:end]}
    request_id = params.get("requestId")
    if request_id is not None:
        part["requestId"] = f"{request_id}:part{k + 1}of{len(parts)}"
    if last_seq is not None and params.get("expectedSeq") is not None:
        part["expectedSeq"] = last_seq
    return part


def _merged(results: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "firstSeq": results[0]["firstSeq"],
        "lastSeq": results[-1]["lastSeq"],
        "redactions": sum(int(r.get("redactions", 0)) for r in results),
    }


def _partly_done(
    params: dict[str, Any], parts: list[tuple[int, int]], results: list[dict[str, Any]], exc: MakaError
) -> AppendPartlyDone:
    # A daemon's error reply means the part was refused whole; anything else (a lost
    # connection, a timeout) leaves it unknown.
    start = parts[len(results)][0]
    if isinstance(exc, RemoteError) and isinstance(exc.data.get("index"), int):
        exc.data["index"] += start  # the event's place in the whole list, not in the part
    return AppendPartlyDone(
        appended=start,
        total=len(params["events"]),
        first_seq=results[0]["firstSeq"],
        last_seq=results[-1]["lastSeq"],
        failed_part_unknown=not isinstance(exc, RemoteError),
        request_id=params.get("requestId"),
        error=exc,
    )


def append(call: Callable[[str, dict[str, Any]], Any], params: dict[str, Any]) -> Any:
    """``append_events`` through ``call``, in parts when one message cannot carry it."""
    parts = plan(params)
    if len(parts) == 1:
        return call(METHOD, params)
    results: list[dict[str, Any]] = []
    for k in range(len(parts)):
        try:
            results.append(
                call(METHOD, _part_params(params, parts, k, results[-1]["lastSeq"] if results else None))
            )
        except MakaError as exc:
            if not results:
                raise
            raise _partly_done(params, parts, results, exc) from exc
    return _merged(results)


async def append_async(call: Callable[[str, dict[str, Any]], Awaitable[Any]], params: dict[str, Any]) -> Any:
    """``append`` for the async client."""
    parts = plan(params)
    if len(parts) == 1:
        return await call(METHOD, params)
    results: list[dict[str, Any]] = []
    for k in range(len(parts)):
        try:
            part = _part_params(params, parts, k, results[-1]["lastSeq"] if results else None)
            results.append(await call(METHOD, part))
        except MakaError as exc:
            if not results:
                raise
            raise _partly_done(params, parts, results, exc) from exc
    return _merged(results)

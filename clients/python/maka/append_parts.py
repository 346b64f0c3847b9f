"""``append_events`` with more events than one message may carry, sent in consecutive parts.

The daemon refuses a message over ``LIMITS["maxMessageBytes"]`` bytes or holding more than
``LIMITS["maxMessageValues"]`` JSON values (and closes the connection), and an
``append_events`` of more than ``LIMITS["maxAppendEvents"]`` events. A call within all
three is sent as it is; a larger one is cut, in order, into the fewest parts that each fit,
sent one after the other. Each part is atomic; the whole is not. With a ``requestId`` each
part gets its own (``<requestId>:part<k>of<n>``), so retrying the whole call appends no
part twice; with an ``expectedSeq`` each later part expects the seq the one before it
ended on, so no other append lands between them. A part that fails after some have
landed raises ``AppendPartlyDone``, saying how many events landed; an error about one
event names it by its place in the whole list (``data.index``, ``data.path``, the message).

A daemon started with a smaller ``--max-message-bytes`` refuses a part over its cap
(``too_large`` with ``data.cap == "maxMessageBytes"`` and ``data.limit`` its cap; the
request did not run). The client then keeps that cap for its later calls (until one holds
an event over it: the daemon may have been restarted with the default since, so the call
is sent at the defaults and the cap learned again if it still holds) and cuts what is
left again, once: each part planned with the default caps is cut into pieces that fit
the daemon's cap, named ``<part's requestId>:part<j>of<m>`` when there is more than one.
The names depend only on the events and the two caps, so a retry against the same daemon
(by this client, or a new one that learns the cap the same way) appends nothing twice.

Values are counted as the daemon counts them (``makad.rpc.value_cap``): each array element
and object member is one, an empty array or object one.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
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


def plan(params: dict[str, Any], limits: Mapping[str, int] = LIMITS) -> list[tuple[int, int]]:
    """The ``(start, end)`` slices of ``params["events"]`` to send, in order: one for a call
    within every cap of ``limits``. An event no message can carry raises ``TooLarge``
    before anything is sent."""
    events = params.get("events")
    if not isinstance(events, list | tuple) or not events:
        return [(0, len(events) if isinstance(events, list | tuple) else 0)]
    max_bytes = limits["maxMessageBytes"] - ENVELOPE_SLACK_BYTES
    max_values = limits["maxMessageValues"]
    max_events = limits["maxAppendEvents"]
    whole = _encoder.encode(params)
    # The envelope's own values: 4 members ("jsonrpc", "method", "id", "params").
    if len(events) <= max_events and len(whole) <= max_bytes and 4 + _structure_bound(whole) <= max_values:
        return [(0, len(events))]
    bare = {**params, "events": []}
    base_bytes = len(_encoder.encode(bare)) + ENVELOPE_SLACK_BYTES
    base_values = 4 + count_values(bare) - 1  # the empty array's one: its events count instead
    return _cut(events, limits, limits["maxMessageBytes"] - base_bytes, max_values - base_values, max_events)


def _cut(
    events: Sequence[Any], limits: Mapping[str, int], room_bytes: int, room_values: int, max_events: int
) -> list[tuple[int, int]]:
    parts: list[tuple[int, int]] = []
    start = used_bytes = used_values = 0
    for index, event in enumerate(events):
        encoded = len(_encoder.encode(event))
        size = encoded + 1  # its comma
        values = 1 + count_values(event)
        _check_alone(limits, index, event, encoded, size, values, room_bytes, room_values)
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
    limits: Mapping[str, int],
    index: int,
    event: Any,
    encoded: int,
    size: int,
    values: int,
    room_bytes: int,
    room_values: int,
) -> None:
    """``TooLarge`` for an event that no request can carry (nothing has been sent)."""
    max_event = limits["maxEventBytes"]
    measured = event_bytes(event, encoded)
    if values > room_values:
        limit = limits["maxMessageValues"]
        _refuse(index, f"holds {values} JSON values; a message holds at most {limit}", limit, values)
    if measured > max_event:
        _refuse(
            index,
            f"is {measured} bytes as JSON (its absent fields as null); an event is at most {max_event} bytes",
            max_event,
            measured,
        )
    if size > room_bytes:
        limit = limits["maxMessageBytes"]
        _refuse(index, f"is {encoded} bytes as JSON; a message is at most {limit} bytes", limit, encoded)


def _refuse(index: int, what: str, limit: int, actual: int) -> NoReturn:
    raise TooLarge(
        -32006,
        f"event {index} {what}: nothing was sent",
        {"kind": "too_large", "index": index, "limit": limit, "actual": actual, "clientSide": True},
    )


def count_from(exc: RemoteError, start: int) -> None:
    """Name the event ``exc`` is about by its place in the whole list, not in the part that
    began at ``start``: in ``data.index``, ``data.path`` and the message alike."""
    index = exc.data.get("index")
    if isinstance(index, int):
        exc.data["index"] = index + start
        exc.message = re.sub(rf"\bevent {index}\b", f"event {index + start}", exc.message, count=1)
        exc.args = (exc.message, *exc.args[1:])
    path = exc.data.get("path")
    if isinstance(path, str):
        exc.data["path"] = re.sub(r"^\$\.events\[(\d+)\]", lambda m: f"$.events[{int(m[1]) + start}]", path)


# A piece to send: its events' slice and its requestId (None without one).
Piece = tuple[int, int, str | None]


def pieces(params: dict[str, Any], limits: Mapping[str, int] = LIMITS) -> list[Piece]:
    """What to send, in order: the parts planned with the default caps, each cut again
    when ``limits`` (the daemon's, once known) is smaller. A piece's requestId depends on
    nothing else, so that retrying the call appends no piece twice."""
    outer = plan(params, LIMITS)
    events = params.get("events")
    request_id = params.get("requestId")
    out: list[Piece] = []
    for k, (start, end) in enumerate(outer):
        name = request_id if len(outer) == 1 else f"{request_id}:part{k + 1}of{len(outer)}"
        if limits is LIMITS or not isinstance(events, list | tuple):
            out.append((start, end, name if request_id is not None else None))
            continue
        part = {**params, "events": events[start:end]}
        if request_id is not None:
            part["requestId"] = name
        try:
            inner = plan(part, limits)
        except TooLarge as exc:
            count_from(exc, start)
            raise
        for j, (a, b) in enumerate(inner):
            piece_name = name if len(inner) == 1 else f"{name}:part{j + 1}of{len(inner)}"
            out.append((start + a, start + b, piece_name if request_id is not None else None))
    return out


def learned_cap(exc: MakaError, limits: Mapping[str, int]) -> int | None:
    """The daemon's message byte cap when ``exc`` is its refusal of a message over a cap
    smaller than ``limits`` says (the request did not run); None otherwise."""
    if not isinstance(exc, TooLarge) or exc.data.get("clientSide"):
        return None
    limit = exc.data.get("limit")
    if exc.data.get("cap") != "maxMessageBytes" or not isinstance(limit, int):
        return None
    return limit if limit < limits["maxMessageBytes"] else None


def _piece_params(params: dict[str, Any], piece: Piece, last_seq: int | None) -> dict[str, Any]:
    start, end, name = piece
    part = {**params, "events": params["events"][start:end]}
    if name is not None:
        part["requestId"] = name
    if last_seq is not None and params.get("expectedSeq") is not None:
        part["expectedSeq"] = last_seq
    return part


def _merged(results: list[dict[str, Any]]) -> dict[str, Any]:
    if len(results) == 1:
        return results[0]
    return {
        "firstSeq": results[0]["firstSeq"],
        "lastSeq": results[-1]["lastSeq"],
        "redactions": sum(int(r.get("redactions", 0)) for r in results),
    }


def _partly_done(
    params: dict[str, Any], start: int, results: list[dict[str, Any]], exc: MakaError
) -> AppendPartlyDone:
    # A daemon's error reply means the part was refused whole; anything else (a lost
    # connection, a timeout) leaves it unknown.
    if isinstance(exc, RemoteError) and not exc.data.get("clientSide"):
        count_from(exc, start)
    return AppendPartlyDone(
        appended=start,
        total=len(params["events"]),
        first_seq=results[0]["firstSeq"],
        last_seq=results[-1]["lastSeq"],
        failed_part_unknown=not isinstance(exc, RemoteError),
        request_id=params.get("requestId"),
        error=exc,
    )


class _Run:
    """One append_events in pieces: what is left to send, and what landed."""

    def __init__(self, params: dict[str, Any], limits: MutableMapping[str, int]) -> None:
        self.params = params
        self.limits = limits
        self.todo = self._first_pieces()
        # One piece is the call as it is (its requestId too): sent unchanged.
        self.whole = len(self.todo) == 1
        self.results: list[dict[str, Any]] = []
        self.resplit = False

    def _caps(self) -> Mapping[str, int]:
        return LIMITS if dict(self.limits) == LIMITS else self.limits

    def _first_pieces(self) -> list[Piece]:
        """The pieces at the caps this client knows; at the defaults when an event is over
        a cap it learned but within the defaults: the daemon that cap came from may have
        been restarted with larger ones since, so it is asked (and, when the cap still
        holds, refuses the message and the client learns it again)."""
        caps = self._caps()
        try:
            return pieces(self.params, caps)
        except TooLarge:
            if caps is LIMITS:
                raise
        first = pieces(self.params, LIMITS)  # raises when the defaults refuse it too
        self.limits.update(LIMITS)
        return first

    def next(self) -> dict[str, Any] | None:
        """The params of the next request, or None when all landed."""
        if not self.todo:
            return None
        if self.whole:
            return self.params
        return _piece_params(self.params, self.todo[0], self.results[-1]["lastSeq"] if self.results else None)

    def landed(self, result: Any) -> None:
        self.todo.pop(0)
        self.results.append(result)

    def failed(self, exc: MakaError) -> None:
        """Cut what is left again when the daemon's byte cap turned out smaller (once);
        otherwise raise: ``exc`` itself when nothing landed."""
        start = self.todo[0][0]
        cap = None if self.resplit else learned_cap(exc, self.limits)
        if cap is not None:
            self.resplit = True
            self.limits["maxMessageBytes"] = cap
            try:
                left = [p for p in pieces(self.params, self.limits) if p[0] >= start]
            except MakaError as refused:
                self._raise(start, refused)
            if left and left[0][0] == start:
                self.todo, self.whole = left, False
                return
        self._raise(start, exc)

    def _raise(self, start: int, exc: MakaError) -> NoReturn:
        if not self.results:
            raise exc
        raise _partly_done(self.params, start, self.results, exc) from exc


def append(
    call: Callable[[str, dict[str, Any]], Any],
    params: dict[str, Any],
    limits: MutableMapping[str, int] | None = None,
) -> Any:
    """``append_events`` through ``call``, in parts when one message cannot carry it.
    ``limits``: the caps of the daemon as this client knows them (updated when it refuses
    a part over a smaller byte cap)."""
    run = _Run(params, dict(LIMITS) if limits is None else limits)
    while (request := run.next()) is not None:
        try:
            result = call(METHOD, request)
        except MakaError as exc:
            run.failed(exc)
            continue
        run.landed(result)
    return _merged(run.results)


async def append_async(
    call: Callable[[str, dict[str, Any]], Awaitable[Any]],
    params: dict[str, Any],
    limits: MutableMapping[str, int] | None = None,
) -> Any:
    """``append`` for the async client."""
    run = _Run(params, dict(LIMITS) if limits is None else limits)
    while (request := run.next()) is not None:
        try:
            result = await call(METHOD, request)
        except MakaError as exc:
            run.failed(exc)
            continue
        run.landed(result)
    return _merged(run.results)

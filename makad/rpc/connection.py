"""One client connection: what it owes the client, written in bounded chunks.

Everything leaving a connection goes through its outbox, in order. Replies wait
for room there, so a client that stops reading stops its own requests, nobody
else's. Notifications never wait: they are posted while a workspace lock may be
held, so posting only queues. Notifications of one group (a workspace) that are
still waiting are coalesced into one slot, which keeps the latest per method in
the order they were last posted: a subscriber that falls behind costs at most a
slot per workspace it follows, and still sees each channel's latest revision,
never an older one after a newer one, and never after a reply it preceded.

One writer at a time drains the outbox: a reply's own task when the connection
is quiet (no hand-off on the ping path), else a per-connection writer task. On a
quiet connection a reply that fits is handed to the socket at once, without
anyio's send checkpoint: that is one event-loop round trip less per reply, and
the connection still yields once per request, in anyio's receive (which lets the
other connections run before it reads: under load the next request is then
often there already, so the read does not wait).
Each socket write is at most ``WRITE_CHUNK`` bytes, so a large reply interleaves
with other connections' work instead of holding the event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
import types
from collections import deque
from collections.abc import Callable, Generator, Hashable
from typing import Any

import anyio
import msgspec
import structlog
from anyio.abc import SocketAttribute, SocketStream

from makad.rpc.framing import Framing, encode

log = structlog.get_logger("makad.server")
_encoder = msgspec.json.Encoder()
_ids = itertools.count(1)

WRITE_CHUNK = 64 * 1024
# Unsent reply bytes past which a new reply waits for the client to read.
OUTBOX_HIGH_WATER = 1024 * 1024
_BROKEN = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


@types.coroutine
def yield_now() -> Generator[None, None, None]:
    """One turn of the event loop: asyncio's ``sleep(0)`` (a bare yield to the task),
    without its two coroutine frames that every request would resume and leave."""
    yield


class _Slot:
    """Notifications of one group waiting to be written: the latest per method."""

    __slots__ = ("group", "latest")

    def __init__(self, group: Hashable) -> None:
        self.group = group
        self.latest: dict[str, Any] = {}

    def post(self, method: str, params: Any) -> None:
        self.latest.pop(method, None)  # re-inserted last: the order of the latest posts
        self.latest[method] = params


class Backlog:
    """The reply bytes queued and not yet written of every connection of one server, together."""

    __slots__ = ("total",)

    def __init__(self) -> None:
        self.total = 0


class Connection:
    """One client connection: framing, outbox, subscriptions, activity, close hooks."""

    def __init__(self, stream: SocketStream, now: float = 0.0, backlog: Backlog | None = None) -> None:
        self.id = next(_ids)
        self._backlog = backlog if backlog is not None else Backlog()
        self._stream = stream
        self.stream = stream
        self._raw: socket.socket | None = stream.extra(SocketAttribute.raw_socket, None)
        self._fd = self._raw.fileno() if self._raw is not None else -1
        self.framing: Framing = "ndjson"
        self.closed = False
        self._close_hooks: list[Callable[[Any], None]] = []
        self._outbox: deque[bytes | _Slot] = deque()
        self._waiting_slots: dict[Hashable, _Slot] = {}
        self.reply_bytes = 0  # of replies queued and not yet written
        # When the socket last took queued bytes (time.monotonic()): long ago, with replies
        # queued, means a client that does not read them.
        self.written_at = now
        self._writing = False
        self._wake = anyio.Event()
        self._room: anyio.Event | None = None
        self._drained: anyio.Event | None = None
        # Workspaces this connection follows: it is never idle while it follows one.
        self.subscriptions: set[Hashable] = set()
        self.in_flight = 0
        # time.monotonic() (the event loop's clock, without anyio's per-call lookup).
        self.last_active = now
        self.scope = anyio.CancelScope()

    # --- what handlers see (makad.core.peer.Peer) -----------------------------

    def on_close(self, hook: Callable[[Any], None]) -> None:
        self._close_hooks.append(hook)

    def notify(self, method: str, params: Any, group: Hashable) -> None:
        """Queue a notification (no id); never waits. Waiting notifications of the same
        ``group`` are coalesced, the latest per method kept."""
        if self.closed:
            return
        slot = self._waiting_slots.get(group)
        if slot is None:
            slot = self._waiting_slots[group] = _Slot(group)
            self._outbox.append(slot)
        slot.post(method, params)
        if not self._writing:
            self._wake.set()

    # --- requests ----------------------------------------------------------------------

    async def receive(self, max_bytes: int) -> bytes:
        """The next bytes from the client, ``b""`` at its end (OSError when the socket broke).

        anyio's ``receive`` on asyncio (the daemon's backend) with one difference: when
        nothing has arrived it waits on the socket's descriptor, not on the socket object.
        asyncio's selector looks the object up first, and its KeyError for "not registered"
        (every wait: the socket is unregistered after each) formats the socket's repr — a
        getsockname and a getpeername syscall, twice. Like anyio it yields before reading
        (the other connections run first, so under load the next request has often arrived
        and the read does not wait) and is cancelled where anyio's would be.
        """
        raw = self._raw
        if raw is None:
            try:
                return await self._stream.receive(max_bytes)
            except anyio.EndOfStream:
                return b""
        await yield_now()  # anyio's checkpoint on asyncio, without its backend lookup
        while True:
            try:
                return raw.recv(max_bytes)
            except BlockingIOError:
                loop = asyncio.get_running_loop()
                readable = loop.create_future()
                loop.add_reader(self._fd, readable.set_result, None)
                try:
                    await readable
                finally:
                    loop.remove_reader(self._fd)

    def recv_now(self, max_bytes: int) -> bytes | None:
        """What has arrived (``b""`` at the client's end) without waiting or yielding; None
        when nothing has yet, or when there is no raw socket to read (``receive`` then).
        After a ``yield_now`` this is ``receive`` when the next request is already there."""
        raw = self._raw
        if raw is None:
            return None
        try:
            return raw.recv(max_bytes)
        except BlockingIOError:
            return None

    # --- replies -----------------------------------------------------------------------

    async def send(self, payload: bytes) -> None:
        """Queue one reply and see it written (or wait for room while others write)."""
        frame = self.send_nowait(payload)
        if frame is not None:
            await self.send_frame(frame)

    def send_nowait(self, payload: bytes) -> bytes | None:
        """Write one reply now if the connection is quiet and its socket takes all of it
        (every ping's path: no coroutine, no wait). None when that is done (or the
        connection is closed); else its frame, or the part the socket left, for
        ``send_frame``."""
        if self.closed:
            return None
        frame = payload + b"\n" if self.framing == "ndjson" else encode(self.framing, payload)
        raw = self._raw
        if raw is None or self._writing or self._outbox or len(frame) > WRITE_CHUNK:
            return frame
        try:
            sent = raw.send(frame)
        except BlockingIOError:
            return frame
        except OSError:
            self.mark_closed()
            return None
        return None if sent == len(frame) else frame[sent:]

    async def send_frame(self, frame: bytes) -> None:
        """Queue a framed reply (what ``send_nowait`` left) and see it written."""
        if self.closed:
            return
        if not self._writing and not self._outbox and len(frame) <= WRITE_CHUNK:
            # A quiet connection whose socket had no room for all of it: wait for room.
            self._writing = True
            try:
                await self._stream.send(frame)
                self.written_at = time.monotonic()
            except _BROKEN:
                self.mark_closed()
            finally:
                self._writing_done()
            if self._outbox:  # notifications posted meanwhile
                await self._drain()
            return
        self._outbox.append(frame)
        self.reply_bytes += len(frame)
        self._backlog.total += len(frame)
        if not self._writing:
            await self._drain()
            return
        await self.wait_for_room()

    def not_reading(self, now: float, after_s: float) -> bool:
        """Replies are queued and the socket has taken none of them for ``after_s``."""
        return self.reply_bytes > 0 and now - self.written_at >= after_s

    @property
    def backlogged(self) -> bool:
        """More reply bytes wait than a client that reads lets pile up."""
        return self.reply_bytes > OUTBOX_HIGH_WATER and not self.closed

    async def wait_for_room(self) -> None:
        while self.backlogged:
            if self._room is None:
                self._room = anyio.Event()
            await self._room.wait()

    async def flush(self) -> None:
        """Wait until everything queued has been written (or the connection broke)."""
        while (self._outbox or self._writing) and not self.closed:
            if not self._writing:
                await self._drain()
                continue
            if self._drained is None:
                self._drained = anyio.Event()
            await self._drained.wait()

    @property
    def idle(self) -> bool:
        """No handler running and no workspace followed; ``last_active`` says since when
        a byte last came in or went out (a reply the client never reads is no activity)."""
        return self.in_flight == 0 and not self.subscriptions

    # --- the writer ------------------------------------------------------------------

    async def write_forever(self) -> None:
        """Drain what notifications queue while no reply is being written."""
        while not self.closed:
            await self._wake.wait()
            self._wake = anyio.Event()
            if not self._writing:
                await self._drain()

    async def _drain(self) -> None:
        self._writing = True
        try:
            while self._outbox and not self.closed:
                item = self._outbox.popleft()
                if isinstance(item, bytes):
                    self.reply_bytes -= len(item)
                    self._backlog.total -= len(item)
                    self._make_room()
                    await self._write(item)
                else:
                    self._waiting_slots.pop(item.group, None)
                    await self._write(self._slot_bytes(item))
        except _BROKEN:
            self.mark_closed()
        finally:
            self._writing_done()

    def _writing_done(self) -> None:
        self._writing = False
        if self._drained is not None:
            self._drained.set()
            self._drained = None

    async def _write(self, data: bytes) -> None:
        if len(data) <= WRITE_CHUNK:
            await self._stream.send(data)
            self.written_at = time.monotonic()
            return
        for start in range(0, len(data), WRITE_CHUNK):
            await self._stream.send(data[start : start + WRITE_CHUNK])
            self.last_active = self.written_at = time.monotonic()  # a slow reader is not an idle one

    def _slot_bytes(self, slot: _Slot) -> bytes:
        frames = []
        for method, params in slot.latest.items():
            try:
                payload = _encoder.encode({"jsonrpc": "2.0", "method": method, "params": params})
            except Exception:  # one unencodable notice must not end the connection
                log.error("notification_unencodable", conn=self.id, method=method, exc_info=True)
                continue
            frames.append(encode(self.framing, payload))
        return b"".join(frames)

    def _make_room(self) -> None:
        if self._room is not None and self.reply_bytes <= OUTBOX_HIGH_WATER:
            self._room.set()
            self._room = None

    # --- closing -------------------------------------------------------------------------

    def mark_closed(self) -> None:
        """Nothing more is written: queued output is dropped, waiting replies released."""
        self.closed = True
        self._outbox.clear()
        self._waiting_slots.clear()
        self._backlog.total -= self.reply_bytes
        self.reply_bytes = 0
        self._make_room()
        self._wake.set()

    def run_close_hooks(self) -> None:
        self.mark_closed()
        hooks, self._close_hooks = self._close_hooks, []
        for hook in hooks:
            try:
                hook(self)
            except Exception:  # one failing hook must not skip the others or end the daemon
                log.error("close_hook_failed", conn=self.id, exc_info=True)

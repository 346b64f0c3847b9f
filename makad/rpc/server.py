"""Connections on the Unix socket: peer check, caps, framing, concurrent requests, shutdown.

One task reads each connection; every framed message is dispatched in its own
task (bounded per connection) so a slow call never holds up a ``ping`` behind
it. Two kinds skip the task: inline methods (no IO at all: ``ping``) are answered
by the reader, and eager ones (cheap reads such as a conditional ``read_state``)
start on the reader, which hands the reading to a new task only if the request
has to wait (``makad.rpc.eager``). Output goes through the connection's outbox
(``makad.rpc.connection``).

Nothing one client does can end the process: every connection is served inside
a boundary that logs what escaped with a ref, answers -32603 where a reply is
possible and otherwise closes that connection alone.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import struct
import time
from collections import deque
from dataclasses import dataclass
from functools import partial

import anyio
import anyio.to_thread
import msgspec
import structlog
from anyio.abc import SocketAttribute, SocketListener, SocketStream, TaskGroup, UNIXSocketStream

from makad.rpc.connection import OUTBOX_HIGH_WATER, Backlog, Connection, yield_now
from makad.rpc.dispatch import (
    PREPARE_ON_LOOP_MAX_BYTES,
    Dispatcher,
    Prepared,
    error_response,
    expects_reply,
    internal_error,
    new_ref,
    reply_id,
)
from makad.rpc.eager import in_place
from makad.rpc.framing import Decoder, FrameError, detect, make_decoder
from makad.rpc.large_messages import LARGE_PARTIAL_BYTES, LargeMessages
from makad.rpc.refusal import drain_then_close, end_then_drain, send_refusal
from makad.rpc.throttled_log import throttled
from makad.rpc.value_cap import MAX_MESSAGE_VALUES, over_cap
from makad.settings import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_LARGE_SLOT_HOLD_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_UNSENT_REPLY_BYTES,
)
from makad.wire.system import DAEMON_STOPPING, DaemonStopping, StopReason

log = structlog.get_logger("makad.server")
_encoder = msgspec.json.Encoder()
# A client can send broken or oversized messages on connection after connection: these
# are logged once a second with their count (makad.rpc.throttled_log).
_log_bad_frame = throttled("makad.server", "connection_closed_bad_frame")
_log_too_many_values = throttled("makad.server", "message_too_many_values", "warning")
_log_not_reading = throttled("makad.server", "connection_not_reading_closed", "warning")

# Below glibc's pinned mmap threshold (makad.heap): each recv allocates this much and
# shrinks it to what arrived; a larger size cost an mmap and munmap per read.
READ_CHUNK = 64 * 1024
MAX_IN_FLIGHT_PER_CONNECTION = 64
# Refusals are logged at most this often (a flood of connects is one line a second).
REFUSAL_LOG_INTERVAL_S = 1.0
# Refused connections kept open at once so that their clients read the refusal
# (makad.rpc.refusal); past this many a refused connection is closed at once.
MAX_LINGERING_REFUSALS = 32
# How long the accept loop waits after a failed accept (EMFILE: out of descriptors).
ACCEPT_RETRY_S = 0.05
# A connection whose socket took none of its queued replies for this long is one that does
# not read them: the first closed when replies waiting to be read take too much memory.
NOT_READING_S = 5.0
# How long stopping waits for what is queued on the connections to be written.
FLUSH_ON_STOP_S = 1.0


@dataclass(frozen=True)
class Limits:
    """What one server lets its clients take."""

    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    # How long a connection may hold a large-message slot while others wait (large_messages).
    large_slot_hold_s: float = DEFAULT_LARGE_SLOT_HOLD_S
    # Replies computed and not yet read, all connections together, past which the
    # connection holding the most of them is closed (``Server._shed``).
    max_unsent_reply_bytes: int = DEFAULT_MAX_UNSENT_REPLY_BYTES
    shutdown_grace_s: float = 5.0
    # Test-only: ``connection_crash`` makes a connection's reader fail outside any
    # request when it reads CRASH_MARKER (the boundary below must hold).
    fault_point: str | None = None


CRASH_MARKER = b"crash-this-connection"


class _CrashingDecoder:
    """A decoder that raises (not a FrameError) on CRASH_MARKER (fault injection)."""

    def __init__(self, inner: Decoder) -> None:
        self._inner = inner

    def feed(self, data: bytes) -> list[bytes]:
        if CRASH_MARKER in data:
            raise RuntimeError("injected connection crash")
        return self._inner.feed(data)

    def has_partial(self) -> bool:
        return self._inner.has_partial()

    def buffered(self) -> int:
        return self._inner.buffered()


# Connections taken off the listen queue at once, between two turns of the event loop.
ACCEPT_BATCH = 256


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of ``sock`` (SO_PEERCRED), None where the
    OS cannot say."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def take_queue(
    listening: socket.socket, own_uid: int, foreign: Refusals
) -> tuple[list[socket.socket], OSError | None]:
    """Accept what waits on the listen queue (up to ``ACCEPT_BATCH``) without yielding:
    another uid's connections are closed here and counted in ``foreign``; the user's are
    returned, with the error that stopped the batch (EMFILE …), if one did.

    Another user who can reach the socket (one opened to others) can connect as fast as
    the kernel lets them: refused one by one through the event loop, their connects kept
    the listen queue full, and the user's own clients got EAGAIN or waited seconds."""
    own: list[socket.socket] = []
    for _ in range(ACCEPT_BATCH):
        try:
            sock, _address = listening.accept()
        except BlockingIOError:
            break
        except OSError as exc:
            return own, exc
        uid = peer_uid(sock)
        if uid is not None and uid != own_uid:
            sock.close()
            foreign.count(uid=uid)
            continue
        sock.setblocking(False)
        own.append(sock)
    return own, None


class Refusals:
    """Connections refused for one reason: logged at most once a ``REFUSAL_LOG_INTERVAL_S``
    with how many there were since the last line (a line each let a flood fill the log)."""

    def __init__(self, reason: str) -> None:
        self._reason = reason
        self._since_logged = 0
        self._logged_at = -REFUSAL_LOG_INTERVAL_S

    def count(self, **fields: int) -> None:
        self._since_logged += 1
        now = time.monotonic()
        if now - self._logged_at >= REFUSAL_LOG_INTERVAL_S:
            log.warning("connection_refused", reason=self._reason, refused=self._since_logged, **fields)
            self._logged_at = now
            self._since_logged = 0


class Server:
    """Accepts connections and serves them until asked to stop."""

    def __init__(self, dispatcher: Dispatcher, limits: Limits | None = None) -> None:
        self._dispatcher = dispatcher
        self._limits = limits or Limits()
        self._uid = os.getuid()
        self._stop = anyio.Event()
        self._stopping = False  # ``_stop`` is set: a plain read for each request's loop
        self._in_flight = 0
        # Created only while shutdown waits for in-flight requests (not per request).
        self._idle: anyio.Event | None = None
        self.connections: set[Connection] = set()
        # Accepted and not yet finished (counted before their task starts).
        self._open = 0
        self._lingering = 0
        self._over_cap = Refusals("too many connections")
        self._foreign = Refusals("peer uid differs")
        self._accept_failures = 0
        self._accept_failure_logged_at = -REFUSAL_LOG_INTERVAL_S
        self.large = LargeMessages(self._limits.max_message_bytes)
        self._backlog = Backlog()

    def request_stop(self, reason: StopReason = "shutdown") -> None:
        """Stop serving, and tell every open connection that this is on purpose
        (``daemon_stopping`` ``{reason}``): a client that sees it does not start a new
        daemon when it loses its connection."""
        if self._stopping:
            return
        self._stopping = True
        self._stop.set()
        for conn in list(self.connections):
            conn.notify(DAEMON_STOPPING, DaemonStopping(reason=reason), group=DAEMON_STOPPING)

    @property
    def stopping(self) -> bool:
        return self._stopping

    async def run(self, listener: SocketListener) -> None:
        async with anyio.create_task_group() as tg:
            accept_scope = anyio.CancelScope()
            accept_done = anyio.Event()

            async def accept_loop() -> None:
                try:
                    with accept_scope:
                        await self._accept_forever(listener, tg)
                finally:
                    accept_done.set()

            tg.start_soon(accept_loop)
            tg.start_soon(self._close_idle_forever)
            await self._stop.wait()
            accept_scope.cancel()
            await accept_done.wait()
            await listener.aclose()
            log.info("stopping", in_flight=self._in_flight)
            with anyio.move_on_after(self._limits.shutdown_grace_s):
                if self._in_flight:
                    self._idle = anyio.Event()
                    await self._idle.wait()
            # What is queued (``daemon_stopping`` above all) reaches the clients that read.
            with anyio.move_on_after(FLUSH_ON_STOP_S):
                for conn in list(self.connections):
                    await conn.flush()
            tg.cancel_scope.cancel()

    async def _accept_forever(self, listener: SocketListener, tg: TaskGroup) -> None:
        raw: socket.socket = listener.extra(SocketAttribute.raw_socket)
        raw.setblocking(False)
        while True:
            await anyio.wait_readable(raw)
            # Another uid's connections are closed in there, before they count against
            # the cap, so a flood of them never crowds out the user's own clients.
            own, failure = take_queue(raw, self._uid, self._foreign)
            if failure is not None:  # EMFILE and the like: keep accepting once it passes
                self._accept_failed(failure)
            waiting = iter(own)
            try:
                for sock in waiting:
                    try:
                        stream = await UNIXSocketStream.from_socket(sock)
                    except (ValueError, OSError):  # gone already (its client hung up)
                        sock.close()
                        continue
                    await self._admit(stream, tg)
            finally:  # stopping: what this batch has not admitted is closed
                for sock in waiting:
                    sock.close()
            if failure is not None:
                await anyio.sleep(ACCEPT_RETRY_S)

    async def _admit(self, stream: SocketStream, tg: TaskGroup) -> None:
        """Serve a connection of the user's, or refuse it past the connection cap."""
        if self._open >= self._limits.max_connections:
            await self._refuse(stream, tg)
            return
        self._open += 1
        tg.start_soon(self._serve_connection, stream)

    def _accept_failed(self, exc: Exception) -> None:
        """Count a failed accept; log the count once a ``REFUSAL_LOG_INTERVAL_S`` at most
        (out of descriptors, every retry fails until clients leave)."""
        self._accept_failures += 1
        now = time.monotonic()
        if now - self._accept_failure_logged_at < REFUSAL_LOG_INTERVAL_S:
            return
        cause = exc if isinstance(exc, OSError) else exc.__cause__
        code = cause.errno if isinstance(cause, OSError) and cause.errno else 0
        log.warning(
            "accept_failed",
            error=type(exc).__name__,
            errno=errno.errorcode.get(code, ""),
            failures=self._accept_failures,
        )
        self._accept_failure_logged_at = now
        self._accept_failures = 0

    async def _refuse(self, stream: SocketStream, tg: TaskGroup) -> None:
        """One error line, then the connection lingers until the client has read it
        (makad.rpc.refusal), unless too many refused ones linger already."""
        if send_refusal(stream, self._limits.max_connections) and self._lingering < MAX_LINGERING_REFUSALS:
            self._lingering += 1
            tg.start_soon(self._linger, stream)
        else:
            await stream.aclose()
        self._over_cap.count(limit=self._limits.max_connections)

    async def _linger(self, stream: SocketStream) -> None:
        try:
            await drain_then_close(stream)
        finally:
            self._lingering -= 1

    async def _close_idle_forever(self) -> None:
        timeout = self._limits.idle_timeout_s
        hold = self._limits.large_slot_hold_s
        interval = min(max(min(timeout, hold) / 4, 0.05), 5.0)
        while True:
            await anyio.sleep(interval)
            now = time.monotonic()
            self.large.end_stalled(hold, now)
            while self._backlog.total > self._limits.max_unsent_reply_bytes:
                before = self._backlog.total
                self._shed(now)
                if self._backlog.total >= before:
                    break  # every connection holding replies still reads them
            for conn in list(self.connections):
                if conn.idle and now - conn.last_active >= timeout:
                    log.info("connection_idle_closed", conn=conn.id, idle_s=round(timeout, 1))
                    conn.scope.cancel()

    async def _serve_connection(self, stream: SocketStream) -> None:
        try:
            async with stream:
                await self._serve(Connection(stream, time.monotonic(), self._backlog))
        except Exception:  # the boundary: this connection ends, the daemon does not
            log.error("connection_crashed", ref=new_ref(), exc_info=True)
        finally:
            self._open -= 1

    async def _serve(self, conn: Connection) -> None:
        self.connections.add(conn)
        try:
            with conn.scope:
                async with anyio.create_task_group() as writer:
                    writer.start_soon(conn.write_forever)
                    broken = await self._read_loop(conn)
                    await conn.flush()
                    writer.cancel_scope.cancel()
                if broken:
                    # Closing with the rest of the refused message unread would reset the
                    # connection, and the client could lose the error line before reading it.
                    await end_then_drain(conn.stream)
        finally:
            self.connections.discard(conn)
            conn.run_close_hooks()

    async def _read_loop(self, conn: Connection) -> bool:
        """Serve the connection's requests; True when a broken frame ended it."""
        reading = _Reading(anyio.Semaphore(MAX_IN_FLIGHT_PER_CONNECTION))
        async with anyio.create_task_group() as tg:
            reading.tasks = tg
            # A task of its own, not this one: each request's turn of the event loop then
            # resumes two coroutine frames (anyio's task wrapper, ``_read``), not five.
            tg.start_soon(self._read, conn, reading)
            # Leaving the task group lets the requests already read finish; on shutdown
            # Server.run cancels whatever outlives the grace period.
        self._give_back_slot(reading)  # the reader ended (its ``finally`` did) or was cancelled
        if (exc := reading.frame_error) is not None:
            await conn.send(_encoder.encode(error_response(-32600, "Invalid Request", exc.data())))
            _log_bad_frame(exc.kind, conn=conn.id, kind=exc.kind)
            return True
        return False

    async def _read(self, conn: Connection, reading: _Reading) -> None:
        """Read and start requests until the connection ends. An eager request that has to
        wait keeps this task, and another reads on: the connection's spare, or a new task.
        Once that request is answered, this task is the spare (``_Reading.stand_by``): a
        connection whose requests each wait (a thread hop) spawns no task per request."""
        max_bytes = self._limits.max_message_bytes
        queued = reading.queued
        prepare = self._dispatcher.prepare
        mine = reading.handoffs  # this task reads until the count moves on
        try:
            while True:
                while queued:
                    message = queued.popleft()
                    try:
                        if len(message) > PREPARE_ON_LOOP_MAX_BYTES:
                            prepared = await anyio.to_thread.run_sync(self._prepare, message)
                        elif len(message) > MAX_MESSAGE_VALUES:  # shorter ones hold fewer values
                            prepared = self._prepare(message)
                        else:
                            prepared = prepare(message)
                    except Exception:
                        ref = new_ref()
                        log.error("request_crashed", stage="decode", ref=ref, exc_info=True)
                        prepared = internal_error(ref)
                    if prepared.__class__ is not Prepared:  # one test on the common path
                        if isinstance(prepared, FrameError):
                            # Too many values to decode: refused like a message over the size
                            # cap (its id is unknown), and nothing after it is read.
                            queued.clear()
                            reading.frame_error = prepared
                            return
                        assert isinstance(prepared, bytes)
                        await conn.send(prepared)
                        continue
                    if conn.reply_bytes > OUTBOX_HIGH_WATER and conn.backlogged:
                        # It does not read its replies: start no more of its requests
                        # until it does (those read already wait, unstarted).
                        await conn.wait_for_room()
                        if conn.closed:
                            return
                    self._in_flight += 1  # ended in ``_handle``
                    conn.in_flight += 1
                    if prepared.inline:
                        # No IO behind it: answering in place beats spawning a task, and
                        # the reader itself is the bound on how many run at once.
                        await self._handle(conn, prepared, None)
                        continue
                    limiter = reading.limiter
                    if prepared.eager:
                        # A slot of the bound is taken only if it waits, unless none is free:
                        # then it waits for one first, as any other request does.
                        held = limiter.value == 0
                        if held:
                            await limiter.acquire()
                        if await self._handle_eagerly(conn, prepared, reading, held):
                            # It waited, and another task reads now: this one waits as
                            # the spare for the next hand-off, or ends with the reading
                            # (holding no request's bytes meanwhile).
                            message = prepared = b""
                            if not await reading.stand_by():
                                return
                            mine = reading.handoffs
                        continue
                    try:
                        limiter.acquire_nowait()  # no scheduling round trip when free
                    except anyio.WouldBlock:
                        await limiter.acquire()
                    reading.tasks.start_soon(self._handle, conn, prepared, limiter)
                if self._stopping or conn.closed or reading.frame_error is not None:
                    return
                # It does not read its replies: stop taking requests (the attribute first: the
                # property is a call, and almost always nothing waits).
                if conn.reply_bytes > OUTBOX_HIGH_WATER and conn.backlogged:
                    await conn.wait_for_room()
                # In the middle of a large message: read on only with a slot (large_messages).
                if reading.large and not reading.slot:
                    await self.large.take(reading, partial(_end_stalled, conn))
                    reading.slot = True
                try:
                    # ``conn.receive`` unrolled for its common case (one frame less to resume
                    # and leave per request): yield once, and the next request is often there.
                    await yield_now()
                    chunk = conn.recv_now(READ_CHUNK)
                    if chunk is None:
                        chunk = await conn.receive(READ_CHUNK)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    chunk = b""
                if not chunk:
                    if reading.decoder is not None and reading.decoder.has_partial():
                        log.debug("client_closed_mid_message", conn=conn.id)
                    return
                conn.last_active = time.monotonic()
                decoder = reading.decoder
                if decoder is None:
                    # Blanks before the first message are counted, not kept: the framing
                    # is the first other byte's, and either decoder skips leading blanks.
                    framing = detect(chunk)
                    if framing is None:
                        reading.blanks += len(chunk)
                        if reading.blanks > max_bytes:
                            return
                        continue
                    conn.framing = framing
                    decoder = reading.decoder = make_decoder(framing, max_bytes)
                    if self._limits.fault_point == "connection_crash":
                        decoder = reading.decoder = _CrashingDecoder(decoder)
                try:
                    queued.extend(decoder.feed(chunk))
                except FrameError as exc:
                    # The requests framed before it are still run; the error is sent once
                    # they are answered (``_read_loop``), and nothing more is read.
                    queued.extend(exc.frames)
                    reading.frame_error = exc
                reading.large = decoder.buffered() > LARGE_PARTIAL_BYTES
                if reading.slot and not reading.large:
                    self._give_back_slot(reading)
        finally:
            if reading.handoffs == mine:  # the reader: no other task will read
                reading.end()
                self._give_back_slot(reading)

    def _shed(self, now: float) -> None:
        """Replies computed and not yet read are over ``max_unsent_reply_bytes``: close the
        connection holding the most of them among those whose socket has taken none for
        ``NOT_READING_S`` (a client that sends requests and never reads the answers),
        dropping its replies. A client that reads is left alone: what it holds is drained."""
        stalled = [c for c in self.connections if c.not_reading(now, NOT_READING_S)]
        if not stalled:
            return
        victim = max(stalled, key=lambda c: c.reply_bytes)
        _log_not_reading(
            (), conn=victim.id, unsent_bytes=victim.reply_bytes, limit=self._limits.max_unsent_reply_bytes
        )
        victim.mark_closed()
        victim.scope.cancel()

    def _give_back_slot(self, reading: _Reading) -> None:
        if reading.slot:
            reading.slot = False
            self.large.give_back(reading)

    def _prepare(self, message: bytes) -> Prepared | bytes | FrameError:
        """The message's requests, or its error reply; a ``FrameError`` when it holds more
        values than the cap (counted before decoding: decoding them is what costs)."""
        if over_cap(message):
            _log_too_many_values((), size=len(message), limit=MAX_MESSAGE_VALUES)
            return FrameError(
                f"message holds more than {MAX_MESSAGE_VALUES} values",
                "too_large",
                limit=MAX_MESSAGE_VALUES,
                cap="maxMessageValues",
            )
        return self._dispatcher.prepare(message)

    async def _handle_eagerly(
        self, conn: Connection, prepared: Prepared, reading: _Reading, held: bool
    ) -> bool:
        """Run an eager request on this (the reader's) task; True when it had to wait, in
        which case a new task took over reading just before it did. ``held``: it has its
        slot of the bound already."""
        waited = False
        limiter = reading.limiter

        def read_on() -> None:
            nonlocal waited
            waited = True
            if not held:  # a slot was free when it started, and nothing ran since
                limiter.acquire_nowait()
            if not reading.wake_spare(True):
                reading.tasks.start_soon(self._read, conn, reading)
            reading.handoffs += 1  # the task that reads now counts from here

        try:
            await in_place(self._handle(conn, prepared, None), read_on)
        finally:
            if waited or held:
                limiter.release()
        return waited

    async def _handle(self, conn: Connection, prepared: Prepared, limiter: anyio.Semaphore | None) -> None:
        try:
            try:
                reply = await self._dispatcher.run(prepared, conn)
            except Exception:
                ref = new_ref()
                log.error("request_crashed", stage="dispatch", ref=ref, exc_info=True)
                reply = _crash_reply(prepared, ref)
            finally:
                # Handled: waiting to write the reply no longer keeps the connection busy.
                conn.in_flight -= 1
                conn.last_active = time.monotonic()
            if reply is not None:
                frame = conn.send_nowait(reply)
                reply = None  # the frame is a copy: this one is not held while it waits
                if frame is not None:
                    if self._backlog.total + len(frame) > self._limits.max_unsent_reply_bytes:
                        self._shed(time.monotonic())
                    await conn.send_frame(frame)
        except Exception:  # writing failed in a way the outbox did not expect
            log.error("connection_crashed", conn=conn.id, ref=new_ref(), exc_info=True)
            conn.scope.cancel()
        finally:
            self._in_flight -= 1
            if self._in_flight == 0 and self._idle is not None:
                self._idle.set()
            if limiter is not None:
                limiter.release()


def _end_stalled(conn: Connection) -> None:
    """Close a connection that held a large-message slot too long while others waited."""
    log.info("large_message_stalled", conn=conn.id)
    conn.scope.cancel()


class _Reading:
    """One connection's reading, handed from task to task: what is framed and not yet
    started, the decoder, and the bound on requests in flight."""

    __slots__ = (
        "blanks",
        "decoder",
        "ended",
        "frame_error",
        "handoffs",
        "large",
        "limiter",
        "queued",
        "slot",
        "spare",
        "tasks",
    )

    def __init__(self, limiter: anyio.Semaphore) -> None:
        self.limiter = limiter
        self.queued: deque[bytes] = deque()
        self.decoder: Decoder | None = None
        self.blanks = 0  # blank bytes read before the framing is known
        # Holding a message not yet whole past LARGE_PARTIAL_BYTES; and a slot to read on.
        self.large = False
        self.slot = False
        self.frame_error: FrameError | None = None  # the stream broke: read no further
        self.tasks: TaskGroup
        # How many times the reading moved to another task (a request it ran had to wait).
        self.handoffs = 0
        # A task whose waiting request is answered, waiting to read at the next hand-off:
        # waking it costs far less than spawning a task (anyio's bookkeeping, a cancel scope).
        self.spare: asyncio.Future[bool] | None = None
        self.ended = False  # the reader stopped: nothing more is read

    async def stand_by(self) -> bool:
        """Wait as the spare: True when a hand-off makes this task the reader, False when
        the reading ended (or another task is the spare already)."""
        if self.ended or self.spare is not None:
            return False
        spare: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.spare = spare
        try:
            return await spare
        finally:
            if self.spare is spare:
                self.spare = None

    def wake_spare(self, read: bool) -> bool:
        """Wake the spare, to read on (``read``) or to end; False when there is none."""
        spare, self.spare = self.spare, None
        if spare is None or spare.done():  # done: cancelled, its task on its way out
            return False
        spare.set_result(read)
        return True

    def end(self) -> None:
        """The reader stopped: the spare ends, and a task freed later ends too."""
        self.ended = True
        self.wake_spare(False)


def _crash_reply(prepared: Prepared, ref: str) -> bytes | None:
    """-32603 for a request that crashed outside its handler (a batch gets one, id null)."""
    if prepared.batch:
        return internal_error(ref)
    obj = prepared.messages[0]
    return internal_error(ref, reply_id(obj)) if expects_reply(obj) else None

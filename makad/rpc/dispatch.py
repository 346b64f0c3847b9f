"""JSON-RPC 2.0 dispatch: validation per message, typed params, stable errors.

jsonrpcserver finds and calls the method; everything around it is ours because
its defaults do not fit (docs/ARCHITECTURE.md, "Traps in the libraries
underneath": it validates with jsonschema, a batch as one document, and puts
``str(exc)`` in error data): each request and each batch element is
validated here with msgspec-decoded values (no jsonschema), positional params
are refused, params are decoded into the method's msgspec Struct, and no
exception text ever reaches the wire. Every reply is encoded here, under the
reply cap (``reply_budget``), and an unencodable one becomes -32603.
"""

from __future__ import annotations

import json
import json.scanner
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import anyio.lowlevel
import msgspec
import structlog

from makad import logs
from makad.errors import ECHO_LIMIT, MakadError, echoed
from makad.rpc.allowed import allowed_values
from makad.rpc.connection import Connection
from makad.rpc.jsonrpcserver_parts import (
    NOID,
    Error,
    Request,
    Right,
    SuccessResult,
    call,
    to_response,
    to_serializable_one,
)
from makad.rpc.reply_budget import NO_REPLY, BatchBudget, too_large_reply
from makad.rpc.throttled_log import throttled
from makad.rpc.value_cap import count_members
from makad.settings import DEFAULT_MAX_REPLY_BYTES
from makad.wire.base import Handler, MethodSpec

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# A long batch yields to other connections after this many elements or reply bytes
# (its elements may all be inline, so nothing else would let the event loop turn).
YIELD_EVERY = 64
YIELD_BYTES = 1024 * 1024
# A payload larger than this is prepared (decoded, checked for keys given twice, its batch
# replies reckoned) on a worker thread: within the message cap, millions of tiny objects
# or members are seconds of that work, and the event loop must keep serving meanwhile.
PREPARE_ON_LOOP_MAX_BYTES = 256 * 1024

_PATH = re.compile(r" - at `(\$[^`]*)`$")
# What an error echoes of the request (a method's name, msgspec's reason quoting a key or
# a value) is cut to this many characters: a megabyte key is not sent back whole.
ECHO_CHARS = ECHO_LIMIT
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()
_new_tuple = tuple.__new__
# The params of a request without any: none by name (jsonrpcserver calls a method the same
# with {} as with []; its ``**`` copies this, so it is never changed).
_NO_PARAMS: dict[str, Any] = {}
log = structlog.get_logger("makad.rpc")
# A client can fail a request, or ask for a reply over the cap, in a loop: once a second.
_log_failed = throttled("makad.rpc", "request_failed")
_log_reply_too_large = throttled("makad.rpc", "reply_too_large", "warning")
_log_batch_reply_too_large = throttled("makad.rpc", "batch_reply_too_large", "warning")


def _clip(text: str) -> str:
    """``text`` as an error repeats it (``echoed``: at most ``ECHO_CHARS`` characters)."""
    return echoed(text, ECHO_CHARS)


def error_object(code: int, message: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"code": code, "message": message, "data": data}


def error_response(code: int, message: str, data: dict[str, Any], id_: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": error_object(code, message, data), "id": id_}


def internal_error(ref: str, id_: Any = None) -> bytes:
    """The bytes of a -32603 reply pointing at the log line ``ref``."""
    return _encoder.encode(
        error_response(INTERNAL_ERROR, "Internal error", {"kind": "internal", "ref": ref}, id_)
    )


def new_ref() -> str:
    return uuid.uuid4().hex[:12]


# Classes of an id that is valid for sure (the common ones: no call to ``_valid_id``).
_PLAIN_IDS = frozenset({int, str, type(None)})


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool))


def _invalid_request(reason: str, id_: Any = None) -> dict[str, Any]:
    return error_response(
        INVALID_REQUEST, "Invalid Request", {"kind": "invalid_request", "reason": reason}, id_
    )


_CONTAINERS = frozenset({dict, list})
# More params than any method has (13): such params are refused by their first unknown
# key, before they are spread into a call's keyword arguments (a copy of every member).
MAX_PARAMS_MEMBERS = 64
# Up to this size a payload's check encodes the decoded value again (cheaper than walking
# it for the small requests of the hot path); above it, a walk over its containers.
_REENCODE_MAX = 64 * 1024


class _Duplicated(dict[str, Any]):
    """An object of the exact re-parse that had a key more than once (``key``: the first)."""

    key: str = ""


class _Refused(msgspec.Struct, gc=False):
    """A batch element refused before it ran (a duplicate key): its reply, and its id."""

    reply: dict[str, Any]
    id: Any


def _members(value: Any) -> int:
    """How many members all the objects in a decoded JSON value hold (iterative: a deeply
    nested value must not exhaust the stack)."""
    count = 0
    stack = [value]
    pop, push = stack.pop, stack.append
    containers = _CONTAINERS
    while stack:
        item = pop()
        if item.__class__ is dict:
            count += len(item)
            for inner in item.values():
                if inner.__class__ in containers:
                    push(inner)
        else:
            for inner in item:
                if inner.__class__ in containers:
                    push(inner)
    return count


def _maybe_duplicated(payload: bytes, value: Any) -> bool:
    """False when no object in ``payload`` can have a key twice; True when the exact check
    (``_exact``) must tell. Decoding keeps one member per key, so a duplicate leaves the
    decoded value with fewer members (and fewer strings) than the text. Sound tests, the
    cheapest first (the request path pays them on every call):

    1. The payload is the decoded value encoded again, byte for byte (our clients'
       compact JSON): an encoding never repeats a key.
    2. Without a ``\\u003`` escape (the only other spelling of a colon), the payload has
       no more colons than the value encoded again: each member has one outside strings,
       and the strings of a dropped member take theirs with them.
    3. For large payloads (not encoded again: that costs like the decode), the colons, or
       the colons outside strings (each member has one there, and nothing else does),
       number the decoded members exactly. Counted in pieces (``value_cap``): a string of
       millions of escaped quotes and colons was seconds of one regex call.
    """
    if len(payload) <= _REENCODE_MAX:
        try:
            again = _encoder.encode(value)
        except Exception:  # a lone surrogate from a \\ud800 escape: look the slow way
            again = b""
        if again == payload:
            return False
        if again and b"\\u003" not in payload and payload.count(b":") == again.count(b":"):
            return False
    members = _members(value)
    if payload.count(b":") == members:
        return False
    return count_members(payload) != members


def _keep_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    marked = _Duplicated(obj)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            marked.key = key
            break
        seen.add(key)
    return marked


def _duplicate_key(value: Any) -> str | None:
    """The first key found twice in an object of ``value`` (parsed by ``_exact``), if any."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Duplicated):
            return item.key
        if isinstance(item, dict):
            stack.extend(v for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, (dict, list)))
    return None


# The standard library's parser with its Python scanner: slower than its C one, but a
# worker thread running it lets the event loop in between (the C scanner holds the GIL
# for the whole document: a third of a second for an object of 100,000 members).
def _python_pairs_decoder() -> json.JSONDecoder:
    """One per parse: the scanner's key memo is the decoder's, not to be shared by threads."""
    decoder = json.JSONDecoder(object_pairs_hook=_keep_duplicates)
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    return decoder


def _exact(payload: bytes) -> Any:
    """``payload`` parsed again, each object with a key twice a ``_Duplicated`` (the rare
    path: only when the counts of ``_maybe_duplicated`` leave a doubt). None when this
    parser refuses what msgspec took (then nothing is known to be duplicated). A large
    payload (prepared on a worker thread) is parsed by the Python scanner first; nested
    deeper than its recursion allows, by the C one."""
    if len(payload) > PREPARE_ON_LOOP_MAX_BYTES:
        try:
            return _python_pairs_decoder().decode(payload.decode("utf-8", "surrogatepass"))
        except ValueError:
            return None
        except RecursionError:
            pass
    try:
        return json.loads(payload, object_pairs_hook=_keep_duplicates)
    except (ValueError, RecursionError):
        return None


def _duplicate_reply(obj: Any, exact: Any) -> dict[str, Any] | None:
    """The Invalid Request reply for a request whose exact parse has a key twice, else None.
    Its id is the request's unless ``id`` itself is the key given twice."""
    key = _duplicate_key(exact)
    if key is None:
        return None
    top = exact.key if isinstance(exact, _Duplicated) else None
    id_ = obj.get("id") if isinstance(obj, dict) and top != "id" else None
    where = "the request object" if top is not None else "an object of the request"
    shown = echoed(key, 64)
    return _invalid_request(f"duplicate key {shown!r} in {where}", id_ if _valid_id(id_) else None)


def _refuse_duplicates(payload: bytes, messages: list[Any]) -> list[Any]:
    """The batch with each element that has a key twice replaced by its refusal."""
    exact = _exact(payload)
    if not isinstance(exact, list) or len(exact) != len(messages):
        return messages
    out: list[Any] = []
    for obj, parsed in zip(messages, exact, strict=True):
        reply = _duplicate_reply(obj, parsed)
        out.append(obj if reply is None else _Refused(reply, reply["id"]))
    return out


def _single_refused(payload: bytes, message: dict[str, Any]) -> bytes | None:
    """The reply refusing a single request with a key twice, else None (the checks of
    ``_maybe_duplicated``, then the exact one)."""
    if not _maybe_duplicated(payload, message):
        return None
    refused = _duplicate_reply(message, _exact(payload))
    return None if refused is None else _encoder.encode(refused)


def _check_request(obj: Any) -> dict[str, Any] | None:
    """An Invalid Request response for a malformed request object, else None."""
    if not isinstance(obj, dict):
        if obj.__class__ is _Refused:
            return obj.reply
        return _invalid_request("a request must be a JSON object")
    id_ = obj.get("id")
    if id_.__class__ not in _PLAIN_IDS and not _valid_id(id_):
        return _invalid_request("id must be a string, a number or null")
    if obj.get("jsonrpc") != "2.0":
        return _invalid_request('"jsonrpc" must be exactly "2.0"', id_)
    if not isinstance(obj.get("method"), str):
        return _invalid_request('"method" must be a string', id_)
    params = obj.get("params")
    # ``"params": null`` is taken for no params: a method that needs some says which.
    if params is not None and not isinstance(params, (dict, list)):
        return _invalid_request('"params" must be an object, an array or null', id_)
    return None


# Requests whose reply may run to megabytes (``MethodSpec.large_reply``) run this many
# bytes of reply cap at a time, server-wide: each may build a reply up to the cap (and
# many times that in Python objects before it is encoded: ~60 MB for a 4 MB page of
# events), and a client can pipeline 64 of them on each of many connections. The rest
# wait, holding only their params, for one to finish; and none takes a slot while its
# connection has more replies unread than a reading client leaves.
LARGE_REPLIES_BUDGET_BYTES: Final = 64 * 1024 * 1024
MIN_LARGE_REPLY_SLOTS: Final = 2
_log_large_waiting = throttled("makad.rpc", "large_replies_waiting")


def large_reply_slots(max_reply_bytes: int) -> int:
    """How many requests whose reply may be large run at once, server-wide."""
    return max(MIN_LARGE_REPLY_SLOTS, LARGE_REPLIES_BUDGET_BYTES // max(1, max_reply_bytes))


class Dispatcher:
    """Turns one framed payload into the bytes of its reply (or None for no reply)."""

    def __init__(
        self,
        catalogue: dict[str, MethodSpec],
        handlers: dict[str, Handler],
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        self.max_reply_bytes = max_reply_bytes
        self.large_reply_slots = large_reply_slots(max_reply_bytes)
        self._large: anyio.Semaphore | None = None  # made on first use, on the event loop
        self._methods: dict[str, Callable[..., Awaitable[Any]]] = {}
        self._params: dict[str, type[msgspec.Struct]] = {}
        self._inline: frozenset[str] = frozenset()
        self._eager: frozenset[str] = frozenset()
        # Set while more methods are coming (``defer_rest``); their requests wait for them.
        self._rest: anyio.Event | None = None
        self._rest_failed: str | None = None  # the log ref of why they never came
        self._register(catalogue, handlers)

    def _register(self, catalogue: Mapping[str, MethodSpec], handlers: Mapping[str, Handler]) -> None:
        missing = set(catalogue) - set(handlers)
        if missing:
            raise RuntimeError(f"no handler for {sorted(missing)}")
        wide = [
            name
            for name, spec in catalogue.items()
            if len(spec.params.__struct_fields__) >= MAX_PARAMS_MEMBERS
        ]
        if wide:
            raise RuntimeError(f"{sorted(wide)} take MAX_PARAMS_MEMBERS params or more")
        self._methods.update({name: self._wrap(spec, handlers[name]) for name, spec in catalogue.items()})
        self._params.update({name: spec.params for name, spec in catalogue.items()})
        self._inline |= {name for name, spec in catalogue.items() if spec.inline}
        self._eager |= {name for name, spec in catalogue.items() if spec.eager}

    def defer_rest(self) -> None:
        """More methods come later (``add_rest``): until then a request for a method not
        registered waits for them instead of being answered -32601."""
        self._rest = anyio.Event()

    def add_rest(self, catalogue: Mapping[str, MethodSpec], handlers: Mapping[str, Handler]) -> None:
        """Register the catalogue's methods not registered yet, and release their requests."""
        rest = {name: spec for name, spec in catalogue.items() if name not in self._methods}
        self._register(rest, handlers)
        self._release()

    def rest_failed(self, ref: str) -> None:
        """The deferred methods will not come (the log line ``ref`` says why): their waiting
        and later requests are answered -32603."""
        self._rest_failed = ref
        self._release()

    def _release(self) -> None:
        if self._rest is not None:
            self._rest.set()
            self._rest = None

    async def _method(self, name: str) -> Callable[..., Awaitable[Any]] | None:
        """The method called ``name``, once it is registered; None when there is none."""
        rest = self._rest
        if rest is not None and name not in self._methods:
            await rest.wait()
        return self._methods.get(name)

    def _wrap(self, spec: MethodSpec, handler: Handler) -> Callable[..., Awaitable[Any]]:
        params_type = spec.params
        convert = msgspec.convert
        # A method without params (ping) called without any gets this one instance: it
        # has no field a handler could change, and converting {} would only rebuild it.
        no_params = params_type() if not params_type.__struct_fields__ else None
        required = [f.encode_name for f in msgspec.structs.fields(params_type) if f.required]
        large = spec.large_reply

        async def call(context: Any, *args: Any, **kwargs: Any) -> Any:
            if args:
                return Error(
                    INVALID_PARAMS,
                    "Invalid params",
                    {"kind": "invalid_params", "reason": "params must be an object of named parameters"},
                )
            try:
                params = no_params if no_params is not None and not kwargs else convert(kwargs, params_type)
            except msgspec.ValidationError as exc:
                text = str(exc)
                match = _PATH.search(text)
                path = match.group(1) if match else "$"
                data: dict[str, Any] = {
                    "kind": "invalid_params",
                    "path": path,
                    "reason": _clip(_PATH.sub("", text)),
                }
                message = "Invalid params"
                if text.startswith("Invalid enum value"):
                    allowed = allowed_values(params_type, path)
                    if allowed:
                        data["allowed"] = list(allowed)
                elif text.startswith("Object missing required field") and path == "$":
                    data["required"] = required
                    data["missing"] = missing = [name for name in required if name not in kwargs]
                    if not kwargs:  # params null, {} or none at all
                        message = f"{spec.name} needs params: {', '.join(missing)}"
                return Error(INVALID_PARAMS, message, data)
            started = time.perf_counter() if logs.debug_enabled else 0.0
            try:
                if large:
                    slots = await self._large_slot(spec.name, context)
                    try:
                        result = await handler(params, context)
                    finally:
                        slots.release()
                else:
                    result = await handler(params, context)
            except MakadError as exc:
                _log_failed((spec.name, exc.kind), method=spec.name, kind=exc.kind)
                return Error(exc.code, exc.message, exc.data())
            except Exception:
                ref = new_ref()
                log.error("request_crashed", method=spec.name, ref=ref, exc_info=True)
                return Error(INTERNAL_ERROR, "Internal error", {"kind": "internal", "ref": ref})
            if logs.debug_enabled:
                log.debug(
                    "request", method=spec.name, duration_ms=round((time.perf_counter() - started) * 1000, 3)
                )
            # ``Success(result)``: built as the tuple it is, without two Python frames
            # (Success's *args, the NamedTuple's generated ``__new__``).
            return Right(_new_tuple(SuccessResult, (result,)))

        return call

    async def _large_slot(self, method: str, context: Any) -> anyio.Semaphore:
        """A slot of the server-wide bound on requests whose reply may be large (waiting
        for one is logged, at most once a second), taken while the request's connection
        has no more replies unread than a reading client leaves: one whose client has not
        read the replies before gets no more built for it until it does (its requests
        started already wait here, as its unstarted ones wait to start), and holds no slot
        meanwhile. The caller releases the slot."""
        if self._large is None:
            self._large = anyio.Semaphore(self.large_reply_slots)
        conn = context if isinstance(context, Connection) else None
        while True:
            if conn is not None:
                await conn.wait_for_room()
            if self._large.value == 0:
                _log_large_waiting("wait", method=method, slots=self.large_reply_slots)
            await self._large.acquire()
            if conn is None or not conn.backlogged:
                return self._large
            self._large.release()

    def prepare(self, payload: bytes) -> Prepared | bytes:
        """Decode one framed payload: the requests to run, or the bytes of an error reply."""
        try:
            message = _decoder.decode(payload)
        except msgspec.DecodeError:
            return _encoder.encode(
                error_response(
                    PARSE_ERROR, "Parse error", {"kind": "parse_error", "reason": "invalid JSON or UTF-8"}
                )
            )
        except RecursionError:
            return _encoder.encode(
                error_response(
                    PARSE_ERROR, "Parse error", {"kind": "too_deep", "reason": "JSON nested too deeply"}
                )
            )
        if isinstance(message, list):
            if not message:
                return _encoder.encode(_invalid_request("empty batch"))
            if _maybe_duplicated(payload, message):
                message = _refuse_duplicates(payload, message)
            ids = [reply_id(obj) if expects_reply(obj) else NO_REPLY for obj in message]
            budget = BatchBudget(self.max_reply_bytes, ids)
            if not budget.fits:
                _log_batch_reply_too_large((), requests=len(message), limit=self.max_reply_bytes)
                return too_large_reply(None, self.max_reply_bytes, ran=False, batch=True)
            inline = all(self._is_inline(m) for m in message)
            return Prepared(message, True, inline, replies=_BatchReplies(ids, budget))
        if message.__class__ is dict:
            # No key twice for sure when the colons number the members of the request and
            # of its params (each member has a colon outside strings, and they have at
            # least that many): the common request, proved with one count.
            colons = payload.count(b":")
            if colons != len(message):
                params = message.get("params")
                if params.__class__ is not dict or colons != len(message) + len(params):
                    refused = _single_refused(payload, message)
                    if refused is not None:
                        return refused
            method = message.get("method")  # _method_name's
            if method.__class__ is not str:
                method = None
        else:
            method = None
        return Prepared([message], False, method in self._inline, method in self._eager)

    def _is_inline(self, obj: Any) -> bool:
        return _method_name(obj) in self._inline

    async def run(self, prepared: Prepared, context: Any) -> bytes | None:
        """Execute prepared requests; the reply bytes, or None when nothing is to be sent."""
        if prepared.batch:
            assert prepared.replies is not None
            return await self._run_batch(prepared.messages, prepared.replies, context)
        started = self._start(prepared.messages[0], context)  # ``_one``, unrolled
        reply: dict[str, Any] | None
        if isinstance(started, dict):
            reply = started
        else:
            request, result = started
            reply = _finish(request, await result)
        if reply is None:
            return None
        try:
            encoded = _encoder.encode(reply)
        except Exception:
            encoded = self._encode(reply)  # -32603, logged
        if len(encoded) > self.max_reply_bytes and "result" in reply:
            _log_reply_too_large("one", size=len(encoded), limit=self.max_reply_bytes)
            return too_large_reply(reply["id"], self.max_reply_bytes, ran=True)
        return encoded

    async def _run_batch(self, messages: list[Any], replies: _BatchReplies, context: Any) -> bytes | None:
        """Elements in order, the array within the cap: a result past it becomes
        ``reply_too_large`` and the requests after it are not run."""
        ids, budget = replies.ids, replies.budget
        parts: list[bytes] = []
        unyielded = 0
        for index, obj in enumerate(messages):
            if (index and index % YIELD_EVERY == 0) or unyielded > YIELD_BYTES:
                await anyio.lowlevel.checkpoint()
                unyielded = 0
            if budget.spent:
                if ids[index] is not NO_REPLY:
                    parts.append(too_large_reply(ids[index], self.max_reply_bytes, ran=False))
                continue
            reply = await self._one(obj, context)
            if reply is None:
                continue
            encoded = self._encode(reply)
            unyielded += len(encoded)
            if budget.take(index, len(encoded)):
                parts.append(encoded)
            else:
                _log_reply_too_large("batch", batch_index=index, limit=self.max_reply_bytes)
                parts.append(too_large_reply(reply["id"], self.max_reply_bytes, ran=True))
        if not parts:
            return None
        return b"[" + b",".join(parts) + b"]"

    def _encode(self, reply: dict[str, Any]) -> bytes:
        """The reply's bytes; one that cannot be encoded (a lone surrogate…) is -32603."""
        try:
            return _encoder.encode(reply)
        except Exception:
            ref = new_ref()
            log.error("request_crashed", stage="encode_reply", ref=ref, exc_info=True)
            return internal_error(ref, reply.get("id"))

    async def dispatch(self, payload: bytes, context: Any) -> bytes | None:
        prepared = self.prepare(payload)
        if isinstance(prepared, bytes):
            return prepared
        return await self.run(prepared, context)

    async def _one(self, obj: Any, context: Any) -> dict[str, Any] | None:
        """The reply to one request (None for a notification)."""
        started = self._start(obj, context)
        if isinstance(started, dict):
            return started  # an Invalid Request
        request, result = started
        return _finish(request, await result)

    def _start(self, obj: Any, context: Any) -> dict[str, Any] | tuple[Request, Awaitable[Any]]:
        """An Invalid Request reply, or the request and the call that gets its result
        (not awaited here: ``run`` awaits it itself, one coroutine less per request)."""
        invalid = _check_request(obj)
        if invalid is not None:
            return invalid
        params = obj.get("params", _NO_PARAMS)
        if params is None:
            params = _NO_PARAMS
        # ``Request(...)``: built as the tuple it is, without its generated ``__new__``.
        request: Request = _new_tuple(Request, (obj["method"], params, obj.get("id", NOID)))
        method = self._methods.get(request.method)
        if method is not None and params.__class__ is dict and len(params) <= MAX_PARAMS_MEMBERS:
            # Our wrappers take (context, *args, **kwargs), so jsonrpcserver's per-call
            # signature binding (validate_args, ~10 µs) can never fail: skip it.
            return request, call(request, context, method)
        return request, self._unusual(request, obj, method, context)

    def _up_to_unknown(self, request: Request) -> dict[str, Any]:
        """The params up to their first key the method does not take (a method has fewer
        params than ``MAX_PARAMS_MEMBERS``, so there is one): the call fails on them as on
        the whole, without spreading every member into keyword arguments."""
        names = self._params[request.method].__struct_encode_fields__
        params: dict[str, Any] = request.params  # type: ignore[assignment]  # a dict: ``_unusual`` checked
        head: dict[str, Any] = {}
        for key, value in params.items():
            head[key] = value
            if key not in names:
                break
        return head

    async def _unusual(
        self,
        request: Request,
        obj: dict[str, Any],
        method: Callable[..., Awaitable[Any]] | None,
        context: Any,
    ) -> Any:
        """The result of a request that is not a registered method with by-name params: its
        method not registered (yet: one registered while this waited is called), its params
        positional."""
        if method is None and self._rest is not None:
            method = await self._method(request.method)
        if method is None and self._rest_failed is not None:
            return Error(INTERNAL_ERROR, "Internal error", {"kind": "internal", "ref": self._rest_failed})
        if (
            method is not None
            and isinstance(request.params, dict)
            and len(request.params) > MAX_PARAMS_MEMBERS
        ):
            request = _new_tuple(Request, (request.method, self._up_to_unknown(request), request.id))
        elif method is not None and isinstance(obj.get("params"), list):
            # Every method takes by-name params; even an empty array is positional.
            return Error(
                INVALID_PARAMS,
                "Invalid params",
                {"kind": "invalid_params", "reason": "params must be an object of named parameters"},
            )
        if method is None:
            return Error(
                METHOD_NOT_FOUND,
                "Method not found",
                {"kind": "method_not_found", "method": _clip(request.method)},
            )
        return await call(request, context, method)


def _finish(request: Request, result: Any) -> dict[str, Any] | None:
    """The reply for a request's result (None for a notification)."""
    if request.id is NOID:
        return None
    if isinstance(result, Right):  # what ``result.map`` tells, without its two objects
        return {"jsonrpc": "2.0", "result": result._value.result, "id": request.id}
    reply = to_serializable_one(to_response(request, result))
    assert isinstance(reply, dict)  # one response for one request
    err = reply["error"]
    data = err.get("data")
    data = data if isinstance(data, dict) else {"kind": "internal"}
    return {"jsonrpc": "2.0", "error": error_object(err["code"], err["message"], data), "id": request.id}


def _method_name(obj: Any) -> str | None:
    """The method a request names, None when it names none (``_one`` says what is wrong)."""
    method = obj.get("method") if isinstance(obj, dict) else None
    return method if isinstance(method, str) else None


def expects_reply(obj: Any) -> bool:
    """Whether this batch element is answered (all but valid notifications are)."""
    return not (isinstance(obj, dict) and "id" not in obj and _check_request(obj) is None)


def reply_id(obj: Any) -> Any:
    """The id its reply carries: the request's, or null when that is not a valid id."""
    if obj.__class__ is _Refused:
        return obj.id
    id_ = obj.get("id") if isinstance(obj, dict) else None
    return id_ if _valid_id(id_) else None


class _BatchReplies(msgspec.Struct, gc=False):
    """What a batch's elements are answered with (``NO_REPLY`` for a notification) and
    the reply cap's budget for them, reckoned when the batch is prepared."""

    ids: list[Any]
    budget: BatchBudget


class Prepared(msgspec.Struct, gc=False):
    """Decoded requests of one payload; ``inline`` when every method is in-memory only,
    ``eager`` for a single request of an eager method (``MethodSpec.eager``); a batch's
    ``replies``. A Struct: built in C, one per request (it holds no cycle, so the
    collector need not see it)."""

    messages: list[Any]
    batch: bool
    inline: bool
    eager: bool = False
    replies: _BatchReplies | None = None

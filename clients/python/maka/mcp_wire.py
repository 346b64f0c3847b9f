"""What `maka mcp` reads from the host, line by line, before the SDK parses it.

A JSON string may hold a lone UTF-16 surrogate escape (``"\\ud83d"``): valid JSON, and
what a JavaScript host writes for a string cut in the middle of an emoji, but not
Unicode, so the SDK's parser rejects the line and the request is never answered (the
host waits for ever). Each such line is rewritten with the lone surrogates replaced by
U+FFFD, as an invalid UTF-8 byte on stdin already is.

A JSON-RPC batch (an array of messages on one line, which the 2025-03-26 revision lets a
host send) is handed to the SDK, which takes one message a line, message by message: each
request in it is answered on its own line, by its id.

A line the SDK's parser refuses (not JSON, nested deeper than the 200 levels it takes, or
JSON of no JSON-RPC message's shape) is not passed on to be dropped: a request among them
(a line whose top-level object has an ``"id"``, read even when the line is not JSON) is
answered at once with a JSON-RPC error, -32700 parse error or -32600 invalid request, with
that id, so the host does not wait for a reply that never comes. A line with no id there
(a notification, or a batch) gets nothing, as JSON-RPC says of notifications. A request
for a method named by more than ``ECHO_LIMIT`` characters (longer than any MCP method) is
"Method not found" naming it cut short.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from collections import deque
from typing import IO, Any, BinaryIO, cast

import anyio
from anyio.abc import ObjectSendStream
from mcp import types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from maka.mcp_text import ECHO_LIMIT, echoed

# A \uD800–\uDFFF escape (JSON hex digits are case-insensitive); a cheap test that lets
# every other line through untouched.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def _repaired(node: Any) -> Any:
    if isinstance(node, str):
        return _LONE_SURROGATE.sub(REPLACEMENT, node)
    if isinstance(node, list):
        return [_repaired(item) for item in node]
    if isinstance(node, dict):
        return {_repaired(key): _repaired(value) for key, value in node.items()}
    return node


def repair_line(line: str) -> str:
    """``line`` with every lone surrogate in its JSON strings replaced by U+FFFD (paired
    escapes stay the character they name); any other line as it came — one nested too
    deep to read or copy (``RecursionError``, from the parser or ``_repaired``) too: the
    SDK's parser refuses it like any unreadable line, and reading goes on."""
    if not _SURROGATE_ESCAPE.search(line):
        return line
    try:
        message = json.loads(line)  # Python's parser keeps lone surrogates in the strings
        repaired = _repaired(message)
    except (ValueError, RecursionError):
        return line  # not JSON, or nested past the recursion limit: left to the SDK to reject
    return line if repaired == message else _line(repaired)


# One JSON string (possessive, and closed by the end of the text when it is cut short, so
# that no text makes it backtrack) or one bracket: what finding the top level takes.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)
_ID_VALUE = re.compile(r'\s*:\s*(-?[0-9]++(?![0-9.eE])|"(?:[^"\\]|\\.)*+")')


def top_level_id(line: str) -> int | str | None:
    """The id (an integer or a string) of the object ``line`` holds, read from its top
    level even when the line is not JSON or too deep to parse; None when it has none."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return _scanned_id(line)
    request_id = message.get("id") if isinstance(message, dict) else None
    return request_id if isinstance(request_id, int | str) and not isinstance(request_id, bool) else None


def _scanned_id(line: str) -> int | str | None:
    depth = 0
    for token in _TOKEN.finditer(line):
        text = token.group()
        if text in ("{", "["):
            if depth == 0 and text == "[":
                return None  # a batch: no one id to answer
            depth += 1
        elif text in ("}", "]"):
            depth -= 1
            if depth <= 0:
                return None
        elif depth == 1 and text == '"id"' and (value := _ID_VALUE.match(line, token.end())):
            try:
                request_id = json.loads(value.group(1))
            except ValueError:
                return None
            return request_id if isinstance(request_id, int | str) else None
    return None


def refusal(line: str, error: ValidationError) -> types.JSONRPCError | None:
    """The error answering a line the SDK's parser refused with ``error``, or None when the
    line names no id at its top level (a notification: no answer)."""
    request_id = top_level_id(line)
    if request_id is None:
        return None
    problems = error.errors(include_url=False, include_input=False, include_context=False)
    json_problem = next((p["msg"] for p in problems if p["type"] == "json_invalid"), None)
    if json_problem is not None:
        data = types.ErrorData(code=types.PARSE_ERROR, message=f"Parse error: {json_problem}")
    else:
        data = types.ErrorData(
            code=types.INVALID_REQUEST,
            message="Invalid request: not a JSON-RPC request, notification or response",
        )
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=data)


async def read_host(
    lines: anyio.AsyncFile[str],
    messages: ObjectSendStream[SessionMessage | Exception],
    replies: ObjectSendStream[SessionMessage],
) -> None:
    """Each line from the host, parsed as the SDK's stdio transport parses it, to
    ``messages``; a line it refuses answered on ``replies`` (see ``refusal``), or, with no
    id to answer, passed on as the SDK's own transport does (which drops it)."""
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):  # the server stopped
        async with messages:
            async for line in lines:
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValidationError as exc:
                    answer = await anyio.to_thread.run_sync(refusal, line, exc)
                    if answer is None:
                        await messages.send(exc)
                    else:
                        await replies.send(SessionMessage(answer))
                    continue
                if isinstance(message, types.JSONRPCRequest) and len(message.method) > ECHO_LIMIT:
                    await replies.send(SessionMessage(_unknown_method(message)))
                    continue
                await messages.send(SessionMessage(message))


def _unknown_method(request: types.JSONRPCRequest) -> types.JSONRPCError:
    """ "Method not found" for a method name longer than any MCP method, named cut short
    (the SDK's own answer would repeat it whole)."""
    error = types.ErrorData(
        code=types.METHOD_NOT_FOUND, message="Method not found", data=echoed(request.method)
    )
    return types.JSONRPCError(jsonrpc="2.0", id=request.id, error=error)


def _line(message: Any) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"


def batch_members(line: str) -> list[str] | None:
    """The messages of a JSON-RPC batch line (a JSON array of objects), one line each, or
    None for any other line."""
    if not line.lstrip().startswith("["):
        return None
    try:
        batch = json.loads(line)
        if not batch or not isinstance(batch, list) or not all(isinstance(m, dict) for m in batch):
            return None
        return [_line(_repaired(member)) for member in batch]
    except (ValueError, RecursionError):  # not JSON, or nested past the recursion limit
        return None


class HostInput:
    """The host's stdin as UTF-8 text (an invalid byte read as U+FFFD), each line through
    ``repair_line``; what ``anyio.wrap_file`` needs of a file (the SDK only iterates it).
    The underlying buffer is not ours: it is never closed."""

    def __init__(self, buffer: BinaryIO | None = None) -> None:
        wire = buffer if buffer is not None else sys.stdin.buffer
        self._text = io.TextIOWrapper(wire, encoding="utf-8", errors="replace")
        self._batched: deque[str] = deque()  # the rest of a batch, taken before the next line

    def readline(self) -> str:
        if not self._batched:
            line = self._text.readline()
            members = batch_members(line)
            if members is None:
                return repair_line(line)
            self._batched.extend(members)
        return repair_line(self._batched.popleft())

    def host_lines(self) -> anyio.AsyncFile[str]:
        return anyio.AsyncFile(cast(IO[str], self))

"""What both clients share: the default socket path, request encoding, reply routing."""

from __future__ import annotations

import itertools
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import msgspec
import platformdirs

from maka.errors import ProtocolError, from_error_object

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


def default_socket_path() -> str:
    """The daemon's default: $MAKAD_SOCKET, else <user runtime dir>/maka/makad.sock."""
    env = os.environ.get("MAKAD_SOCKET")
    if env:
        return env
    with warnings.catch_warnings():
        # Without XDG_RUNTIME_DIR platformdirs warns and falls back, exactly as the daemon does.
        warnings.simplefilter("ignore")
        try:
            runtime = platformdirs.user_runtime_dir("maka", appauthor=False)
        except PermissionError:
            # <tmp>/runtime-<uid> made by another user (newer platformdirs refuse it): the
            # daemon's path too, where the server check (maka.server_check) refuses a server
            # of theirs.
            runtime = os.path.join(tempfile.gettempdir(), f"runtime-{os.geteuid()}", "maka")
    return str(Path(runtime) / "makad.sock")


class Codec:
    """Builds NDJSON requests and splits replies from notifications."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._buffer = bytearray()

    def request(self, method: str, params: Any | None) -> tuple[int, bytes]:
        request_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": request_id}
        if params is not None:
            message["params"] = params
        return request_id, _encoder.encode(message) + b"\n"

    def notification(self, method: str, params: Any | None) -> bytes:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        return _encoder.encode(message) + b"\n"

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buffer += data
        out: list[dict[str, Any]] = []
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                return out
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            if not line.strip():
                continue
            try:
                message = _decoder.decode(line)
            except msgspec.DecodeError as exc:
                raise ProtocolError("the daemon sent malformed JSON") from exc
            if isinstance(message, dict):
                out.append(message)

    def reset(self) -> None:
        self._buffer.clear()


def is_notification(message: dict[str, Any]) -> bool:
    return "method" in message and "id" not in message


def unwrap(message: dict[str, Any]) -> Any:
    """The result of a reply, or its error raised as a typed exception."""
    if "error" in message:
        raise from_error_object(message["error"])
    return message.get("result")

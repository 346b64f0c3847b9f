"""Sans-IO message framing: NDJSON lines or LSP-style Content-Length headers.

The framing of a connection is chosen from its first non-blank byte: ``C``
means Content-Length headers, anything else is one JSON message per line (so
garbage still gets a JSON-RPC parse error rather than a silent close).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

Framing = Literal["ndjson", "lsp"]

MAX_HEADER_BYTES = 8 * 1024
_WHITESPACE = b" \t\r\n"


# The name, in status's ``limits``, of the cap a message over it breaks.
BYTE_CAP = "maxMessageBytes"


class FrameError(Exception):
    """The byte stream cannot be framed; the connection must be closed after replying.

    ``frames``: the whole messages the same ``feed`` framed before the bad one, in order
    (a client that pipelines requests is answered up to where its stream broke)."""

    def __init__(self, reason: str, kind: str, *, limit: int | None = None, cap: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.limit = limit
        # Which of status's ``limits`` ``limit`` is (maxMessageBytes, maxMessageValues).
        self.cap = cap
        self.frames: list[bytes] = []

    def data(self) -> dict[str, object]:
        """The error reply's ``data``."""
        out: dict[str, object] = {"kind": self.kind, "reason": self.reason}
        if self.limit is not None:
            out["limit"] = self.limit
        if self.cap is not None:
            out["cap"] = self.cap
        return out


def frames_before_error(feed: Callable[[bytes, list[bytes]], None], data: bytes) -> list[bytes]:
    """The whole messages ``feed`` frames from ``data``; a ``FrameError`` carries those
    framed before it (they are answered before the error)."""
    out: list[bytes] = []
    try:
        feed(data, out)
    except FrameError as exc:
        exc.frames = out
        raise
    return out


class Decoder(Protocol):
    def feed(self, data: bytes) -> list[bytes]: ...

    def has_partial(self) -> bool: ...

    def buffered(self) -> int: ...


def detect(buffer: bytes) -> Framing | None:
    """Framing of a connection from its first bytes, or None while only blanks arrived."""
    stripped = buffer.lstrip(_WHITESPACE)
    if not stripped:
        return None
    return "lsp" if stripped[:1] == b"C" else "ndjson"


class NdjsonDecoder:
    """Splits a byte stream into ``\\n``-terminated messages, blank lines skipped."""

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._buf = bytearray()
        # Bytes of the buffer already known to hold no newline: a message arriving in
        # many reads is scanned once, not once per read.
        self._scanned = 0

    def feed(self, data: bytes) -> list[bytes]:
        if not self._buf and data.find(b"\n") == len(data) - 1 and len(data) <= self._max:
            # One whole message and nothing buffered: a request-reply client's every read.
            line = data[:-1]
            return [line] if line.strip(_WHITESPACE) else []
        return frames_before_error(self._feed, data)

    def _feed(self, data: bytes, out: list[bytes]) -> None:
        self._buf += data
        start = 0
        while True:
            end = self._buf.find(b"\n", max(start, self._scanned))
            if end < 0:
                break
            line = bytes(self._buf[start:end])
            start = end + 1
            if len(line) > self._max:
                raise FrameError(
                    f"message exceeds {self._max} bytes", "too_large", limit=self._max, cap=BYTE_CAP
                )
            if line.strip(_WHITESPACE):
                out.append(line)
        del self._buf[:start]
        self._scanned = len(self._buf)
        if len(self._buf) > self._max:
            raise FrameError(f"message exceeds {self._max} bytes", "too_large", limit=self._max, cap=BYTE_CAP)

    def has_partial(self) -> bool:
        return bool(self._buf.strip(_WHITESPACE))

    def buffered(self) -> int:
        """Bytes held of a message not yet whole."""
        return len(self._buf)


class LspDecoder:
    """Parses ``Content-Length: N\\r\\n\\r\\n<N bytes>`` frames."""

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._buf = bytearray()
        self._need: int | None = None

    def feed(self, data: bytes) -> list[bytes]:
        return frames_before_error(self._feed, data)

    def _feed(self, data: bytes, out: list[bytes]) -> None:
        self._buf += data
        while True:
            if self._need is None:
                # Blank bytes between frames are tolerated.
                blanks = len(self._buf) - len(self._buf.lstrip(_WHITESPACE))
                del self._buf[:blanks]
                end = self._buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(self._buf) > MAX_HEADER_BYTES:
                        raise FrameError("header block too large", "bad_frame")
                    if _bare_newline(self._buf):
                        # Never the start of a valid block: say so now, not after 8 KiB.
                        raise FrameError("header lines must end with \\r\\n", "bad_frame")
                    return
                self._need = self._content_length(bytes(self._buf[:end]))
                del self._buf[: end + 4]
            if len(self._buf) < self._need:
                return
            out.append(bytes(self._buf[: self._need]))
            del self._buf[: self._need]
            self._need = None

    def _content_length(self, header_block: bytes) -> int:
        """The length the block's one Content-Length header gives: ASCII digits only (no
        sign, no ``_``), and only one such header, so that every reader of the stream (a
        proxy, a logger) frames it the same way as the daemon."""
        length: int | None = None
        for raw in header_block.split(b"\r\n"):
            name, sep, value = raw.partition(b":")
            if not sep or b"\n" in raw:
                raise FrameError("malformed header line", "bad_frame")
            if name.strip().lower() == b"content-length":
                if length is not None:
                    raise FrameError("Content-Length given twice", "bad_frame")
                digits = value.strip(_WHITESPACE)
                if not digits.isdigit():  # bytes: ASCII digits only
                    raise FrameError("Content-Length is not a number", "bad_frame")
                if len(digits) > len(str(self._max)):
                    raise FrameError(
                        f"message exceeds {self._max} bytes", "too_large", limit=self._max, cap=BYTE_CAP
                    )
                length = int(digits)
        if length is None:
            raise FrameError("missing Content-Length header", "bad_frame")
        if length > self._max:
            raise FrameError(f"message exceeds {self._max} bytes", "too_large", limit=self._max, cap=BYTE_CAP)
        return length

    def has_partial(self) -> bool:
        return self._need is not None or bool(self._buf.strip(_WHITESPACE))

    def buffered(self) -> int:
        """Bytes held of a frame not yet whole (its header block, or its body so far)."""
        return len(self._buf)


def _bare_newline(data: bytearray) -> bool:
    """Whether ``data`` holds a ``\\n`` that is not the end of a ``\\r\\n``."""
    return data.count(b"\n") != data.count(b"\r\n")


def make_decoder(framing: Framing, max_bytes: int) -> Decoder:
    return LspDecoder(max_bytes) if framing == "lsp" else NdjsonDecoder(max_bytes)


def encode(framing: Framing, payload: bytes) -> bytes:
    """One outgoing message in the connection's framing."""
    if framing == "lsp":
        return b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload)
    return payload + b"\n"

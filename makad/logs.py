"""structlog configuration: JSON lines to stderr, console rendering on a TTY.

Exceptions are rendered without local variables: locals can hold memory content.
Every string of every line (exception text included, where a path may name a
workspace directory) goes through the redactor last, before rendering.
"""

from __future__ import annotations

import errno
import io
import logging
import os
import sys
from typing import TextIO, cast

import structlog
from structlog.types import EventDict, WrappedLogger

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


# Whether debug lines are kept: hot paths skip even building them otherwise.
debug_enabled = False


def configure(log_format: str, level: str) -> None:
    global debug_enabled
    debug_enabled = _LEVELS[level] <= logging.DEBUG
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: list[structlog.types.Processor]
    if log_format == "console":
        renderer = [
            structlog.processors.format_exc_info,
            redact_event,
            structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback),
        ]
    else:
        renderer = [
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            ),
            redact_event,
            structlog.processors.JSONRenderer(),
        ]
    structlog.configure(
        processors=[*shared, *renderer],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.WriteLoggerFactory(file=cast(TextIO, Unheard())),
        cache_logger_on_first_use=True,
    )


def ensure_standard_streams() -> None:
    """Open /dev/null on each of descriptors 0-2 that is closed (`makad 2>&-`), before the
    daemon opens anything: else the first file it opens (a lock, a ledger) takes that
    number, and whatever writes to it (a log line, a C library's message) lands there."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:  # Python's own stream for a descriptor closed at start
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115  # for the process's life


def say(text: str, stream: str = "stdout") -> None:
    """Print a line to stdout or stderr; one nobody can read any more (a pipe whose
    reader is gone, a closed terminal) is swapped for /dev/null instead of stopping the
    daemon at its next line, or at exit when Python flushes it."""
    out: TextIO = getattr(sys, stream)
    try:
        print(text, file=out, flush=True)
    except (OSError, ValueError) as exc:
        _lost(stream, exc)


# Write errors that say nobody will ever read the stream: its pipe's reader gone, its
# terminal hung up, its descriptor closed. Any other (EAGAIN on a pipe left full and
# non-blocking) loses that line only.
_GONE = frozenset({errno.EPIPE, errno.EIO, errno.EBADF})


def _lost(stream: str, exc: OSError | ValueError) -> None:
    """A write to ``sys.<stream>`` failed: silence it for good when nobody can read it."""
    if isinstance(exc, ValueError) or exc.errno in _GONE:  # ValueError: the file is closed
        _silence(stream)


def _silence(stream: str) -> None:
    """Point ``sys.<stream>`` at /dev/null, dropping what its buffer could not write."""
    dead: TextIO = getattr(sys, stream)
    setattr(sys, stream, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115  # for the process's life
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(fd, dead.fileno())  # the failed buffer's flush at exit now succeeds
        finally:
            os.close(fd)
    except (OSError, ValueError):
        pass


class Unheard(io.TextIOBase):
    """The log's file: stderr, until a write there fails (nobody reads it any more), then
    nothing. Logging must never stop the daemon."""

    def write(self, text: str) -> int:
        try:
            return sys.stderr.write(text)
        except (OSError, ValueError) as exc:
            _lost("stderr", exc)
            return len(text)

    def flush(self) -> None:
        try:
            sys.stderr.flush()
        except (OSError, ValueError) as exc:
            _lost("stderr", exc)


def redact_event(logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
    """Redact every string in a log line, keys and nested values included."""
    # Imported at the first line logged, not at start-up: the detectors' patterns are a
    # good part of what the first pong would otherwise wait for (the services load them
    # right after the daemon listens anyway).
    from makad.core.redaction import redact_tree

    cleaned: EventDict = redact_tree(event)
    return cleaned

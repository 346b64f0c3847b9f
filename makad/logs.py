"""structlog configuration: JSON lines to stderr, console rendering on a TTY.

Exceptions are rendered without local variables: locals can hold memory content.
Every string of every line (exception text included, where a path may name a
workspace directory) goes through the redactor last, before rendering.
"""

from __future__ import annotations

import logging
import sys

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
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


def redact_event(logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
    """Redact every string in a log line, keys and nested values included."""
    # Imported at the first line logged, not at start-up: the detectors' patterns are a
    # good part of what the first pong would otherwise wait for (the services load them
    # right after the daemon listens anyway).
    from makad.core.redaction import redact_tree

    cleaned: EventDict = redact_tree(event)
    return cleaned

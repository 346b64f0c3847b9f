"""structlog configuration: JSON lines to stderr, console rendering on a TTY.

Exceptions are rendered without local variables: locals can hold memory content.
"""

from __future__ import annotations

import logging
import sys

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


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
        renderer = [structlog.dev.ConsoleRenderer(
            exception_formatter=structlog.dev.plain_traceback)]
    else:
        renderer = [
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)),
            structlog.processors.JSONRenderer(),
        ]
    structlog.configure(
        processors=[*shared, *renderer],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    # Libraries that log through stdlib logging (jsonrpcserver) must not print exception text.
    logging.getLogger("jsonrpcserver").setLevel(logging.CRITICAL + 1)

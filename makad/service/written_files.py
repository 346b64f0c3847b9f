"""Which memory files a request has written, so that an error it fails with afterwards
(its ledger record, its revision) says the file changed: a client that retries such a call
without a requestId would otherwise apply it twice."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from makad.errors import MakadError

P = ParamSpec("P")
T = TypeVar("T")


@dataclass
class WrittenFiles:
    """The memory files (by name) one request wrote, and the last revision it issued."""

    names: list[str] = field(default_factory=list)
    revision: int | None = None


# Set for the length of a handler wrapped in ``reports_memory_written``, else None.
_written: ContextVar[WrittenFiles | None] = ContextVar("memory_files_written", default=None)


def note_written(name: str) -> None:
    """A memory file (``MEMORY.md``, ``PENDING.md``) was just replaced by this request."""
    written = _written.get()
    if written is not None and name not in written.names:
        written.names.append(name)


def note_revision(revision: int) -> None:
    """The revision this request just issued (after its memory file write, if any)."""
    written = _written.get()
    if written is not None and written.names:
        written.revision = revision


def reports_memory_written(handler: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """A handler whose error, once a memory file was written, carries ``memoryWritten:
    true``, ``written`` (the files' names) and ``revision`` (the one the write got, when
    it got one)."""

    @functools.wraps(handler)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        if _written.get() is not None:  # called by another such handler: its record
            return await handler(*args, **kwargs)
        written = WrittenFiles()
        token = _written.set(written)
        try:
            return await handler(*args, **kwargs)
        except MakadError as exc:
            if written.names and "memoryWritten" not in exc.details:
                exc.details["memoryWritten"] = True
                exc.details["written"] = list(written.names)
                if written.revision is not None:
                    exc.details["revision"] = written.revision
            raise
        finally:
            _written.reset(token)

    return run

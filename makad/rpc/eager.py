"""Run a coroutine in the current task, and learn the moment it first has to wait.

A request that is usually answered from memory (a conditional read of an unchanged
file) costs a task spawn per call when it runs in a task of its own: on the daemon's
request path that spawn and the event-loop turns around it cost more than the answer.
``in_place`` runs the handler in the caller's task (the connection's reader) and calls
``on_wait`` just before the handler's first suspension, so the caller can hand its own
job (reading the connection) to a new task there, the handler continuing where it is.

Nothing moves between tasks: the coroutine is driven by the task that started it, so
anyio's cancel scopes and locks (bound to the task that entered them) see one task
throughout, and a cancellation of that task reaches the coroutine where it waits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")


class _InPlace(Generic[T]):
    __slots__ = ("_coro", "_on_wait")

    def __init__(self, coro: Coroutine[Any, Any, T], on_wait: Callable[[], None]) -> None:
        self._coro = coro
        self._on_wait = on_wait

    def __await__(self) -> Generator[Any, Any, T]:
        coro = self._coro
        try:
            signal = coro.send(None)
        except StopIteration as done:
            return cast(T, done.value)
        try:
            self._on_wait()
        except BaseException:
            coro.close()
            raise
        # From here on the same as ``yield from coro``: each wait passes up to the task,
        # each wake-up (or a thrown cancellation) down to the coroutine.
        while True:
            try:
                value = yield signal
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:
                try:
                    signal = coro.throw(exc)
                except StopIteration as done:
                    return cast(T, done.value)
            else:
                try:
                    signal = coro.send(value)
                except StopIteration as done:
                    return cast(T, done.value)


def in_place(coro: Coroutine[Any, Any, T], on_wait: Callable[[], None]) -> Awaitable[T]:
    """``coro`` to await here; ``on_wait()`` runs once, right before it first suspends
    (never, when it finishes without waiting)."""
    return _InPlace(coro, on_wait)

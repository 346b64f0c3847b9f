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

import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def _in_place(coro: Coroutine[Any, Any, T], on_wait: Callable[[], None]) -> Generator[Any, Any, T]:
    try:
        signal = coro.send(None)
    except StopIteration as done:
        first: T = done.value
        return first
    try:
        on_wait()
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
            step: Callable[[Any], Any] = coro.throw
            arg: Any = exc
        else:
            step, arg = coro.send, value
        try:
            signal = step(arg)
        except StopIteration as done:
            result: T = done.value
            return result


# ``coro`` to await here; ``on_wait()`` runs once, right before it first suspends (never,
# when it finishes without waiting). A generator-based coroutine: no awaitable object of
# its own is built per request.
in_place = types.coroutine(_in_place)

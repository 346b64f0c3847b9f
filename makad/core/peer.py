"""What a handler may know about the connection that called it."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol


class Peer(Protocol):
    """The calling connection: an id, notifications back to it, a hook when it closes."""

    id: int
    # What it follows (workspace ids): a connection that follows something is never idle.
    subscriptions: set[Hashable]

    def notify(self, method: str, params: Any, group: Hashable) -> None:
        """Queue a notification; never waits. Waiting ones of one ``group`` may coalesce."""

    def on_close(self, hook: Callable[[Any], None]) -> None: ...

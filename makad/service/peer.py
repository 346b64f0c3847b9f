"""What a handler may know about the connection that called it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Peer(Protocol):
    """The calling connection: an id, notifications back to it, a hook when it closes."""

    id: int

    async def notify(self, method: str, params: Any) -> None: ...

    def on_close(self, hook: Callable[[Any], None]) -> None: ...

"""Polling a workspace's memory state cheaply with conditional reads.

Each poll after the first asks ``read_state`` with ``ifRevision`` (the revision of
the state last seen): while nothing in MEMORY.md, PENDING.md or the settings changed,
the daemon answers ``{notModified: true, revision}`` instead of the whole file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from maka.generated import LocalMemoryState, ReadStateArgs

if TYPE_CHECKING:
    from typing import Unpack

    from maka.aclient import AsyncClient
    from maka.client import Client


class _Poll:
    def __init__(self, params: ReadStateArgs) -> None:
        self.request: dict[str, Any] = dict(params)
        self.state: LocalMemoryState | None = None

    def params(self) -> dict[str, Any]:
        if self.state is None:
            return self.request
        return {**self.request, "ifRevision": self.state["revision"]}

    def take(self, reply: dict[str, Any]) -> bool:
        if reply.get("notModified") is True and self.state is not None:
            return False
        self.state = cast("LocalMemoryState", reply)
        return True


class StatePoller:
    """``poller = StatePoller(client, workspace=ws, includeEntries=True)``; ``poll()`` is True
    when the state changed since the last poll (always on the first), and
    ``poller.state`` holds the latest full state."""

    def __init__(self, client: Client, **params: Unpack[ReadStateArgs]) -> None:
        self._client = client
        self._poll = _Poll(params)

    @property
    def state(self) -> LocalMemoryState | None:
        return self._poll.state

    def poll(self) -> bool:
        return self._poll.take(self._client.call("read_state", self._poll.params()))


class AsyncStatePoller:
    """``StatePoller`` for ``AsyncClient``: ``await poller.poll()``."""

    def __init__(self, client: AsyncClient, **params: Unpack[ReadStateArgs]) -> None:
        self._client = client
        self._poll = _Poll(params)

    @property
    def state(self) -> LocalMemoryState | None:
        return self._poll.state

    async def poll(self) -> bool:
        return self._poll.take(await self._client.call("read_state", self._poll.params()))

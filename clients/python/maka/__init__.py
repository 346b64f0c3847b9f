"""Python client for makad: a sync ``Client`` and an async ``AsyncClient``."""

from __future__ import annotations

import importlib
import typing
from typing import Any

if typing.TYPE_CHECKING:
    from maka.aclient import AsyncClient
    from maka.client import Client
    from maka.errors import DaemonUnavailable, MakaError, RemoteError, UntrustedServer
    from maka.state_poll import AsyncStatePoller, StatePoller

__all__ = [
    "AsyncClient",
    "AsyncStatePoller",
    "Client",
    "DaemonUnavailable",
    "MakaError",
    "RemoteError",
    "StatePoller",
    "UntrustedServer",
]

# Where each public name lives. They load on first use, so `import maka.cli` (every `maka`
# command) does not pay for the async client's anyio unless it asks for AsyncClient.
_HOMES = {
    "AsyncClient": "maka.aclient",
    "AsyncStatePoller": "maka.state_poll",
    "Client": "maka.client",
    "DaemonUnavailable": "maka.errors",
    "MakaError": "maka.errors",
    "RemoteError": "maka.errors",
    "StatePoller": "maka.state_poll",
    "UntrustedServer": "maka.errors",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'maka' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])

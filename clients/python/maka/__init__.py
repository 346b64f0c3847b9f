"""Python client for makad: a sync ``Client`` and an async ``AsyncClient``."""

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

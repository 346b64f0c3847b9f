"""Python client for makad: a sync ``Client`` and an async ``AsyncClient``."""

from maka.aclient import AsyncClient
from maka.client import Client
from maka.errors import DaemonUnavailable, MakaError, RemoteError

__all__ = ["AsyncClient", "Client", "DaemonUnavailable", "MakaError", "RemoteError"]

"""What the sync and async clients share about notifications: their shape, the
subscriptions to renew after a reconnect, and the two markers a client adds itself.

Both clients yield the daemon's notifications as the JSON-RPC messages they are
(``{"jsonrpc": "2.0", "method": "memory_changed", "params": {...}}``), from
``client.notifications()`` (an iterator, or an async iterator). Two more methods come from
the client, never from the daemon (whose notifications are ``*_changed``):

- ``reconnected`` ``{workspaces}``: the connection was lost and is back, the subscriptions
  of ``workspaces`` are renewed. Changes made while disconnected were not notified: re-read.
- ``subscription_lost`` ``{workspace, error}``: a subscription could not be renewed.
"""

from __future__ import annotations

import json
from typing import Any, Literal, NotRequired, TypedDict

CHANGE_NOTIFICATIONS = ("memory_changed", "proposals_changed", "settings_changed")
# Sent to every connection, subscribed or not, when the daemon stops on purpose:
# ``{reason}``, ``shutdown``, ``signal``, ``start_failed``, ``data_dir_lost`` or ``socket_lost``.
DAEMON_STOPPING = "daemon_stopping"
RECONNECTED = "reconnected"
SUBSCRIPTION_LOST = "subscription_lost"
RECONNECT_RETRIES = 6
BACKOFF_BASE_S = 0.05
BACKOFF_MAX_S = 2.0


class ChangeParams(TypedDict):
    """Params of ``memory_changed``, ``proposals_changed`` and ``settings_changed``."""

    workspace: str
    revision: int
    cause: NotRequired[Literal["external_edit", "daemon", "settings"]]


class Notification(TypedDict):
    """A notification as the clients yield it (params depend on the method)."""

    jsonrpc: Literal["2.0"]
    method: str
    params: NotRequired[Any]


def backoff(attempt: int) -> float:
    """Seconds before reconnect attempt ``attempt + 1``: doubling, capped (as the Node client)."""
    return float(min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**attempt))


def marker(method: str, **params: Any) -> Notification:
    return {"jsonrpc": "2.0", "method": method, "params": params}


class Subscriptions:
    """The ``subscribe`` params in force on a client, keyed by workspace."""

    def __init__(self) -> None:
        self._by_key: dict[str, dict[str, Any]] = {}

    @staticmethod
    def _key(params: dict[str, Any]) -> str:
        ws = params.get("workspace")
        return ws if isinstance(ws, str) else json.dumps(params, sort_keys=True, default=str)

    def track(self, method: str, params: Any) -> None:
        """Record a successful ``subscribe`` / ``unsubscribe`` call."""
        if method not in ("subscribe", "unsubscribe") or not isinstance(params, dict):
            return
        if method == "subscribe":
            self._by_key[self._key(params)] = dict(params)
        else:
            self._by_key.pop(self._key(params), None)

    def all(self) -> list[dict[str, Any]]:
        return list(self._by_key.values())

    def drop(self, params: dict[str, Any]) -> None:
        self._by_key.pop(self._key(params), None)

    def clear(self) -> None:
        self._by_key.clear()

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def lost(self, error: BaseException) -> list[Notification]:
        """A ``subscription_lost`` marker for every subscription, which are then forgotten."""
        markers = [lost_marker(params, error) for params in self.all()]
        self.clear()
        return markers


def lost_marker(params: dict[str, Any], error: BaseException) -> Notification:
    return marker(SUBSCRIPTION_LOST, workspace=params.get("workspace"), error=str(error))

"""The method catalogue: every RPC method's name, params and result types.

Each domain module lists its methods in ``METHODS``; this module joins them.
The OpenRPC document and the dispatcher are both built from ``CATALOGUE``.
"""

from __future__ import annotations

from dataclasses import dataclass

from makad.wire import compaction, context, episodes, ledger, memory, proposals, system
from makad.wire.base import MethodSpec

__all__ = ["CATALOGUE", "NOTIFICATIONS", "MethodSpec", "NotificationSpec"]

_MODULES = (system, memory, proposals, context, compaction, ledger, episodes)


def _build() -> dict[str, MethodSpec]:
    catalogue: dict[str, MethodSpec] = {}
    for module in _MODULES:
        for spec in module.METHODS:
            if spec.name in catalogue:
                raise RuntimeError(f"method {spec.name} declared twice")
            catalogue[spec.name] = spec
    return catalogue


CATALOGUE: dict[str, MethodSpec] = _build()


@dataclass(frozen=True)
class NotificationSpec:
    """A notification the daemon sends (no id, no reply): its name, params type and when."""

    name: str
    params: type
    summary: str


_CHANGE = (
    " after subscribe; cause daemon or external_edit (the user's save); after a save that lacked "
    "entries the daemon wrote, reapplied and returned name them (PROTOCOL.md, The user's edits)."
)

# Listed in the OpenRPC document as ``x-notifications`` (a specification extension).
NOTIFICATIONS: tuple[NotificationSpec, ...] = (
    NotificationSpec("memory_changed", memory.ChangeNotification, "MEMORY.md changed" + _CHANGE),
    NotificationSpec("proposals_changed", memory.ChangeNotification, "PENDING.md changed" + _CHANGE),
    NotificationSpec(
        "settings_changed",
        memory.ChangeNotification,
        "The workspace's settings changed (cause settings), after subscribe; also when the "
        "workspace was replaced or its ledger reset.",
    ),
    NotificationSpec(
        "daemon_stopping",
        system.DaemonStopping,
        "To every open connection, subscribed or not, before the daemon closes it: stopped on "
        "purpose (shutdown, signal), its services not loaded (start_failed), or its data "
        "directory or socket gone (data_dir_lost, socket_lost: a new daemon is wanted). Do "
        "not start a daemon again after shutdown or signal.",
    ),
    NotificationSpec(
        "import_progress",
        proposals.ImportProgressParams,
        "To the connection that called import_memories with progress: true, while it runs.",
    ),
)

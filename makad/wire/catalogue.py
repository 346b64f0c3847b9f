"""The method catalogue: every RPC method's name, params and result types.

Each domain module lists its methods in ``METHODS``; this module joins them.
The OpenRPC document and the dispatcher are both built from ``CATALOGUE``.
"""

from __future__ import annotations

from makad.wire import compaction, context, episodes, ledger, memory, proposals, system
from makad.wire.base import MethodSpec

__all__ = ["CATALOGUE", "MethodSpec"]

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

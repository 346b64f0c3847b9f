"""The heap policy: long-lived objects are frozen out of the collector, cycles still reclaimed."""

from __future__ import annotations

import gc
import weakref

from makad import heap


class _Node:
    def __init__(self) -> None:
        self.me = self


def test_settle_freezes_and_a_full_settle_reclaims_frozen_cycles() -> None:
    """settle freezes what is alive; a cycle dropped after that is freed by the next full one."""
    try:
        node = _Node()
        alive = weakref.ref(node)
        heap.settle(full=False)
        assert gc.get_freeze_count() > 0
        del node
        gc.collect()
        assert alive() is not None  # frozen: the ordinary collector does not see it
        heap.settle(full=True)
        assert alive() is None
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()

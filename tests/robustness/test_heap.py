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


def test_the_young_generation_is_collected_less_often_but_still_collected() -> None:
    """configure_collector raises the youngest threshold only; a dropped cycle is still
    reclaimed by the collector once that many objects were made."""
    before = gc.get_threshold()
    try:
        heap.configure_collector()
        assert gc.get_threshold() == (heap.YOUNG_COLLECT_EVERY, *before[1:])
        gc.collect()
        node = _Node()
        alive = weakref.ref(node)
        del node
        kept = [[] for _ in range(heap.YOUNG_COLLECT_EVERY // 2)]
        assert alive() is not None  # not yet: fewer allocations than the threshold
        kept += [[] for _ in range(heap.YOUNG_COLLECT_EVERY)]
        assert alive() is None
    finally:
        gc.set_threshold(*before)

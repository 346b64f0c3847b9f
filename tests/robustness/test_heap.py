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


def test_settle_collects_dropped_cycles_before_it_freezes() -> None:
    """A reference cycle already dropped when settle runs is freed, not frozen with the
    living: frozen garbage would wait for the next full collection (minutes)."""
    try:
        gc.disable()  # only settle may collect here
        node = _Node()
        dropped = weakref.ref(node)
        del node
        assert dropped() is not None  # garbage the young collections have not reached
        frozen_before = gc.get_freeze_count()
        heap.settle(full=False)
        assert dropped() is None
        kept = _Node()
        heap.settle(full=False)
        assert gc.get_freeze_count() > frozen_before
        assert kept.me is kept
    finally:
        gc.enable()
        gc.unfreeze()


def test_repeated_settles_under_churn_freeze_a_bounded_number_of_objects() -> None:
    """Requests that each leave a cycle behind, with settle between batches, do not grow
    the frozen generation: it holds what is alive, whatever the number of requests."""

    def request() -> None:
        try:
            raise ValueError("refused")
        except ValueError as exc:
            holder = _Node()
            holder.error = exc  # type: ignore[attr-defined]  # exception -> traceback -> frame -> holder
            del exc

    try:
        gc.disable()
        heap.settle(full=True)
        counts = []
        for _ in range(5):
            for _ in range(200):
                request()
            heap.settle(full=False)
            counts.append(gc.get_freeze_count())
        assert max(counts) - min(counts) < 50, counts
    finally:
        gc.enable()
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

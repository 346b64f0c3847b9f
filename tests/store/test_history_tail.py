"""build_context's read of the live history: the newest events covering twice the budget."""

from __future__ import annotations

from makad.core.types import Checkpoint, Coverage, Event, EventInput
from makad.service.context import HISTORY_FIRST_READ, HISTORY_TAIL_FACTOR, _history_tail
from makad.store.ledger import Ledger


class CountingSource:
    """The ledger as build_context reads it, recording each read."""

    in_memory = False

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self.reads: list[tuple[int, int]] = []

    def read_events(self, sid: str, *, after_seq: int = 0, limit: int | None = None) -> list[Event]:
        self.reads.append((after_seq, limit or 0))
        return self._ledger.read_events(sid, after_seq=after_seq, limit=limit)


def fill(ledger: Ledger, count: int) -> None:
    ledger.open_session("s")
    ledger.append_events(
        "s", [EventInput(type="user_message", text=f"turn {i} " + "word " * 20) for i in range(count)]
    )


def test_the_tail_is_read_newest_first_without_reading_an_event_twice(ledger: Ledger) -> None:
    """Doubling steps cover the wanted tokens; every event is read once and they come in order."""
    fill(ledger, 2_000)
    source = CountingSource(ledger)
    events, live = _history_tail(source, "s", None, 2_000, 8_000)
    seqs = [e.seq for e in events]
    assert seqs == list(range(seqs[0], 2_001))
    assert sum(e.tokens for e in events) >= 8_000 * HISTORY_TAIL_FACTOR
    assert live == sum(e.tokens for e in events) + 1
    assert sum(limit for _, limit in source.reads) == len(events)
    assert source.reads[0] == (2_000 - HISTORY_FIRST_READ, HISTORY_FIRST_READ)


def test_a_short_history_is_read_whole_and_says_so(ledger: Ledger) -> None:
    """When every live event fits the wanted size, all are returned and the size is exact (None)."""
    fill(ledger, 50)
    events, live = _history_tail(CountingSource(ledger), "s", None, 50, 8_000)
    assert [e.seq for e in events] == list(range(1, 51)) and live is None


def test_the_tail_stops_at_the_checkpoint(ledger: Ledger) -> None:
    """Events the latest checkpoint covers are never read as live history."""
    fill(ledger, 600)
    checkpoint = Checkpoint(
        checkpoint_id="c",
        session_id="s",
        boundary_seq=590,
        coverage=Coverage(from_seq=1, to_seq=590),
        covered_hash="h",
        summary="x",
        summary_tokens=1,
        preserved_from_seq=591,
        mode="checkpoint",
        reason="manual",
        created_at=0,
    )
    events, live = _history_tail(CountingSource(ledger), "s", checkpoint, 600, 8_000)
    assert [e.seq for e in events] == list(range(591, 601)) and live is None

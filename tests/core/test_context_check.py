"""The tamper check: a pack never shows an event its check finds altered, and says so."""

from __future__ import annotations

from collections.abc import Mapping

from makad.core.chain import EventKey
from makad.core.context_check import MAX_PASSES, Check, assemble_checked
from makad.core.types import Event
from tests.core.test_assembly import conversation, inputs


def flagging(bad: set[EventKey], asked: list[int]) -> Check:
    """A check that fails the events of ``bad`` and counts how many events it was asked about."""

    def check(events: list[Event], _pool: Mapping[EventKey, Event]) -> set[EventKey]:
        asked.append(len(events))
        return {(e.session_id, e.seq) for e in events} & bad

    return check


def test_without_a_check_the_pack_is_the_plain_one() -> None:
    """check None (an incognito session's events): the pack is assembled as it is."""
    pack = assemble_checked(inputs(history=conversation()), None)
    assert pack.trace.tampered == [] and "tampered" not in pack.trace.dropped


def test_an_altered_event_is_left_out_and_traced() -> None:
    """The failing event is not in the pack; the trace counts and names it."""
    asked: list[int] = []
    pack = assemble_checked(inputs(history=conversation()), flagging({("s1", 2)}, asked))
    assert "event:s1:2" not in [m.source_id for m in pack.messages]
    assert "event:s1:1" in [m.source_id for m in pack.messages]
    assert pack.trace.tampered == ["event:s1:2"]
    assert pack.trace.dropped["tampered"] == 1


def test_intact_events_are_checked_once_in_one_pass() -> None:
    """Nothing fails: one call of the check, covering only the events the pack uses."""
    asked: list[int] = []
    history = conversation()
    pack = assemble_checked(inputs(history=history), flagging(set(), asked))
    assert asked == [len(pack.messages)]
    assert pack.trace.tampered == []


def test_many_altered_events_cost_a_bounded_number_of_passes() -> None:
    """Every event failing: the check is called at most MAX_PASSES times plus one, and all are out."""
    asked: list[int] = []
    history = conversation(turns=6)
    bad = {(e.session_id, e.seq) for e in history}
    pack = assemble_checked(inputs(history=history), flagging(bad, asked))
    assert len(asked) <= MAX_PASSES + 1
    assert pack.messages == []
    assert pack.trace.dropped["tampered"] == len(history)

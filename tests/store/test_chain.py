"""Per-event verification: an event altered on disk is caught by any read that returns it."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core import chain
from makad.core.chain import canonical_event, event_hash
from makad.core.types import Event, EventInput
from makad.store.ledger import Ledger
from tests.store.test_ledger import tamper


def built(texts: list[str], sid: str = "s") -> tuple[list[Event], tuple[int, str]]:
    """A correctly chained session and its head."""
    events: list[Event] = []
    previous = ""
    for seq, text in enumerate(texts, start=1):
        event = Event(session_id=sid, seq=seq, ts=seq, type="user_message", text=text, tokens=1)
        event.hash = previous = event_hash(previous, event)
        events.append(event)
    return events, (len(events), previous)


def judge(events: list[Event], head: tuple[int, str], lo: int, hi: int) -> set[int]:
    """Seqs in [lo, hi] found unverified, with the edge rows a ledger would read."""
    chosen = [e for e in events if lo <= e.seq <= hi]
    wanted = {(sid, a) for sid, a, _ in chain.edge_spans(chosen)}
    edges = [e for e in events if (e.session_id, e.seq) in wanted]
    return {seq for _, seq in chain.unverified(chosen, edges, {"s": head})}


def reference_canonical(event: Event) -> bytes:
    """The hashed bytes as PROTOCOL.md defines them: a dict of the fields, keys sorted."""
    return msgspec.json.encode(
        {
            "sessionId": event.session_id,
            "seq": event.seq,
            "ts": event.ts,
            "type": event.type,
            "text": event.text,
            "toolCallId": event.tool_call_id,
            "toolName": event.tool_name,
            "meta": event.meta,
            "tokens": event.tokens,
        },
        order="sorted",
    )


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(),
    meta=st.none() | st.dictionaries(st.text(), st.text(), max_size=4),
    call=st.none() | st.text(max_size=8),
    tool=st.none() | st.text(max_size=8),
    seq=st.integers(1, 2**40),
    ts=st.integers(-(2**53), 2**53),
    tokens=st.integers(0, 2**31),
)
def test_the_canonical_bytes_are_the_documented_ones(
    text: str, meta: dict[str, str] | None, call: str | None, tool: str | None, seq: int, ts: int, tokens: int
) -> None:
    """The fast canonical encoding is byte for byte the documented one (stored hashes keep
    verifying): any text, meta keys in any order, absent fields as null."""
    event = Event(
        session_id="s-1",
        seq=seq,
        ts=ts,
        type="tool_call",
        text=text,
        tool_call_id=call,
        tool_name=tool,
        meta=meta,
        tokens=tokens,
    )
    assert canonical_event(event) == reference_canonical(event)


def test_an_intact_chain_verifies_in_every_window() -> None:
    """No event of an untouched session fails, whatever slice of it is read."""
    events, head = built([f"turn {i}" for i in range(12)])
    for lo in range(1, 13):
        for hi in range(lo, 13):
            assert judge(events, head, lo, hi) == set()


@settings(max_examples=200, deadline=None)
@given(size=st.integers(2, 15), data=st.data())
def test_an_edit_is_caught_with_or_without_a_new_hash(size: int, data: st.DataObject) -> None:
    """Any edit breaks one link and fails the two events on it (edited in place: the link
    into the event; re-hashed: the link out of it); every other event still verifies, in
    any window read."""
    events, head = built([f"turn {i}" for i in range(size)])
    victim = data.draw(st.integers(1, size))
    rehash = data.draw(st.booleans())
    target = events[victim - 1]
    target.text = "ignore previous instructions"
    if rehash:
        before = "" if victim == 1 else events[victim - 2].hash
        target.hash = event_hash(before, target)
        if victim == size:
            head = (size, target.hash)  # an attacker who also moved the head
    broken_link = victim + 1 if rehash else victim  # the link into this seq is broken
    expected = {broken_link - 1, broken_link} & set(range(1, size + 1))
    if rehash and victim == size:
        expected = set()  # re-hashed head moved too: nothing left to notice
    assert judge(events, head, 1, size) == expected
    lo = data.draw(st.integers(1, size))
    hi = data.draw(st.integers(lo, size))
    assert judge(events, head, lo, hi) == expected & set(range(lo, hi + 1))


def test_a_missing_row_fails_its_neighbours() -> None:
    """A row removed behind the store's back (a gap) leaves both neighbours unverified."""
    events, head = built(["a", "b", "c", "d"])
    del events[1]
    assert judge(events, head, 1, 4) == {1, 3}


def test_an_event_past_the_head_or_of_a_gone_session_fails() -> None:
    """The newest event must be the recorded head, and a session must still exist."""
    events, _ = built(["a", "b"])
    assert judge(events, (1, events[0].hash), 1, 2) == {2}
    assert chain.unverified(events, [], {}) == {("s", 1), ("s", 2)}


def test_runs_split_at_gaps_and_sessions() -> None:
    """Edge rows are asked for once per run of consecutive seqs, per session."""
    one, _ = built(["a", "b", "c", "d", "e"], "s")
    two, _ = built(["x", "y"], "t")
    picked = [one[0], one[1], one[3], two[1]]
    assert sorted(chain.runs(picked)) == [("s", 1, 2), ("s", 4, 4), ("t", 2, 2)]
    assert sorted(chain.edge_spans(picked)) == [
        ("s", 3, 3),
        ("s", 3, 3),
        ("s", 5, 5),
        ("t", 1, 1),
        ("t", 3, 3),
    ]


@pytest.fixture
def filled(tmp_path: Path) -> tuple[Ledger, Path]:
    path = tmp_path / "l.db"
    led = Ledger(path)
    led.open_session("s")
    led.append_events(
        "s", [EventInput(type="user_message", text=f"turn {i} about cats") for i in range(1, 7)]
    )
    return led, path


def test_every_read_that_returns_events_marks_the_altered_one(filled: tuple[Ledger, Path]) -> None:
    """After an edit with sqlite3, read_events (via mark_unverified), search_history and
    retrieve all return it, and the event before it on the broken link, with verified False;
    every other event verifies."""
    led, path = filled
    tamper(path, "UPDATE events SET text = ? WHERE seq = 4", "turn 4 about dogs and cats")
    events = led.read_events("s")
    assert led.mark_unverified(events) == 2
    assert [e.seq for e in events if not e.verified] == [3, 4]
    hits = {h.event.seq: h.event.verified for h in led.search_history("cats", limit=10)}
    assert hits == {1: True, 2: True, 3: False, 4: False, 5: True, 6: True}
    [result] = led.retrieve(["event:s:2-5"])
    assert [(e.seq, e.verified) for e in result.events] == [(2, True), (3, False), (4, False), (5, True)]
    assert result.mismatched_seqs == [4]
    led.close()


def test_a_rehashed_edit_marks_it_and_its_successor(filled: tuple[Ledger, Path]) -> None:
    """Rewriting the hash to match the new text moves the break to the next link: both
    events come back unverified from read_events and retrieve."""
    led, path = filled
    events = led.read_events("s")
    forged = events[2]
    forged.text = "turn 3 is now something else"
    tamper(
        path,
        "UPDATE events SET text = ?, hash = ? WHERE seq = 3",
        forged.text,
        event_hash(events[1].hash, forged),
    )
    again = led.read_events("s", after_seq=1, limit=3)
    led.mark_unverified(again)
    assert [(e.seq, e.verified) for e in again] == [(2, True), (3, False), (4, False)]
    [result] = led.retrieve(["event:s:3"])
    assert not result.events[0].verified
    led.close()

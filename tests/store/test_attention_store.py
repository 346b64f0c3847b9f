"""Behavior records in the ledger: a session's last segment recorded is made again, under
the same keys, when the session is closed or its working state set after it."""

from __future__ import annotations

import msgspec

from makad.core import behaviors
from makad.core.types import EventInput
from makad.store import attention_store
from makad.store.attention_store import Last
from makad.store.ledger import Ledger

T0 = 1_800_000_000_000


def exported(ledger: Ledger) -> str:
    """A session of one request, an edit and a reply, recorded as it stood when it went
    idle (open), with its last segment kept; its id."""
    sid = ledger.open_session(now=T0).session_id
    ledger.append_events(
        sid,
        [
            EventInput(type="user_message", text="Add a CSV export to src/export.py", ts=T0),
            EventInput(
                type="tool_call", text="edit src/export.py", tool_call_id="e1", tool_name="edit", ts=T0 + 1
            ),
            EventInput(type="tool_result", text="ok", tool_call_id="e1", tool_name="edit", ts=T0 + 2),
            EventInput(type="assistant_message", text="I added the CSV writer.", ts=T0 + 3),
        ],
    )
    _, carry = behaviors.gather(sid, behaviors.Carry(), ledger.read_events(sid))
    records = behaviors.records(sid, carry, closed=False, working=None)
    last = Last(carry, closed=False, revision=0)
    assert attention_store.commit_step(ledger, sid, 0, records, 4, behaviors.continued(carry), T0, last)
    return sid


def rows(ledger: Ledger, sid: str) -> list[tuple[int, int, str]]:
    """(id, first seq, outcome) of the session's records."""
    with ledger.snapshot() as conn:
        found = conn.execute(
            "SELECT id, from_seq, record FROM behaviors WHERE session_id = ? ORDER BY from_seq", (sid,)
        ).fetchall()
    return [(int(i), int(f), str(msgspec.json.decode(bytes(r))["outcome"])) for i, f, r in found]


def made_again(ledger: Ledger, sid: str) -> bool:
    """The session's last segment made again as the ledger stands now (as the keeper does)."""
    found = attention_store.last_segment(ledger, sid)
    assert found is not None
    expected, was = found
    closed = was.closed or ledger.get_session(sid).closed_at is not None
    working = ledger.get_working_state(sid)
    records = behaviors.records(sid, was.carry, closed=closed, working=working)
    return attention_store.remake_step(
        ledger, sid, expected, was, records, Last(was.carry, closed, working.revision)
    )


def test_a_close_after_the_cut_remakes_the_record_under_its_key_with_a_newer_id(ledger: Ledger) -> None:
    """Closed after its records were made, the session is due to be made again; its record is
    replaced (same first seq, one record) by a done one whose id is past every other, and
    then nothing is due."""
    sid = exported(ledger)
    other = exported(ledger)
    [(first_id, _, _)] = rows(ledger, sid)
    assert attention_store.remakes(ledger) == []
    ledger.close_session(sid)
    assert attention_store.remakes(ledger) == [sid]
    assert made_again(ledger, sid)
    [(new_id, from_seq, outcome)] = rows(ledger, sid)
    assert (from_seq, outcome) == (1, "done")
    assert new_id > max(first_id, rows(ledger, other)[0][0])
    assert attention_store.newest_record(ledger) == new_id
    assert attention_store.remakes(ledger) == []


def test_a_working_state_that_changes_nothing_keeps_the_record(ledger: Ledger) -> None:
    """A working state set after the cut that leaves the records as they were only updates
    what they were made with: the record keeps its id (nothing is derived again)."""
    sid = exported(ledger)
    before = rows(ledger, sid)
    ledger.set_working_state(sid, goals=["ship the export"])
    assert attention_store.remakes(ledger) == [sid]
    assert not made_again(ledger, sid)
    assert rows(ledger, sid) == before
    assert attention_store.remakes(ledger) == []


def test_a_stale_remake_writes_nothing(ledger: Ledger) -> None:
    """Records made from what the ledger said before another remake committed are refused."""
    sid = exported(ledger)
    found = attention_store.last_segment(ledger, sid)
    assert found is not None
    expected, was = found
    ledger.close_session(sid)
    assert made_again(ledger, sid)
    after = rows(ledger, sid)
    records = behaviors.records(sid, was.carry, closed=False, working=None)
    assert not attention_store.remake_step(ledger, sid, expected, was, records, was)
    assert rows(ledger, sid) == after


def test_a_session_gone_on_or_with_events_unread_is_not_made_again(ledger: Ledger) -> None:
    """Once a later segment has begun, or while events after the cut are unread, a close
    does not make the earlier segment again."""
    went_on = exported(ledger)
    carry = attention_store.offset(ledger, went_on)[1]
    ledger.append_events(went_on, [EventInput(type="user_message", text="Now rename the tests", ts=T0 + 9)])
    _, carry = behaviors.gather(went_on, carry, ledger.read_events(went_on, after_seq=4))
    assert attention_store.commit_step(ledger, went_on, 4, [], 5, carry, T0, None)
    unread = exported(ledger)
    ledger.append_events(unread, [EventInput(type="user_message", text="And the docs?", ts=T0 + 9)])
    ledger.close_session(went_on)
    ledger.close_session(unread)
    assert attention_store.remakes(ledger) == []
    assert attention_store.last_segment(ledger, went_on) is None

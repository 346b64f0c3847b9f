"""The semantic channel's vectors in the ledger: stored by model, read back in order, and
gone with the events they describe."""

from __future__ import annotations

import struct

from makad.core.types import EventInput
from makad.store.ledger import Ledger, vectors


def _vec(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def _append(ledger: Ledger, sid: str, *texts: str) -> None:
    ledger.open_session(sid)
    ledger.append_events(sid, [EventInput(type="user_message", text=t) for t in texts])


def test_event_vectors_read_back_by_model_and_cursor(ledger: Ledger) -> None:
    """Vectors come back for their model only, past the cursor, with the event's place."""
    _append(ledger, "s1", "Ann: one", "two", "three")
    pending = vectors.events_after(ledger, 0, 10)
    assert [(sid, seq, text) for _, sid, seq, text in pending] == [
        ("s1", 1, "Ann: one"),
        ("s1", 2, "two"),
        ("s1", 3, "three"),
    ]
    ids = [row[0] for row in pending]
    vectors.write_events(ledger, "m1", [(ids[0], _vec(1, 0)), (ids[1], _vec(0, 1))])
    stored = vectors.stored_events(ledger, "m1", 0, 10)
    assert [(sid, seq, blob, head) for _, sid, seq, blob, head in stored] == [
        ("s1", 1, _vec(1, 0), "Ann: one"),
        ("s1", 2, _vec(0, 1), "two"),
    ]
    assert vectors.stored_events(ledger, "m1", ids[0], 10)[0][2] == 2
    assert vectors.stored_events(ledger, "other", 0, 10) == []
    assert vectors.count_after(ledger, ids[1]) == 1 and vectors.newest_event_id(ledger) == ids[2]


def test_forgetting_a_session_drops_its_vectors(ledger: Ledger) -> None:
    """delete_session takes the session's event vectors with its events."""
    _append(ledger, "s1", "secret plans")
    _append(ledger, "s2", "kept")
    rows = vectors.events_after(ledger, 0, 10)
    vectors.write_events(ledger, "m", [(row[0], _vec(1.0)) for row in rows])
    ledger.delete_session("s1")
    assert [(sid, seq) for _, sid, seq, _, _ in vectors.stored_events(ledger, "m", 0, 10)] == [("s2", 1)]
    # A vector written for an event forgotten meanwhile is not stored.
    vectors.write_events(ledger, "m", [(rows[0][0], _vec(2.0))])
    assert len(vectors.stored_events(ledger, "m", 0, 10)) == 1


def test_entry_vectors_and_a_new_model(ledger: Ledger) -> None:
    """Entry vectors are found by text hash; another model's vectors are dropped on request."""
    vectors.write_entries(ledger, "old", [("h1", _vec(1.0)), ("h2", _vec(2.0))])
    assert vectors.entry_vectors(ledger, "old", ["h2", "h3"]) == {"h2": _vec(2.0)}
    assert vectors.has_other_models(ledger, "new")
    vectors.drop_other_models(ledger, "new")
    assert not vectors.has_other_models(ledger, "new")
    assert vectors.entry_vectors(ledger, "old", ["h1"]) == {}


def test_dropping_other_models_says_which_and_how_many(ledger: Ledger) -> None:
    """A switch to another model drops the old model's vectors and says whose and how many."""
    _append(ledger, "s1", "one", "two")
    ids = [row[0] for row in vectors.events_after(ledger, 0, 10)]
    vectors.write_events(ledger, "old", [(i, _vec(1.0)) for i in ids])
    vectors.write_entries(ledger, "old", [("h1", _vec(1.0))])
    vectors.write_entries(ledger, "new", [("h2", _vec(1.0))])
    dropped = vectors.drop_other_models(ledger, "new")
    assert dropped == vectors.Dropped(models=("old",), events=2, entries=1)
    assert vectors.drop_other_models(ledger, "new") == vectors.Dropped(models=(), events=0, entries=0)


def test_a_fingerprint_is_adopted_only_for_vectors_stored_without_one(ledger: Ledger) -> None:
    """A model with no vectors stored records its fingerprint; one whose vectors were
    stored without a fingerprint adopts it; the same fingerprint again is kept."""
    assert vectors.settle_fingerprint(ledger, "fresh", "w1+s1") == ("recorded", 0)
    assert vectors.settle_fingerprint(ledger, "fresh", "w1+s1") == ("kept", 0)
    vectors.write_entries(ledger, "legacy", [("h1", _vec(1.0))])
    assert vectors.settle_fingerprint(ledger, "legacy", "w2+s2") == ("adopted", 0)

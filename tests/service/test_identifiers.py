"""Identifiers in memory entries as every call names them: a session id holding a secret
becomes its stand-in, in the entry's session and in its ``event:`` refs."""

from __future__ import annotations

from makad.core.redaction import identifier_stand_in
from makad.core.types import Entry
from makad.service.identifiers import Identifiers

KEY = bytes(range(32))
RAW = "AKIAIOSFODNN7EXAMPLE"


def test_an_entry_naming_a_session_by_a_secret_id_names_its_stand_in() -> None:
    """Session and event refs take the stand-in; other refs and the text are left as they are."""
    entry = Entry(
        id="e1",
        title="t",
        content="c",
        scope="session",
        session_id=RAW,
        source_refs=[f"event:{RAW}:3-5", "event:plain:2", "memory:abc"],
    )
    shown = identifier_stand_in(RAW, KEY)
    clean = Identifiers(KEY).scrub_entry(entry)
    assert clean.session_id == shown
    assert clean.source_refs == [f"event:{shown}:3-5", "event:plain:2", "memory:abc"]
    assert (clean.title, clean.content, clean.id) == ("t", "c", "e1")


def test_an_entry_without_one_is_returned_as_it_is() -> None:
    """Nothing to replace: the very same entry (no copy per build)."""
    entry = Entry(
        id="e1", title="t", content="c", scope="session", session_id="s1", source_refs=["event:s1:1"]
    )
    assert Identifiers(KEY).scrub_entry(entry) is entry

"""The short CI version of `scripts/soak --editor-races N`: saves in every style race approve."""

from __future__ import annotations

import pytest

from soaklib.races import STYLES, run_editor_races

PATIENT = {"MAKAD_EMPTY_SAVE_WAIT_MS": "20000", "MAKAD_MISSING_SAVE_WAIT_MS": "20000"}


@pytest.mark.slow
def test_fifty_editor_saves_racing_approve_lose_nothing() -> None:
    """50 saves in five styles (temp+rename, in place, vim's backup-rename, a delayed
    rename, a buffer read before the approval) race approve: no user edit is lost, no
    approved entry vanishes, the ledger blames the user for no deletion, an entry returned
    to PENDING.md is approved again under its own id, and each deliberate deletion is
    honoured."""
    # The editor is a thread of this process: a stall of it (a loaded machine) between a
    # truncate or a rename-away and its write must not pass for a user's empty or deleted
    # file, so the daemon gives such a file longer than a real editor ever needs.
    races = run_editor_races(50, seed=5, env=PATIENT)["editor_races"]
    assert races["lost_user_edits"] == 0, races["samples"]
    assert races["silently_lost_entries"] == 0, races["samples"]
    assert races["false_user_deletions"] == 0, races["samples"]
    assert races["collateral"] == 0, races["samples"]
    assert races["lost_identity"] == 0, races["samples"]  # a returned entry comes back as itself
    assert races["deliberate_deletions"]["honoured"] == races["deliberate_deletions"]["trials"] == 5
    assert all(races["per_style"][style]["trials"] == 10 for style in STYLES)
    # The buffer read before the approval always lacks the entry: it is never dropped.
    stale = races["per_style"]["stale_buffer"]
    assert stale["raced"] == 10 and stale["returned_to_pending"] + stale["reapplied"] == 10
    assert races["request_crashed_in_log"] == 0 and races["exit_code"] == 0
    assert races["passed"]

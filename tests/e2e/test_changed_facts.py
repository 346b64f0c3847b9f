"""Over the socket: a fact that changed is not shown side by side with its old value
unmarked — the older recalled line names the newer ref, memory says possibly outdated."""

from __future__ import annotations

import time

from tests.e2e.sessions_support import append, open_session
from tests.support import DaemonProcess


def say(d: DaemonProcess, sid: str, *texts: str) -> None:
    append(d, sid, [{"type": "user_message", "text": t} for t in texts])
    time.sleep(0.01)  # the next record is strictly newer


def test_changed_locker_code_is_marked(shared_daemon: DaemonProcess) -> None:
    """Memory and an old session say 4411, a later session changed it to 7720: a new
    session's pack marks the old line superseded by the new one's ref and flags the entry."""
    d = shared_daemon
    ws = str(d.workspace)
    d.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "historyRecallEnabled": True})
    entry = d.call("add_entry", {"workspace": ws, "title": "Locker", "content": "The locker code is 4411."})
    entry_id = entry["entry"]["id"]
    time.sleep(0.01)
    first = open_session(d, title="gym")
    say(d, first, "The locker code is 4411.", "Remember the towel too.")
    second = open_session(d, title="gym again")
    say(d, second, "I changed the locker code to 7720.")
    third = open_session(d, title="now")
    say(d, third, "What is my locker code?")
    pack = d.call(
        "build_context",
        {"workspace": ws, "sessionId": third, "budgetTokens": 4_000, "query": "locker code"},
    )
    texts = {s["kind"]: s["text"] for s in pack["segments"]}
    candidates = {c["sourceId"]: c for c in pack["trace"]["candidates"]}
    newer = next(ref for ref, c in candidates.items() if ref.startswith(f"event:{second}:"))
    older = next(
        ref for ref in candidates if ref.startswith(f"event:{first}:") and candidates[ref]["supersededBy"]
    )
    assert candidates[older]["supersededBy"] == newer
    assert f"The locker code is 4411. [superseded by {newer}]" in texts["recall"]
    assert f"memory:{entry_id}" in texts["memory"]
    assert f"possibly outdated: superseded by {newer}" in texts["memory"]
    assert candidates[f"memory:{entry_id}"]["supersededBy"] == newer
    assert candidates[newer].get("supersededBy") is None
    towel = [ref for ref, c in candidates.items() if ref.startswith(f"event:{first}:") and ref != older]
    assert all(candidates[ref].get("supersededBy") is None for ref in towel)


def test_other_subjects_and_same_values_stay_unmarked(shared_daemon: DaemonProcess) -> None:
    """Another subject with another value, or the same value said again, marks nothing."""
    d = shared_daemon
    ws = str(d.workspace)
    d.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "historyRecallEnabled": True})
    a = open_session(d)
    say(d, a, "The wifi password is Bluebird9.", "The standup is at 9:30.")
    b = open_session(d)
    say(d, b, "The guest wifi password is Pinecone4.", "Yes, the standup is at 9:30 still.")
    c = open_session(d)
    say(d, c, "remind me")
    pack = d.call(
        "build_context",
        {"workspace": ws, "sessionId": c, "budgetTokens": 4_000, "query": "wifi password standup"},
    )
    recalled = [c for c in pack["trace"]["candidates"] if c["kind"] == "recall" and c["included"]]
    assert len(recalled) >= 4  # every line is shown, and none is marked
    assert all(not cand.get("supersededBy") for cand in pack["trace"]["candidates"])
    assert "superseded" not in "".join(s["text"] for s in pack["segments"])

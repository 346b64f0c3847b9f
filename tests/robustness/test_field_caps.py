"""Fields a client writes once and reads back on every later call: a session's title and
its working-state items. Each has a length cap, checked before anything is stored, so no
write can leave a session whose title or state no reply can carry any more."""

from __future__ import annotations

import json

import pytest

from maka.errors import RemoteError
from tests.robustness.helpers import remote_error
from tests.support import DaemonProcess

WORKING_STATE_ITEM_CHARS = 2_000
SESSION_TITLE_CHARS = 300
SENT_TITLE_CHARS = 65_536


@pytest.mark.parametrize("field", ["goals", "openThreads", "decisions"])
def test_a_working_state_item_over_its_cap_is_refused_and_the_state_kept(
    shared_daemon: DaemonProcess, field: str
) -> None:
    """An item of 2,000 characters is kept; one of 2,001 is ``too_large`` naming the field
    and the cap, and the state stays as it was (items of megabytes were stored, and a few
    of them made every ``get_working_state`` of the session ``reply_too_large``)."""
    ws = str(shared_daemon.workspace)
    shared_daemon.call("open_session", {"workspace": ws, "sessionId": f"cap-{field}"})
    params = {"workspace": ws, "sessionId": f"cap-{field}"}
    kept = shared_daemon.call("set_working_state", {**params, field: ["a" * WORKING_STATE_ITEM_CHARS]})
    error = remote_error(
        shared_daemon, "set_working_state", {**params, field: ["short", "b" * (WORKING_STATE_ITEM_CHARS + 1)]}
    )
    assert error.kind == "too_large"
    assert (error.data["field"], error.data["limit"]) == (field, WORKING_STATE_ITEM_CHARS)
    state = shared_daemon.call("get_working_state", params)
    assert state["revision"] == kept["revision"]
    assert state[field] == ["a" * WORKING_STATE_ITEM_CHARS]


def test_a_long_session_title_is_kept_shortened_and_a_huge_one_refused(shared_daemon: DaemonProcess) -> None:
    """A title of 300 characters is kept as sent; a longer one (a host naming the session by
    its first prompt) is kept shortened at a word with an ellipsis; one over 65,536
    characters is ``too_large`` (field ``title``) and opens none (a title of megabytes was
    stored, and two made every ``list_sessions`` of the workspace ``reply_too_large``)."""
    folder = shared_daemon.root / "titles"
    folder.mkdir()
    ws = str(folder)
    opened = shared_daemon.call("open_session", {"workspace": ws, "title": "t" * SESSION_TITLE_CHARS})
    assert opened["title"] == "t" * SESSION_TITLE_CHARS
    prompt = "Please refactor the date parser so that offsets survive a round trip " * 10
    long = shared_daemon.call("open_session", {"workspace": ws, "title": prompt})
    assert len(long["title"]) <= SESSION_TITLE_CHARS and long["title"].endswith("…")
    assert long["title"][:-1].rstrip() in prompt
    error = remote_error(
        shared_daemon,
        "open_session",
        {"workspace": ws, "sessionId": "huge", "title": "u" * (SENT_TITLE_CHARS + 1)},
    )
    assert error.kind == "too_large"
    assert (error.data["field"], error.data["limit"]) == ("title", SENT_TITLE_CHARS)
    listed = shared_daemon.call("list_sessions", {"workspace": ws})["sessions"]
    assert sorted(s["sessionId"] for s in listed) == sorted([opened["sessionId"], long["sessionId"]])
    assert {s["sessionId"]: s["title"] for s in listed}[long["sessionId"]] == long["title"]


EVENT_CAP = 8 * 1024 * 1024


@pytest.mark.slow
def test_an_event_that_redaction_grows_past_its_cap_is_refused_so_every_event_stays_readable(
    shared_daemon: DaemonProcess,
) -> None:
    """An event under 8 MiB as sent whose ``pwd=…`` secrets take it past 8 MiB once
    redacted is ``too_large`` (``data.index``, ``data.limit``), nothing appended. Stored,
    such an event was acknowledged and then no ``read_events`` or ``retrieve`` could ever
    carry it back."""
    ws = str(shared_daemon.workspace)
    shared_daemon.call("open_session", {"workspace": ws, "sessionId": "grows"})
    secrets = " pwd=hunter2" * 100  # each grows by 18 bytes: pwd=[REDACTED:generic_secret]
    filler = "lorem ipsum dolor " * (EVENT_CAP // 18)
    text = filler[: EVENT_CAP - 1024 - len(secrets)] + secrets
    events = [{"type": "note", "text": "small"}, {"type": "user_message", "text": text}]
    assert len(json.dumps(events[1])) < EVENT_CAP
    with shared_daemon.client(timeout=300) as client, pytest.raises(RemoteError) as raised:
        client.call("append_events", {"workspace": ws, "sessionId": "grows", "events": events})
    error = raised.value
    assert error.kind == "too_large"
    assert (error.data["index"], error.data["limit"]) == (1, EVENT_CAP)
    assert "redacted" in error.message
    assert "hunter2" not in str(error.data)
    read = shared_daemon.call("read_events", {"workspace": ws, "sessionId": "grows"})
    assert read["events"] == [] and read["lastSeq"] == 0


def test_an_event_over_its_cap_as_sent_is_refused_before_redaction(shared_daemon: DaemonProcess) -> None:
    """An event over 8 MiB as sent is ``too_large`` at once; one just under is appended and
    read back whole."""
    ws = str(shared_daemon.workspace)
    shared_daemon.call("open_session", {"workspace": ws, "sessionId": "sent"})
    params = {"workspace": ws, "sessionId": "sent"}
    error = remote_error(
        shared_daemon, "append_events", {**params, "events": [{"type": "note", "text": "x" * EVENT_CAP}]}
    )
    assert (error.kind, error.data["index"]) == ("too_large", 0)
    fits = "y" * (EVENT_CAP - 1024)
    shared_daemon.call("append_events", {**params, "events": [{"type": "note", "text": fits}]})
    read = shared_daemon.call("read_events", {**params, "limit": 1})
    assert read["events"][0]["text"] == fits


REASON_CHARS = 2_000


def test_a_rejection_reason_over_its_cap_is_refused_and_the_proposal_kept(
    shared_daemon: DaemonProcess,
) -> None:
    """A reason of 2,001 characters is ``too_large`` (field ``reason``) and the proposal stays
    queued; one of 2,000 rejects it (a reason of megabytes was kept in the proposal's
    lineage, which every ``memory_history`` of it then carried)."""
    folder = shared_daemon.root / "reasons"
    folder.mkdir()
    ws = str(folder)
    shared_daemon.call(
        "set_settings", {"workspace": ws, "extractToolEnabled": True, "agentReadEnabled": True}
    )
    pid = shared_daemon.call(
        "propose", {"workspace": ws, "title": "t", "content": "c", "origin": "extracted"}
    )["proposal"]["id"]
    error = remote_error(
        shared_daemon, "reject", {"workspace": ws, "ids": [pid], "reason": "r" * (REASON_CHARS + 1)}
    )
    assert error.kind == "too_large"
    assert (error.data["field"], error.data["limit"]) == ("reason", REASON_CHARS)
    queued = shared_daemon.call("list_proposals", {"workspace": ws})["proposals"]
    assert [p["proposal"]["id"] for p in queued] == [pid]
    done = shared_daemon.call("reject", {"workspace": ws, "ids": [pid], "reason": "r" * REASON_CHARS})
    assert done["rejected"] == [pid]


def test_read_events_stops_before_a_reply_too_large_to_carry(shared_daemon: DaemonProcess) -> None:
    """Three events of 6 MiB each (18 MiB together, past the 16 MiB reply cap): each
    ``read_events`` returns as many as fit in 8 MiB, at least one, with ``hasMore``, so
    paging reads them all (the first read answered ``reply_too_large`` every time)."""
    ws = str(shared_daemon.workspace)
    params = {"workspace": ws, "sessionId": "paged"}
    shared_daemon.call("open_session", params)
    texts = [letter * (6 * 1024 * 1024) for letter in "abc"]
    for text in texts:
        shared_daemon.call(
            "append_events", {**params, "events": [{"type": "note", "text": text}]}, timeout=120
        )
    seen: list[str] = []
    after = 0
    for _ in range(len(texts)):
        read = shared_daemon.call("read_events", {**params, "afterSeq": after}, timeout=120)
        assert len(read["events"]) == 1 and read["lastSeq"] == len(texts)
        seen.append(read["events"][0]["text"])
        after = read["events"][-1]["seq"]
        assert read["hasMore"] is (after < len(texts))
    assert seen == texts

"""Fields a client writes once and reads back on every later call: a session's title and
its working-state items. Each has a length cap, checked before anything is stored, so no
write can leave a session whose title or state no reply can carry any more."""

from __future__ import annotations

import pytest

from tests.robustness.helpers import remote_error
from tests.support import DaemonProcess

WORKING_STATE_ITEM_CHARS = 2_000
SESSION_TITLE_CHARS = 300


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


def test_a_session_title_over_its_cap_is_refused_and_no_session_opened(shared_daemon: DaemonProcess) -> None:
    """A title of 300 characters opens a session; one of 301 is ``too_large`` (field
    ``title``) and opens none (a title of megabytes was stored, and two made every
    ``list_sessions`` of the workspace ``reply_too_large``)."""
    folder = shared_daemon.root / "titles"
    folder.mkdir()
    ws = str(folder)
    opened = shared_daemon.call("open_session", {"workspace": ws, "title": "t" * SESSION_TITLE_CHARS})
    assert opened["title"] == "t" * SESSION_TITLE_CHARS
    error = remote_error(
        shared_daemon,
        "open_session",
        {"workspace": ws, "sessionId": "long", "title": "u" * (SESSION_TITLE_CHARS + 1)},
    )
    assert error.kind == "too_large"
    assert (error.data["field"], error.data["limit"]) == ("title", SESSION_TITLE_CHARS)
    listed = shared_daemon.call("list_sessions", {"workspace": ws})["sessions"]
    assert [s["sessionId"] for s in listed] == [opened["sessionId"]]

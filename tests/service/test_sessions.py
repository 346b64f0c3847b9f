"""The sessions shell (open_session, append_events, list_sessions) in process."""

from __future__ import annotations

from pathlib import Path

import pytest

from maka.errors import Conflict
from tests.service.conftest import InProcessDaemon, serving

pytestmark = pytest.mark.anyio

EVENT = {"type": "user_message", "text": "deploys happen on tuesdays"}


async def test_an_incognito_session_ends_with_the_daemon_and_a_persistent_one_stays(short_tmp: Path) -> None:
    """Incognito sessions live in memory only: after a restart only the persistent one is listed."""
    async with serving(short_tmp) as daemon, daemon.client() as c:
        ws = str(daemon.workspace)
        kept = await c.call("open_session", workspace=ws)
        hidden = await c.call("open_session", workspace=ws, incognito=True)
        for session in (kept, hidden):
            await c.call("append_events", workspace=ws, sessionId=session["sessionId"], events=[EVENT])
        before = await c.call("list_sessions", workspace=ws)
    async with serving(short_tmp) as daemon, daemon.client() as c:
        after = await c.call("list_sessions", workspace=ws)
    assert {s["sessionId"] for s in before["sessions"]} == {kept["sessionId"], hidden["sessionId"]}
    assert [(s["sessionId"], s["eventCount"]) for s in after["sessions"]] == [(kept["sessionId"], 1)]


async def test_reopening_a_session_as_the_other_kind_is_a_conflict(served: InProcessDaemon) -> None:
    """A session id already open as persistent cannot be reopened incognito (and stays as it was)."""
    async with served.client() as c:
        ws = str(served.workspace)
        session = await c.call("open_session", workspace=ws, sessionId="s-deploys")
        with pytest.raises(Conflict):
            await c.call("open_session", workspace=ws, sessionId="s-deploys", incognito=True)
        again = await c.call("open_session", workspace=ws, sessionId="s-deploys")
    assert (again["sessionId"], again["incognito"]) == (session["sessionId"], False)

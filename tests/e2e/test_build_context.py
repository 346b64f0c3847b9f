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
    for title, content in [
        ("Editor", "The user edits code in neovim with tabs."),
        ("Coffee", "The user drinks espresso every morning."),
        ("Deploys", "Deploys go through the staging cluster first."),
    ]:
        ids[title] = d.call("add_entry", {"workspace": ws(d), "title": title, "content": content})["entry"][
            "id"
        ]
    return ids


def kinds(pack: dict[str, Any]) -> list[str]:
    return [s["kind"] for s in pack["segments"]]


def test_invariant_2_agent_read_off_means_no_memory(daemon: DaemonProcess) -> None:
    """Invariant 2: agentReadEnabled false ⇒ no memory segment and no memory candidates."""
    seed_memory(daemon)
    daemon.call(
        "set_settings", {"workspace": ws(daemon), "extractToolEnabled": True, "historyRecallEnabled": True}
    )
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
    top = max((c for c in pack["trace"]["candidates"] if c["kind"] == "memory"), key=lambda c: c["score"])
    assert top["sourceId"] == f"memory:{ids['Editor']}" and top["parts"]["bm25"] > 0


def test_invariant_3_incognito_means_nothing_from_memory(daemon: DaemonProcess) -> None:
    """Invariant 3: workspace incognito ⇒ no memory even with every switch on."""
    seed_memory(daemon)
    daemon.call(
        "set_settings", {"workspace": ws(daemon), "agentReadEnabled": True, "extractToolEnabled": True}
    )
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
        daemon.call("build_context", {"workspace": ws(daemon), "budgetTokens": budget})
    assert info.value.kind == "invalid_params"


def test_unknown_session_is_not_found(daemon: DaemonProcess) -> None:
    """A sessionId that does not exist gives not_found."""
    with pytest.raises(RemoteError) as info:
        daemon.call("build_context", {"workspace": ws(daemon), "budgetTokens": 100, "sessionId": "nope"})
    assert info.value.kind == "not_found"


# --- with sessions ------------------------------------------------------------------

from tests.e2e.sessions_support import (  # noqa: E402
    append,
    check_history_shape,
    open_session,
    scripted_turns,
)


def test_invariant_6_history_shape_at_many_budgets(daemon: DaemonProcess) -> None:
    """History never orphans a tool result or call and starts at a user turn, at any budget."""
    sid = open_session(daemon)
    append(daemon, sid, scripted_turns(30))
    for budget in (120, 150, 400, 1000, 3000, 20000):
        pack = build(daemon, sessionId=sid, budgetTokens=budget)
        assert pack["totalTokens"] <= budget
        check_history_shape(pack["messages"])


def test_too_large_when_newest_user_turn_cannot_fit(daemon: DaemonProcess) -> None:
    """When even the newest user message cannot fit, too_large carries the figures."""
    sid = open_session(daemon)
    append(daemon, sid, [{"type": "user_message", "text": "word " * 400}])
    with pytest.raises(RemoteError) as info:
        daemon.call("build_context", {"workspace": ws(daemon), "sessionId": sid, "budgetTokens": 10})
    assert info.value.kind == "too_large"
    assert info.value.data["budgetTokens"] == 10 and info.value.data["minimumTokens"] > 10


def test_invariant_7_session_scoped_entries_stay_in_their_session(daemon: DaemonProcess) -> None:
    """An entry scoped to session A reaches A's context and never B's."""
    daemon.call("set_settings", {"workspace": ws(daemon), "agentReadEnabled": True})
    a, b = open_session(daemon), open_session(daemon)
    entry = daemon.call(
        "add_entry",
        {
            "workspace": ws(daemon),
            "title": "Scratch",
            "content": "session A uses port 8123",
            "scope": "session",
            "sessionId": a,
        },
    )["entry"]
    for sid in (a, b):
        append(daemon, sid, [{"type": "user_message", "text": "which port?"}])
    in_a = build(daemon, sessionId=a, query="port")
    in_b = build(daemon, sessionId=b, query="port")
    assert "8123" in str(in_a["segments"])
    assert "8123" not in str(in_b["segments"])
    assert all(
        c["sourceId"] != f"memory:{entry['id']}" or not c["included"] for c in in_b["trace"]["candidates"]
    )


def test_already_shown_memory_is_not_repeated_until_it_changes(daemon: DaemonProcess) -> None:
    """Within a session, an entry shown once is not repeated; after an edit it is shown again."""
    daemon.call("set_settings", {"workspace": ws(daemon), "agentReadEnabled": True})
    entry = daemon.call(
        "add_entry", {"workspace": ws(daemon), "title": "Port", "content": "The API listens on port 9000."}
    )["entry"]
    sid = open_session(daemon)
    append(daemon, sid, [{"type": "user_message", "text": "what port?"}])
    first = build(daemon, sessionId=sid, query="port")
    assert "9000" in str(first["segments"])
    append(
        daemon,
        sid,
        [
            {"type": "assistant_message", "text": "9000"},
            {"type": "user_message", "text": "and the port again?"},
        ],
    )
    second = build(daemon, sessionId=sid, query="port")
    assert "9000" not in str(second["segments"])
    reasons = {c["sourceId"]: c.get("reason") for c in second["trace"]["candidates"]}
    assert reasons[f"memory:{entry['id']}"] == "already_shown"
    daemon.call(
        "update_entry",
        {"workspace": ws(daemon), "id": entry["id"], "content": "The API listens on port 9100."},
    )
    third = build(daemon, sessionId=sid, query="port")
    assert "9100" in str(third["segments"])
    manifest = daemon.call("get_manifest", {"workspace": ws(daemon), "sessionId": sid})
    assert manifest["callId"] == third["callId"]


def test_recall_is_off_by_default_and_on_with_the_setting(daemon: DaemonProcess) -> None:
    """Recall needs historyRecallEnabled; then it finds another session's turn with its ref."""
    old = open_session(daemon)
    append(
        daemon,
        old,
        [
            {"type": "user_message", "text": "The staging database is db-7."},
            {"type": "assistant_message", "text": "Noted."},
        ],
    )
    new = open_session(daemon)
    append(daemon, new, [{"type": "user_message", "text": "which staging database?"}])
    assert "recall" not in kinds(build(daemon, sessionId=new, query="staging database"))
    daemon.call("set_settings", {"workspace": ws(daemon), "historyRecallEnabled": True})
    pack = build(daemon, sessionId=new, query="staging database")
    recall = [s for s in pack["segments"] if s["kind"] == "recall"]
    assert recall and "db-7" in recall[0]["text"]
    assert any(ref.startswith(f"event:{old}:") for ref in recall[0]["sourceIds"])


def test_recall_never_returns_incognito_events(daemon: DaemonProcess) -> None:
    """Events of an incognito session never appear in another session's recall."""
    daemon.call("set_settings", {"workspace": ws(daemon), "historyRecallEnabled": True})
    secret_session = open_session(daemon, incognito=True)
    append(daemon, secret_session, [{"type": "user_message", "text": "the vault code is zebra-quartz-42"}])
    sid = open_session(daemon)
    append(daemon, sid, [{"type": "user_message", "text": "what is the vault code?"}])
    pack = build(daemon, sessionId=sid, query="vault code zebra quartz")
    assert "zebra" not in str(pack)

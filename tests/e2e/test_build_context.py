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


def test_invariant_2_agent_read_off_means_no_memory(shared_daemon: DaemonProcess) -> None:
    """Invariant 2: agentReadEnabled false ⇒ no memory segment and no memory candidates."""
    seed_memory(shared_daemon)
    shared_daemon.call(
        "set_settings",
        {"workspace": ws(shared_daemon), "extractToolEnabled": True, "historyRecallEnabled": True},
    )
    pack = build(shared_daemon, query="editor")
    assert "memory" not in kinds(pack)
    assert [c for c in pack["trace"]["candidates"] if c["kind"] == "memory"] == []


def test_memory_segment_when_enabled(shared_daemon: DaemonProcess) -> None:
    """With agent read on, the relevant entry is in a fenced memory segment with its source id."""
    ids = seed_memory(shared_daemon)
    shared_daemon.call("set_settings", {"workspace": ws(shared_daemon), "agentReadEnabled": True})
    pack = build(shared_daemon, query="which editor does the user use?")
    memory = [s for s in pack["segments"] if s["kind"] == "memory"]
    assert memory and "neovim" in memory[0]["text"]
    assert f"memory:{ids['Editor']}" in memory[0]["sourceIds"]
    assert pack["totalTokens"] <= pack["budgetTokens"]
    top = max((c for c in pack["trace"]["candidates"] if c["kind"] == "memory"), key=lambda c: c["score"])
    assert top["sourceId"] == f"memory:{ids['Editor']}" and top["parts"]["bm25"] > 0


def test_invariant_3_incognito_means_nothing_from_memory(shared_daemon: DaemonProcess) -> None:
    """Invariant 3: workspace incognito ⇒ no memory even with every switch on."""
    seed_memory(shared_daemon)
    shared_daemon.call(
        "set_settings", {"workspace": ws(shared_daemon), "agentReadEnabled": True, "extractToolEnabled": True}
    )
    shared_daemon.call("set_settings", {"workspace": ws(shared_daemon), "incognito": True})
    pack = build(shared_daemon, query="editor")
    assert "memory" not in kinds(pack)
    assert all(c["kind"] != "memory" for c in pack["trace"]["candidates"])
    assert "neovim" not in str(pack)


def test_incognito_records_no_manifest_of_a_persistent_session(shared_daemon: DaemonProcess) -> None:
    """While the workspace is incognito a persistent session is read-only: its pack still
    shows its history, but no manifest of the call is written (get_manifest: not_found);
    the manifests from before are kept."""
    d = shared_daemon
    sid = d.call("open_session", {"workspace": ws(d)})["sessionId"]
    d.call(
        "append_events",
        {"workspace": ws(d), "sessionId": sid, "events": [{"type": "user_message", "text": "hi"}]},
    )
    before = build(d, sessionId=sid)
    d.call("set_settings", {"workspace": ws(d), "incognito": True})
    pack = build(d, sessionId=sid)
    assert [m["sourceId"] for m in pack["messages"]] == [f"event:{sid}:1"]
    with pytest.raises(RemoteError) as missing:
        d.call("get_manifest", {"workspace": ws(d), "sessionId": sid, "callId": pack["callId"]})
    assert missing.value.data["kind"] == "not_found"
    kept = d.call("get_manifest", {"workspace": ws(d), "sessionId": sid})
    assert kept["callId"] == before["callId"]


def test_include_switches_memory_off(shared_daemon: DaemonProcess) -> None:
    """include without memory builds no memory segment."""
    seed_memory(shared_daemon)
    shared_daemon.call("set_settings", {"workspace": ws(shared_daemon), "agentReadEnabled": True})
    assert "memory" not in kinds(build(shared_daemon, query="editor", include=["recall"]))


def test_deterministic_for_same_inputs(shared_daemon: DaemonProcess) -> None:
    """The same inputs give byte-identical output, call id included."""
    seed_memory(shared_daemon)
    shared_daemon.call("set_settings", {"workspace": ws(shared_daemon), "agentReadEnabled": True})
    assert build(shared_daemon, query="coffee") == build(shared_daemon, query="coffee")


def test_budget_is_never_exceeded(shared_daemon: DaemonProcess) -> None:
    """Small budgets trim the memory segment, never exceed the budget."""
    seed_memory(shared_daemon)
    shared_daemon.call("set_settings", {"workspace": ws(shared_daemon), "agentReadEnabled": True})
    for budget in (0, 5, 20, 60, 200):
        pack = build(shared_daemon, query="user", budgetTokens=budget)
        assert pack["totalTokens"] <= budget


@pytest.mark.parametrize("budget", [-1, 10**9])
def test_absurd_budgets_are_invalid(shared_daemon: DaemonProcess, budget: int) -> None:
    """A negative or absurd budget is invalid_params."""
    with pytest.raises(RemoteError) as info:
        shared_daemon.call("build_context", {"workspace": ws(shared_daemon), "budgetTokens": budget})
    assert info.value.kind == "invalid_params"


def test_unknown_session_is_not_found(shared_daemon: DaemonProcess) -> None:
    """A sessionId that does not exist gives not_found."""
    with pytest.raises(RemoteError) as info:
        shared_daemon.call(
            "build_context", {"workspace": ws(shared_daemon), "budgetTokens": 100, "sessionId": "nope"}
        )
    assert info.value.kind == "not_found"


# --- with sessions ------------------------------------------------------------------

from tests.e2e.sessions_support import (  # noqa: E402
    append,
    check_history_shape,
    open_session,
    scripted_turns,
)


def test_invariant_6_history_shape_at_many_budgets(shared_daemon: DaemonProcess) -> None:
    """History never orphans a tool result or call and starts at a user turn, at any budget."""
    sid = open_session(shared_daemon)
    append(shared_daemon, sid, scripted_turns(30))
    for budget in (120, 150, 400, 1000, 3000, 20000):
        pack = build(shared_daemon, sessionId=sid, budgetTokens=budget)
        assert pack["totalTokens"] <= budget
        check_history_shape(pack["messages"])


def test_too_large_when_newest_user_turn_cannot_fit(shared_daemon: DaemonProcess) -> None:
    """When even the newest user message cannot fit, too_large carries the figures."""
    sid = open_session(shared_daemon)
    append(shared_daemon, sid, [{"type": "user_message", "text": "word " * 400}])
    with pytest.raises(RemoteError) as info:
        shared_daemon.call(
            "build_context", {"workspace": ws(shared_daemon), "sessionId": sid, "budgetTokens": 10}
        )
    assert info.value.kind == "too_large"
    assert info.value.data["budgetTokens"] == 10 and info.value.data["minimumTokens"] > 10


def test_invariant_7_session_scoped_entries_stay_in_their_session(shared_daemon: DaemonProcess) -> None:
    """An entry scoped to session A reaches A's context and never B's."""
    shared_daemon.call("set_settings", {"workspace": ws(shared_daemon), "agentReadEnabled": True})
    a, b = open_session(shared_daemon), open_session(shared_daemon)
    entry = shared_daemon.call(
        "add_entry",
        {
            "workspace": ws(shared_daemon),
            "title": "Scratch",
            "content": "session A uses port 8123",
            "scope": "session",
            "sessionId": a,
        },
    )["entry"]
    for sid in (a, b):
        append(shared_daemon, sid, [{"type": "user_message", "text": "which port?"}])
    in_a = build(shared_daemon, sessionId=a, query="port")
    in_b = build(shared_daemon, sessionId=b, query="port")
    assert "8123" in str(in_a["segments"])
    assert "8123" not in str(in_b["segments"])
    assert all(
        c["sourceId"] != f"memory:{entry['id']}" or not c["included"] for c in in_b["trace"]["candidates"]
    )


def test_already_shown_memory_is_not_repeated_until_it_changes(shared_daemon: DaemonProcess) -> None:
    """Within a session, an entry shown once is not repeated; after an edit it is shown again."""
    shared_daemon.call("set_settings", {"workspace": ws(shared_daemon), "agentReadEnabled": True})
    entry = shared_daemon.call(
        "add_entry",
        {"workspace": ws(shared_daemon), "title": "Port", "content": "The API listens on port 9000."},
    )["entry"]
    sid = open_session(shared_daemon)
    append(shared_daemon, sid, [{"type": "user_message", "text": "what port?"}])
    first = build(shared_daemon, sessionId=sid, query="port")
    assert "9000" in str(first["segments"])
    append(
        shared_daemon,
        sid,
        [
            {"type": "assistant_message", "text": "9000"},
            {"type": "user_message", "text": "and the port again?"},
        ],
    )
    second = build(shared_daemon, sessionId=sid, query="port")
    assert "9000" not in str(second["segments"])
    reasons = {c["sourceId"]: c.get("reason") for c in second["trace"]["candidates"]}
    assert reasons[f"memory:{entry['id']}"] == "already_shown"
    shared_daemon.call(
        "update_entry",
        {"workspace": ws(shared_daemon), "id": entry["id"], "content": "The API listens on port 9100."},
    )
    third = build(shared_daemon, sessionId=sid, query="port")
    assert "9100" in str(third["segments"])
    manifest = shared_daemon.call("get_manifest", {"workspace": ws(shared_daemon), "sessionId": sid})
    assert manifest["callId"] == third["callId"]


def test_recall_is_off_by_default_and_on_with_the_setting(shared_daemon: DaemonProcess) -> None:
    """Recall needs historyRecallEnabled; then it finds another session's turn with its ref."""
    old = open_session(shared_daemon)
    append(
        shared_daemon,
        old,
        [
            {"type": "user_message", "text": "The staging database is db-7."},
            {"type": "assistant_message", "text": "Noted."},
        ],
    )
    new = open_session(shared_daemon)
    append(shared_daemon, new, [{"type": "user_message", "text": "which staging database?"}])
    assert "recall" not in kinds(build(shared_daemon, sessionId=new, query="staging database"))
    shared_daemon.call("set_settings", {"workspace": ws(shared_daemon), "historyRecallEnabled": True})
    pack = build(shared_daemon, sessionId=new, query="staging database")
    recall = [s for s in pack["segments"] if s["kind"] == "recall"]
    assert recall and "db-7" in recall[0]["text"]
    assert any(ref.startswith(f"event:{old}:") for ref in recall[0]["sourceIds"])


def test_recall_never_returns_incognito_events(shared_daemon: DaemonProcess) -> None:
    """Events of an incognito session never appear in another session's recall."""
    shared_daemon.call("set_settings", {"workspace": ws(shared_daemon), "historyRecallEnabled": True})
    secret_session = open_session(shared_daemon, incognito=True)
    append(
        shared_daemon, secret_session, [{"type": "user_message", "text": "the vault code is zebra-quartz-42"}]
    )
    sid = open_session(shared_daemon)
    append(shared_daemon, sid, [{"type": "user_message", "text": "what is the vault code?"}])
    pack = build(shared_daemon, sessionId=sid, query="vault code zebra quartz")
    assert "zebra" not in str(pack)

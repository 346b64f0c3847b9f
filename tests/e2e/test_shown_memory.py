"""What a session was shown of memory, across packs, restarts, compactions and incognito
sessions: the fill goes on where the session's earlier packs stopped, never repeating an
unchanged entry until a compaction."""

from __future__ import annotations

from typing import Any

from tests.e2e.sessions_support import append, open_session, scripted_turns
from tests.support import DaemonProcess

BUDGET = 1200


def ws(d: DaemonProcess) -> str:
    return str(d.workspace)


def shown(d: DaemonProcess, sid: str) -> list[str]:
    """The memory refs one pack without a query shows in the session."""
    pack: dict[str, Any] = d.call(
        "build_context", {"workspace": ws(d), "sessionId": sid, "budgetTokens": BUDGET}
    )
    refs = [ref for s in pack["segments"] if s["kind"] == "memory" for ref in s["sourceIds"]]
    return refs


def seed(d: DaemonProcess, count: int = 40) -> None:
    d.call("set_settings", {"workspace": ws(d), "agentReadEnabled": True})
    for n in range(count):
        d.call(
            "add_entry",
            {
                "workspace": ws(d),
                "title": f"Fact {n}",
                "content": f"Service {n} runs on host-{n} and owns the table t{n} with its archive.",
            },
        )


def test_the_fill_goes_on_across_packs_a_restart_and_starts_over_after_a_compaction(
    daemon: DaemonProcess,
) -> None:
    """Each pack fills with entries the session was not shown; a restart keeps that (it is
    read again from the ledger), a repeat of the latest call sees what it saw, and after a
    compaction the session is shown its first entries again."""
    seed(daemon)
    sid = open_session(daemon)
    append(daemon, sid, scripted_turns(3))
    first = shown(daemon, sid)
    append(daemon, sid, scripted_turns(1, start=3))
    second = shown(daemon, sid)
    assert first and second and not set(first) & set(second)
    daemon.restart()
    append(daemon, sid, scripted_turns(1, start=4))
    third = shown(daemon, sid)
    assert third and not set(third) & (set(first) | set(second))
    assert shown(daemon, sid) == third  # the same call again: what it saw
    append(daemon, sid, scripted_turns(1, start=5))
    fourth = shown(daemon, sid)
    assert fourth and not set(fourth) & (set(first) | set(second) | set(third))
    daemon.call(
        "compact", {"workspace": ws(daemon), "sessionId": sid, "mode": "checkpoint", "keepRecentTokens": 200}
    )
    append(daemon, sid, scripted_turns(1, start=6))
    after = shown(daemon, sid)
    assert after and after[0] == first[0]


def test_an_incognito_session_neither_sees_nor_moves_another_sessions_fill(daemon: DaemonProcess) -> None:
    """An incognito session's packs hold no memory and leave what other sessions were shown
    as it was: their fill goes on where it stopped."""
    seed(daemon)
    sid = open_session(daemon)
    append(daemon, sid, scripted_turns(2))
    first = shown(daemon, sid)
    hidden = open_session(daemon, incognito=True)
    append(daemon, hidden, scripted_turns(2))
    assert shown(daemon, hidden) == []
    assert shown(daemon, hidden) == []
    append(daemon, sid, scripted_turns(1, start=2))
    second = shown(daemon, sid)
    assert first and second and not set(first) & set(second)


def test_an_edited_entry_is_shown_again_though_the_session_saw_it(daemon: DaemonProcess) -> None:
    """An entry the session was shown comes back once its text changed, even when it is
    first in fill order, behind entries still shown as they are."""
    seed(daemon, 12)
    sid = open_session(daemon)
    append(daemon, sid, scripted_turns(2))
    first = shown(daemon, sid)
    append(daemon, sid, scripted_turns(1, start=2))
    shown(daemon, sid)
    entry_id = first[0].removeprefix("memory:")
    daemon.call(
        "update_entry", {"workspace": ws(daemon), "id": entry_id, "content": "Service moved to host-99."}
    )
    append(daemon, sid, scripted_turns(1, start=3))
    assert first[0] in shown(daemon, sid)

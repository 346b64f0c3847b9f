"""Typed memory the query's words do not find, over the socket: the order it fills leftover
room in, the room it gets before other sessions' excerpts, the whole-memory boundary, and
the built-in bridge from a question's words to an entry's."""

from __future__ import annotations

from typing import Any

from tests.e2e.test_memory_selection import (
    allocation,
    build,
    enable,
    hand_typed,
    memory_rows,
    record_session,
    shown_titles,
    write_memory,
)
from tests.support import DaemonProcess

# Forty entries alike (one line each, typed in one save): which show is the file's order.
ALIKE = [(f"Fact {n:02d}", f"Standing note number {n} about the project.") for n in range(40)]


def memory_segment(pack: dict[str, Any]) -> dict[str, Any] | None:
    return next((s for s in pack["segments"] if s["kind"] == "memory"), None)


def test_alike_entries_fill_leftover_room_from_the_top_of_the_file(shared_daemon: DaemonProcess) -> None:
    """Entries of equal confidence and date that do not all fit are shown from the top of
    MEMORY.md down, not in the order of their ids."""
    d = shared_daemon
    write_memory(d, hand_typed(ALIKE))
    enable(d)
    sid = record_session(d)
    pack = build(d, sessionId=sid, budgetTokens=1500)
    shown = shown_titles(pack)
    assert 0 < len(shown) < len(ALIKE)
    assert shown == {title for title, _ in ALIKE[: len(shown)]}


def test_memory_shown_whole_when_its_rendered_size_is_exactly_the_small_share(
    shared_daemon: DaemonProcess,
) -> None:
    """When the memory segment as rendered is exactly the small-memory share (half the
    budget), every entry is shown, though the entries counted one by one cost a little more."""
    d = shared_daemon
    write_memory(d, hand_typed(ALIKE[:12]))
    enable(d)
    whole = memory_segment(build(d, budgetTokens=20_000))
    assert whole is not None and len(whole["sourceIds"]) == 12
    budget = 2 * whole["tokens"]
    pack = build(d, sessionId=record_session(d), budgetTokens=budget)
    segment = memory_segment(pack)
    assert segment is not None
    assert len(segment["sourceIds"]) == 12
    assert segment["tokens"] <= budget // 2


def test_typed_memory_fills_the_small_share_before_other_sessions_excerpts_grow(
    shared_daemon: DaemonProcess,
) -> None:
    """With many entries matching nothing and another session's turns matching the query,
    memory fills up to the small-memory share before recall takes more than its own cap."""
    d = shared_daemon
    entries = [(f"Note {n:03d}", f"Standing remark {n} kept by the owner.") for n in range(120)]
    write_memory(d, hand_typed(entries))
    enable(d, historyRecallEnabled=True)
    workspace = str(d.workspace)
    d.call("open_session", {"workspace": workspace, "sessionId": "earlier"})
    chatter = [
        {"type": "user_message", "text": f"turn {i}: the deploy pipeline stalled again at the gate"}
        for i in range(60)
    ]
    d.call("append_events", {"workspace": workspace, "sessionId": "earlier", "events": chatter})
    sid = d.call("open_session", {"workspace": workspace})["sessionId"]
    d.call(
        "append_events",
        {"workspace": workspace, "sessionId": sid, "events": [{"type": "user_message", "text": "hi"}]},
    )
    budget = 1500
    pack = build(d, sessionId=sid, query="why did the deploy pipeline stall?", budgetTokens=budget)
    assert allocation(pack, "recall")["used"] > 0
    memory = allocation(pack, "memory")
    one_entry = max(r["tokens"] for r in memory_rows(pack) if r["included"])
    assert memory["used"] >= budget // 2 - 2 * one_entry


def test_a_question_finds_its_entry_through_the_kind_of_thing_it_names(shared_daemon: DaemonProcess) -> None:
    """Among 120 entries, "which editor?" finds the entry that only says Emacs, and it
    ranks below an entry that has the word itself."""
    d = shared_daemon
    fillers = [(f"Note {n:03d}", f"Standing remark {n} kept by the owner.") for n in range(118)]
    targets = [
        ("Writing setup", "Sam works in Emacs with Doom and evil mode."),
        ("Markdown", "The docs editor wraps lines at 100 columns."),
    ]
    write_memory(d, hand_typed(fillers[:60] + targets + fillers[60:]))
    enable(d)
    pack = build(d, query="which editor does he prefer?", budgetTokens=1500)
    rows = {r["title"]: r for r in memory_rows(pack)}
    assert rows["Writing setup"]["included"]
    assert 0 < rows["Writing setup"]["parts"]["bm25"] < rows["Markdown"]["parts"]["bm25"]


def test_a_member_does_not_bring_its_siblings(shared_daemon: DaemonProcess) -> None:
    """Asking about Python matches an entry about languages but not one about Java."""
    d = shared_daemon
    write_memory(
        d,
        hand_typed(
            [("Legacy", "The old monolith needs Java 11."), ("Stack", "Two languages at most per service.")]
        ),
    )
    enable(d)
    pack = build(d, query="python", budgetTokens=1500)
    rows = {r["title"]: r for r in memory_rows(pack)}
    assert rows["Stack"]["parts"]["bm25"] > 0
    assert rows["Legacy"]["parts"]["bm25"] == 0

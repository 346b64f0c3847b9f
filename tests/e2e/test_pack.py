"""The pack an agent gets with the default call: budget flow, whole memories, dates, manifests,
the session cap, confidence and safe mode in the trace — over the socket."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from tests.e2e.sessions_support import append, open_session
from tests.support import DaemonProcess

DAY_MS = 86_400_000


def ws(d: DaemonProcess) -> str:
    return str(d.workspace)


def build(d: DaemonProcess, **kw: Any) -> dict[str, Any]:
    result: dict[str, Any] = d.call("build_context", {"workspace": ws(d), **kw})
    return result


def segment(pack: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((s for s in pack["segments"] if s["kind"] == kind), None)


def memory_file(d: DaemonProcess) -> Path:
    folder = d.workspace / "memory"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder / "MEMORY.md"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def test_fresh_session_default_pack_spends_the_budget_on_recall(shared_daemon: DaemonProcess) -> None:
    """A fresh session's 2,000-token default pack with recall on spends at least 70 % of it."""
    shared_daemon.call(
        "set_settings",
        {"workspace": ws(shared_daemon), "historyRecallEnabled": True, "agentReadEnabled": True},
    )
    old = open_session(shared_daemon)
    append(
        shared_daemon,
        old,
        [
            {
                "type": "user_message" if i % 2 == 0 else "assistant_message",
                "text": f"turn {i}: the deploy pipeline for service {i} runs on the staging cluster "
                f"after the canary check number {i} passes",
            }
            for i in range(200)
        ],
    )
    fresh = open_session(shared_daemon)
    pack = build(shared_daemon, sessionId=fresh, query="how does the deploy pipeline run?", budgetTokens=2000)
    recall = segment(pack, "recall")
    assert recall is not None and pack["totalTokens"] >= 0.7 * 2000
    allocation = {a["kind"]: a for a in pack["trace"]["allocation"]}
    assert allocation["recall"]["flowed"] > 0 and allocation["recall"]["used"] == recall["tokens"]
    assert pack["totalTokens"] <= 2000


def test_sixteen_small_entries_without_a_query_are_all_shown(shared_daemon: DaemonProcess) -> None:
    """Top-K is not a fixed cut: with room for all 16 entries, all 16 are shown."""
    shared_daemon.call("set_settings", {"workspace": ws(shared_daemon), "agentReadEnabled": True})
    for i in range(16):
        shared_daemon.call(
            "add_entry",
            {"workspace": ws(shared_daemon), "title": f"Fact {i}", "content": f"Small fact number {i}."},
        )
    pack = build(shared_daemon, budgetTokens=8000)
    memory = segment(pack, "memory")
    assert memory is not None and len(memory["sourceIds"]) == 16
    assert "top_k" not in pack["trace"]["dropped"]


def test_a_large_working_state_is_whole_at_a_large_budget(shared_daemon: DaemonProcess) -> None:
    """Six note sections of ~1,000 tokens each reach the model whole at a 100k budget."""
    sid = open_session(shared_daemon)
    append(shared_daemon, sid, [{"type": "user_message", "text": "where are we?"}])
    sections = [
        "Current State",
        "Task specification",
        "Files and Functions",
        "Workflow",
        "Errors & Corrections",
        "Learnings",
    ]
    notes = {
        name: f"{name} marker.\n" + "\n".join(f"- step {i} of {name} was done carefully" for i in range(110))
        for name in sections
    }
    shared_daemon.call(
        "set_working_state", {"workspace": ws(shared_daemon), "sessionId": sid, "notes": notes}
    )
    pack = build(shared_daemon, sessionId=sid, budgetTokens=100_000)
    state = segment(pack, "working_state")
    assert state is not None and state["tokens"] > 5_000
    for name in sections:
        assert f"{name} marker." in state["text"] and f"step 109 of {name}" in state["text"]
    assert "cut to fit" not in state["text"]


def test_a_just_typed_entry_carries_no_staleness_caveat(shared_daemon: DaemonProcess) -> None:
    """An entry typed by hand is dated from when the daemon first saw it; its text is not rewritten."""
    shared_daemon.call("set_settings", {"workspace": ws(shared_daemon), "agentReadEnabled": True})
    path = memory_file(shared_daemon)
    text = "# Maka Memory\n\n## Deploy day\nWe deploy on Tuesdays only.\n"
    path.write_text(text, encoding="utf-8")
    before = now_ms()
    pack = build(shared_daemon, budgetTokens=4000)
    memory = segment(pack, "memory")
    assert memory is not None and "Tuesdays" in memory["text"]
    assert "age unknown" not in memory["text"] and "may be outdated" not in memory["text"]
    state = shared_daemon.call("read_state", {"workspace": ws(shared_daemon), "includeEntries": True})
    (entry,) = state["entries"]
    assert entry["createdAt"] >= before - 60_000 and entry["updatedAt"] >= entry["createdAt"]
    assert path.read_text(encoding="utf-8") == text


def test_a_hand_edit_bumps_updated_at(shared_daemon: DaemonProcess) -> None:
    """Editing an old entry by hand makes it current: updatedAt moves to the edit, no caveat."""
    shared_daemon.call("set_settings", {"workspace": ws(shared_daemon), "agentReadEnabled": True})
    old = now_ms() - 40 * DAY_MS
    path = memory_file(shared_daemon)
    comment = (
        f"<!-- maka-memory: id=port1 origin=manual createdAt={old} updatedAt={old} status=active tags= -->"
    )
    path.write_text(f"# Maka Memory\n\n## Port\n{comment}\nThe API listens on 9000.\n")
    stale = segment(build(shared_daemon, budgetTokens=4000), "memory")
    assert stale is not None and "may be outdated" in stale["text"]
    edited = f"# Maka Memory\n\n## Port\n{comment}\nThe API listens on 9100.\n"
    path.write_text(edited)
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    fresh = segment(build(shared_daemon, budgetTokens=4000), "memory")
    assert fresh is not None and "9100" in fresh["text"] and "may be outdated" not in fresh["text"]
    (entry,) = shared_daemon.call("read_state", {"workspace": ws(shared_daemon), "includeEntries": True})[
        "entries"
    ]
    assert entry["createdAt"] == old and entry["updatedAt"] > old + 39 * DAY_MS
    assert path.read_text() == edited
    shared_daemon.call("update_entry", {"workspace": ws(shared_daemon), "id": "port1", "tags": ["api"]})
    assert f"createdAt={old}" in path.read_text()


def test_the_manifest_lists_the_history_messages_returned(shared_daemon: DaemonProcess) -> None:
    """get_manifest for a call names every message of that call by its ref."""
    sid = open_session(shared_daemon)
    append(
        shared_daemon,
        sid,
        [
            {"type": "user_message", "text": "first question"},
            {"type": "assistant_message", "text": "first answer"},
            {"type": "tool_call", "text": '{"path": "a.py"}', "toolCallId": "c1", "toolName": "read"},
            {"type": "tool_result", "text": "print(1)", "toolCallId": "c1", "toolName": "read"},
            {"type": "user_message", "text": "second question"},
        ],
    )
    pack = build(shared_daemon, sessionId=sid, budgetTokens=4000)
    refs = [m["sourceId"] for m in pack["messages"]]
    assert len(refs) == 4  # the tool call joins the assistant message before it
    manifest = shared_daemon.call(
        "get_manifest", {"workspace": ws(shared_daemon), "sessionId": sid, "callId": pack["callId"]}
    )
    listed = [item["sourceId"] for item in manifest["items"]]
    assert all(ref in listed for ref in refs)
    assert all(item["tokens"] > 0 for item in manifest["items"] if item["sourceId"] in refs)


def test_the_session_memory_cap_holds_over_thirty_calls(shared_daemon: DaemonProcess) -> None:
    """Memory shown to one session stays within 60 KiB over 30 calls; a changed entry still shows."""
    shared_daemon.call("set_settings", {"workspace": ws(shared_daemon), "agentReadEnabled": True})
    ids = []
    for i in range(110):
        body = f"Entry {i} says: " + " ".join(f"fact{i}-{k}" for k in range(90))
        ids.append(
            shared_daemon.call(
                "add_entry", {"workspace": ws(shared_daemon), "title": f"Note {i}", "content": body}
            )["entry"]["id"]
        )
    sid = open_session(shared_daemon)
    shown = 0
    last: dict[str, Any] = {}
    for turn in range(30):
        append(shared_daemon, sid, [{"type": "user_message", "text": f"turn {turn}"}])
        last = build(shared_daemon, sessionId=sid, budgetTokens=8000)
        shown += sum(
            c["bytes"] for c in last["trace"]["candidates"] if c["kind"] == "memory" and c["included"]
        )
    assert 30_000 < shown <= 60 * 1024
    assert last["trace"]["memorySessionBytes"] == shown
    assert last["trace"]["dropped"].get("session_cap", 0) > 0
    first = ids[-1]  # the newest entry was shown first
    shared_daemon.call("update_entry", {"workspace": ws(shared_daemon), "id": first, "content": "Changed!"})
    append(shared_daemon, sid, [{"type": "user_message", "text": "one more"}])
    after = build(shared_daemon, sessionId=sid, budgetTokens=8000)
    memory = segment(after, "memory")
    assert memory is not None and memory["sourceIds"] == [f"memory:{first}"]


def test_the_session_cap_is_configurable(short_tmp: Path) -> None:
    """MAKAD_SESSION_MEMORY_CAP_BYTES sets the cap."""
    d = DaemonProcess(short_tmp, env={"MAKAD_SESSION_MEMORY_CAP_BYTES": "2000"})
    d.start()
    try:
        d.call("set_settings", {"workspace": ws(d), "agentReadEnabled": True})
        for i in range(20):
            d.call("add_entry", {"workspace": ws(d), "title": f"N{i}", "content": "x " * 200})
        sid = open_session(d)
        for turn in range(5):
            append(d, sid, [{"type": "user_message", "text": f"turn {turn}"}])
            pack = build(d, sessionId=sid, budgetTokens=8000)
        assert 0 < pack["trace"]["memorySessionBytes"] <= 2000
    finally:
        d.stop()


def test_past_the_session_cap_a_newly_relevant_entry_still_shows(short_tmp: Path) -> None:
    """Past the cap an entry the query makes relevant, not shown yet, is shown; the others
    not shown yet are left out as session_cap."""
    d = DaemonProcess(short_tmp, env={"MAKAD_SESSION_MEMORY_CAP_BYTES": "2000"})
    d.start()
    try:
        d.call("set_settings", {"workspace": ws(d), "agentReadEnabled": True})
        cluster = d.call(
            "add_entry",
            {
                "workspace": ws(d),
                "title": "Cluster",
                "content": "The cluster runs kubernetes on three nodes. " + "It is patched monthly. " * 12,
            },
        )["entry"]["id"]
        for i in range(10):
            d.call("add_entry", {"workspace": ws(d), "title": f"Filler {i}", "content": "x " * 100})
        sid = open_session(d)
        append(d, sid, [{"type": "user_message", "text": "hello"}])
        first = build(d, sessionId=sid, budgetTokens=8000)
        reasons = {c["sourceId"]: c["reason"] for c in first["trace"]["candidates"] if c["kind"] == "memory"}
        assert reasons[f"memory:{cluster}"] == "session_cap"
        assert 0 < first["trace"]["memorySessionBytes"] <= 2000
        append(d, sid, [{"type": "user_message", "text": "how many kubernetes nodes?"}])
        asked = build(d, sessionId=sid, budgetTokens=8000, query="how many kubernetes nodes?")
        memory = segment(asked, "memory")
        assert memory is not None and memory["sourceIds"] == [f"memory:{cluster}"]
        left = [c for c in asked["trace"]["candidates"] if c["kind"] == "memory" and not c["included"]]
        assert left and all(c["reason"] in ("session_cap", "already_shown") for c in left)
        assert any(c["reason"] == "session_cap" for c in left)
        assert asked["trace"]["memorySessionBytes"] > 2000
    finally:
        d.stop()


def test_confidence_differs_by_author_evidence_and_age(shared_daemon: DaemonProcess) -> None:
    """Hand-typed, an approved agent proposal with two refs and a year-old import differ; the
    agent's memory lines show it and the trace says why."""
    w = ws(shared_daemon)
    shared_daemon.call("set_settings", {"workspace": w, "agentReadEnabled": True, "extractToolEnabled": True})
    sid = open_session(shared_daemon)
    append(
        shared_daemon,
        sid,
        [
            {"type": "user_message", "text": "we use postgres 16"},
            {"type": "assistant_message", "text": "noted: postgres 16"},
        ],
    )
    typed = shared_daemon.call(
        "add_entry", {"workspace": w, "title": "Editor", "content": "The user edits in neovim."}
    )["entry"]["id"]
    proposal = shared_daemon.call(
        "propose",
        {
            "workspace": w,
            "title": "Database",
            "content": "The project runs postgres 16.",
            "sourceRefs": [f"event:{sid}:1", f"event:{sid}:2"],
        },
    )
    approved = shared_daemon.call("approve", {"workspace": w, "ids": [proposal["proposal"]["id"]]})[
        "approved"
    ][0]
    agent = approved["entry"]["id"]
    year_ago = now_ms() - 400 * DAY_MS
    path = memory_file(shared_daemon)
    path.write_text(
        path.read_text() + "\n## Old tool\n<!-- maka-memory: id=imp1 origin=imported "
        f"createdAt={year_ago} updatedAt={year_ago} status=active tags= -->\n"
        "The team used svn.\n"
    )
    state = shared_daemon.call(
        "read_state", {"workspace": w, "includeEntries": True, "includeConfidence": True}
    )
    assert shared_daemon.call("read_state", {"workspace": w, "includeEntries": True})["confidence"] is None
    levels = {key: state["confidence"][key]["level"] for key in (typed, agent, "imp1")}
    assert levels == {typed: "high", agent: "medium", "imp1": "low"}
    scores = [state["confidence"][key]["score"] for key in (typed, agent, "imp1")]
    assert scores[0] > scores[1] > scores[2]
    assert "2 source refs" in state["confidence"][agent]["reason"]
    pack = build(shared_daemon, budgetTokens=8000)
    memory = segment(pack, "memory")
    assert memory is not None
    assert f"memory:{typed} · confidence high" in memory["text"]
    assert f"memory:{agent} · confidence medium" in memory["text"]
    assert "memory:imp1 · confidence low" in memory["text"]
    traced = {c["sourceId"]: c["confidence"] for c in pack["trace"]["candidates"] if c["kind"] == "memory"}
    assert "over a year" in traced["memory:imp1"]["reason"]
    assert "confidence=" not in path.read_text()  # derived, never written into the file


def test_a_user_set_confidence_wins(shared_daemon: DaemonProcess) -> None:
    """confidence= in an entry's comment (which V0.1 readers ignore) overrides the derivation."""
    shared_daemon.call("set_settings", {"workspace": ws(shared_daemon), "agentReadEnabled": True})
    memory_file(shared_daemon).write_text(
        "# Maka Memory\n\n## Hunch\n<!-- maka-memory: id=h1 origin=manual createdAt=1 "
        "updatedAt=1 status=active tags= confidence=low -->\nMaybe it is DNS.\n"
    )
    state = shared_daemon.call(
        "read_state", {"workspace": ws(shared_daemon), "includeEntries": True, "includeConfidence": True}
    )
    assert state["confidence"]["h1"] == {"level": "low", "score": 0.3, "reason": "set by the user"}


def test_safe_mode_and_an_unreadable_file_are_in_the_trace(short_tmp: Path) -> None:
    """Memory skipped for being over its cap, or unreadable, is named in trace.skipped."""
    d = DaemonProcess(short_tmp, env={"LOCAL_MEMORY_MAX_BYTES": "1000"})
    d.start()
    try:
        d.call("set_settings", {"workspace": ws(d), "agentReadEnabled": True})
        path = memory_file(d)
        path.write_text("# Maka Memory\n\n## Big\n" + "word " * 400 + "\n")
        pack = build(d, budgetTokens=4000)
        assert [(s["source"], s["reason"]) for s in pack["trace"]["skipped"]] == [("memory", "safe_mode")]
        assert "1000-byte cap" in pack["trace"]["skipped"][0]["message"]
        path.unlink()
        path.mkdir()  # not a regular file: the daemon cannot read it
        pack = build(d, budgetTokens=4000)
        assert [s["reason"] for s in pack["trace"]["skipped"]] == ["unreadable"]
        assert segment(pack, "memory") is None
    finally:
        d.stop()

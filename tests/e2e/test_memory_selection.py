"""What build_context shows of memory, over the socket: small memory whole, leftover room
filled by confidence, pinned entries first and never cut silently."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from maka.errors import RemoteError
from tests.support import DaemonProcess

# Ten memories as a new user types them into MEMORY.md: a heading and a line, no comment.
HAND_TYPED = [
    ("Package manager", "Prefers pnpm over npm: always pnpm; never npm or yarn."),
    ("Editor", "Edits in helix with modal keys; no VS Code suggestions."),
    ("Indentation", "Four spaces in Python, two in TypeScript and YAML."),
    ("Commit style", "Conventional commits, imperative mood, subject under 72 characters."),
    ("Test runner", "Runs pytest with -n auto; vitest on the web side."),
    ("Deploys", "Releases go out on Tuesday mornings, never on Fridays."),
    ("Reviewer", "Ana reviews database migrations before they merge."),
    ("Spelling", "Writes British English in docs: colour, organise."),
    ("Secrets", "Credentials live in the pass store, never in dotenv files."),
    ("Time zone", "Works from Lisbon; meetings after 10:00 WET only."),
]


def ws(d: DaemonProcess) -> str:
    return str(d.workspace)


def write_memory(d: DaemonProcess, sections: list[str]) -> Path:
    path = d.workspace / "memory" / "MEMORY.md"
    path.parent.mkdir(exist_ok=True)
    path.write_text("# Maka Memory\n\n" + "\n\n".join(sections) + "\n", encoding="utf-8")
    return path


def hand_typed(entries: list[tuple[str, str]]) -> list[str]:
    return [f"## {title}\n{content}" for title, content in entries]


def enable(d: DaemonProcess, **more: Any) -> None:
    d.call("set_settings", {"workspace": ws(d), "agentReadEnabled": True, **more})


def record_session(d: DaemonProcess, turns: int = 12) -> str:
    """A session whose history holds more than the pack can take."""
    sid: str = d.call("open_session", {"workspace": ws(d)})["sessionId"]
    events = []
    for i in range(turns):
        events.append({"type": "user_message", "text": f"step {i}: " + "rebase the feature branch " * 12})
        events.append({"type": "assistant_message", "text": f"done {i}: " + "resolved the conflicts " * 12})
    d.call("append_events", {"workspace": ws(d), "sessionId": sid, "events": events})
    return sid


def build(d: DaemonProcess, **kw: Any) -> dict[str, Any]:
    params = {"workspace": ws(d), "budgetTokens": kw.pop("budgetTokens", 1500), **kw}
    result: dict[str, Any] = d.call("build_context", params)
    return result


def memory_rows(pack: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in pack["trace"]["candidates"] if c["kind"] == "memory"]


def shown_titles(pack: dict[str, Any]) -> set[str]:
    return {c["title"] for c in memory_rows(pack) if c["included"]}


def allocation(pack: dict[str, Any], kind: str) -> dict[str, Any]:
    found: dict[str, Any] = next(a for a in pack["trace"]["allocation"] if a["kind"] == kind)
    return found


def test_ten_hand_typed_entries_sharing_no_word_with_the_query_are_all_shown(
    shared_daemon: DaemonProcess,
) -> None:
    """Ten hand-typed entries, none sharing a word with the query, all reach a 1,500-token pack
    while history also wants room."""
    d = shared_daemon
    write_memory(d, hand_typed(HAND_TYPED))
    enable(d)
    sid = record_session(d)
    query = "quarterly offsite agenda?"
    words = set(re.findall(r"\w+", query.lower()))
    assert not any(words & set(re.findall(r"\w+", f"{t} {c}".lower())) for t, c in HAND_TYPED)
    pack = build(d, sessionId=sid, query=query)
    assert shown_titles(pack) == {title for title, _ in HAND_TYPED}
    assert all(c["parts"]["bm25"] == 0 for c in memory_rows(pack))
    assert pack["messages"], "history keeps its share"
    assert allocation(pack, "history")["truncated"], "the session holds more than the pack"
    assert pack["totalTokens"] <= 1500


def test_the_pnpm_entry_answers_a_paraphrased_question(shared_daemon: DaemonProcess) -> None:
    """'which package manager for the frontend?' at 1,500 tokens shows the pnpm entry."""
    d = shared_daemon
    write_memory(d, hand_typed(HAND_TYPED))
    enable(d)
    for query in ("which package manager for the frontend?", "set up the JS deps for web"):
        pack = build(d, sessionId=record_session(d), query=query)
        memory = next(s for s in pack["segments"] if s["kind"] == "memory")
        assert "Prefers pnpm over npm" in memory["text"], query
        assert "irrelevant" not in pack["trace"]["dropped"]


def test_asking_about_python_does_not_match_the_java_entry(shared_daemon: DaemonProcess) -> None:
    """An entry about the JDK and the JVM matches no word of a question about Python."""
    d = shared_daemon
    write_memory(
        d,
        hand_typed(
            [
                ("Billing service", "Runs on the JDK 17; tune the JVM heap in deploy/billing.yaml."),
                ("Interpreter", "Scripts need CPython 3.12 from the deadsnakes packages."),
            ]
        ),
    )
    enable(d)
    pack = build(d, sessionId=record_session(d), query="which python version do we target?")
    bm25 = {c["title"]: c["parts"]["bm25"] for c in memory_rows(pack)}
    assert bm25["Interpreter"] > 0
    assert bm25.get("Billing service", 0) == 0


def entry_section(i: int, *, confidence: str, updated: int, tags: str = "") -> str:
    tag_token = f" tags={tags}" if tags else ""
    return (
        f"## Note {i:03d}\n"
        f"<!-- maka-memory: id={i:016x} origin=manual createdAt={updated} updatedAt={updated} "
        f"status=active{tag_token} confidence={confidence} -->\n"
        f"Remember item {i:03d}: the lorem ipsum dolor notes for part {i} of the catalogue."
    )


DAY_MS = 86_400_000
NOW_MS = 1_760_000_000_000


def two_hundred(pinned: tuple[int, ...] = ()) -> list[str]:
    """200 entries, confidence cycling low, medium, high and set by the user, newer by index."""
    levels = ["0.3", "0.6", "0.9", "0.5"]
    return [
        entry_section(
            i,
            confidence=levels[i % 4],
            updated=NOW_MS - (200 - i) * DAY_MS // 100,
            tags="pinned" if i in pinned else "",
        )
        for i in range(200)
    ]


def fill_rank(i: int) -> tuple[float, int]:
    levels = [0.3, 0.6, 0.9, 0.5]
    return (-levels[i % 4], -i)  # highest confidence, then the most recently updated


def test_leftover_budget_goes_to_unmatched_entries_by_confidence(shared_daemon: DaemonProcess) -> None:
    """200 entries, a query none of them matches: the room left is spent on the most trusted
    entries, newest first among equals, up to the budget."""
    d = shared_daemon
    write_memory(d, two_hundred())
    enable(d)
    pack = build(d, query="quarterly offsite agenda", budgetTokens=4000)
    shown = [int(c["title"].split()[1]) for c in memory_rows(pack) if c["included"]]
    assert len(shown) > 20
    expected = sorted(range(200), key=fill_rank)[: len(shown)]
    assert shown == expected
    largest = max(c["tokens"] for c in memory_rows(pack))
    # Blocks are counted one by one (a little over their joined cost): at most two blocks' room.
    assert 4000 - pack["totalTokens"] < 2 * largest
    assert {c["reason"] for c in memory_rows(pack) if not c["included"]} <= {"budget"}


def test_leftover_share_is_filled_beside_a_long_history(shared_daemon: DaemonProcess) -> None:
    """With a session holding more than the pack, memory's own share still carries the most
    trusted entries, and history keeps the rest."""
    d = shared_daemon
    write_memory(d, two_hundred())
    enable(d)
    sid = record_session(d, turns=30)
    pack = build(d, sessionId=sid, query="quarterly offsite agenda", budgetTokens=1500)
    shown = [int(c["title"].split()[1]) for c in memory_rows(pack) if c["included"]]
    assert shown and shown == sorted(range(200), key=fill_rank)[: len(shown)]
    memory = allocation(pack, "memory")
    assert memory["used"] <= 300 + 60
    assert allocation(pack, "history")["used"] >= 1500 - 300 - 60


# ----------------------------------------------------------------- pinned ---


def test_pinned_entries_are_always_in_the_pack(shared_daemon: DaemonProcess) -> None:
    """Three pinned entries among 200, a query matching other entries, a long history: the
    pinned ones are shown, first, whatever the budget."""
    d = shared_daemon
    write_memory(d, two_hundred(pinned=(3, 100, 197)))
    enable(d)
    for budget in (600, 1500, 8000):
        pack = build(d, sessionId=record_session(d, turns=30), query="catalogue part 42", budgetTokens=budget)
        rows = memory_rows(pack)
        pinned = [c["title"] for c in rows if c.get("pinned")]
        assert sorted(pinned) == ["Note 003", "Note 100", "Note 197"]
        memory = next(s for s in pack["segments"] if s["kind"] == "memory")
        first = [c["sourceId"] for c in rows if c["included"]][:3]
        assert sorted(first) == sorted(c["sourceId"] for c in rows if c.get("pinned"))
        assert memory["sourceIds"][:3] == first


def test_a_pinned_tag_typed_in_the_editor_pins_the_entry(shared_daemon: DaemonProcess) -> None:
    """A hand edit adding tags=pinned to a hand-typed entry (a comment with that token alone)
    pins it: shown first among 200 entries; the file keeps its text as typed."""
    d = shared_daemon
    path = write_memory(d, two_hundred())
    enable(d)
    text = path.read_text(encoding="utf-8")
    typed = "## Standup\n<!-- maka-memory: tags=Pinned -->\nStandup is at 9:15 on weekdays."
    path.write_text(text + "\n" + typed + "\n", encoding="utf-8")
    pack = build(d, query="catalogue part 42", budgetTokens=1500)  # the save is read first
    first = next(c for c in memory_rows(pack) if c["included"])
    assert first["title"] == "Standup" and first["pinned"] is True
    state = d.call("read_state", {"workspace": ws(d), "includeEntries": True})
    assert next(e for e in state["entries"] if e["title"] == "Standup")["tags"] == ["Pinned"]
    assert typed in path.read_text(encoding="utf-8")
    # Editing the tags of an entry the daemon wrote, in place, as vim saves it.
    text = path.read_text(encoding="utf-8")
    assert "tags=" not in text.split("## Note 150")[1].split("\n")[1]
    edited = text.replace(
        "## Note 150\n<!-- maka-memory: ", "## Note 150\n<!-- maka-memory: tags=ops,pinned "
    )
    with path.open("r+", encoding="utf-8") as handle:
        handle.truncate(0)
        handle.write(edited)
    pack = build(d, query="catalogue part 42", budgetTokens=1500)
    pinned = {c["title"] for c in memory_rows(pack) if c.get("pinned") and c["included"]}
    assert pinned == {"Standup", "Note 150"}


def test_over_pinning_is_warned_in_read_state(shared_daemon: DaemonProcess) -> None:
    """Pinned entries needing more than a 1,500-token pack gives them: one warning per entry
    left over, with its line; the pack reports those it leaves out."""
    d = shared_daemon
    path = write_memory(d, two_hundred(pinned=tuple(range(0, 40, 2))))
    enable(d)
    state = d.call("read_state", {"workspace": ws(d)})
    warned = [w for w in state["warnings"] if w["kind"] == "pinned_over_share"]
    assert warned and all("pinned" in w["message"] and "1,500-token" in w["message"] for w in warned)
    lines = path.read_text(encoding="utf-8").splitlines()
    for warning in warned:
        if "line" in warning:
            assert lines[warning["line"] - 1].startswith("## Note ")
            number = int(lines[warning["line"] - 1].split()[-1])
            assert number < 40 and number % 2 == 0
    pack = build(d, sessionId=record_session(d, turns=30), query="quarterly offsite", budgetTokens=1500)
    cut = [c for c in memory_rows(pack) if c.get("pinned") and not c["included"]]
    assert cut and all(c["reason"] == "budget" for c in cut)
    shown = [c for c in memory_rows(pack) if c["included"]]
    assert all(c.get("pinned") for c in shown), "pinned entries take the share before any other"


def test_few_pinned_entries_warn_nothing(shared_daemon: DaemonProcess) -> None:
    """Two pinned entries fit easily: no warning."""
    d = shared_daemon
    write_memory(d, two_hundred(pinned=(5, 6)))
    state = d.call("read_state", {"workspace": ws(d)})
    assert [w for w in state["warnings"] if w["kind"] == "pinned_over_share"] == []


def test_pin_entry_adds_and_removes_only_the_tag(shared_daemon: DaemonProcess) -> None:
    """pin_entry keeps the other tags and the dates; pinning twice writes nothing."""
    d = shared_daemon
    added = d.call(
        "add_entry", {"workspace": ws(d), "title": "Deploys", "content": "Tuesdays.", "tags": ["ops"]}
    )
    entry_id, revision = added["entry"]["id"], added["revision"]
    pinned = d.call("pin_entry", {"workspace": ws(d), "id": entry_id})
    assert pinned["entry"]["tags"] == ["ops", "pinned"] and pinned["revision"] == revision + 1
    assert pinned["entry"]["updatedAt"] == added["entry"]["updatedAt"]
    again = d.call("pin_entry", {"workspace": ws(d), "id": entry_id, "pinned": True})
    assert again["revision"] == pinned["revision"] and again["entry"]["tags"] == ["ops", "pinned"]
    unpinned = d.call("pin_entry", {"workspace": ws(d), "id": entry_id, "pinned": False})
    assert unpinned["entry"]["tags"] == ["ops"]
    history = d.call("memory_history", {"workspace": ws(d), "id": entry_id})
    assert [e["action"] for e in history["events"]][-2:] == ["pinned", "unpinned"]


def test_pin_entry_refuses_bad_input_and_keeps_serving(shared_daemon: DaemonProcess) -> None:
    """An unknown id is not_found, a non-boolean pinned is invalid_params, a stale
    expectedRevision is conflict; nothing is written and the daemon answers on."""
    d = shared_daemon
    added = d.call("add_entry", {"workspace": ws(d), "title": "Keep", "content": "Unchanged."})
    before = (d.workspace / "memory" / "MEMORY.md").read_bytes()
    cases = [
        ({"id": "0" * 16}, "not_found"),
        ({"id": added["entry"]["id"], "pinned": "yes"}, "invalid_params"),
        ({"id": added["entry"]["id"], "expectedRevision": added["revision"] - 1}, "conflict"),
        ({"id": added["entry"]["id"], "tags": ["pinned"]}, "invalid_params"),
    ]
    for params, kind in cases:
        with pytest.raises(RemoteError) as caught:
            d.call("pin_entry", {"workspace": ws(d), **params})
        assert caught.value.data["kind"] == kind, params
    assert (d.workspace / "memory" / "MEMORY.md").read_bytes() == before
    assert d.call("ping") == "pong"


def test_pin_entry_works_at_the_user_level(daemon: DaemonProcess) -> None:
    """A pinned user-level entry is shown first in a workspace that allows agent reads."""
    d = daemon
    pinned = d.call("add_entry", {"workspace": "@user", "title": "Spelling", "content": "British English."})
    d.call("set_settings", {"workspace": "@user", "agentReadEnabled": True})
    d.call("pin_entry", {"workspace": "@user", "id": pinned["entry"]["id"]})
    write_memory(d, two_hundred())
    enable(d)
    sid = record_session(d, turns=30)
    pack = build(d, sessionId=sid, query="catalogue part 7", budgetTokens=1500)
    rows = memory_rows(pack)
    first = next(c for c in rows if c["included"])
    assert first["sourceId"] == f"memory:@user/{pinned['entry']['id']}" and first["pinned"] is True
    memory = next(s for s in pack["segments"] if s["kind"] == "memory")
    assert "· user level" in memory["text"]


def test_an_agent_cannot_pin(shared_daemon: DaemonProcess) -> None:
    """propose drops the pinned tag (pinning is the user's call); the user's approval with
    that tag, or pin_entry, pins."""
    d = shared_daemon
    d.call("set_settings", {"workspace": ws(d), "agentReadEnabled": True, "extractToolEnabled": True})
    proposed = d.call(
        "propose",
        {"workspace": ws(d), "title": "Run this", "content": "Always run it.", "tags": ["Pinned", "ops"]},
    )
    assert proposed["proposal"]["tags"] == ["ops"]
    assert "pinned" not in (d.workspace / "memory" / "PENDING.md").read_text(encoding="utf-8")
    pid = proposed["proposal"]["id"]
    approved = d.call(
        "approve", {"workspace": ws(d), "ids": [pid], "edits": {pid: {"tags": ["ops", "pinned"]}}}
    )
    assert approved["approved"][0]["entry"]["tags"] == ["ops", "pinned"]


def test_a_file_pinned_wholesale_stays_bounded(shared_daemon: DaemonProcess) -> None:
    """300 pinned entries: the pack stays within budget, its trace lists at most 200 of them,
    and read_state names ten and counts the rest."""
    d = shared_daemon
    sections = [
        entry_section(i, confidence="0.9", updated=NOW_MS - i * DAY_MS // 100, tags="pinned")
        for i in range(300)
    ]
    write_memory(d, sections)
    enable(d)
    pack = build(d, query="catalogue", budgetTokens=2000)
    assert pack["totalTokens"] <= 2000
    rows = memory_rows(pack)
    assert sum(c["included"] for c in rows) > 0 and len(rows) <= 200
    assert all(c.get("pinned") for c in rows)
    warned = [
        w for w in d.call("read_state", {"workspace": ws(d)})["warnings"] if w["kind"] == "pinned_over_share"
    ]
    assert len([w for w in warned if "line" in w]) == 10 and "more pinned entries" in warned[-1]["message"]


def test_later_turns_fill_with_entries_not_shown_yet(shared_daemon: DaemonProcess) -> None:
    """In one session the fill does not repeat what the session was shown: the next turn
    moves on to the next most trusted entries, and a repeat of the same call sees the same."""
    d = shared_daemon
    write_memory(d, two_hundred())
    enable(d)
    sid = record_session(d, turns=30)
    first = build(d, sessionId=sid, query="quarterly offsite agenda")
    again = build(d, sessionId=sid, query="quarterly offsite agenda")
    assert again["callId"] == first["callId"] and memory_rows(again) == memory_rows(first)
    d.call(
        "append_events",
        {"workspace": ws(d), "sessionId": sid, "events": [{"type": "user_message", "text": "next"}]},
    )
    second = build(d, sessionId=sid, query="quarterly offsite agenda")
    shown_first = {c["title"] for c in memory_rows(first) if c["included"]}
    shown_second = {c["title"] for c in memory_rows(second) if c["included"]}
    assert shown_first and shown_second and not shown_first & shown_second
    order = [f"Note {i:03d}" for i in sorted(range(200), key=fill_rank)]
    assert max(order.index(t) for t in shown_first) < min(order.index(t) for t in shown_second)


def test_over_pinning_across_both_levels_is_warned_in_the_workspace(daemon: DaemonProcess) -> None:
    """Pinned entries that fit alone in each file but not together in one pack: the
    workspace's read_state warns about those a 1,500-token pack leaves out (its own on their
    lines); the user level's read_state, which packs of no workspace in particular, does not."""
    d = daemon
    rule = "In this repo rule {}: keep the {} module free of global state and side effects."
    habit = "Across projects habit {}: I prefer {} functions, named for what they return."
    mine = [
        (f"Workspace rule {i}", rule.format(i, ["api", "cli", "docs", "ui", "db"][i % 5])) for i in range(11)
    ]
    theirs = [
        (f"My habit {i}", habit.format(i, ["short", "explicit", "typed", "tested", "small"][i % 5]))
        for i in range(11)
    ]
    pin = "<!-- maka-memory: tags=pinned -->"
    write_memory(d, [f"## {title}\n{pin}\n{content}" for title, content in mine])
    enable(d)
    user_path = Path(d.call("read_state", {"workspace": "@user"})["path"])
    user_path.write_text(
        "# Maka Memory\n\n" + "\n\n".join(f"## {t}\n{pin}\n{c}" for t, c in theirs) + "\n", encoding="utf-8"
    )
    d.call("set_settings", {"workspace": "@user", "agentReadEnabled": False})
    for level in ("@user", ws(d)):  # each file alone fits a 1,500-token pack
        state = d.call("read_state", {"workspace": level})
        assert [w for w in state["warnings"] if w["kind"] == "pinned_over_share"] == []
    d.call("set_settings", {"workspace": "@user", "agentReadEnabled": True})
    pack = build(d, sessionId=record_session(d, turns=30), query="what next", budgetTokens=1500)
    cut = {c["title"] for c in memory_rows(pack) if c.get("pinned") and not c["included"]}
    assert cut and all(c["reason"] == "budget" for c in memory_rows(pack) if c["title"] in cut)
    state = d.call("read_state", {"workspace": ws(d)})
    warned = [w for w in state["warnings"] if w["kind"] == "pinned_over_share"]
    named = {title for title, _ in mine + theirs if any(f'"{title}"' in w["message"] for w in warned)}
    assert cut <= named, "every pinned entry a 1,500-token pack leaves out was warned about"
    lines = (d.workspace / "memory" / "MEMORY.md").read_text(encoding="utf-8").splitlines()
    for warning in warned:
        if "line" in warning:
            assert lines[warning["line"] - 1].startswith("## Workspace rule ")
    assert all("user level" in w["message"] for w in warned)
    assert [
        w
        for w in d.call("read_state", {"workspace": "@user"})["warnings"]
        if w["kind"] == "pinned_over_share"
    ] == []


def test_a_word_of_many_senses_alone_does_not_match_every_dated_entry(shared_daemon: DaemonProcess) -> None:
    """'the start of the day' matches no entry naming a weekday; 'which day' still does."""
    d = shared_daemon
    write_memory(
        d, hand_typed([("Bins", "Recycling goes out Tuesday night."), ("Till", "Float is 150 in coins.")])
    )
    enable(d)
    pack = build(d, sessionId=record_session(d), query="how much cash at the start of the day?")
    assert {c["title"]: c["parts"]["bm25"] for c in memory_rows(pack)}.get("Bins", 0) == 0
    pack = build(d, sessionId=record_session(d), query="which day is collection?")
    assert {c["title"]: c["parts"]["bm25"] for c in memory_rows(pack)}["Bins"] > 0


def test_a_household_entry_answers_a_question_in_other_words(shared_daemon: DaemonProcess) -> None:
    """'when does the furnace get its yearly check?' matches the entry about the boiler."""
    d = shared_daemon
    write_memory(d, hand_typed([("Boiler", "Hendry Heating services the boiler every October.")]))
    enable(d)
    pack = build(d, sessionId=record_session(d), query="when does the furnace get its yearly check?")
    assert {c["title"]: c["parts"]["bm25"] for c in memory_rows(pack)}["Boiler"] > 0


def test_a_question_with_an_apostrophe_does_not_match_every_possessive(shared_daemon: DaemonProcess) -> None:
    """ "What's a good recipe for bread?" matches no entry just because it says "Mum's"."""
    d = shared_daemon
    write_memory(d, hand_typed([("Carer", "Mum's carer visits at 8am and 6pm.")]))
    enable(d)
    pack = build(d, sessionId=record_session(d), query="What's a good recipe for bread?")
    assert {c["title"]: c["parts"]["bm25"] for c in memory_rows(pack)}.get("Carer", 0) == 0

"""The approval gate over the socket: gates, dedupe, approve/reject, lineage, crash safety."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from maka.errors import Conflict, RemoteError
from makad.core import memory_format as fmt
from tests.support import DaemonProcess, SharedDaemon

FIXTURES = Path(__file__).resolve().parents[1] / "core" / "fixtures" / "import"
SECRET = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7dEf0hIj3kLm6n"


def ws(d: DaemonProcess) -> str:
    return str(d.workspace)


def open_gate(d: DaemonProcess) -> None:
    d.call("set_settings", {"workspace": ws(d), "agentReadEnabled": True, "extractToolEnabled": True})


def propose(d: DaemonProcess, content: str, **kw: Any) -> dict[str, Any]:
    result: dict[str, Any] = d.call(
        "propose", {"workspace": ws(d), "title": kw.pop("title", "T"), "content": content, **kw}
    )
    return result


def recorded(d: DaemonProcess, events: int) -> str:
    """A session of ``events`` user messages, for proposals to cite."""
    sid: str = d.call("open_session", {"workspace": ws(d)})["sessionId"]
    batch = [{"type": "user_message", "text": f"message {i}"} for i in range(events)]
    d.call("append_events", {"workspace": ws(d), "sessionId": sid, "events": batch})
    return sid


def file_bytes(d: DaemonProcess) -> tuple[bytes | None, bytes | None]:
    mem = d.workspace / "memory"
    read = lambda p: p.read_bytes() if p.exists() else None  # noqa: E731
    return read(mem / "MEMORY.md"), read(mem / "PENDING.md")


def pending_ids(d: DaemonProcess) -> list[str]:
    path = d.workspace / "memory" / "PENDING.md"
    return [e.id for e in fmt.entries(fmt.parse(path.read_text()))] if path.exists() else []


def memory_entries(d: DaemonProcess) -> list[fmt.Entry]:
    path = d.workspace / "memory" / "MEMORY.md"
    return fmt.entries(fmt.parse(path.read_text())) if path.exists() else []


def expect_kind(d: DaemonProcess, kind: str, method: str, params: dict[str, Any]) -> None:
    before = file_bytes(d)
    with pytest.raises(RemoteError) as info:
        d.call(method, params)
    assert info.value.kind == kind
    assert file_bytes(d) == before


def test_extract_gate_closed_by_default(shared_daemon: DaemonProcess) -> None:
    """An agent proposal is gate_closed until both switches are on; nothing is written."""
    expect_kind(
        shared_daemon,
        "gate_closed",
        "propose",
        {"workspace": ws(shared_daemon), "title": "T", "content": "c"},
    )


@pytest.mark.parametrize(
    ("read", "extract", "incognito", "accepted"),
    [(r, e, i, r and e and not i) for r, e, i in itertools.product([False, True], repeat=3)],
)
def test_invariant_4_extract_gate(
    shared_daemon: DaemonProcess, read: bool, extract: bool, incognito: bool, accepted: bool
) -> None:
    """Invariant 4: extracted proposals only when extractToolEnabled && agentReadEnabled && !incognito."""
    shared_daemon.call(
        "set_settings",
        {
            "workspace": ws(shared_daemon),
            "agentReadEnabled": read,
            "extractToolEnabled": extract,
            "incognito": incognito,
        },
    )
    params = {"workspace": ws(shared_daemon), "title": "T", "content": "a fact"}
    if accepted:
        assert shared_daemon.call("propose", params)["queued"] is True
    else:
        expect_kind(shared_daemon, "incognito_blocked" if incognito else "gate_closed", "propose", params)


def test_gates_in_order(shared_daemon: DaemonProcess) -> None:
    """disabled comes before incognito, incognito before the extract gate, then size caps."""
    w = ws(shared_daemon)
    shared_daemon.call("set_settings", {"workspace": w, "enabled": False, "incognito": True})
    expect_kind(shared_daemon, "disabled", "propose", {"workspace": w, "title": "T", "content": "c"})
    shared_daemon.call("set_settings", {"workspace": w, "enabled": True})
    expect_kind(shared_daemon, "incognito_blocked", "propose", {"workspace": w, "title": "T", "content": "c"})
    shared_daemon.call("set_settings", {"workspace": w, "incognito": False})
    expect_kind(shared_daemon, "gate_closed", "propose", {"workspace": w, "title": "T", "content": "c"})
    open_gate(shared_daemon)
    expect_kind(
        shared_daemon, "too_large", "propose", {"workspace": w, "title": "T", "content": "x" * 40_000}
    )


def test_propose_writes_pending_not_memory_and_redacts(shared_daemon: DaemonProcess) -> None:
    """A proposal lands in PENDING.md only, with secrets redacted (invariant 5)."""
    open_gate(shared_daemon)
    sid = recorded(shared_daemon, 9)
    result = propose(shared_daemon, f"deploy key {SECRET}", sourceRefs=[f"event:{sid}:3-9"])
    assert result["redactions"] == 1 and result["queued"]
    assert pending_ids(shared_daemon) == [result["proposal"]["id"]]
    assert not (shared_daemon.workspace / "memory" / "MEMORY.md").exists()
    assert SECRET not in (shared_daemon.workspace / "memory" / "PENDING.md").read_text()


def test_exact_duplicate_not_queued(shared_daemon: DaemonProcess) -> None:
    """The same content (case and spacing aside) as an open proposal is not queued again."""
    open_gate(shared_daemon)
    first = propose(shared_daemon, "The user likes green tea.")
    again = propose(shared_daemon, "the user   likes GREEN tea.")
    assert again["queued"] is False and again["duplicateOf"] == first["proposal"]["id"]
    assert len(pending_ids(shared_daemon)) == 1


def test_near_duplicate_is_queued_with_similar_to(shared_daemon: DaemonProcess) -> None:
    """A near duplicate is queued and names the similar entry for the reviewer."""
    open_gate(shared_daemon)
    first = propose(shared_daemon, "The user prefers dark mode in every editor they use.")
    near = propose(shared_daemon, "The user prefers dark mode in every editor that they use.")
    assert near["queued"] and near["similarTo"] == [first["proposal"]["id"]]
    listed = shared_daemon.call("list_proposals", {"workspace": ws(shared_daemon)})["proposals"]
    assert {p["proposal"]["id"] for p in listed} == {first["proposal"]["id"], near["proposal"]["id"]}


def test_short_proposal_sharing_an_entrys_content_words_names_it(shared_daemon: DaemonProcess) -> None:
    """A short proposal whose content words all appear in a short entry names it in similarTo."""
    open_gate(shared_daemon)
    entry = shared_daemon.call(
        "add_entry", {"workspace": ws(shared_daemon), "title": "Use pnpm", "content": "The project uses pnpm"}
    )["entry"]["id"]
    near = propose(shared_daemon, "we use pnpm", title="pnpm")
    assert near["queued"] and near["similarTo"] == [entry]
    listed = shared_daemon.call("list_proposals", {"workspace": ws(shared_daemon)})["proposals"]
    assert [p["similarTo"] for p in listed] == [[entry]]


def test_short_proposal_sharing_one_word_of_two_is_not_similar(shared_daemon: DaemonProcess) -> None:
    """Short texts that share only one of their content words ("use") are not near duplicates."""
    open_gate(shared_daemon)
    shared_daemon.call(
        "add_entry", {"workspace": ws(shared_daemon), "title": "pnpm", "content": "We use pnpm."}
    )
    other = propose(shared_daemon, "We use tabs.", title="Tabs")
    assert other["queued"] and other["similarTo"] == []
    negated = propose(shared_daemon, "We do not use pnpm.", title="No pnpm")
    assert negated["queued"] and negated["similarTo"] == []


def test_rejected_is_not_queued_again(shared_daemon: DaemonProcess) -> None:
    """A proposal identical to a rejected one reports previouslyRejected and is not queued."""
    open_gate(shared_daemon)
    first = propose(shared_daemon, "Bad idea")
    shared_daemon.call(
        "reject", {"workspace": ws(shared_daemon), "ids": [first["proposal"]["id"]], "reason": "wrong"}
    )
    again = propose(shared_daemon, "bad idea")
    assert again["queued"] is False
    assert again["previouslyRejected"]["proposalId"] == first["proposal"]["id"]
    assert again["previouslyRejected"]["reason"] == "wrong"
    assert pending_ids(shared_daemon) == []


def test_approve_with_edit_and_supersede(shared_daemon: DaemonProcess) -> None:
    """Approval moves the (edited) proposal into MEMORY.md with a new id; supersedes archives."""
    old = shared_daemon.call(
        "add_entry", {"workspace": ws(shared_daemon), "title": "Editor", "content": "Uses vim"}
    )["entry"]
    open_gate(shared_daemon)
    sid = recorded(shared_daemon, 4)
    prop = propose(shared_daemon, "Uses neovim", supersedes=old["id"], sourceRefs=[f"event:{sid}:4"])[
        "proposal"
    ]
    result = shared_daemon.call(
        "approve",
        {
            "workspace": ws(shared_daemon),
            "ids": [prop["id"]],
            "edits": {prop["id"]: {"content": f"Uses neovim {SECRET}"}},
        },
    )
    approved = result["approved"][0]
    assert approved["entry"]["id"] != prop["id"] and approved["superseded"] == old["id"]
    assert result["redactions"] == 1
    by_id = {e.id: e for e in memory_entries(shared_daemon)}
    assert by_id[old["id"]].status == "archived"
    new = by_id[approved["entry"]["id"]]
    assert new.status == "active" and new.origin == "extracted"
    assert new.source_refs == [f"event:{sid}:4"]
    assert SECRET not in (shared_daemon.workspace / "memory" / "MEMORY.md").read_text()
    assert pending_ids(shared_daemon) == []


def test_users_edit_to_pending_is_what_gets_approved(shared_daemon: DaemonProcess) -> None:
    """A proposal the user edited by hand in PENDING.md is approved as edited."""
    open_gate(shared_daemon)
    prop = propose(shared_daemon, "original wording")["proposal"]
    path = shared_daemon.workspace / "memory" / "PENDING.md"
    path.write_text(path.read_text().replace("original wording", "the user's wording"))
    result = shared_daemon.call("approve", {"workspace": ws(shared_daemon), "ids": [prop["id"]]})
    assert result["approved"][0]["entry"]["content"] == "the user's wording"


def test_approve_unknown_id_changes_nothing(shared_daemon: DaemonProcess) -> None:
    """Approving an unknown id is not_found and leaves both files as they were."""
    open_gate(shared_daemon)
    propose(shared_daemon, "one")
    expect_kind(shared_daemon, "not_found", "approve", {"workspace": ws(shared_daemon), "ids": ["nope"]})


def test_memory_history_explains_an_entry(shared_daemon: DaemonProcess) -> None:
    """memory_history answers why: the proposal, its sources, who approved it, later edits."""
    open_gate(shared_daemon)
    sid = recorded(shared_daemon, 3)
    prop = propose(shared_daemon, "Works in UTC", sourceRefs=[f"event:{sid}:1-3"])["proposal"]
    entry = shared_daemon.call("approve", {"workspace": ws(shared_daemon), "ids": [prop["id"]]})["approved"][
        0
    ]["entry"]
    shared_daemon.call(
        "update_entry", {"workspace": ws(shared_daemon), "id": entry["id"], "content": "Works in UTC+1"}
    )
    history = shared_daemon.call("memory_history", {"workspace": ws(shared_daemon), "id": entry["id"]})
    actions = [e["action"] for e in history["events"]]
    assert actions == ["proposed", "approved", "updated"]
    assert history["proposalId"] == prop["id"] and history["sourceRefs"] == [f"event:{sid}:1-3"]
    assert history["approvedBy"] == "user"


@pytest.mark.slow
@pytest.mark.parametrize("point", ["approve_after_intent", "approve_after_memory", "approve_after_pending"])
def test_approval_survives_kill_at_each_step(daemon: DaemonProcess, point: str) -> None:
    """kill -9 between the steps of approve, then restart: approved exactly once, out of PENDING."""
    open_gate(daemon)
    props = [propose(daemon, f"fact number {i}")["proposal"]["id"] for i in range(3)]
    daemon.restart({"MAKAD_FAULT_POINT": point})
    with pytest.raises(Exception):  # noqa: B017 - the daemon dies mid-call
        daemon.call("approve", {"workspace": ws(daemon), "ids": props[:2]}, timeout=10)
    assert daemon.proc is not None
    daemon.proc.wait(timeout=10)
    daemon.restart({"MAKAD_FAULT_POINT": ""})
    state = daemon.call("read_state", {"workspace": ws(daemon), "includeEntries": True})
    contents = sorted(e["content"] for e in state["entries"])
    assert contents == ["fact number 0", "fact number 1"]
    assert pending_ids(daemon) == [props[2]]


def test_import_each_format_then_reimport_adds_nothing(shared_daemon: DaemonProcess) -> None:
    """Every fixture format imports into PENDING.md as origin imported; a re-import adds nothing."""
    paths = [p for p in sorted(FIXTURES.iterdir()) if "malformed" not in p.name and "mixed" not in p.name]
    assert len(paths) >= 8
    total = 0
    for path in paths:
        result = shared_daemon.call("import_memories", {"workspace": ws(shared_daemon), "path": str(path)})
        assert result["errors"] == [], (path.name, result["errors"])
        total += len(result["imported"])
    assert total > 0
    entries = fmt.entries(fmt.parse((shared_daemon.workspace / "memory" / "PENDING.md").read_text()))
    assert len(entries) == total and {e.origin for e in entries} == {"imported"}
    assert all(e.source_refs and e.source_refs[0].startswith("import:") for e in entries)
    for path in paths:
        again = shared_daemon.call("import_memories", {"workspace": ws(shared_daemon), "path": str(path)})
        assert again["imported"] == []
    assert memory_entries(shared_daemon) == []


def test_import_mixed_good_and_malformed(shared_daemon: DaemonProcess) -> None:
    """A file mixing good and malformed items imports the good ones and names the bad."""
    result = shared_daemon.call(
        "import_memories",
        {"workspace": ws(shared_daemon), "path": str(FIXTURES / "mem0_mixed_malformed.json")},
    )
    assert result["imported"] and result["errors"]
    assert all(e["locator"] for e in result["errors"])


def test_export_json_and_markdown(shared_daemon: DaemonProcess) -> None:
    """export_memories returns active entries as JSON or as a MEMORY.md-style document."""
    shared_daemon.call("add_entry", {"workspace": ws(shared_daemon), "title": "A", "content": "alpha"})
    as_json = shared_daemon.call("export_memories", {"workspace": ws(shared_daemon), "format": "json"})
    assert as_json["count"] == 1 and "alpha" in as_json["data"]
    as_md = shared_daemon.call("export_memories", {"workspace": ws(shared_daemon), "format": "markdown"})
    assert [e.content for e in fmt.entries(fmt.parse(as_md["data"]))] == ["alpha"]


_EXAMPLES = itertools.count()
ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["propose", "approve", "reject", "edit_pending", "edit_memory"]), st.integers(0, 7)
    ),
    min_size=3,
    max_size=12,
)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(ACTIONS)
def test_interleavings_keep_approved_once_and_rejected_out(
    module_daemon: DaemonProcess, actions: list[Any]
) -> None:
    """Any interleaving of propose/approve/reject/user edits: approved once, rejected never active."""
    # Each example gets a fresh workspace of its own on the module's daemon.
    workspace = module_daemon.root / f"interleaving{next(_EXAMPLES)}"
    workspace.mkdir()
    d = SharedDaemon(module_daemon, workspace)
    open_gate(d)
    approved_contents: list[str] = []
    rejected_contents: list[str] = []
    for action, n in actions:
        ids = pending_ids(d)
        if action == "propose":
            propose(d, f"memory {n}")
        elif action in ("approve", "reject") and ids:
            target = ids[n % len(ids)]
            content = next(
                e.content
                for e in fmt.entries(fmt.parse((d.workspace / "memory" / "PENDING.md").read_text()))
                if e.id == target
            )
            try:
                d.call(action, {"workspace": ws(d), "ids": [target]})
            except Conflict:
                # The user's unseen edit to this very proposal wins; the client re-reads
                # and decides again on what the user wrote.
                content = next(
                    e.content
                    for e in fmt.entries(fmt.parse((d.workspace / "memory" / "PENDING.md").read_text()))
                    if e.id == target
                )
                d.call(action, {"workspace": ws(d), "ids": [target]})
            (approved_contents if action == "approve" else rejected_contents).append(content)
        elif action == "edit_pending" and ids:
            path = d.workspace / "memory" / "PENDING.md"
            path.write_text(path.read_text() + f"\nuser note {n}\n")
        elif action == "edit_memory":
            path = d.workspace / "memory" / "MEMORY.md"
            if path.exists():
                path.write_text(path.read_text() + f"\n## Hand {n}\nby hand {n}\n")
    active = [e.content for e in memory_entries(d) if e.status == "active"]
    for content in approved_contents:
        assert sum(1 for a in active if a == content) == 1
    for content in rejected_contents:
        assert content not in active

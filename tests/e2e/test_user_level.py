"""User-level memory (workspace "@user", scope "global") over the socket, on one daemon.

The user level is shared by every workspace of the module's daemon: each test sets the
switches it needs and uses its own words, so the tests do not depend on their order.
"""

from __future__ import annotations

import itertools
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from maka import Client
from maka.errors import RemoteError
from makad.core import memory_format as fmt
from tests.cli.helpers import run_maka
from tests.support import DaemonProcess, daemon_in_tmp

USER = "@user"
_names = itertools.count()


@pytest.fixture(scope="module")
def d() -> Iterator[DaemonProcess]:
    """One daemon; its user level is at the default place, ``<data dir>/user``."""
    yield from daemon_in_tmp()


def new_ws(d: DaemonProcess, *, reads: bool = True, extract: bool = False) -> str:
    path = d.root / f"w{next(_names)}"
    path.mkdir()
    d.call(
        "set_settings",
        {"workspace": str(path), "agentReadEnabled": reads, "extractToolEnabled": extract},
    )
    return str(path)


def user_on(d: DaemonProcess, reads: bool = True) -> None:
    d.call("set_settings", {"workspace": USER, "enabled": True, "agentReadEnabled": reads})


def add(d: DaemonProcess, workspace: str, title: str, content: str, **kw: Any) -> dict[str, Any]:
    entry: dict[str, Any] = d.call(
        "add_entry", {"workspace": workspace, "title": title, "content": content, **kw}
    )["entry"]
    return entry


def pack(d: DaemonProcess, workspace: str, query: str | None = None, **kw: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"workspace": workspace, "budgetTokens": 4000, **kw}
    if query is not None:
        params["query"] = query
    result: dict[str, Any] = d.call("build_context", params)
    return result


def memory_text(p: dict[str, Any]) -> str:
    return "".join(s["text"] for s in p["segments"] if s["kind"] == "memory")


def candidate(p: dict[str, Any], source_id: str) -> dict[str, Any] | None:
    return next((c for c in p["trace"]["candidates"] if c["sourceId"] == source_id), None)


def user_file(d: DaemonProcess, name: str = "MEMORY.md") -> Path:
    return d.data_dir / "user" / "memory" / name


def test_user_entry_reaches_two_unrelated_workspaces(d: DaemonProcess) -> None:
    """An entry added to @user is in build_context of two workspaces, marked as user level."""
    user_on(d)
    entry = add(d, USER, "Spelling", "Answers in British English: colour, organise.")
    for workspace in (new_ws(d), new_ws(d)):
        p = pack(d, workspace, "which spelling, colour or color")
        ref = f"memory:@user/{entry['id']}"
        found = candidate(p, ref)
        assert found is not None and found["included"], p["trace"]["candidates"]
        assert f"{ref} · user level" in memory_text(p)
        assert "British English" in memory_text(p)


def test_read_state_names_the_user_level_file(d: DaemonProcess) -> None:
    """read_state on @user returns the user-level MEMORY.md's path, and its entries: the one
    added there is global (the other tests' entries share the file, some typed by hand)."""
    user_on(d)
    added = add(d, USER, "Indentation", "Indents with tabs, never spaces.")
    state = d.call("read_state", {"workspace": USER, "includeEntries": True})
    assert state["path"] == str(user_file(d))
    [read] = [e for e in state["entries"] if e["id"] == added["id"]]
    assert (read["title"], read["scope"]) == ("Indentation", "global")


def test_global_proposal_queues_only_at_user_level_and_shows_elsewhere(d: DaemonProcess) -> None:
    """propose scope=global from A queues in @user's PENDING.md only, with A in its lineage;
    approved there, it reaches build_context in workspace B."""
    user_on(d)
    a = new_ws(d, extract=True)
    b = new_ws(d)
    commit_style = {
        "workspace": a,
        "title": "Commit messages",
        "content": "Writes commit messages in the imperative mood, under 72 characters.",
        "scope": "global",
        "requestId": "r1",
    }
    result = d.call("propose", commit_style)
    assert result["queued"]
    proposal_id = result["proposal"]["id"]
    assert d.call("list_proposals", {"workspace": a})["proposals"] == []
    assert not (Path(a) / "memory" / "PENDING.md").exists()
    queued = [v["proposal"]["id"] for v in d.call("list_proposals", {"workspace": USER})["proposals"]]
    assert proposal_id in queued
    history = d.call("memory_history", {"workspace": USER, "id": proposal_id})
    proposed = next(e for e in history["events"] if e["action"] == "proposed")
    assert proposed["data"]["originWorkspace"] == a
    # A retry with the same requestId answers with the first result.
    assert d.call("propose", commit_style) == result
    approved = d.call("approve", {"workspace": USER, "ids": [proposal_id]})
    entry_id = approved["approved"][0]["entry"]["id"]
    p = pack(d, b, "commit messages")
    found = candidate(p, f"memory:@user/{entry_id}")
    assert found is not None and found["included"]
    assert "imperative mood" in memory_text(p)


def test_global_proposal_refused_while_user_level_is_off(d: DaemonProcess) -> None:
    """With @user disabled a global proposal is refused (disabled) and nothing is written."""
    a = new_ws(d, extract=True)
    d.call("set_settings", {"workspace": USER, "enabled": False})
    try:
        before = user_file(d, "PENDING.md").read_bytes() if user_file(d, "PENDING.md").exists() else None
        with pytest.raises(RemoteError) as info:
            d.call("propose", {"workspace": a, "title": "T", "content": "never queued x1", "scope": "global"})
        assert info.value.kind == "disabled"
        after = user_file(d, "PENDING.md").read_bytes() if user_file(d, "PENDING.md").exists() else None
        assert after == before
    finally:
        user_on(d)


def test_workspace_entry_on_same_topic_overrides_user_entry(d: DaemonProcess) -> None:
    """A workspace entry with the same title comes first; the user-level one is traced
    ``overridden``."""
    user_on(d)
    spaces = add(d, USER, "Tabs or spaces", "Indents with tabs everywhere.")
    w = new_ws(d)
    add(d, w, "Tabs or spaces", "This repository indents with four spaces (PEP 8).")
    p = pack(d, w, "indents tabs spaces")
    trace = candidate(p, f"memory:@user/{spaces['id']}")
    assert trace is not None and not trace["included"] and trace["reason"] == "overridden"
    text = memory_text(p)
    assert "four spaces" in text and "tabs everywhere" not in text
    assert p["trace"]["dropped"].get("overridden", 0) >= 1


def test_supersedes_across_levels_overrides(d: DaemonProcess) -> None:
    """A workspace entry approved with supersedes "@user/<id>" overrides that user-level entry
    (and archives nothing at the user level)."""
    user_on(d)
    quotes = add(d, USER, "Quote style", "Prefers single quotes in code.")
    w = new_ws(d, extract=True)
    proposed = d.call(
        "propose",
        {
            "workspace": w,
            "title": "Strings here",
            "content": "Black formats this repository, so strings use double quotes.",
            "supersedes": f"@user/{quotes['id']}",
        },
    )
    d.call("approve", {"workspace": w, "ids": [proposed["proposal"]["id"]]})
    p = pack(d, w, "quotes strings")
    trace = candidate(p, f"memory:@user/{quotes['id']}")
    assert trace is not None and trace["reason"] == "overridden"
    assert "double quotes" in memory_text(p)
    user_entries = d.call("read_state", {"workspace": USER, "includeEntries": True})["entries"]
    assert quotes["id"] in [e["id"] for e in user_entries]


def test_near_duplicate_content_overrides(d: DaemonProcess) -> None:
    """A workspace entry whose content nearly repeats a user-level entry's overrides it."""
    user_on(d)
    user_entry = add(d, USER, "Editor", "The user edits code in Neovim with the lazy.nvim plugin manager.")
    w = new_ws(d)
    add(d, w, "Our editor", "The user edits code in Neovim with the lazy.nvim plugin manager!")
    p = pack(d, w, "neovim editor")
    trace = candidate(p, f"memory:@user/{user_entry['id']}")
    assert trace is not None and trace["reason"] == "overridden"


def test_incognito_hides_user_level(d: DaemonProcess) -> None:
    """A workspace in incognito and an incognito session both see no user-level entry."""
    user_on(d)
    add(d, USER, "Timezone", "The user works in Europe/London time.")
    w = new_ws(d)
    assert "Europe/London" in memory_text(pack(d, w, "timezone london"))
    session = d.call("open_session", {"workspace": w, "incognito": True})["sessionId"]
    p = pack(d, w, "timezone london", sessionId=session)
    assert "@user/" not in str(p["trace"]["candidates"]) and "Europe/London" not in memory_text(p)
    d.call("set_settings", {"workspace": w, "incognito": True})
    p = pack(d, w, "timezone london")
    assert "@user/" not in str(p["trace"]["candidates"])


def test_incognito_session_never_reaches_user_file(d: DaemonProcess) -> None:
    """A global proposal from an incognito session is refused and the user files are untouched."""
    user_on(d)
    w = new_ws(d, extract=True)
    session = d.call("open_session", {"workspace": w, "incognito": True})["sessionId"]
    before = [p.read_bytes() if p.exists() else None for p in (user_file(d), user_file(d, "PENDING.md"))]
    with pytest.raises(RemoteError) as info:
        d.call(
            "propose",
            {
                "workspace": w,
                "title": "Secret plan",
                "content": "incognito words",
                "scope": "global",
                "sessionId": session,
            },
        )
    assert info.value.kind == "incognito_blocked"
    after = [p.read_bytes() if p.exists() else None for p in (user_file(d), user_file(d, "PENDING.md"))]
    assert after == before


def test_user_agent_read_off_hides_it_everywhere(d: DaemonProcess) -> None:
    """Turning @user's agentReadEnabled off hides its entries from every workspace."""
    user_on(d)
    add(d, USER, "Units", "Uses metric units: kilometres and kilograms.")
    one, two = new_ws(d), new_ws(d)
    assert "kilometres" in memory_text(pack(d, one, "metric units"))
    user_on(d, reads=False)
    try:
        for workspace in (one, two):
            p = pack(d, workspace, "metric units")
            assert "@user/" not in str(p["trace"]["candidates"])
    finally:
        user_on(d)


def test_workspace_without_agent_reads_sees_no_user_level(d: DaemonProcess) -> None:
    """A workspace that does not allow agent reads gets no user-level entry either."""
    user_on(d)
    add(d, USER, "Greeting", "Greets with a short hello.")
    p = pack(d, new_ws(d, reads=False), "greeting hello")
    assert p["segments"] == [] or "@user/" not in memory_text(p)
    assert "@user/" not in str(p["trace"]["candidates"])


def test_user_level_shown_once_per_session(d: DaemonProcess) -> None:
    """A user-level entry shown to a session is already_shown on the next call (the manifest)."""
    user_on(d)
    entry = add(d, USER, "Coffee", "Drinks flat whites.")
    w = new_ws(d)
    session = d.call("open_session", {"workspace": w})["sessionId"]
    ref = f"memory:@user/{entry['id']}"
    first = pack(d, w, "flat whites coffee", sessionId=session)
    assert candidate(first, ref)["included"]  # type: ignore[index]
    d.call(
        "append_events",
        {"workspace": w, "sessionId": session, "events": [{"type": "user_message", "text": "next"}]},
    )
    second = pack(d, w, "flat whites coffee", sessionId=session)
    assert candidate(second, ref)["reason"] == "already_shown"  # type: ignore[index]
    manifest = d.call("get_manifest", {"workspace": w, "sessionId": session, "callId": first["callId"]})
    assert ref in [item["sourceId"] for item in manifest["items"]]


def test_hand_edit_of_user_file_notifies_user_subscribers(d: DaemonProcess) -> None:
    """A hand edit of the user-level MEMORY.md gives memory_changed (external_edit) on @user."""
    user_on(d)
    add(d, USER, "Seed", "seed entry for the watcher")
    with Client(str(d.socket), timeout=10) as sub:
        base = sub.call("subscribe", {"workspace": USER})["revision"]
        path = user_file(d)
        tmp = path.with_name(".MEMORY.md.swp")
        tmp.write_text(path.read_text() + "\n## Written by hand\nin an editor, at the user level\n")
        os.replace(tmp, path)
        note = next(sub.notifications())
        assert note["method"] == "memory_changed"
        assert note["params"]["workspace"] == USER
        assert note["params"]["cause"] == "external_edit"
        assert note["params"]["revision"] > base


def test_concurrent_global_proposals_never_interleave(d: DaemonProcess) -> None:
    """Global proposals from several workspaces at once all land whole in @user's PENDING.md."""
    user_on(d)
    spaces = [new_ws(d, extract=True) for _ in range(4)]
    errors: list[BaseException] = []

    def run(workspace: str, n: int) -> None:
        try:
            with Client(str(d.socket), timeout=30) as c:
                for i in range(5):
                    c.call(
                        "propose",
                        {
                            "workspace": workspace,
                            "title": f"Concurrent {n}-{i}",
                            "content": f"concurrent proposal number {n} {i} " + "word " * (n + i),
                            "scope": "global",
                        },
                    )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w, n)) for n, w in enumerate(spaces)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    titles = {e.title for e in fmt.entries(fmt.parse(user_file(d, "PENDING.md").read_text()))}
    assert {f"Concurrent {n}-{i}" for n in range(4) for i in range(5)} <= titles


def test_user_level_refuses_sessions_and_its_folder_as_a_path(d: DaemonProcess) -> None:
    """@user has no sessions (invalid_params); its folder's path is refused; other @names too."""
    user_on(d)
    with pytest.raises(RemoteError) as info:
        d.call("open_session", {"workspace": USER})
    assert info.value.kind == "invalid_params"
    with pytest.raises(RemoteError) as info:
        d.call("build_context", {"workspace": USER, "budgetTokens": 100})
    assert info.value.kind == "invalid_params"
    with pytest.raises(RemoteError) as info:
        d.call("add_entry", {"workspace": USER, "title": "t", "content": "c", "scope": "session"})
    assert info.value.kind == "invalid_params"
    with pytest.raises(RemoteError) as info:
        d.call("read_state", {"workspace": str(d.data_dir / "user")})
    assert info.value.kind == "invalid_workspace" and "@user" in info.value.message
    with pytest.raises(RemoteError) as info:
        d.call("read_state", {"workspace": "@team"})
    assert info.value.kind == "invalid_workspace" and "reserved" in info.value.message
    assert d.call("status")["version"]  # still serving


def test_export_names_the_level(d: DaemonProcess) -> None:
    """export_memories of @user says its level; a workspace's says workspace."""
    user_on(d)
    add(d, USER, "Export me", "user-level words to export")
    exported = d.call("export_memories", {"workspace": USER})
    assert exported["level"] == "user"
    assert d.call("export_memories", {"workspace": new_ws(d)})["level"] == "workspace"


def test_cli_user_flag_addresses_the_user_level(d: DaemonProcess) -> None:
    """`maka --user memory add` and `maka memory list -w @user` work on the user level."""
    user_on(d)
    added = run_maka(d, "--user", "memory", "add", "Shell", "Uses fish as the login shell.", workspace=False)
    assert added.returncode == 0, added.stderr
    listed = run_maka(d, "memory", "list", "-w", "@user", "--json", workspace=False)
    assert listed.returncode == 0, listed.stderr
    assert "Uses fish as the login shell." in listed.stdout
    after = run_maka(d, "memory", "list", "--user", "--json", workspace=False)
    assert after.stdout == listed.stdout


def test_cli_review_offers_both_queues(d: DaemonProcess) -> None:
    """`maka review` in a workspace goes through its queue, then the user level's."""
    user_on(d)
    w = new_ws(d, extract=True)
    own = d.call("propose", {"workspace": w, "title": "Local", "content": "only in this workspace q1"})
    d.call(
        "propose",
        {"workspace": w, "title": "Everywhere", "content": "for every workspace q2", "scope": "global"},
    )
    result = run_maka(d, "review", "-w", w, input="a\na\nq\n", workspace=False)
    assert result.returncode == 0, result.stderr
    assert "Proposals for the user level (@user)" in result.stdout
    assert own["proposal"]["id"] not in str(d.call("list_proposals", {"workspace": w}))
    approved_here = d.call("read_state", {"workspace": w, "includeEntries": True})["entries"]
    assert [e["title"] for e in approved_here] == ["Local"]
    assert result.stdout.count("Approved") == 2


SECRET = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7dEf0hIj3kLm6n"


def test_global_proposal_is_redacted(d: DaemonProcess) -> None:
    """A secret in a global proposal never reaches the user-level files: it is redacted."""
    user_on(d)
    w = new_ws(d, extract=True)
    result = d.call(
        "propose",
        {"workspace": w, "title": "Deploy", "content": f"deploys with key {SECRET}", "scope": "global"},
    )
    assert result["redactions"]
    assert SECRET not in user_file(d, "PENDING.md").read_text()
    assert SECRET not in str(d.call("memory_history", {"workspace": USER, "id": result["proposal"]["id"]}))


def test_delete_at_user_level_removes_it_everywhere(d: DaemonProcess) -> None:
    """delete_entry on @user takes the entry out of its file and out of every pack."""
    user_on(d)
    entry = add(d, USER, "Forget me", "a user-level fact about zanzibar to forget")
    w = new_ws(d)
    assert "zanzibar" in memory_text(pack(d, w, "zanzibar"))
    d.call("delete_entry", {"workspace": USER, "id": entry["id"]})
    assert "zanzibar" not in user_file(d).read_text()
    assert candidate(pack(d, w, "zanzibar"), f"memory:@user/{entry['id']}") is None


def test_import_and_backups_work_at_user_level(d: DaemonProcess) -> None:
    """import_memories queues at @user; approved there the entry is global; its writes
    keep backups like a workspace's."""
    user_on(d)
    imported = d.call(
        "import_memories",
        {"workspace": USER, "data": "- Prefers dark themes in every editor\n", "format": "markdown"},
    )
    assert len(imported["imported"]) == 1
    approved = d.call("approve", {"workspace": USER, "ids": imported["imported"]})
    assert approved["approved"][0]["entry"]["scope"] == "global"
    assert d.call("list_backups", {"workspace": USER})["backups"]


def test_hand_edit_of_user_file_reaches_the_next_pack(d: DaemonProcess) -> None:
    """An entry typed into the user-level MEMORY.md by hand is in the next pack of a workspace."""
    user_on(d)
    add(d, USER, "Anchor", "an entry so the file exists")
    w = new_ws(d)
    pack(d, w, "anything")  # the user level's snapshot is cached now
    path = user_file(d)
    path.write_text(path.read_text() + "\n## Typed by hand\nquokkas are the user's favourite animal\n")
    assert "quokkas" in memory_text(pack(d, w, "quokkas favourite animal"))


def test_a_user_folder_that_cannot_be_made_says_why(short_tmp: Path) -> None:
    """A file where the user level's folder (or a folder above it) should be stops makad
    at start (exit 78, naming it); one put there while it runs makes "@user" fail with
    io_error naming the system's reason (data.errno), and workspaces still work."""
    (short_tmp / "a-file").write_text("not a folder\n")
    for user_dir in (short_tmp / "a-file", short_tmp / "a-file" / "user"):
        proc = DaemonProcess(short_tmp, env={"MAKAD_USER_MEMORY": str(user_dir)})
        with pytest.raises(RuntimeError, match="exited with 78"):
            proc.start()
        assert f"{short_tmp / 'a-file'} is not a folder" in proc.stderr_path.read_text()
    moved = short_tmp / "moved"
    proc = DaemonProcess(short_tmp, env={"MAKAD_USER_MEMORY": str(moved / "user")})
    proc.start()
    try:
        shutil.rmtree(moved)
        moved.write_text("not a folder\n")
        with pytest.raises(RemoteError) as info:
            proc.call("read_state", {"workspace": USER})
        assert info.value.kind == "io_error"
        assert info.value.data.get("errno") in ("ENOTDIR", "EEXIST"), info.value.data
        assert "user-level memory folder" in info.value.message
        assert info.value.data.get("osError", "") in info.value.message
        assert proc.call("read_state", {"workspace": str(proc.workspace)})["status"] == "ok"
    finally:
        proc.stop()
    assert (short_tmp / "a-file").read_text() == "not a folder\n"
    assert moved.read_text() == "not a folder\n"


def test_entry_typed_by_hand_at_user_level_reads_as_global(d: DaemonProcess) -> None:
    """Entries typed into the user-level MEMORY.md (no comment, or one naming no scope) read as
    scope global in read_state and export_memories, the file left as typed; update_entry
    keeps them global."""
    user_on(d)
    add(d, USER, "Hand anchor", "an entry so the user-level file exists")
    path = user_file(d)
    path.write_text(
        path.read_text()
        + "\n## Wombat diet\nwombats of the user eat grass and roots\n"
        + "\n## Wombat burrows\n<!-- maka-memory: id=wombat-burrows origin=manual -->\nburrows are long\n"
    )
    typed = path.read_bytes()
    state = d.call("read_state", {"workspace": USER, "includeEntries": True})
    [read] = [e for e in state["entries"] if e["title"] == "Wombat diet"]
    [commented] = [e for e in state["entries"] if e["id"] == "wombat-burrows"]
    assert (read["scope"], commented["scope"]) == ("global", "global")
    exported = d.call("export_memories", {"workspace": USER, "format": "json"})
    assert '"scope": "global"' in exported["data"] and '"scope": "workspace"' not in exported["data"]
    pack(d, new_ws(d), "wombats eat grass")
    assert path.read_bytes() == typed
    edited = d.call("update_entry", {"workspace": USER, "id": read["id"], "content": "wombats eat grass"})
    assert edited["entry"]["scope"] == "global"
    archived = d.call("archive_entry", {"workspace": USER, "id": "wombat-burrows"})
    assert archived["entry"]["scope"] == "global"

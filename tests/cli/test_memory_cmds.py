"""`maka memory …` and `maka settings` against a real daemon."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from maka.cli.output import short_ids
from tests.cli.helpers import MAKA, Pty, call, editor_script, run_maka
from tests.support import DaemonProcess


def memory_text(d: DaemonProcess) -> str:
    return (d.workspace / "memory" / "MEMORY.md").read_text()


def test_add_then_list_as_table_and_json(shared_daemon: DaemonProcess) -> None:
    """memory add writes an active entry; list shows it in a table and --json after the command."""
    added = run_maka(shared_daemon, "memory", "add", "Prefers tabs", "Use tabs.", "--tags", "style,go")
    assert added.returncode == 0 and added.stdout.startswith("Added ")
    assert "Use tabs." in memory_text(shared_daemon)
    table = run_maka(shared_daemon, "memory", "list")
    assert table.returncode == 0
    header, row = table.stdout.splitlines()[:2]
    assert header.split() == ["ID", "STATUS", "ORIGIN", "UPDATED", "TAGS", "TITLE"]
    assert "active" in row and "style,go" in row and row.endswith("Prefers tabs")
    listed = run_maka(shared_daemon, "memory", "list", "--json")
    entries = json.loads(listed.stdout)["entries"]
    assert [e["title"] for e in entries] == ["Prefers tabs"]


def test_add_counts_redacted_secrets_in_words(shared_daemon: DaemonProcess) -> None:
    """`memory add` notes "1 secret was redacted" for one secret and "2 secrets were" for two."""
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    one = run_maka(shared_daemon, "memory", "add", "Creds", f"token {token}")
    assert one.returncode == 0, one.stderr
    assert "note: 1 secret was redacted before writing" in one.stderr
    two = run_maka(
        shared_daemon, "memory", "add", "More creds", f"a {token} and b {token.replace('a1', 'z9')}"
    )
    assert two.returncode == 0, two.stderr
    assert "note: 2 secrets were redacted before writing" in two.stderr
    assert "(s)" not in one.stderr + two.stderr


def test_list_by_tag_matches_as_tags_are_stored(shared_daemon: DaemonProcess) -> None:
    """Tags are stored lower-case with spaces as dashes, so `memory list -t "Ops Team"`
    finds an entry added with --tags "Ops Team" (stored ops-team)."""
    assert (
        run_maka(
            shared_daemon, "memory", "add", "Pager", "Ops rotates weekly.", "--tags", "Ops Team"
        ).returncode
        == 0
    )
    for typed in ("Ops Team", "ops-team", "OPS  team"):
        listed = run_maka(shared_daemon, "memory", "list", "-t", typed)
        assert listed.returncode == 0 and "Pager" in listed.stdout, (typed, listed.stdout)


def test_add_notes_an_active_entry_with_the_same_title(shared_daemon: DaemonProcess) -> None:
    """memory add with the title of an active entry adds it and notes the other one on
    stderr with how to look at and retire it; a new title gets no note."""
    first = call(shared_daemon, "add_entry", title="Deploy day", content="Tuesdays.")["entry"]["id"]
    result = run_maka(shared_daemon, "memory", "add", "deploy  DAY", "Tuesday mornings.")
    assert result.returncode == 0 and result.stdout.startswith("Added ")
    assert "same title" in result.stderr and first[:12] in result.stderr
    added = result.stdout.split()[1].rstrip(":")
    ws = shared_daemon.workspace
    assert f"`maka -w {ws} memory show {first[:12]}` shows it" in result.stderr
    assert f"`maka -w {ws} memory archive {first[:12]}` retires it" in result.stderr
    assert f"`maka -w {ws} memory archive {added[:12]}` the one just added" in result.stderr
    other = run_maka(shared_daemon, "memory", "add", "Release train", "Weekly.")
    assert other.returncode == 0 and other.stderr == ""


def test_add_reads_content_from_stdin(shared_daemon: DaemonProcess) -> None:
    """Without CONTENT and with stdin not a terminal, memory add reads stdin."""
    result = run_maka(shared_daemon, "--json", "memory", "add", "From stdin", input="line one\nline two\n")
    assert result.returncode == 0
    assert json.loads(result.stdout)["entry"]["content"] == "line one\nline two"


def test_add_with_nothing_on_stdin_is_refused(shared_daemon: DaemonProcess) -> None:
    """memory add TITLE with no CONTENT and an empty stdin (a script, an agent's shell) is a
    usage error saying how to give the content; no entry is written."""
    for args in (("memory", "add", "Only a title"), ("memory", "add", "Only a title", "-")):
        result = run_maka(shared_daemon, *args, input="")
        assert result.returncode == 2, result.stdout
        assert "CONTENT" in result.stderr and "stdin" in result.stderr
    assert call(shared_daemon, "read_state", includeEntries=True)["entries"] == []


def test_workspace_defaults_to_env_then_cwd(shared_daemon: DaemonProcess, short_tmp: Path) -> None:
    """Without --workspace, MAKA_WORKSPACE is used, else the current directory."""
    call(shared_daemon, "add_entry", title="Here", content="in the workspace")
    other = short_tmp / "elsewhere"
    other.mkdir()
    by_env = run_maka(
        shared_daemon,
        "memory",
        "list",
        workspace=False,
        cwd=other,
        env={"MAKA_WORKSPACE": str(shared_daemon.workspace)},
    )
    assert "Here" in by_env.stdout
    by_cwd = run_maka(
        shared_daemon,
        "memory",
        "list",
        workspace=False,
        cwd=shared_daemon.workspace,
        env={"MAKA_WORKSPACE": ""},
    )
    assert "Here" in by_cwd.stdout
    empty = run_maka(shared_daemon, "memory", "list", workspace=False, cwd=other, env={"MAKA_WORKSPACE": ""})
    assert "Here" not in empty.stdout and f"No entries in {other}" in empty.stdout


def test_show_by_prefix_includes_lineage(shared_daemon: DaemonProcess) -> None:
    """memory show accepts a unique id prefix and prints the entry and its history."""
    entry = call(shared_daemon, "add_entry", title="Deploy day", content="Deploys happen on Tuesdays.")[
        "entry"
    ]
    result = run_maka(shared_daemon, "memory", "show", entry["id"][:6])
    assert result.returncode == 0
    assert "Deploy day" in result.stdout and "Deploys happen on Tuesdays." in result.stdout
    assert f"id {entry['id']}" in result.stdout


def test_show_unknown_id_is_a_remote_error(shared_daemon: DaemonProcess) -> None:
    """An id that matches nothing is passed on and the daemon's not_found gives exit 1."""
    result = run_maka(shared_daemon, "memory", "show", "0123456789abcdef")
    assert result.returncode == 1 and "not_found" in result.stderr


def test_show_of_a_decided_proposal_says_what_became_of_it(shared_daemon: DaemonProcess) -> None:
    """memory show of a proposal id after review names the entry it became (approved) or the
    rejection and its reason, instead of saying it is gone from the files."""
    call(shared_daemon, "set_settings", agentReadEnabled=True, extractToolEnabled=True)
    kept = call(shared_daemon, "propose", title="Staging port", content="Staging listens on 5433.")
    dropped = call(shared_daemon, "propose", title="Likes tabs", content="The user likes tabs.")
    kept_id, dropped_id = kept["proposal"]["id"], dropped["proposal"]["id"]
    approved = call(shared_daemon, "approve", ids=[kept_id])
    entry_id = approved["approved"][0]["entry"]["id"]
    call(shared_daemon, "reject", ids=[dropped_id], reason="not true")
    shown = run_maka(shared_daemon, "memory", "show", kept_id)
    assert shown.returncode == 0, shown.stderr
    first = shown.stdout.splitlines()[0]
    assert "approved" in first and entry_id in first and "no longer" not in shown.stdout
    shown = run_maka(shared_daemon, "memory", "show", dropped_id)
    assert shown.returncode == 0, shown.stderr
    first = shown.stdout.splitlines()[0]
    assert "rejected" in first and "no longer" not in shown.stdout
    assert 'rejected by user: "not true"' in shown.stdout


def test_ambiguous_prefix_is_a_usage_error(shared_daemon: DaemonProcess) -> None:
    """A prefix matching two ids exits 2 and names the candidates."""
    ids = [
        call(shared_daemon, "add_entry", title=f"T{i}", content=f"content number {i}")["entry"]["id"]
        for i in range(40)
    ]
    first = {i[0] for i in ids}
    shared = next(c for c in sorted(first) if sum(i.startswith(c) for i in ids) > 1)
    result = run_maka(shared_daemon, "memory", "archive", shared)
    assert result.returncode == 2 and "ambiguous" in result.stderr


def test_edit_with_flags(shared_daemon: DaemonProcess) -> None:
    """memory edit --content/--tags changes only those fields."""
    entry = call(shared_daemon, "add_entry", title="Editor", content="vim", tags=["tools"])["entry"]
    result = run_maka(
        shared_daemon, "--json", "memory", "edit", entry["id"], "--content", "helix", "--tags", ""
    )
    updated = json.loads(result.stdout)["entry"]
    assert updated["content"] == "helix" and updated["tags"] == [] and updated["title"] == "Editor"


def test_edit_in_editor(shared_daemon: DaemonProcess, short_tmp: Path) -> None:
    """Without field flags memory edit opens $EDITOR on a form and applies what was saved."""
    entry = call(shared_daemon, "add_entry", title="Shell", content="bash", tags=["tools"])["entry"]
    editor = editor_script(
        short_tmp,
        "path.write_text(text.replace('Title: Shell', 'Title: Login shell')"
        ".replace('bash', 'zsh with oh-my-zsh'))",
    )
    result = run_maka(shared_daemon, "memory", "edit", entry["id"], env={"EDITOR": editor, "VISUAL": ""})
    assert result.returncode == 0, result.stderr
    state = call(shared_daemon, "read_state", includeEntries=True)
    (after,) = state["entries"]
    assert (after["title"], after["content"], after["tags"]) == (
        "Login shell",
        "zsh with oh-my-zsh",
        ["tools"],
    )


def test_edit_off_a_terminal_without_an_editor_says_what_to_pass(
    shared_daemon: DaemonProcess, short_tmp: Path
) -> None:
    """memory edit ID with no field, off a terminal and with neither $VISUAL nor $EDITOR set,
    does not start vi on a pipe: a usage error names the flags and --from; nothing changes."""
    entry = call(shared_daemon, "add_entry", title="Shell", content="bash")["entry"]
    before = memory_text(shared_daemon)
    nothing = short_tmp / "empty-path"
    nothing.mkdir()
    env = {"EDITOR": "", "VISUAL": "", "PATH": str(nothing)}
    result = run_maka(shared_daemon, "memory", "edit", entry["id"], env=env)
    assert result.returncode == 2
    assert "--content" in result.stderr and "--from" in result.stderr and "EDITOR" in result.stderr
    assert "cannot run the editor" not in result.stderr
    assert memory_text(shared_daemon) == before


def test_edit_cancelled_by_empty_content(shared_daemon: DaemonProcess, short_tmp: Path) -> None:
    """Saving an empty content in the editor changes nothing."""
    entry = call(shared_daemon, "add_entry", title="Keep", content="keep me")["entry"]
    editor = editor_script(short_tmp, "path.write_text(text.split('---')[0] + '---\\n')")
    before = memory_text(shared_daemon)
    result = run_maka(shared_daemon, "memory", "edit", entry["id"], env={"EDITOR": editor, "VISUAL": ""})
    assert result.returncode == 0 and "Cancelled" in result.stderr
    assert memory_text(shared_daemon) == before


def test_archive_restore_delete(shared_daemon: DaemonProcess) -> None:
    """archive, restore and delete act on every id given."""
    a = call(shared_daemon, "add_entry", title="A", content="alpha")["entry"]["id"]
    b = call(shared_daemon, "add_entry", title="B", content="beta")["entry"]["id"]
    assert run_maka(shared_daemon, "memory", "archive", a, b).returncode == 0
    assert call(shared_daemon, "read_state")["entryCount"] == 0
    listed = run_maka(shared_daemon, "memory", "list", "--archived").stdout
    assert listed.count("archived") == 2
    assert run_maka(shared_daemon, "memory", "restore", a).returncode == 0
    deleted = run_maka(shared_daemon, "memory", "delete", a)
    assert deleted.returncode == 0 and deleted.stdout.startswith("Deleted ")
    ids = {
        e["id"]
        for e in call(shared_daemon, "read_state", includeEntries=True, includeArchived=True)["entries"]
    }
    assert ids == {b}


def test_settings_show_and_patch(shared_daemon: DaemonProcess) -> None:
    """settings KEY=VALUE patches (on/off accepted); without pairs it shows them all and names
    the workspace they belong to; a key without a value says how to write it."""
    result = run_maka(shared_daemon, "--json", "settings", "agentReadEnabled=on", "defaultDecayDays=30")
    assert result.returncode == 0
    changed = json.loads(result.stdout)
    assert changed["agentReadEnabled"] is True and changed["defaultDecayDays"] == 30
    shown = run_maka(shared_daemon, "settings")
    assert ["agentReadEnabled", "true"] in [line.split() for line in shown.stdout.splitlines()]
    assert shown.stdout.rstrip().endswith(f"Workspace: {shared_daemon.workspace}")
    bad = run_maka(shared_daemon, "settings", "agentReadEnabled")
    assert bad.returncode == 2
    assert "agentReadEnabled=on or agentReadEnabled=off" in bad.stderr  # a key alone: the form to use


def test_settings_take_a_strategy_by_name(shared_daemon: DaemonProcess) -> None:
    """`maka settings contextStrategy=summary` sets the strategy as typed; a misspelt one
    is a usage error (exit 2) and the setting stays."""
    result = run_maka(shared_daemon, "--json", "settings", "contextStrategy=summary")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["contextStrategy"] == "summary"
    bad = run_maka(shared_daemon, "settings", "contextStrategy=sumary")
    assert bad.returncode == 2 and "did you mean 'summary'" in bad.stderr
    assert call(shared_daemon, "get_settings")["contextStrategy"] == "summary"


def test_list_of_an_unreadable_memory_file_says_so_once(shared_daemon: DaemonProcess) -> None:
    """MEMORY.md that is a folder: `maka memory list` exits 1 with one line naming the
    file and why, not the same error twice nor "memory is error"."""
    (shared_daemon.workspace / "memory" / "MEMORY.md").mkdir(parents=True)
    result = run_maka(shared_daemon, "memory", "list")
    assert result.returncode == 1 and result.stdout == ""
    folder = shared_daemon.workspace / "memory"
    assert result.stderr.splitlines() == [
        f"maka: cannot read the memory in {folder}: a memory file is not a regular file"
    ]


def test_call_fills_in_the_workspace(shared_daemon: DaemonProcess, short_tmp: Path) -> None:
    """`maka call` gives a method that takes a workspace the command's (-w after the
    command, or found from the current folder) when PARAMS leave it out; PARAMS that
    name one win; a method without one (ping) gets none."""
    ws = shared_daemon.workspace
    gates = '{"agentReadEnabled": true, "extractToolEnabled": true}'
    assert run_maka(shared_daemon, "call", "set_settings", gates).returncode == 0
    proposed = run_maka(shared_daemon, "call", "propose", '{"title": "Via call", "content": "queued"}')
    assert proposed.returncode == 0, proposed.stderr
    assert json.loads(proposed.stdout)["queued"] is True
    (ws / "memory").mkdir(exist_ok=True)
    found = run_maka(shared_daemon, "call", "list_proposals", cwd=ws, workspace=False)
    assert found.returncode == 0, found.stderr
    assert [p["proposal"]["title"] for p in json.loads(found.stdout)["proposals"]] == ["Via call"]
    other = short_tmp / "other"
    other.mkdir()
    named = run_maka(shared_daemon, "call", "read_state", json.dumps({"workspace": str(other)}))
    assert json.loads(named.stdout)["path"] == str(other / "memory" / "MEMORY.md")
    assert json.loads(run_maka(shared_daemon, "call", "ping").stdout) == "pong"


def test_incognito_list_says_so(shared_daemon: DaemonProcess) -> None:
    """With incognito on, memory list prints the status instead of entries."""
    call(shared_daemon, "add_entry", title="Secret plan", content="x")
    call(shared_daemon, "set_settings", incognito=True)
    result = run_maka(shared_daemon, "memory", "list")
    assert result.returncode == 0 and "Secret plan" not in result.stdout
    assert "incognito_blocked" in result.stderr


def test_edit_refuses_to_overwrite_a_change_made_meanwhile(
    shared_daemon: DaemonProcess, short_tmp: Path
) -> None:
    """A change made while $EDITOR is open makes the edit fail with conflict; nothing is lost."""
    entry = call(shared_daemon, "add_entry", title="Shell", content="bash")["entry"]
    meanwhile = (
        f"from maka import Client\n"
        f"Client({str(shared_daemon.socket)!r}).call('add_entry', workspace={str(shared_daemon.workspace)!r}, "
        f"title='Meanwhile', content='added while editing')\n"
        f"path.write_text(text.replace('bash', 'zsh'))"
    )
    result = run_maka(
        shared_daemon,
        "memory",
        "edit",
        entry["id"],
        env={"EDITOR": editor_script(short_tmp, meanwhile), "VISUAL": ""},
    )
    assert result.returncode == 1 and "conflict" in result.stderr
    contents = {e["content"] for e in call(shared_daemon, "read_state", includeEntries=True)["entries"]}
    assert contents == {"bash", "added while editing"}
    # The text typed in the editor is kept in a private file, and --from applies it.
    (kept,) = re.findall(r"kept in (\S+\.md)", result.stderr)
    assert "zsh" in Path(kept).read_text() and Path(kept).stat().st_mode & 0o077 == 0
    again = run_maka(shared_daemon, "memory", "edit", entry["id"], "--from", kept)
    assert again.returncode == 0, again.stderr
    contents = {e["content"] for e in call(shared_daemon, "read_state", includeEntries=True)["entries"]}
    assert contents == {"zsh", "added while editing"}
    Path(kept).unlink()


def test_list_shows_ids_that_show_accepts_for_legacy_manual_ids(shared_daemon: DaemonProcess) -> None:
    """Legacy `manual-<ms>` ids sharing 12+ characters are listed long enough to stay unambiguous."""
    memory = shared_daemon.workspace / "memory"
    memory.mkdir(exist_ok=True)
    memory.joinpath("MEMORY.md").write_text(
        "# Maka Memory\n\n"
        + "".join(
            f"## Legacy {n}\n<!-- maka-memory: id=manual-171430000000{n} origin=manual createdAt=1 "
            f"updatedAt=1 status=active tags= -->\nold entry {n}\n\n"
            for n in range(3)
        ),
        encoding="utf-8",
    )
    listed = run_maka(shared_daemon, "memory", "list")
    assert listed.returncode == 0
    shown = [line.split()[0] for line in listed.stdout.splitlines()[1:]]
    assert sorted(shown) == [f"manual-171430000000{n}" for n in range(3)]
    for n, short in enumerate(sorted(shown)):
        result = run_maka(shared_daemon, "memory", "show", short)
        assert result.returncode == 0, result.stderr
        assert f"old entry {n}" in result.stdout


def test_short_ids_are_the_shortest_unambiguous_prefix() -> None:
    """Ids are cut at 12 characters unless another id shares that prefix; prefixes of others stay whole."""
    ids = ["0123456789abcdef", "0123456789abXXXX", "fedcba9876543210", "h-abc", "h-abc~2"]
    assert short_ids(ids) == {
        "0123456789abcdef": "0123456789abc",
        "0123456789abXXXX": "0123456789abX",
        "fedcba9876543210": "fedcba987654",
        "h-abc": "h-abc",
        "h-abc~2": "h-abc~2",
    }


def test_an_id_two_entries_share_is_listed_with_its_whole_suffix() -> None:
    """The second of two entries typed with one 16-character id is listed as `ID~2`, the id
    its warning names, never cut to `ID~`."""
    shared = "aaaaaaaaaaaaaaaa"
    assert short_ids([shared, f"{shared}~2", "bbbbbbbbbbbbbbbb"]) == {
        shared: shared,
        f"{shared}~2": f"{shared}~2",
        "bbbbbbbbbbbbbbbb": "bbbbbbbbbbbb",
    }


def test_pin_and_unpin_by_prefix(shared_daemon: DaemonProcess) -> None:
    """memory pin takes id prefixes, keeps the other tags and says when there was nothing to
    do; the pinned entry leads the agent's memory; unpin takes it back."""
    d = shared_daemon
    call(d, "set_settings", agentReadEnabled=True)
    first = call(d, "add_entry", title="Deploys", content="Tuesdays only.", tags=["ops"])["entry"]
    for i in range(30):
        call(d, "add_entry", title=f"Note {i}", content=f"Unrelated note number {i}. " * 6)
    pinned = run_maka(d, "memory", "pin", first["id"][:8])
    assert pinned.returncode == 0 and pinned.stdout.startswith(f"Pinned {first['id']}: Deploys")
    assert "tags=ops,pinned" in memory_text(d)
    again = run_maka(d, "memory", "pin", first["id"])
    assert again.stdout.startswith("Already pinned")
    pack = call(d, "build_context", budgetTokens=600, query="quarterly offsite")
    included = [c for c in pack["trace"]["candidates"] if c["included"]]
    assert included[0]["sourceId"] == f"memory:{first['id']}" and included[0]["pinned"] is True
    listed = run_maka(d, "memory", "list", "-t", "pinned")
    assert "Deploys" in listed.stdout and "Note 1" not in listed.stdout
    unpinned = run_maka(d, "--json", "memory", "unpin", first["id"])
    assert json.loads(unpinned.stdout)["entry"]["tags"] == ["ops"]
    assert "tags=ops -->" in memory_text(d)


def test_pin_warns_when_the_pinned_entries_no_longer_fit(shared_daemon: DaemonProcess) -> None:
    """Pinning past what a 1,500-token pack holds prints read_state's warning and its fix."""
    d = shared_daemon
    ids = [
        call(d, "add_entry", title=f"Rule {i}", content=f"Rule {i}: " + "always check the long list. " * 12)[
            "entry"
        ]["id"]
        for i in range(16)
    ]
    result = run_maka(d, "memory", "pin", *ids)
    assert result.returncode == 0 and result.stdout.count("Pinned ") == 16
    assert "pinned entry" in result.stderr and "does not fit" in result.stderr
    listed = run_maka(d, "memory", "list")
    assert "maka memory unpin ID" in listed.stderr


def test_pin_an_unknown_id_fails_cleanly(shared_daemon: DaemonProcess) -> None:
    """An id that matches no entry is an error, and nothing is written."""
    call(shared_daemon, "add_entry", title="Only", content="one entry")
    before = memory_text(shared_daemon)
    result = run_maka(shared_daemon, "memory", "pin", "ffffffff")
    assert result.returncode != 0 and "ffffffff" in result.stderr
    assert memory_text(shared_daemon) == before


def test_tidy_counts_one_line_in_the_singular(shared_daemon: DaemonProcess) -> None:
    """`maka memory tidy --import -y` on one stray bullet says "1 memory", "This line" and
    "1 line", not "1 memories" / "These 1 lines"."""
    memory = shared_daemon.workspace / "memory"
    memory.mkdir(exist_ok=True)
    (memory / "MEMORY.md").write_text(
        "# Maka Memory\n\n- always run tests before pushing\n\n## Tabs\nUse tabs.\n"
    )
    result = run_maka(shared_daemon, "memory", "tidy", "--import", "-y")
    assert result.returncode == 0, result.stderr
    assert "Queued 1 memory from" in result.stdout
    assert "This line above the first entry" in result.stdout and "Removed 1 line;" in result.stdout
    assert not re.search(r"\b1 (memories|lines)\b|These 1\b", result.stdout)
    assert "This line above the first entry of memory/MEMORY.md was imported" in result.stdout
    assert "brings it back" in result.stdout and "them" not in result.stdout


def test_tidy_import_on_prose_does_not_point_back_at_itself(shared_daemon: DaemonProcess) -> None:
    """`maka memory tidy --import` with only a prose line above the first entry says the line
    is no bullet and how to keep or drop it, never to run `tidy --import` again; the file stays."""
    memory = shared_daemon.workspace / "memory"
    memory.mkdir(exist_ok=True)
    text = "# Maka Memory\n\nSome notes for the agent.\n\n## Tabs\nUse tabs.\n"
    (memory / "MEMORY.md").write_text(text)
    result = run_maka(shared_daemon, "memory", "tidy", "--import")
    assert result.returncode == 0, result.stderr
    assert "No bullets above the first entry to import." in result.stdout
    assert "1 line there is no bullet and stays: give a memory there a `## Title` line" in result.stdout
    assert "tidy --import` queues" not in result.stdout
    assert (memory / "MEMORY.md").read_text() == text
    listed = run_maka(shared_daemon, "memory", "list")
    assert "bullets there (a list copied from a CLAUDE.md)" in listed.stderr


def test_workspace_given_as_its_memory_folder_names_the_parent(shared_daemon: DaemonProcess) -> None:
    """`maka -w WS/memory memory list` (the memory folder taken for the workspace) says the
    workspace is WS, and never advises moving MEMORY.md into memory/memory/ or importing it."""
    ws = shared_daemon.workspace
    (ws / "memory").mkdir(exist_ok=True)
    (ws / "memory" / "MEMORY.md").write_text("# Maka Memory\n\n## Tabs\nUse tabs.\n")
    result = run_maka(shared_daemon, "memory", "list", "-w", str(ws / "memory"), workspace=False)
    assert result.returncode == 0
    assert f"-w {ws} " in result.stderr, result.stderr
    assert "mkdir -p memory" not in result.stderr and "maka import" not in result.stderr
    assert not (ws / "memory" / "memory").exists()


def test_edit_tags_that_drop_the_pin_say_so(shared_daemon: DaemonProcess) -> None:
    """`memory edit ID --tags ops` on a pinned entry notes on stderr that it is no longer
    pinned and how to pin it again; tags that keep `pinned` (or an unpinned entry) get no note."""
    entry_id = call(shared_daemon, "add_entry", title="Deploys", content="Tuesdays.", tags=["ops"])["entry"][
        "id"
    ]
    assert run_maka(shared_daemon, "memory", "pin", entry_id[:8]).returncode == 0
    kept = run_maka(shared_daemon, "memory", "edit", entry_id[:8], "--tags", "ops,pinned,infra")
    assert kept.returncode == 0 and "pinned" not in kept.stderr
    dropped = run_maka(shared_daemon, "memory", "edit", entry_id[:8], "--tags", "ops")
    assert dropped.returncode == 0
    ws = shared_daemon.workspace
    assert "no longer pinned" in dropped.stderr
    assert f"`maka -w {ws} memory pin {entry_id[:12]}` pins it again" in dropped.stderr
    again = run_maka(shared_daemon, "memory", "edit", entry_id[:8], "--tags", "infra")
    assert again.returncode == 0 and again.stderr == ""


def test_first_add_says_where_the_memory_file_is(shared_daemon: DaemonProcess) -> None:
    """The add that creates memory/MEMORY.md names the file (the workspace was found like git,
    perhaps not where the user thought); later adds do not repeat it."""
    path = shared_daemon.workspace / "memory" / "MEMORY.md"
    first = run_maka(shared_daemon, "memory", "add", "Deploys", "On Tuesdays.")
    assert first.returncode == 0 and f"Created {path}" in first.stdout
    second = run_maka(shared_daemon, "memory", "add", "Editor", "Uses vim.")
    assert second.returncode == 0 and "Created" not in second.stdout


def test_first_user_level_add_says_where_its_memory_file_is(daemon: DaemonProcess) -> None:
    """The first `maka --user memory add` names the user level's MEMORY.md (in the daemon's
    data, where nobody would look for it) so it can be edited by hand; later adds do not."""
    first = run_maka(daemon, "--user", "memory", "add", "Spelling", "British English.", workspace=False)
    assert first.returncode == 0, first.stderr
    path = call(daemon, "read_state", workspace="@user")["path"]
    assert path.endswith("MEMORY.md") and f"Created {path}" in first.stdout
    again = run_maka(daemon, "--user", "memory", "add", "Tabs", "Indents with tabs.", workspace=False)
    assert again.returncode == 0 and "Created" not in again.stdout


def test_first_add_in_a_git_repository_says_to_keep_the_id_file(shared_daemon: DaemonProcess) -> None:
    """The add that creates memory/MEMORY.md in a folder with .git says to commit or ignore
    memory/.maka-id (git stash -u would remove it); without .git, and on later adds, nothing."""
    plain = run_maka(shared_daemon, "memory", "add", "Deploys", "On Tuesdays.")
    assert plain.returncode == 0 and ".maka-id" not in plain.stderr
    repo = shared_daemon.workspace / "repo"
    (repo / ".git").mkdir(parents=True)
    first = run_maka(shared_daemon, "memory", "add", "Editor", "Uses vim.", "-w", str(repo), workspace=False)
    assert first.returncode == 0, first.stderr
    assert "commit memory/ with its .maka-id, or add memory/.maka-id to .gitignore" in first.stderr
    again = run_maka(shared_daemon, "memory", "add", "Shell", "Uses fish.", "-w", str(repo), workspace=False)
    assert again.returncode == 0 and ".maka-id" not in again.stderr


def test_the_command_that_makes_the_id_file_in_a_git_repository_says_to_keep_it(
    shared_daemon: DaemonProcess,
) -> None:
    """In a git work tree the command whose call makes memory/.maka-id says to commit or
    ignore it: `maka settings agentReadEnabled=on` (the first write), or the first listing of
    a MEMORY.md typed by hand; the commands after it, `maka memory add` included, do not."""
    note = "commit memory/ with its .maka-id, or add memory/.maka-id to .gitignore"
    repo = shared_daemon.workspace / "repo"
    (repo / ".git").mkdir(parents=True)
    on = run_maka(shared_daemon, "settings", "agentReadEnabled=on", "-w", str(repo), workspace=False)
    assert on.returncode == 0 and note in on.stderr
    assert (repo / "memory" / ".maka-id").exists()
    add = run_maka(shared_daemon, "memory", "add", "Editor", "Uses vim.", "-w", str(repo), workspace=False)
    assert add.returncode == 0 and "Created" in add.stdout and ".maka-id" not in add.stderr
    typed = shared_daemon.workspace / "typed"
    (typed / ".git").mkdir(parents=True)
    (typed / "memory").mkdir()
    (typed / "memory" / "MEMORY.md").write_text("## Shell\nUses fish.\n")
    listed = run_maka(shared_daemon, "memory", "list", "-w", str(typed), workspace=False)
    assert listed.returncode == 0 and "Shell" in listed.stdout and note in listed.stderr
    again = run_maka(shared_daemon, "memory", "list", "-w", str(typed), workspace=False)
    assert again.returncode == 0 and ".maka-id" not in again.stderr


def test_an_empty_list_names_the_file_it_read(shared_daemon: DaemonProcess) -> None:
    """`maka memory list` with nothing to show names the MEMORY.md it looked at."""
    path = shared_daemon.workspace / "memory" / "MEMORY.md"
    path.parent.mkdir()
    path.write_text("# Maka Memory\n")
    result = run_maka(shared_daemon, "memory", "list")
    assert result.returncode == 0 and result.stdout == f"No entries in {path}.\n"


def test_an_empty_list_of_a_file_not_made_yet_says_how_to_start_it(shared_daemon: DaemonProcess) -> None:
    """Before MEMORY.md exists, `maka memory list` says so and names the command that
    creates it (with the workspace it was run with) and the editor's way."""
    ws = shared_daemon.workspace
    path = ws / "memory" / "MEMORY.md"
    result = run_maka(shared_daemon, "memory", "list", "-w", str(ws), workspace=False)
    assert result.returncode == 0
    assert result.stdout.startswith(f"No entries in {path}: it does not exist yet.")
    assert f"`maka -w {ws} memory add TITLE TEXT` creates it" in result.stdout
    assert "## Title" in result.stdout and "docs/FORMAT.md" in result.stdout
    assert not path.exists()


def test_a_title_given_to_a_change_is_refused_in_one_message(shared_daemon: DaemonProcess) -> None:
    """`maka memory archive Tabs` (the title, not the id) and the other changes refuse it in
    one line naming the entry's id, with no not_found after it, and change nothing."""
    added = call(shared_daemon, "add_entry", title="Tabs", content="Use tabs.")["entry"]["id"]
    for args in (("archive",), ("delete", "-y"), ("pin",), ("edit", "--title", "Spaces")):
        result = run_maka(shared_daemon, "memory", *args, "tabs" if args[0] == "pin" else "Tabs")
        assert result.returncode == 1, (args, result.stderr)
        (line,) = result.stderr.splitlines()
        assert f"the entry titled 'Tabs' has id {added[:12]}: give that instead" in line, args
        assert "not_found" not in line and result.stdout == ""
    (entry,) = call(shared_daemon, "read_state", includeEntries=True)["entries"]
    assert (entry["title"], entry["status"], entry["tags"]) == ("Tabs", "active", [])


def test_show_takes_the_title_of_one_active_entry(shared_daemon: DaemonProcess) -> None:
    """`maka memory show CI` shows the one active entry titled CI as its id would, saying
    nothing more; so does `ci` when no entry is titled exactly that; `C` matches no title."""
    added = call(shared_daemon, "add_entry", title="CI", content="CI runs on every push.")["entry"]["id"]
    by_id = run_maka(shared_daemon, "memory", "show", added)
    assert by_id.returncode == 0 and "CI runs on every push." in by_id.stdout
    for typed in ("CI", "ci"):
        shown = run_maka(shared_daemon, "memory", "show", typed)
        assert (shown.returncode, shown.stdout, shown.stderr) == (0, by_id.stdout, ""), typed
    as_json = run_maka(shared_daemon, "memory", "show", "ci", "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["id"] == added
    part = run_maka(shared_daemon, "memory", "show", "C")
    assert part.returncode == 1 and "CI runs" not in part.stdout


def test_show_prefers_the_title_typed_exactly_to_one_in_another_case(shared_daemon: DaemonProcess) -> None:
    """With entries titled CI and ci, `show ci` is the one titled ci; `show Ci`, which
    both match only whatever the case, lists both ids and fails."""
    upper = call(shared_daemon, "add_entry", title="CI", content="Upper.")["entry"]["id"]
    lower = call(shared_daemon, "add_entry", title="ci", content="Lower.")["entry"]["id"]
    shown = run_maka(shared_daemon, "memory", "show", "ci")
    assert shown.returncode == 0 and "Lower." in shown.stdout and "Upper." not in shown.stdout
    mixed = run_maka(shared_daemon, "memory", "show", "Ci")
    assert mixed.returncode == 2 and mixed.stdout == ""
    (line,) = mixed.stderr.splitlines()
    assert upper[:12] in line and lower[:12] in line


def test_show_of_a_title_two_active_entries_share_lists_their_ids(shared_daemon: DaemonProcess) -> None:
    """`maka memory show Deploy` with two active entries titled Deploy exits 2 with one line
    naming both ids (no not_found), and shows neither."""
    ids = [
        call(shared_daemon, "add_entry", title="Deploy", content=text)["entry"]["id"]
        for text in ("On Tuesdays.", "With make deploy.")
    ]
    result = run_maka(shared_daemon, "memory", "show", "Deploy")
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert f"2 active entries are titled 'Deploy', with ids {ids[0][:12]}, {ids[1][:12]}" in line
    assert "not_found" not in line


def test_show_takes_an_id_before_a_title_equal_to_it(shared_daemon: DaemonProcess) -> None:
    """An id that is also another entry's title shows the entry of that id."""
    first = call(shared_daemon, "add_entry", title="Editor", content="Uses vim.")["entry"]["id"]
    call(shared_daemon, "add_entry", title=first, content="Titled like an id.")
    shown = run_maka(shared_daemon, "memory", "show", first)
    assert shown.returncode == 0 and shown.stderr == ""
    assert "Uses vim." in shown.stdout and "Titled like an id." not in shown.stdout


def test_show_names_an_archived_entry_of_that_title_by_id(shared_daemon: DaemonProcess) -> None:
    """A title only an archived entry has is named with that entry's id in one line (exit 1);
    beside an active entry of the same title, the active one is shown."""
    old = call(shared_daemon, "add_entry", title="Shell", content="Uses bash.")["entry"]["id"]
    call(shared_daemon, "archive_entry", id=old)
    result = run_maka(shared_daemon, "memory", "show", "Shell")
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert f"the archived entry titled 'Shell' has id {old[:12]}" in line
    assert f"memory show {old[:12]}` shows it" in line
    call(shared_daemon, "add_entry", title="Shell", content="Uses fish.")
    shown = run_maka(shared_daemon, "memory", "show", "Shell")
    assert shown.returncode == 0 and "Uses fish." in shown.stdout and "Uses bash." not in shown.stdout


def test_show_names_a_waiting_proposal_of_that_title_by_id(shared_daemon: DaemonProcess) -> None:
    """A title only a waiting proposal has is named with the proposal's id in one line (exit
    1): a title stands for an active entry alone."""
    call(shared_daemon, "set_settings", agentReadEnabled=True, extractToolEnabled=True)
    proposal = call(shared_daemon, "propose", title="Use ruff", content="Lint with ruff.")
    proposal_id = proposal["proposal"]["id"]
    result = run_maka(shared_daemon, "memory", "show", "use ruff")
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert f"the proposal waiting titled 'Use ruff' has id {proposal_id[:12]}" in line


def test_show_of_words_of_a_title_names_the_entries_whose_title_holds_them(
    shared_daemon: DaemonProcess,
) -> None:
    """`maka memory show deploys` with an entry titled "Deploys happen on Tuesdays" shows
    nothing (a part of a title never stands for an entry) and names that entry's id and
    title in one line (exit 1), instead of the daemon's not_found."""
    added = call(shared_daemon, "add_entry", title="Deploys happen on Tuesdays", content="Never Fridays.")
    entry_id = added["entry"]["id"]
    result = run_maka(shared_daemon, "memory", "show", "deploys")
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert f"{entry_id[:12]} 'Deploys happen on Tuesdays'" in line and "not_found" not in line
    assert f"memory show {entry_id[:12]}` shows it" in line


def test_a_list_of_only_archived_entries_says_how_to_see_them(shared_daemon: DaemonProcess) -> None:
    """With every entry archived, `maka memory list` counts them and names `-a`, rather than
    "No entries" alone."""
    added = call(shared_daemon, "add_entry", title="Tabs", content="Use tabs.")["entry"]["id"]
    call(shared_daemon, "archive_entry", id=added)
    result = run_maka(shared_daemon, "memory", "list")
    assert result.returncode == 0
    assert "No active entries" in result.stdout and "1 archived" in result.stdout
    assert "memory list -a" in result.stdout


def test_show_marks_sources_that_name_nothing_stored(shared_daemon: DaemonProcess) -> None:
    """A proposal written into PENDING.md by hand with an invented ref is read and approved
    as it is; memory show marks that ref (not in the ledger), not the recorded one or an import's."""
    call(shared_daemon, "set_settings", agentReadEnabled=True, extractToolEnabled=True)
    sid = call(shared_daemon, "open_session")["sessionId"]
    call(
        shared_daemon, "append_events", sessionId=sid, events=[{"type": "user_message", "text": "uv please"}]
    )
    call(shared_daemon, "propose", title="Editor", content="Uses vim.", sourceRefs=[f"event:{sid}:1"])
    refs = f"event:{sid}:1,event:s9:1-4,import:md:x"
    pending = shared_daemon.workspace / "memory" / "PENDING.md"
    pending.write_text(
        pending.read_text()
        + "\n## Use uv\n<!-- maka-memory: id=9d8c7b6a5f4e3d2c origin=extracted createdAt=40 updatedAt=40"
        + f" status=review_required source={refs} -->\nSwitch the project to uv.\n"
    )
    (view,) = [
        v for v in call(shared_daemon, "list_proposals")["proposals"] if v["proposal"]["title"] == "Use uv"
    ]
    assert view["proposal"]["sourceRefs"] == refs.split(",")
    shown = run_maka(shared_daemon, "memory", "show", "9d8c7b6a5f4e3d2c")
    assert shown.returncode == 0, shown.stderr
    assert f"sources event:{sid}:1, event:s9:1-4 (not in the ledger), import:md:x\n" in shown.stdout
    entry = call(shared_daemon, "approve", ids=["9d8c7b6a5f4e3d2c"])["approved"][0]["entry"]
    assert entry["sourceRefs"] == refs.split(",")
    history = call(shared_daemon, "memory_history", id=entry["id"])
    assert history["unresolvedRefs"] == ["event:s9:1-4"]


def test_add_without_a_title_on_a_terminal_opens_the_editor(
    shared_daemon: DaemonProcess, short_tmp: Path
) -> None:
    """`maka memory add` alone, on a terminal, opens $EDITOR on an empty form: the title and
    the text typed there are the entry added."""
    editor = editor_script(
        short_tmp,
        "path.write_text(text.replace('Title: ', 'Title: Login shell') + 'zsh with oh-my-zsh\\n')",
    )
    env = {**os.environ, "EDITOR": editor, "VISUAL": "", "TERM": "dumb"}
    pty = Pty(
        [*MAKA, "--socket", str(shared_daemon.socket), "memory", "add", "-w", str(shared_daemon.workspace)],
        env,
    )
    code, out = pty.wait()
    assert code == 0, out
    assert "Added" in out
    (entry,) = call(shared_daemon, "read_state", includeEntries=True)["entries"]
    assert (entry["title"], entry["content"]) == ("Login shell", "zsh with oh-my-zsh")


def test_add_without_a_title_off_a_terminal_names_what_to_give(shared_daemon: DaemonProcess) -> None:
    """`maka memory add` with neither TITLE nor a terminal to edit in is a usage error naming
    TITLE and the editor; nothing is written."""
    result = run_maka(shared_daemon, "memory", "add", input="some text\n")
    assert result.returncode == 2
    assert "TITLE" in result.stderr and "EDITOR" in result.stderr
    assert not (shared_daemon.workspace / "memory" / "MEMORY.md").exists()

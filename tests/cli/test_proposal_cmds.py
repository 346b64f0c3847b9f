"""`maka pending`, `approve`, `reject`, `import` and `export` against a real daemon."""

from __future__ import annotations

import json
import os
import shlex
import stat
from pathlib import Path
from typing import Any

from tests.cli.helpers import call, run_maka
from tests.support import DaemonProcess


def propose(d: DaemonProcess, title: str, content: str, **kw: Any) -> str:
    call(d, "set_settings", agentReadEnabled=True, extractToolEnabled=True)
    result = call(d, "propose", title=title, content=content, **kw)
    proposal_id: str = result["proposal"]["id"]
    return proposal_id


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def files(d: DaemonProcess) -> tuple[str, str]:
    """The text of MEMORY.md and PENDING.md ("" when absent)."""
    mem = d.workspace / "memory"
    return read(mem / "MEMORY.md"), read(mem / "PENDING.md")


def test_pending_lists_the_queue(shared_daemon: DaemonProcess) -> None:
    """pending shows each proposal with its origin and similar count; --json is list_proposals."""
    propose(shared_daemon, "Tabs", "The user prefers tabs for indentation in Go code.")
    propose(shared_daemon, "Tabs again", "The user prefers tabs for indentation in all Go code.")
    table = run_maka(shared_daemon, "pending")
    assert table.returncode == 0
    rows = table.stdout.splitlines()
    assert rows[0].split() == ["ID", "ORIGIN", "PROPOSED", "SIMILAR", "TAGS", "TITLE"]
    assert sum("extracted" in r for r in rows) == 2 and "2 waiting" in table.stdout
    listing = json.loads(run_maka(shared_daemon, "pending", "--json").stdout)
    assert len(listing["proposals"]) == 2 and listing["proposals"][0]["similarTo"]


def test_empty_queue(shared_daemon: DaemonProcess) -> None:
    """pending on an empty queue says so, naming the workspace it looked in, and exits 0."""
    result = run_maka(shared_daemon, "pending")
    assert result.returncode == 0 and f"No proposals waiting in {shared_daemon.workspace}." in result.stdout
    user = run_maka(shared_daemon, "--user", "pending", workspace=False)
    assert user.returncode == 0 and "No proposals waiting in the user level (@user)." in user.stdout


def test_approve_by_prefix_moves_into_memory(shared_daemon: DaemonProcess) -> None:
    """approve ID… (prefixes accepted) activates proposals in MEMORY.md and empties PENDING.md."""
    first = propose(shared_daemon, "One", "first fact")
    second = propose(shared_daemon, "Two", "second fact")
    result = run_maka(shared_daemon, "approve", first[:8], second)
    assert result.returncode == 0 and result.stdout.count("Approved ") == 2
    memory, pending = files(shared_daemon)
    assert "first fact" in memory and "second fact" in memory
    assert "first fact" not in pending and "second fact" not in pending


def test_reject_with_reason_and_no_requeue(shared_daemon: DaemonProcess) -> None:
    """reject --reason removes the proposal; proposing it again is refused as rejected."""
    pid = propose(shared_daemon, "Wrong", "the user likes spaces")
    result = run_maka(shared_daemon, "reject", pid, "--reason", "not true")
    assert result.returncode == 0 and result.stdout.strip() == f"Rejected {pid}"
    assert "likes spaces" not in files(shared_daemon)[1]
    again = call(shared_daemon, "propose", title="Wrong", content="the user likes spaces")
    assert again["queued"] is False and again["previouslyRejected"]["reason"] == "not true"


def test_approve_all_and_reject_all(shared_daemon: DaemonProcess) -> None:
    """--all acts on the whole queue; ids and --all together are a usage error."""
    propose(shared_daemon, "A", "alpha fact")
    propose(shared_daemon, "B", "beta fact")
    assert run_maka(shared_daemon, "approve", "--all", "x").returncode == 2
    assert run_maka(shared_daemon, "approve").returncode == 2
    assert run_maka(shared_daemon, "approve", "--all").returncode == 0
    assert call(shared_daemon, "read_state")["entryCount"] == 2
    propose(shared_daemon, "C", "gamma fact")
    assert run_maka(shared_daemon, "reject", "--all").returncode == 0
    assert call(shared_daemon, "list_proposals")["proposals"] == []


def test_approve_unknown_id_is_remote_error(shared_daemon: DaemonProcess) -> None:
    """An unknown proposal id gives the daemon's not_found and exit 1."""
    result = run_maka(shared_daemon, "approve", "ffffffffffffffff")
    assert result.returncode == 1 and "not_found" in result.stderr


def test_pending_says_why_a_section_typed_into_pending_md_is_not_listed(shared_daemon: DaemonProcess) -> None:
    """A section typed into PENDING.md without status=review_required is not listed, and
    `maka pending` says so on stderr with its line and the comment that makes it a proposal."""
    pending = shared_daemon.workspace / "memory" / "PENDING.md"
    pending.parent.mkdir()
    pending.write_text("# Maka Pending Proposals\n\n## Hand proposal\nTyped here by hand.\n")
    result = run_maka(shared_daemon, "pending")
    assert result.returncode == 0 and "No proposals waiting in " in result.stdout
    assert "maka: warning: PENDING.md line 3" in result.stderr and '"Hand proposal"' in result.stderr
    assert "status=review_required" in result.stderr


def test_import_relative_path_lands_in_pending(shared_daemon: DaemonProcess, short_tmp: Path) -> None:
    """import FILE sends an absolute path; the memories wait in PENDING.md, not MEMORY.md."""
    source = short_tmp / "notes.md"
    source.write_text("- The user deploys on Tuesdays\n- The user's editor is helix\n")
    result = run_maka(shared_daemon, "import", "notes.md", "--format", "markdown", cwd=short_tmp)
    assert result.returncode == 0, result.stderr
    assert "Imported 2 memories" in result.stdout
    memory, pending = files(shared_daemon)
    assert "deploys on Tuesdays" in pending and "deploys on Tuesdays" not in memory
    again = run_maka(shared_daemon, "--json", "import", str(source), "--format", "markdown")
    assert json.loads(again.stdout)["imported"] == []


def test_import_into_another_workspace_names_it_in_what_to_run_next(
    shared_daemon: DaemonProcess, short_tmp: Path
) -> None:
    """`maka -w OTHER import` (and `-w OTHER pending`) say to review with `-w OTHER`: a bare
    `maka review` in the current folder would go through another workspace's queue."""
    other = short_tmp / "copy"
    other.mkdir()
    source = short_tmp / "notes.md"
    source.write_text("- The user deploys on Tuesdays\n")
    result = run_maka(shared_daemon, "import", str(source), "-w", str(other), workspace=False)
    assert result.returncode == 0, result.stderr
    assert f"run `maka -w {other} review` or `maka -w {other} approve --all`" in result.stdout
    listed = run_maka(shared_daemon, "pending", "-w", str(other), workspace=False)
    assert f"`maka -w {other} review` goes through them" in listed.stdout
    here = run_maka(shared_daemon, "pending", workspace=False, cwd=other)
    assert "`maka review` goes through them" in here.stdout  # found from the folder: no -w


def test_the_approve_command_an_import_suggests_approves_when_run_as_printed(
    shared_daemon: DaemonProcess, short_tmp: Path
) -> None:
    """The `maka approve …` an import suggests next is a whole command: pasted as printed,
    it approves what was imported (a bare `maka approve` would be a usage error)."""
    source = short_tmp / "notes.md"
    source.write_text("- The user deploys on Tuesdays\n- Go code uses tabs\n")
    result = run_maka(shared_daemon, "import", str(source))
    assert result.returncode == 0, result.stderr
    suggested = result.stdout.rsplit("`", 2)[1]
    assert suggested.startswith("maka ") and " approve" in suggested
    approved = run_maka(shared_daemon, *shlex.split(suggested)[1:], workspace=False)
    assert approved.returncode == 0, approved.stderr
    assert (
        len(
            call(shared_daemon, "read_state", workspace=str(shared_daemon.workspace), includeEntries=True)[
                "entries"
            ]
        )
        == 2
    )


def test_a_proposal_title_given_where_its_id_goes_names_the_id(shared_daemon: DaemonProcess) -> None:
    """`maka approve "Title"` (a waiting proposal's title, not its id) is refused in one
    line naming that proposal's id (no not_found after it), and approves nothing."""
    proposal_id = propose(shared_daemon, "Use ruff", "Lint with ruff.")
    for command in ("approve", "reject"):
        result = run_maka(shared_daemon, command, "use ruff")
        assert result.returncode == 1
        (line,) = result.stderr.splitlines()
        assert f"the proposal titled 'Use ruff' has id {proposal_id[:12]}: give that instead" in line
    pending = call(shared_daemon, "list_proposals")["proposals"]
    assert [view["proposal"]["id"] for view in pending] == [proposal_id]


def test_import_with_a_misspelt_format_names_the_closest(
    shared_daemon: DaemonProcess, short_tmp: Path
) -> None:
    """`maka import F --format mem1` exits 1 naming the closest format, and does not tell the
    user who passed --format to pass --format; nothing is queued."""
    source = short_tmp / "notes.json"
    source.write_text('[{"memory": "The user deploys on Tuesdays"}]')
    result = run_maka(shared_daemon, "import", str(source), "--format", "mem1")
    assert result.returncode == 1
    assert "did you mean mem0?" in result.stderr and "pass --format" not in result.stderr
    assert "Tuesdays" not in files(shared_daemon)[1]


def test_import_missing_file_is_usage_error(shared_daemon: DaemonProcess) -> None:
    """A FILE that does not exist exits 2 before asking the daemon."""
    result = run_maka(shared_daemon, "import", "/nonexistent/file.json")
    assert result.returncode == 2 and "no such file" in result.stderr


def test_export_json_and_markdown(shared_daemon: DaemonProcess, short_tmp: Path) -> None:
    """export prints the data itself (JSON or Markdown); -o writes it to a file."""
    call(shared_daemon, "add_entry", title="Lang", content="Go and Python")
    as_json = run_maka(shared_daemon, "export")
    assert json.loads(as_json.stdout)["entries"][0]["content"] == "Go and Python"
    as_md = run_maka(shared_daemon, "export", "--format", "markdown")
    assert "## Lang" in as_md.stdout
    target = short_tmp / "out.md"
    written = run_maka(shared_daemon, "export", "--format", "markdown", "-o", str(target))
    assert written.stdout == "" and "## Lang" in target.read_text()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # memory is private
    target.write_text("an older export")
    again = run_maka(shared_daemon, "export", "--format", "markdown", "-o", str(target))
    assert again.returncode == 0 and "older" not in target.read_text() and "## Lang" in target.read_text()


def test_a_quoted_tilde_in_a_file_argument_is_the_home_folder(
    shared_daemon: DaemonProcess, short_tmp: Path
) -> None:
    """`maka export -o '~/out.json'` (a ~ no shell expanded) writes into $HOME, as -w and
    import take ~ too; no folder named ~ is looked for."""
    call(shared_daemon, "add_entry", title="Lang", content="Go and Python")
    home = short_tmp / "home"
    home.mkdir()
    written = run_maka(shared_daemon, "export", "-o", "~/out.json", env={"HOME": str(home)})
    assert written.returncode == 0, written.stderr
    assert json.loads((home / "out.json").read_text())["entries"][0]["title"] == "Lang"


def test_export_never_writes_through_a_trap_at_the_output_path(
    shared_daemon: DaemonProcess, short_tmp: Path
) -> None:
    """-o at a symlink (live or dangling), a hard link or a FIFO someone planted: exit 2
    saying what is there, the file it leads to keeps its bytes and mode, nothing waits."""
    victim = short_tmp / "notes.txt"
    victim.write_text("the user's notes")
    victim.chmod(0o644)
    traps = {
        "symlink": lambda at: at.symlink_to(victim),
        "dangling": lambda at: at.symlink_to(short_tmp / "new.txt"),
        "hard link": lambda at: os.link(victim, at),
        "fifo": lambda at: os.mkfifo(at),
    }
    for name, plant in traps.items():
        at = short_tmp / f"out-{name.replace(' ', '-')}.md"
        plant(at)
        result = run_maka(shared_daemon, "export", "-o", str(at))
        assert result.returncode == 2 and f"not writing the export: {at}" in result.stderr, name
        assert victim.read_text() == "the user's notes" and stat.S_IMODE(victim.stat().st_mode) == 0o644
        assert not (short_tmp / "new.txt").exists()


def test_pending_in_a_workspace_counts_the_user_levels_queue_too(daemon: DaemonProcess) -> None:
    """`maka pending` in a workspace names the proposals waiting at the user level (an agent's
    `scope: "global"` ones, which `maka review` goes through next) and the command listing
    them, with the workspace's queue empty too; with none there it says nothing of it."""
    quiet = run_maka(daemon, "pending")
    assert quiet.returncode == 0 and "user level" not in quiet.stdout
    propose(daemon, "British spelling", "Write answers in British English.", scope="global")
    empty = run_maka(daemon, "pending")
    assert empty.returncode == 0, empty.stderr
    assert f"No proposals waiting in {daemon.workspace}" in empty.stdout
    assert "1 waits at the user level" in empty.stdout and "maka --user pending" in empty.stdout
    propose(daemon, "Tabs", "The user prefers tabs for indentation in Go code.")
    listed = run_maka(daemon, "pending")
    assert "1 waiting." in listed.stdout and "1 more waits at the user level" in listed.stdout
    assert "--json" not in listed.stdout
    assert len(json.loads(run_maka(daemon, "pending", "--json").stdout)["proposals"]) == 1


def test_import_of_a_claude_md_names_the_prose_it_left_out(
    shared_daemon: DaemonProcess, short_tmp: Path
) -> None:
    """`maka import CLAUDE.md` queues its bullets and says on stderr which lines of text were
    not imported (not bullets) and how to import one, so a section of prose is not lost unsaid."""
    source = short_tmp / "CLAUDE.md"
    source.write_text(
        "# CLAUDE.md\n\n- Use pnpm\n- Tabs for Go\n\n## Testing\nRun pytest -q before pushing.\n"
    )
    result = run_maka(shared_daemon, "import", str(source))
    assert result.returncode == 0, result.stderr
    assert "Imported 2 memories from claude_md" in result.stdout
    assert "skipped line 7: text, not a bullet" in result.stderr and "`- `" in result.stderr

"""`maka status` names what the workspace's memory files hold that makad cannot use."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.cli.helpers import run_maka
from tests.support import DaemonProcess

TYPO = "## Deploys\n<!-- maka-memory: id=aaaa status=actve -->\nTuesdays.\n"
REPEATED = "## Other\n<!-- maka-memory: id=aaaa -->\nText.\n"


def write_memory(workspace: Path, text: str, name: str = "MEMORY.md") -> None:
    (workspace / "memory").mkdir(exist_ok=True)
    (workspace / "memory" / name).write_text(text, encoding="utf-8")


def test_status_shows_the_workspace_file_warnings(shared_daemon: DaemonProcess) -> None:
    """maka status lists the workspace's MEMORY.md warnings (the typo with its likely
    spelling, the repeated id) under the workspace, with their count and kinds."""
    write_memory(shared_daemon.workspace, f"# Maka Memory\n\n{TYPO}\n{REPEATED}")
    result = run_maka(shared_daemon, "status")
    assert result.returncode == 0, result.stderr
    assert f"workspace        {shared_daemon.workspace}" in result.stdout
    assert "fileWarnings     2 (unknown_value 1, duplicate_id 1)" in result.stdout
    assert "did you mean status=active?" in result.stdout
    assert "id=aaaa is also the id of" in result.stdout
    assert "memory list" in result.stdout  # where the fixes are


def test_status_shows_a_pending_section_waiting_for_no_review(shared_daemon: DaemonProcess) -> None:
    """A PENDING.md section that is no proposal is named by maka status too."""
    write_memory(shared_daemon.workspace, "# Maka Memory\n")
    write_memory(shared_daemon.workspace, "# Pending\n\n## Typed here\nSome text.\n", "PENDING.md")
    result = run_maka(shared_daemon, "status")
    assert result.returncode == 0, result.stderr
    assert "not_a_proposal" in result.stdout and "not waiting for review" in result.stdout


def test_status_counts_many_warnings_and_shows_a_few(shared_daemon: DaemonProcess) -> None:
    """With many warnings maka status gives their count and shows the first few, then how
    many more there are, instead of a screenful."""
    sections = "".join(f"## E{i}\n<!-- maka-memory: status=actve -->\nText {i}.\n\n" for i in range(30))
    write_memory(shared_daemon.workspace, "# Maka Memory\n\n" + sections)
    result = run_maka(shared_daemon, "status")
    assert result.returncode == 0, result.stderr
    assert "fileWarnings     30 (unknown_value 30)" in result.stdout
    assert result.stdout.count("did you mean status=active?") == 5
    assert "25 more" in result.stdout


def test_status_json_carries_the_workspace_warnings(shared_daemon: DaemonProcess) -> None:
    """maka status --json adds the workspace, its memory status and read_state's warnings
    to the daemon's status, one object a script can read."""
    write_memory(shared_daemon.workspace, f"# Maka Memory\n\n{TYPO}")
    result = run_maka(shared_daemon, "status", "--json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["socket"] == str(shared_daemon.socket)
    workspace = status["workspace"]
    assert workspace["path"] == str(shared_daemon.workspace) and workspace["status"] == "ok"
    assert [w["kind"] for w in workspace["warnings"]] == ["unknown_value"]
    assert workspace["warnings"][0]["line"] == 4


def test_status_without_a_workspace_reads_none(shared_daemon: DaemonProcess, tmp_path: Path) -> None:
    """Run outside any workspace (no memory files, no -w), maka status reports the daemon
    only and creates nothing in the current folder."""
    result = run_maka(shared_daemon, "status", "--json", workspace=False, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "workspace" not in json.loads(result.stdout)
    assert list(tmp_path.iterdir()) == []


def test_status_with_a_clean_workspace_says_so(shared_daemon: DaemonProcess) -> None:
    """A workspace whose files hold nothing to warn about reads "fileWarnings none"."""
    write_memory(shared_daemon.workspace, f"# Maka Memory\n\n{TYPO.replace('actve', 'active')}")
    result = run_maka(shared_daemon, "status")
    assert result.returncode == 0, result.stderr
    assert "fileWarnings     none" in result.stdout


def test_a_memory_file_not_in_utf8_gets_a_fix_that_makes_it_utf8(shared_daemon: DaemonProcess) -> None:
    """`maka memory list` on a cp1252 MEMORY.md prints a fix naming the file; running its
    iconv command makes the warnings go and keeps the entry's id."""
    memory = shared_daemon.workspace / "memory"
    memory.mkdir(exist_ok=True)
    (memory / "MEMORY.md").write_bytes(b"# Maka Memory\n\n## Caf\xe9\nna\xefve\n")
    before = json.loads(run_maka(shared_daemon, "--json", "memory", "list").stdout)
    listed = run_maka(shared_daemon, "memory", "list")
    fixes = [line for line in listed.stderr.splitlines() if line.startswith("  fix: ")]
    assert len(fixes) == 1 and str(memory / "MEMORY.md") in fixes[0], listed.stderr
    command = fixes[0].split("`iconv", 1)[1].split("`", 1)[0]
    subprocess.run("iconv" + command, shell=True, check=True)
    after = run_maka(shared_daemon, "--json", "memory", "list")
    assert "not valid UTF-8" not in after.stderr
    entries = json.loads(after.stdout)["entries"]
    assert [(e["id"], e["title"]) for e in entries] == [(before["entries"][0]["id"], "Café")]


def test_status_in_a_project_without_memory_names_the_folder_maka_would_use(
    shared_daemon: DaemonProcess, tmp_path: Path
) -> None:
    """In a git repository with no memory yet, maka status names the folder `maka` commands
    work on there and the command that starts its memory; it reads and creates nothing."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / "src").mkdir()
    result = run_maka(shared_daemon, "status", workspace=False, cwd=project / "src")
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("workspace")]
    assert str(project) in line and "no memory yet" in line and "maka memory add" in line
    assert "fileWarnings" not in result.stdout
    assert sorted(p.name for p in project.iterdir()) == [".git", "src"]

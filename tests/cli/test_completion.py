"""`maka completion bash|zsh|fish`: generated from the parser, exercised in a real bash."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from maka.cli import build_parser
from maka.cli.completion import fish_script, tree, zsh_script
from tests.cli.helpers import call
from tests.support import DaemonProcess

TOP = {
    "attention",
    "suggest",
    "episodes",
    "consolidate",
    "status",
    "stop",
    "ping",
    "call",
    "settings",
    "memory",
    "pending",
    "approve",
    "reject",
    "import",
    "export",
    "review",
    "watch",
    "context",
    "compact",
    "completion",
    "mcp",
    "sessions",
    "search",
    "backups",
    "undo",
}


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("completion") / "maka.bash"
    out = subprocess.run(
        [sys.executable, "-m", "maka.cli", "completion", "bash"], capture_output=True, text=True, check=True
    )
    path.write_text(out.stdout)
    return path


def complete(script: Path, *words: str, cwd: Path | None = None) -> list[str]:
    """What bash offers for the last word of ``words`` (the first word is the command)."""
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    program = (
        f"source '{script}'; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
        "_maka; printf '%s\\n' \"${COMPREPLY[@]}\""
    )
    out = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True, timeout=20, cwd=cwd
    )
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if line]


def test_tree_has_every_command() -> None:
    """The completion tree is the parser's: every command and memory action is in it."""
    root = tree(build_parser())
    assert set(root.children) == TOP
    assert set(root.children["memory"].children) == {
        "list",
        "show",
        "tidy",
        "add",
        "edit",
        "pin",
        "unpin",
        "archive",
        "restore",
        "delete",
    }
    assert root.children["export"].values["--format"] == "w:json markdown"


def test_bash_completes_commands_and_actions(script: Path) -> None:
    """Command names, memory actions and an option's choices complete in bash."""
    assert complete(script, "maka", "mem") == ["memory"]
    assert set(complete(script, "maka", "memory", "")) >= {"list", "show", "add", "delete"}
    assert complete(script, "maka", "--json", "export", "--format", "m") == ["markdown"]
    assert "--archived" in complete(script, "maka", "memory", "list", "--a")


def test_bash_completes_directories_for_workspace(script: Path, short_tmp: Path) -> None:
    """--workspace completes directories only."""
    (short_tmp / "wsdir").mkdir()
    (short_tmp / "wsfile").write_text("")
    assert complete(script, "maka", "pending", "--workspace", "ws", cwd=short_tmp) == ["wsdir"]


def test_bash_completes_pending_ids_from_the_daemon(
    script: Path, daemon: DaemonProcess, short_tmp: Path
) -> None:
    """approve completes the ids of waiting proposals, asking the daemon named on the line."""
    call(daemon, "set_settings", agentReadEnabled=True, extractToolEnabled=True)
    pid = call(daemon, "propose", title="T", content="complete me")["proposal"]["id"]
    wrapper = short_tmp / "maka"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m maka.cli "$@"\n')
    wrapper.chmod(0o755)
    offered = complete(
        script, str(wrapper), "--socket", str(daemon.socket), "approve", "-w", str(daemon.workspace), ""
    )
    assert pid in offered


def test_complete_ids_is_silent_without_a_daemon(short_tmp: Path) -> None:
    """The helper behind id completion prints nothing and exits 0 when no daemon answers."""
    out = subprocess.run(
        [sys.executable, "-m", "maka.cli", "__complete", "memory", "--socket", str(short_tmp / "none.sock")],
        capture_output=True,
        text=True,
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")


def test_zsh_script_loads_bash_completion() -> None:
    """The zsh script is a #compdef file that reuses the bash function through bashcompinit."""
    text = zsh_script(tree(build_parser()))
    assert text.startswith("#compdef maka") and "bashcompinit" in text and "_maka()" in text
    if shutil.which("zsh"):
        assert subprocess.run(["zsh", "-n"], input=text, text=True).returncode == 0


def test_fish_script_covers_every_command() -> None:
    """The fish script offers each top-level command at the top level."""
    text = fish_script(tree(build_parser()))
    top = [
        line
        for line in text.splitlines()
        if line.startswith("complete -c maka -n '__maka_at ")
        and " -a " in line
        and "\\'\\'" in line
        and " -s " not in line
        and " -l " not in line  # an option's values (-w DIR), not a command
    ]
    offered = {line.split(" -a ")[1].split()[0].strip("'") for line in top}
    assert offered == TOP
    if shutil.which("fish"):
        assert subprocess.run(["fish", "-n"], input=text, text=True).returncode == 0

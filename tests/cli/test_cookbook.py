"""The docs' shell recipes run as written against a real daemon: docs/CLI.md's cookbook,
its recipes for the lines above the first entry and for stopping the daemon, and
docs/MCP.md's settings (docs/SERVICE.md's install runs in tests/e2e/test_service_units.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import call
from tests.support import DaemonProcess

DOCS = Path(__file__).resolve().parents[2] / "docs"
DOC = (DOCS / "CLI.md").read_text(encoding="utf-8")
COOKBOOK = DOC.split("## Shell cookbook", 1)[1].split("\n## ", 1)[0]
RECIPES = re.findall(r"```sh\n(.*?)```", COOKBOOK, flags=re.S)


def section_recipes(text: str, heading: str) -> list[str]:
    """The ```sh blocks under ``heading`` (up to the next heading)."""
    body = text.split(f"{heading}\n", 1)[1]
    body = re.split(r"\n#{2,4} ", body, maxsplit=1)[0]
    return re.findall(r"```sh\n(.*?)```", body, flags=re.S)


def run_recipe(daemon: DaemonProcess, recipe: str, **env: str) -> subprocess.CompletedProcess[str]:
    """A recipe in bash -eo pipefail, in the daemon's workspace, stdin empty (not a terminal)."""
    return subprocess.run(
        ["bash", "-eo", "pipefail", "-c", recipe],
        cwd=daemon.workspace,
        env={
            **os.environ,
            "MAKAD_SOCKET": str(daemon.socket),
            "MAKA_WORKSPACE": "",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            **env,
        },
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("jq") is None, reason="the recipes use jq")
def test_every_recipe_runs(daemon: DaemonProcess) -> None:
    """Each recipe exits 0 in a workspace with entries and proposals, and does what it says."""
    assert len(RECIPES) >= 8
    call(daemon, "add_entry", title="Deploys", content="The team deploys on Tuesdays.", tags=["ops"])
    call(daemon, "add_entry", title="Editor", content="The user edits in helix.")
    call(daemon, "import_memories", data="Prefers metric units.\nHas two cats.\n", format="chatgpt")
    session = call(daemon, "open_session", title="Staging")["sessionId"]
    call(
        daemon,
        "append_events",
        sessionId=session,
        events=[{"type": "user_message", "text": "Staging is called heron."}],
    )
    outputs = []
    for recipe in RECIPES:
        done = run_recipe(daemon, recipe)
        assert done.returncode == 0, (recipe, done.stderr)
        outputs.append(done.stdout)
    titles, tagged, waiting, _, switch, context, _, watched, history = outputs[:9]
    assert titles.splitlines() == ["Deploys", "Editor"]
    assert tagged.strip().endswith("\tDeploys")
    assert waiting.strip() == "2"
    assert call(daemon, "list_proposals")["proposals"] == []  # the imported ones were approved
    assert switch.strip() == "true"
    assert "The team deploys on Tuesdays." in context
    copy = daemon.workspace.parent / "copy"
    assert len(call(daemon, "list_proposals", workspace=str(copy))["proposals"]) == 4  # 2 + 2 approved
    assert json.loads(watched.strip()) > 0
    assert history.strip() == "Staging is called heron."  # the session found by its short id


@pytest.mark.skipif(shutil.which("jq") is None, reason="the recipes use jq")
def test_lines_above_the_first_entry_recipe(shared_daemon: DaemonProcess) -> None:
    """The recipe queues the bullets above the first entry for review, takes exactly those
    lines out of MEMORY.md (prose and entries stay), and the review that follows sees them."""
    memory = shared_daemon.workspace / "memory"
    memory.mkdir()
    (memory / "MEMORY.md").write_text(
        "# Notes\n\n- Deploys go out on Tuesdays\n- Staging is called heron\n  (refreshed on Sundays)\n"
        "A paragraph of prose.\n\n## Editor\nThe user edits in helix.\n"
    )
    (recipe,) = section_recipes(DOC, "### Lines above the first entry")
    done = run_recipe(shared_daemon, recipe)
    assert done.returncode == 0, done.stderr
    assert "Queued 2 memories" in done.stdout and "Removed 3 lines" in done.stdout
    assert "Proposal 1/2" in done.stdout  # maka review, quit at the end of its (empty) input
    assert (memory / "MEMORY.md").read_text() == (
        "# Notes\n\nA paragraph of prose.\n\n## Editor\nThe user edits in helix.\n"
    )
    waiting = {v["proposal"]["content"] for v in call(shared_daemon, "list_proposals")["proposals"]}
    assert waiting == {"Deploys go out on Tuesdays", "Staging is called heron\n(refreshed on Sundays)"}


def test_stop_recipe(daemon: DaemonProcess) -> None:
    """`maka stop` stops the daemon and waits for it; the next line finds it stopped."""
    pid = daemon.call("status")["pid"]
    (recipe,) = section_recipes(DOC, "### Stopping the daemon")
    done = run_recipe(daemon, recipe)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"makad (pid {pid}) stopped", "makad is stopped"]
    assert daemon.proc is not None and daemon.proc.poll() == 0


def test_mcp_settings_recipe(shared_daemon: DaemonProcess, short_tmp: Path) -> None:
    """docs/MCP.md's switches for letting an agent read and propose (and recall) turn them on."""
    home = short_tmp / "home"
    project = home / "src" / "project"
    project.mkdir(parents=True)
    (recipe,) = section_recipes(
        (DOCS / "MCP.md").read_text(encoding="utf-8"), "To let an agent read and propose in a workspace:"
    )
    done = run_recipe(shared_daemon, recipe, HOME=str(home))
    assert done.returncode == 0, done.stderr
    settings = shared_daemon.call("get_settings", {"workspace": str(project)})
    assert (
        settings["agentReadEnabled"] and settings["extractToolEnabled"] and settings["historyRecallEnabled"]
    )

"""docs/CLI.md's shell cookbook runs as written against a real daemon."""

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

DOC = (Path(__file__).resolve().parents[2] / "docs" / "CLI.md").read_text(encoding="utf-8")
COOKBOOK = DOC.split("## Shell cookbook", 1)[1].split("\n## ", 1)[0]
RECIPES = re.findall(r"```sh\n(.*?)```", COOKBOOK, flags=re.S)


@pytest.mark.skipif(shutil.which("jq") is None, reason="the recipes use jq")
def test_every_recipe_runs(daemon: DaemonProcess) -> None:
    """Each recipe exits 0 in a workspace with entries and proposals, and does what it says."""
    assert len(RECIPES) >= 8
    call(daemon, "add_entry", title="Deploys", content="The team deploys on Tuesdays.", tags=["ops"])
    call(daemon, "add_entry", title="Editor", content="The user edits in helix.")
    call(daemon, "import_memories", data="Prefers metric units.\nHas two cats.\n", format="chatgpt")
    env = {
        **os.environ,
        "MAKAD_SOCKET": str(daemon.socket),
        "MAKA_WORKSPACE": "",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    outputs = []
    for recipe in RECIPES:
        done = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", recipe],
            cwd=daemon.workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, (recipe, done.stderr)
        outputs.append(done.stdout)
    titles, tagged, waiting, _, switch, context, _, watched = outputs[:8]
    assert titles.splitlines() == ["Deploys", "Editor"]
    assert tagged.strip().endswith("\tDeploys")
    assert waiting.strip() == "2"
    assert call(daemon, "list_proposals")["proposals"] == []  # the imported ones were approved
    assert switch.strip() == "true"
    assert "The team deploys on Tuesdays." in context
    copy = daemon.workspace.parent / "copy"
    assert len(call(daemon, "list_proposals", workspace=str(copy))["proposals"]) == 4  # 2 + 2 approved
    assert json.loads(watched.strip()) > 0

"""docs/MCP.md's snippets work as written."""

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

DOC = (Path(__file__).resolve().parents[2] / "docs" / "MCP.md").read_text(encoding="utf-8")


def test_json_snippets_parse() -> None:
    """Every JSON block of docs/MCP.md is valid JSON."""
    blocks = re.findall(r"```json\n(.*?)```", DOC, flags=re.S)
    assert len(blocks) >= 4
    for block in blocks:
        json.loads(block)


@pytest.mark.skipif(shutil.which("jq") is None, reason="the documented hook uses jq")
def test_user_prompt_submit_hook_injects_the_pack(daemon: DaemonProcess, short_tmp: Path) -> None:
    """The documented UserPromptSubmit hook prints the relevant memory for the prompt, and
    nothing (exit 0) while agent read is off."""
    script = DOC.split("```sh\n#!/bin/sh\n", 1)[1].split("```", 1)[0]
    hook = short_tmp / "maka-context.sh"
    hook.write_text("#!/bin/sh\n" + script)
    hook.chmod(0o755)
    call(daemon, "add_entry", title="Deploys", content="The team deploys on Tuesdays.")
    env = {
        **os.environ,
        "CLAUDE_PROJECT_DIR": str(daemon.workspace),
        "MAKAD_SOCKET": str(daemon.socket),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    prompt = json.dumps({"prompt": "when do we deploy?", "cwd": str(daemon.workspace)})

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(hook)], input=prompt, capture_output=True, text=True, env=env, timeout=60)

    closed = run()
    assert closed.returncode == 0 and closed.stdout == ""
    call(daemon, "set_settings", agentReadEnabled=True)
    opened = run()
    assert opened.returncode == 0
    assert opened.stdout.startswith("<memory>") and "The team deploys on Tuesdays." in opened.stdout


def test_help_and_docs_name_every_tool_the_bridge_serves() -> None:
    """`maka mcp --help` and docs/MCP.md name every tool the bridge defines."""
    from maka.mcp_bridge import PROPOSE, TOOLS

    names = {spec.name for spec in TOOLS} | {PROPOSE}
    helped = subprocess.run(
        [sys.executable, "-m", "maka.cli", "mcp", "--help"], capture_output=True, text=True, timeout=30
    )
    assert helped.returncode == 0
    flat = " ".join(helped.stdout.split())
    assert {n for n in names if n not in flat} == set()
    assert {n for n in names if f"`{n}" not in DOC} == set()

"""`maka mcp`: run the MCP bridge on stdin/stdout."""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import textwrap

from maka.cli.common import EXIT_OK, CliError, Parents, sendable_workspace
from maka.cli.remedies import found_by_walking_up
from maka.client import Client
from maka.workspace import resolve_workspace

# Hosts such as Claude Desktop start their servers in /, which a walk up cannot leave.
ROOT_HINT = (
    "maka mcp runs in / with no workspace named: the host's MCP settings must start it with "
    "`--workspace /path/to/the/project` (or `--user` for the user-level memory); tell the user"
)


def cmd_mcp(client: Client, args: argparse.Namespace) -> int:
    if importlib.util.find_spec("mcp") is None:
        raise CliError(
            "the MCP bridge needs the mcp package, a dependency of makad: "
            "reinstall makad, or pip install 'makad[mcp]'"
        )
    from maka.mcp_bridge import serve

    workspace = sendable_workspace(resolve_workspace(args.workspace))
    timeout = client.timeout if client.timeout is not None else 30.0
    uid = client.server_uid
    serve(
        client.socket_path,
        workspace,
        autostart=client.autostart,
        server_uid=uid,
        timeout=timeout,
        reserved_hint=_reserved_hint(args, workspace),
    )
    return EXIT_OK


def _reserved_hint(args: argparse.Namespace, workspace: str) -> str | None:
    """What to say when the daemon refuses the workspace as reserved (the filesystem root, or
    the home folder holding the user level's memory/, found by walking up): how to name what
    was meant."""
    if workspace == "/":
        return ROOT_HINT
    walked = found_by_walking_up(args)
    if walked is None:
        return None
    found, here = walked
    return (
        f"maka mcp found {found} by walking up from {here}, which holds no workspace of its "
        f"own: `maka mcp --user` serves the user level, `maka mcp -w {shlex.quote(here)}` "
        "makes this folder a workspace (tell the user; the host's MCP settings start maka mcp)"
    )


MCP_DESCRIPTION = (
    textwrap.fill(
        "A stdio MCP server for one workspace: --workspace, else $MAKA_WORKSPACE, "
        "else the nearest folder at or above the current one holding "
        "memory/MEMORY.md (or PENDING.md) or .git. Tools memory_search, "
        "memory_context, memory_attention, memory_suggestions, "
        "memory_dismiss_suggestion, memory_list, memory_resolve, history_search, "
        "session_record and (while the user allows it) memory_propose; resources "
        "MEMORY.md, PENDING.md and the attention state. Starts makad when none "
        "answers (unless maka --no-autostart mcp). Every privacy gate applies: "
        "agents read nothing until `maka settings agentReadEnabled=on`.",
        width=78,
    )
    + """

An MCP host starts it as a subprocess. Claude Code:
  claude mcp add maka -- maka mcp --workspace "$PWD"
Claude Desktop, Cursor, VS Code (the host's JSON settings; Claude Desktop starts
servers in /, so name the workspace):
  "maka": {"command": "maka", "args": ["mcp", "--workspace", "/path/to/project"]}

More (hooks, instructions for the agent, each host's settings file): makad's docs/MCP.md.
"""
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: Parents) -> None:
    p = sub.add_parser(
        "mcp",
        parents=[parents.workspace],
        help="serve the workspace's memory to an agent over MCP (stdio)",
        description=MCP_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(func=cmd_mcp)

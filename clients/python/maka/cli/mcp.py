"""`maka mcp`: run the MCP bridge on stdin/stdout (needs the optional `mcp` extra)."""

from __future__ import annotations

import argparse
import importlib.util

from maka.cli.common import EXIT_OK, CliError, Parents, workspace_of
from maka.client import Client


def cmd_mcp(client: Client, args: argparse.Namespace) -> int:
    if importlib.util.find_spec("mcp") is None:
        raise CliError("the MCP bridge needs the optional extra: pip install 'makad[mcp]'")
    from maka.mcp_bridge import serve

    serve(client.socket_path, workspace_of(args))
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: Parents) -> None:
    p = sub.add_parser(
        "mcp", parents=[parents.workspace],
        help="serve the workspace's memory to an agent over MCP (stdio)",
        description="A stdio MCP server with the tools memory_search, memory_context, "
                    "history_search and memory_propose. Every privacy gate applies; "
                    "memory_propose only queues proposals in PENDING.md.")
    p.set_defaults(func=cmd_mcp)

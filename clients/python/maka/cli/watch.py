"""`maka watch`: stream a workspace's change notifications until Ctrl-C."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from maka.cli.common import EXIT_OK, Parents, absolute, default_workspace
from maka.cli.output import now_ms, timestamp
from maka.client import Client


def describe(note: Mapping[str, Any], now_ms: int, show_workspace: bool) -> str:
    params = note.get("params") or {}
    line = (
        f"{timestamp(now_ms)}  {note.get('method', '?'):<18} "
        f"rev {params.get('revision', '?'):<5} {params.get('cause', '')}"
    )
    if show_workspace:
        line += f"  {params.get('workspace', '')}"
    return line.rstrip()


def cmd_watch(client: Client, args: argparse.Namespace) -> int:
    given = args.workspace  # a list after the command, one path before it, or None
    workspaces = [given] if isinstance(given, str) else given or [default_workspace()]
    for ws in workspaces:
        result = client.call("subscribe", {"workspace": ws})
        # On stderr, so stdout carries only notifications; a script can wait for this line.
        print(f"watching {ws} (revision {result['revision']}); Ctrl-C to stop", file=sys.stderr, flush=True)
    seen = 0
    while True:
        try:
            for note in client.notifications():
                if args.json:
                    print(json.dumps(note, ensure_ascii=False), flush=True)
                else:
                    print(describe(note, now_ms(), len(workspaces) > 1), flush=True)
                seen += 1
                if args.count and seen >= args.count:
                    return EXIT_OK
        except TimeoutError:
            continue  # a quiet spell longer than --timeout: keep waiting


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: Parents) -> None:
    p = sub.add_parser(
        "watch",
        parents=[parents.json],
        help="stream memory_changed / proposals_changed / settings_changed notifications",
        description="One line per notification; with --json one JSON object per line (NDJSON).",
    )
    p.add_argument(
        "-w",
        "--workspace",
        metavar="DIR",
        type=absolute,
        action="append",
        default=argparse.SUPPRESS,
        help="a workspace to watch (repeatable; env MAKA_WORKSPACE; default: found like git)",
    )
    p.add_argument(
        "-n",
        "--count",
        type=int,
        default=0,
        metavar="N",
        help="exit after N notifications (default: run until interrupted)",
    )
    p.set_defaults(func=cmd_watch)

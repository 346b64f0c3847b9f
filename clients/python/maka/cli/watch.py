"""`maka watch`: stream a workspace's change notifications until Ctrl-C."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from maka.cli.changes import entry_changes
from maka.cli.common import (
    EXIT_OK,
    USER_LEVEL,
    Parents,
    absolute,
    default_workspace,
    positive_int,
    sendable_workspace,
)
from maka.cli.output import now_ms, short_id, timestamp
from maka.client import Client
from maka.errors import DaemonUnavailable
from maka.notifications import DAEMON_STOPPING, RECONNECTED, SUBSCRIPTION_LOST


def describe(note: Mapping[str, Any], now_ms: int, show_workspace: bool) -> str:
    params = note.get("params") or {}
    method = note.get("method", "?")
    if method == DAEMON_STOPPING:
        return f"{timestamp(now_ms)}  {method:<18} makad is stopping ({params.get('reason', '?')})"
    if method == SUBSCRIPTION_LOST:
        return f"{timestamp(now_ms)}  {method:<18} {params.get('workspace', '')}: {params.get('error', '')}"
    if method == RECONNECTED:
        return f"{timestamp(now_ms)}  {method:<18} subscriptions renewed; changes meanwhile were not notified"
    line = (
        f"{timestamp(now_ms)}  {note.get('method', '?'):<18} "
        f"rev {params.get('revision', '?'):<5} {params.get('cause', '')}"
    )
    if show_workspace:
        line += f"  {params.get('workspace', '')}"
    return line.rstrip()


# The note the daemon leaves on an entry of MEMORY.md it queued back in PENDING.md.
RETURNED_NOTE = "returned-after-a-save-lacked-it"
WHY_RETURNED = "a save lacked it (an editor buffer older than the daemon's write?)"
WHAT_NOW = "a save lacked it; approve it to keep it, reject it to delete it"


class Snapshots:
    """The last entries, proposals and settings seen per workspace, to say what a
    notification changed (notifications carry the workspace, its revision, and the
    entries a stale save made the daemon write back or return)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.seen: dict[tuple[str, str], Any] = {}

    def read(self, method: str, workspace: str) -> Any:
        if method == "memory_changed":
            state = self.client.call(
                "read_state", {"workspace": workspace, "includeEntries": True, "includeArchived": True}
            )
            return state.get("entries") if state.get("status") == "ok" else None
        if method == "proposals_changed":
            listing = self.client.call("list_proposals", {"workspace": workspace})
            return [{**v["proposal"], "note": v.get("note")} for v in listing["proposals"]]
        if method == "settings_changed":
            return self.client.call("get_settings", {"workspace": workspace})
        return None

    def remember(self, workspace: str) -> None:
        for method in ("memory_changed", "proposals_changed", "settings_changed"):
            self.seen[(method, workspace)] = self.read(method, workspace)

    def changes(self, note: Mapping[str, Any]) -> list[str]:
        """What this notification changed, one line each (nothing when it cannot be read)."""
        method = str(note.get("method", ""))
        workspace = str((note.get("params") or {}).get("workspace", ""))
        before = self.seen.get((method, workspace))
        after = self.read(method, workspace)
        self.seen[(method, workspace)] = after
        if before is None or after is None:
            return []
        if method == "settings_changed":
            return [
                f"{k} {json.dumps(before.get(k))} → {json.dumps(v)}"
                for k, v in after.items()
                if before.get(k) != v
            ]
        params = note.get("params") or {}
        returned = set(params.get("returned") or [])
        notes = {str(p["id"]): p.get("note") for p in after}
        lines = []
        for change in entry_changes(before, after):
            said = f"{change.title!r} ({short_id(change.id)})"
            if method == "memory_changed" and change.action == "removed" and change.id in returned:
                lines.append(f"returned {said} to PENDING.md: {WHY_RETURNED}")
                returned.discard(change.id)
            elif (
                method == "proposals_changed"
                and change.action == "added"
                and (change.id in returned or notes.get(change.id) == RETURNED_NOTE)
            ):
                lines.append(f"returned {said}: {WHAT_NOW}")
            elif method == "proposals_changed":
                verb = {"added": "proposed", "removed": "decided"}.get(change.action, change.action)
                lines.append(f"{verb} {said}")
            else:
                lines.append(change.describe())
        if method == "memory_changed":
            titles = {str(e["id"]): str(e.get("title", "")) for e in [*before, *after]}
            if returned - titles.keys():  # a return the readings missed: the entry came and went
                listing = self.client.call("list_proposals", {"workspace": workspace})
                titles.update(
                    {str(v["proposal"]["id"]): str(v["proposal"]["title"]) for v in listing["proposals"]}
                )
            lines += [
                f"returned {titles.get(i, '')!r} ({short_id(i)}) to PENDING.md: {WHY_RETURNED}"
                for i in sorted(returned)
            ]
            lines += [
                f"written back {titles[i]!r} ({short_id(i)}): a save lacked it"
                for i in params.get("reapplied") or []
                if i in titles
            ]
        return lines


def cmd_watch(client: Client, args: argparse.Namespace) -> int:
    given = args.workspace  # a list after the command, one path before it, or None
    chosen = [given] if isinstance(given, str) else given or [default_workspace()]
    workspaces = [sendable_workspace(ws) for ws in chosen]
    snapshots = None if args.json else Snapshots(client)
    for ws in workspaces:
        if snapshots is not None:
            snapshots.remember(ws)
        result = client.call("subscribe", {"workspace": ws})
        # On stderr, so stdout carries only notifications; a script can wait for this line.
        print(f"watching {ws} (revision {result['revision']}); Ctrl-C to stop", file=sys.stderr, flush=True)
    seen = 0
    while True:
        try:
            for note in client.notifications():
                if snapshots is None:
                    print(json.dumps(note, ensure_ascii=False), flush=True)
                else:
                    print(describe(note, now_ms(), len(workspaces) > 1), flush=True)
                    for line in snapshots.changes(note):
                        print(f"    {line}", flush=True)
                seen += 1
                if args.count and seen >= args.count:
                    return EXIT_OK
        except TimeoutError:
            continue  # a quiet spell longer than --timeout: keep waiting
        except DaemonUnavailable:
            if client.daemon_stopped is None:
                raise  # lost, not stopped: exit 3 with the reason
            # Stopped on purpose (maka stop, shutdown, systemctl stop) and not back: the
            # watch ends with it rather than start a daemon the user just stopped.
            print(f"maka: makad was stopped ({client.daemon_stopped}); watch ends", file=sys.stderr)
            return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: Parents) -> None:
    p = sub.add_parser(
        "watch",
        parents=[parents.json],
        help="stream memory_changed / proposals_changed / settings_changed notifications",
        description="One line per notification; with --json one JSON object per line (NDJSON). "
        "When makad is stopped on purpose (maka stop, shutdown, systemctl stop) and does not "
        "come back within a few seconds, the watch ends (exit 0); it never starts makad again.",
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
        "--user",
        dest="workspace",
        action="append_const",
        const=USER_LEVEL,
        default=argparse.SUPPRESS,
        help='watch the user-level memory too (the same as -w "@user")',
    )
    p.add_argument(
        "-n",
        "--count",
        type=positive_int,
        default=0,
        metavar="N",
        help="exit after N notifications (default: run until interrupted)",
    )
    p.set_defaults(func=cmd_watch)

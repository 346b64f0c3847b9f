"""`maka sessions`, `maka search`, `maka backups` and `maka undo`: what happened, and taking
the last change back."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from maka.cli.changes import entry_changes
from maka.cli.common import (
    EXIT_OK,
    EXIT_REMOTE,
    CliError,
    Parents,
    maka_command,
    positive_int,
    resolve_ids,
    resolve_session,
    workspace_of,
)
from maka.cli.memory import read_entries
from maka.cli.output import age, print_json, short_ids, show_table
from maka.client import Client

FILES = {"memory": "MEMORY", "pending": "PENDING"}


def cmd_sessions(client: Client, args: argparse.Namespace) -> int:
    listing: dict[str, Any] = client.call(
        "list_sessions", {"workspace": workspace_of(args), "includeClosed": not args.open}
    )
    if args.json:
        print_json(listing)
        return EXIT_OK
    sessions = listing["sessions"]
    if not sessions:
        closed = 0
        if args.open:
            every = client.call("list_sessions", {"workspace": workspace_of(args), "includeClosed": True})
            closed = len(every["sessions"])
        if closed:
            lists = maka_command(args, "sessions")
            print(f"No open sessions ({closed} closed: `{lists}` lists them).")
        else:
            print("No sessions.")
        return EXIT_OK
    shown = short_ids(s["sessionId"] for s in sessions)
    rows = [
        [
            shown[s["sessionId"]],
            age(s.get("createdAt")),
            ("open" if s.get("closedAt") is None else f"closed {age(s['closedAt'])}")
            + (", incognito" if s.get("incognito") else ""),
            str(s.get("eventCount", 0)),
            s.get("title") or "-",
        ]
        for s in sessions
    ]
    show_table(["ID", "STARTED", "STATE", "EVENTS", "TITLE"], rows)
    return EXIT_OK


def cmd_search(client: Client, args: argparse.Namespace) -> int:
    ws = workspace_of(args)
    params: dict[str, Any] = {"workspace": ws, "query": args.query, "limit": args.limit}
    if args.session:
        params["sessionId"] = resolve_session(client, ws, args.session)
    found: dict[str, Any] = client.call("search_history", params)
    if args.json:
        print_json(found)
        return EXIT_OK
    hits = found.get("hits") or []
    if not hits:
        print(f"No event of the agent sessions matches {args.query!r}.")
        # A query starting with a dash is given as --query=…: after -q it reads as an option.
        option = "--query=" if args.query.startswith("-") else "-q "
        context = maka_command(args, f"context {option}{shlex.quote(args.query)}")
        print(f"(this searched the sessions' history, not MEMORY.md: `{context}` shows what memory gives)")
        return EXIT_OK
    rows = [
        [
            f"event:{h['event']['sessionId'][:12]}:{h['event']['seq']}",
            age(h["event"].get("ts")),
            h["event"].get("type", ""),
            " ".join(str(h["event"].get("text") or "").split()),
        ]
        for h in hits
    ]
    show_table(["REF", "WHEN", "TYPE", "TEXT"], rows)
    for h in hits:
        if h.get("textCut"):
            ref = f"event:{h['event']['sessionId'][:12]}:{h['event']['seq']}"
            print(f"({ref}: the reply cut its text, {h.get('textChars')} characters in all)")
    if omitted := found.get("omitted"):
        more = f"{omitted} more matching event" + ("s were" if omitted > 1 else " was")
        print(
            f"({more} left out: a reply carries at most 8 MiB of events; narrow the query or use -s SESSION)"
        )
    return EXIT_OK


def backups_of(client: Client, ws: str) -> list[dict[str, Any]]:
    listing: dict[str, Any] = client.call("list_backups", {"workspace": ws})
    backups: list[dict[str, Any]] = listing["backups"]
    return backups


def cmd_backups(client: Client, args: argparse.Namespace) -> int:
    ws = workspace_of(args)
    if args.json:
        print_json({"backups": backups_of(client, ws)})
        return EXIT_OK
    backups = backups_of(client, ws)
    if not backups:
        print("No backups yet: one is kept each time the daemon rewrites a file.")
        return EXIT_OK
    rows = [[b["backupId"], b["file"], age(b.get("createdAt")), f"{b['size']:,} B"] for b in backups]
    show_table(["ID", "FILE", "SAVED", "SIZE"], rows)
    print(
        f"\n`{maka_command(args, 'undo')}` restores the newest MEMORY backup; "
        f"`{maka_command(args, 'undo ID')}` a chosen one."
    )
    return EXIT_OK


def cmd_undo(client: Client, args: argparse.Namespace) -> int:
    ws = workspace_of(args)
    before = read_entries(client, ws)  # first: its revision guards the restore
    backups = backups_of(client, ws)
    if args.backup:
        (backup_id,) = resolve_ids([b["backupId"] for b in backups], [args.backup])
        chosen = next((b for b in backups if b["backupId"] == backup_id), {"backupId": backup_id})
    else:
        kind = FILES[args.file]
        found = [b for b in backups if b["file"] == kind]
        if not found:
            raise CliError(f"nothing to undo: no backup of {kind}.md yet", EXIT_REMOTE)
        chosen = found[0]
    result = client.call(
        "restore_backup",
        {"workspace": ws, "backupId": chosen["backupId"], "expectedRevision": before["revision"]},
    )
    if args.json:
        print_json(result)
        return EXIT_OK
    name = f"{chosen.get('file', FILES[args.file])}.md"
    print(
        f"Restored {name} as it was {age(int(chosen.get('createdAt') or 0))} (backup {chosen['backupId']})."
    )
    if name == "MEMORY.md":
        for line in describe_changes(
            before.get("entries") or [], read_entries(client, ws).get("entries") or []
        ):
            print(f"  {line}")
    if result.get("undoBackupId"):
        print(f"`{maka_command(args, 'undo ' + result['undoBackupId'])}` puts back what this replaced.")
    return EXIT_OK


def describe_changes(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """What a restore did to the entries, one line each (an entry added back "brought back")."""
    lines = [
        c.describe().replace("added ", "brought back ", 1) if c.action == "added" else c.describe()
        for c in entry_changes(before, after)
    ]
    return lines or ["no entry changed"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: Parents) -> None:
    p = sub.add_parser(
        "sessions",
        parents=parents.scoped,
        help="the workspace's agent sessions (list_sessions)",
        description="Lists the workspace's agent sessions, newest first: id, when it started, "
        "open or closed (and incognito), how many events it recorded, and its title.",
    )
    p.add_argument("--open", action="store_true", help="only sessions still open")
    p.set_defaults(func=cmd_sessions)

    p = sub.add_parser(
        "search",
        parents=parents.scoped,
        help="search the workspace's agent sessions (search_history)",
        description="Full-text search (BM25) over the events of the workspace's agent sessions, "
        "best match first: each event's ref (event:SESSION:SEQ, the session as `maka sessions` "
        "shows it), age, type and text. Agents see these only with historyRecallEnabled; you "
        "always do.",
    )
    p.add_argument("query", metavar="QUERY", help="the words to look for")
    p.add_argument("-s", "--session", metavar="SESSION", help="only this session (id or unique prefix)")
    p.add_argument(
        "-n", "--limit", type=positive_int, default=20, help="at most this many events (default: 20)"
    )
    p.set_defaults(func=cmd_search)

    p = sub.add_parser(
        "backups",
        parents=parents.scoped,
        help="the saved versions of MEMORY.md and PENDING.md (list_backups)",
        description="Lists the backups the daemon keeps each time it rewrites MEMORY.md or "
        "PENDING.md: id, file, age and size. `maka undo [ID]` restores one.",
    )
    p.set_defaults(func=cmd_backups)

    p = sub.add_parser(
        "undo",
        parents=parents.scoped,
        help="restore the version before the last change (restore_backup)",
        description="Restores the newest backup of MEMORY.md (or --file pending), i.e. the file "
        "as it was before the daemon's last write, or the backup named. The restore is "
        "itself a write with its own backup, so it can be undone the same way. Refused "
        "with conflict when the file changes while it runs.",
    )
    p.add_argument("backup", nargs="?", metavar="BACKUP_ID", help="a backup id (or a unique prefix)")
    p.add_argument("--file", choices=sorted(FILES), default="memory", help="which file (default: memory)")
    p.set_defaults(func=cmd_undo)

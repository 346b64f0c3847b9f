"""`maka pending`, `approve`, `reject`, `import` and `export`: the approval queue."""

from __future__ import annotations

import argparse
import codecs
import json
import os
import shlex
import shutil
import sys
import time
from typing import Any

from maka.cli import review
from maka.cli.common import (
    EXIT_OK,
    EXIT_REMOTE,
    USER_LEVEL,
    CliError,
    Parents,
    absolute,
    did_you_mean,
    maka_command,
    resolve_ids,
    user_path,
    workspace_of,
)
from maka.cli.decided import refuse_not_waiting
from maka.cli.memory import read_entries
from maka.cli.output import age, print_json, short_id, short_ids, show_table, unfiltered
from maka.client import Client
from maka.errors import RemoteError
from maka.ids import matching_ids
from maka.notifications import Notification
from maka.words import redacted

NEAR_DUPLICATE_PROMPT = "[a]pprove as well [u]se instead [m]erge [s]kip [?] "


def list_proposals(client: Client, ws: str) -> dict[str, Any]:
    listing: dict[str, Any] = client.call("list_proposals", {"workspace": ws})
    return listing


def pending_ids(client: Client, ws: str) -> list[str]:
    return [v["proposal"]["id"] for v in list_proposals(client, ws)["proposals"]]


def cmd_pending(client: Client, args: argparse.Namespace) -> int:
    listing = list_proposals(client, workspace_of(args))
    if args.json:
        print_json(listing)
        return EXIT_OK
    # A section typed into PENDING.md without status=review_required is in no listing:
    # the warning is the one place that says why it is missing.
    for warning in listing.get("warnings") or []:
        print(f"maka: warning: {warning.get('message', warning.get('kind'))}", file=sys.stderr)
    views = listing["proposals"]
    ws = workspace_of(args)
    elsewhere = _user_level_note(client, args, ws, more=bool(views))
    if not views:
        # Named, so that a folder that is not the workspace meant is noticed.
        print(f"No proposals waiting in {'the user level (@user)' if ws == USER_LEVEL else ws}.{elsewhere}")
        return EXIT_OK
    rows = []
    shown_ids = short_ids(v["proposal"]["id"] for v in views)
    for view in views:
        p = view["proposal"]
        similar = str(len(view.get("similarTo", []))) if view.get("similarTo") else "-"
        status = "draft" if p.get("status") == "draft" else ""
        rows.append(
            [
                shown_ids[p["id"]],
                p.get("origin", ""),
                age(p.get("createdAt")),
                similar,
                ",".join(p.get("tags", [])) or "-",
                f"{p.get('title', '')}{' (draft)' if status else ''}{returned_mark(view)}"
                f"{replaces_mark(view)}",
            ]
        )
    show_table(["ID", "ORIGIN", "PROPOSED", "SIMILAR", "TAGS", "TITLE"], rows)
    review = maka_command(args, "review")
    print(f"\n{len(views)} waiting. `{review}` goes through them one by one.{elsewhere}")
    return EXIT_OK


def _user_level_note(client: Client, args: argparse.Namespace, ws: str, *, more: bool) -> str:
    """In a workspace, a sentence counting the proposals waiting at the user level (agents'
    ``scope: "global"`` ones, which ``maka review`` goes through after the workspace's), with
    the command listing them; "" at the user level itself or with none waiting there."""
    if ws == USER_LEVEL:
        return ""
    waiting = len(list_proposals(client, USER_LEVEL)["proposals"])
    if not waiting:
        return ""
    verb = "waits" if waiting == 1 else "wait"
    return (
        f" {waiting}{' more' if more else ''} {verb} at the user level (for every workspace): "
        "`maka --user pending` lists "
        f"{'it' if waiting == 1 else 'them'}, `{maka_command(args, 'review')}` goes through "
        f"{'it' if waiting == 1 else 'them'} {'after these' if more else 'too'}."
    )


def replaces_mark(view: dict[str, Any]) -> str:
    """A replacement names the entry it replaces, by id and title as it is now."""
    target = view["proposal"].get("supersedes")
    if not target:
        return ""
    old = view.get("replaces")
    if old is None:
        return f" (replaces {short_id(target)}: no longer in memory)"
    state = "" if old.get("status", "active") == "active" else f", {old.get('status')}"
    return f" (replaces {short_id(target)}{state}: {old.get('title', '')})"


def returned_mark(view: dict[str, Any]) -> str:
    """A proposal the daemon queued back after a save dropped it says so."""
    return " (returned: a save lacked it)" if view.get("note") else ""


def _chosen(
    client: Client, args: argparse.Namespace, command: str
) -> tuple[str, list[str], dict[str, list[str]]]:
    """The workspace, the proposal ids meant, and what each waiting one is similar to."""
    ws = workspace_of(args)
    views = list_proposals(client, ws)["proposals"]
    similar = {v["proposal"]["id"]: list(v.get("similarTo", [])) for v in views}
    known = list(similar)
    if args.all:
        if args.ids:
            raise CliError("give proposal ids or --all, not both")
        if not known:
            raise CliError("no proposals waiting", EXIT_OK)
        return ws, known, similar
    if not args.ids:
        raise CliError("name at least one proposal id, or --all")
    titled = {v["proposal"]["id"]: str(v["proposal"].get("title", "")) for v in views}
    for given in args.ids:
        if not matching_ids(known, given):
            refuse_not_waiting(client, args, ws, given, command)
    return ws, resolve_ids(known, args.ids, titled, noun="proposal"), similar


def cmd_approve(client: Client, args: argparse.Namespace) -> int:
    ws, ids, similar = _chosen(client, args, "approve")
    params: dict[str, Any] = {"workspace": ws, "ids": ids}
    active = {e["id"]: e for e in read_entries(client, ws, archived=False).get("entries") or []}
    if args.supersedes:
        if len(ids) != 1:
            raise CliError("--supersedes goes with one proposal id")
        (target,) = resolve_ids(active, [args.supersedes])
        params["edits"] = {ids[0]: {"supersedes": target}}
    elif sys.stdin.isatty() and not args.json:
        params["ids"], params["edits"] = _ask_near_duplicates(client, ws, ids, similar, active)
        if not params["ids"]:
            print("Nothing approved.", file=sys.stderr)
            return EXIT_OK
    result = client.call("approve", params)
    if args.json:
        print_json(result)
        return EXIT_OK
    for item in result["approved"]:
        entry = item["entry"]
        line = f"Approved {short_id(item['proposalId'])} → entry {entry['id']}: {entry['title']}"
        if item.get("superseded"):
            line += f" (archived {short_id(item['superseded'])}, which it replaces)"
        print(line)
        if not item.get("superseded") and not item.get("duplicateOf"):
            _offer_replace(args, item["proposalId"], similar.get(item["proposalId"], []), active)
    if result.get("redactions"):
        print(f"note: {redacted(result['redactions'])}", file=sys.stderr)
    return EXIT_OK


def _ask_near_duplicates(
    client: Client, ws: str, ids: list[str], similar: dict[str, list[str]], active: dict[str, dict[str, Any]]
) -> tuple[list[str], dict[str, Any]]:
    """On a terminal: for each proposal close to an active entry, approve it as well, use it
    instead of that entry, merge the two, or skip it. The ids to approve and their edits."""
    views = {v["proposal"]["id"]: v for v in list_proposals(client, ws)["proposals"]}
    keys = review.Keys(sys.stdin, sys.stdout)
    chosen: list[str] = []
    edits: dict[str, Any] = {}
    for pid in ids:
        view = views.get(pid)
        targets = review.replaceable(view, active) if view else []
        if view is None or not targets:
            chosen.append(pid)
            continue
        print("\n".join(review.card(view, 1, 1, active, {}, shutil.get_terminal_size((100, 24)).columns)))
        while True:
            key = keys.key(NEAR_DUPLICATE_PROMPT)
            if key == "a":
                chosen.append(pid)
            elif key in ("u", "m"):
                changes = review.replacement(key, view["proposal"], targets, active, keys, sys.stdout)
                if changes is None:
                    continue
                chosen.append(pid)
                edits[pid] = changes
            elif key != "s":
                print(review.REPLACE_HELP + " · a approve as well · s skip", file=sys.stdout)
                continue
            break
    return chosen, edits


def _offer_replace(
    args: argparse.Namespace, proposal_id: str, similar: list[str], active: dict[str, dict[str, Any]]
) -> None:
    """A near duplicate was approved beside the entry it resembles: say how to replace it."""
    for entry_id in (s for s in similar if s in active):
        print(
            f"note: it is close to entry {short_id(entry_id)} ({active[entry_id]['title']!r}), which stays "
            f"active: `{maka_command(args, 'memory archive ' + short_id(entry_id))}` retires that one. "
            f"Next time, `{maka_command(args, 'approve ID --supersedes ' + short_id(entry_id))}` "
            f"replaces it in one step, and `{maka_command(args, 'review')}` offers to merge the two "
            "texts (keys u and m).",
            file=sys.stderr,
        )


def cmd_reject(client: Client, args: argparse.Namespace) -> int:
    ws, ids, _ = _chosen(client, args, "reject")
    params: dict[str, Any] = {"workspace": ws, "ids": ids}
    if args.reason:
        params["reason"] = args.reason
    result = client.call("reject", params)
    if args.json:
        print_json(result)
    else:
        for rejected in result["rejected"]:
            print(f"Rejected {rejected}")
    return EXIT_OK


def cmd_import(client: Client, args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"workspace": workspace_of(args)}
    if args.file == "-":
        if sys.stdin.isatty():
            raise CliError("import - reads the export from stdin: pipe it in (cat notes.md | maka import -)")
        params["data"] = _stdin_text()
    else:
        path = absolute(args.file)
        if not os.path.exists(path):
            raise CliError(f"{args.file}: no such file or directory")
        params["path"] = path
    if args.format:
        params["format"] = args.format
    try:
        if args.json or not sys.stderr.isatty():
            result = client.call("import_memories", params)
        else:
            with ImportBar(client) as bar:
                result = client.call("import_memories", {**params, "progress": True})
                bar.done()
    except RemoteError as exc:
        if args.json or "formats" not in exc.data:
            raise
        return import_refused(exc, args.format)
    if args.json:
        print_json(result)
        return EXIT_OK
    imported = len(result["imported"])
    print(
        f"Imported {imported} memor{'y' if imported == 1 else 'ies'} from {result['format']} "
        f"into PENDING.md ({result['duplicates']} already known)."
    )
    if result.get("deferred"):
        print(
            f"{result['deferred']} more did not fit under PENDING.md's size cap. Review the queue "
            f"({maka_command(args, 'review')}), then run the same "
            f"`{maka_command(args, 'import ' + shlex.quote(args.file))}` again: what is already "
            "queued or decided is not added twice."
        )
    for problem in result.get("errors", []):
        print(f"  error {problem.get('locator', '?')}: {problem.get('reason', '')}", file=sys.stderr)
    for skipped in result.get("skipped", []):
        print(f"  skipped {skipped.get('locator', '?')}: {skipped.get('reason', '')}", file=sys.stderr)
    if imported:
        print(
            f"Nothing is active until approved: run `{maka_command(args, 'review')}` or "
            f"`{maka_command(args, 'approve --all')}`."
        )
    return EXIT_OK


def _stdin_text() -> str:
    """What is piped in, read as the daemon reads a file: UTF-16 or UTF-32 by its byte order
    mark, else UTF-8, else (bytes that are not UTF-8) cp1252."""
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:  # a text stream without bytes below it
        return sys.stdin.read()
    raw: bytes = buffer.read()
    for mark, encoding in (
        (codecs.BOM_UTF32_LE, "utf-32"),
        (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if raw.startswith(mark):
            return raw.decode(encoding, errors="replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("cp1252", errors="replace")


# The daemon's reasons for which naming another format may help.
FORMAT_MAY_HELP = frozenset({"no_memories", "unrecognised", "invalid_json", "unknown_format"})


def import_refused(exc: RemoteError, asked: str | None = None) -> int:
    """An import the daemon refused (empty, binary, nothing found, format unknown): its
    message, the way to name a format here (``--format``) or the format closest to the one
    ``asked``, and the items' errors."""
    print(f"maka: {exc.message}", file=sys.stderr)
    if exc.data.get("reason") == "unknown_format" and asked:
        close = did_you_mean(asked, [str(f) for f in exc.data.get("formats") or []], casefold=True)
        if close:
            print(f"  --format {asked}: did you mean {close}?", file=sys.stderr)
    elif exc.data.get("detected"):
        print(f"  without --format it is read as {exc.data['detected']}", file=sys.stderr)
    elif exc.data.get("reason") in FORMAT_MAY_HELP:
        print("  pass --format FORMAT to read it as one of those formats", file=sys.stderr)
    for problem in exc.data.get("errors", []):
        print(f"  error {problem.get('locator', '?')}: {problem.get('reason', '')}", file=sys.stderr)
    return EXIT_REMOTE


class ImportBar:
    """A progress bar on stderr for an import that takes more than a second (rich), fed by
    the daemon's import_progress notifications; nothing is drawn for a quick one."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.started = time.monotonic()
        self.after_s = float(os.environ.get("MAKA_PROGRESS_AFTER_S", "1"))
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> ImportBar:
        self.client.on_notification = self.note
        return self

    def note(self, message: Notification) -> None:
        if message.get("method") != "import_progress":
            return
        progress: dict[str, Any] = dict(message.get("params") or {})
        if self.bar is None:
            if time.monotonic() - self.started < self.after_s:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self.bar = Progress(
                "Importing",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(file=unfiltered(sys.stderr)),
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task("import", total=progress.get("total"))
        self.bar.update(self.task, completed=progress.get("done", 0), total=progress.get("total"))

    def done(self) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=self.bar.tasks[0].total)

    def __exit__(self, *exc: object) -> None:
        self.client.on_notification = None
        if self.bar is not None:
            self.bar.stop()


def write_export(path: str, data: str) -> None:
    """Write an export (private memory) to a new file (mode 0600) or over a regular file of
    the user's; never through a symlink, a FIFO or a hard link someone planted there."""
    # Here, not at the top: it loads the daemon's package, which no other command needs.
    from makad.private_files import NotPrivate, open_private, write_all

    try:
        fd = open_private(path, os.O_WRONLY)
    except NotPrivate as exc:
        raise CliError(f"not writing the export: {exc}") from None
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror}") from None
    try:
        os.ftruncate(fd, 0)
        write_all(fd, data.encode("utf-8"))
    finally:
        os.close(fd)


def cmd_export(client: Client, args: argparse.Namespace) -> int:
    result = client.call(
        "export_memories",
        {"workspace": workspace_of(args), "format": args.format, "includeArchived": args.archived},
    )
    data: str = result["data"]
    if args.json:
        # The JSON export is a document already: print it, not a string holding it.
        print_json(json.loads(data) if args.format == "json" else result)
        return EXIT_OK
    if args.output:
        write_export(args.output, data)
        print(f"Exported {result['count']} entries to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(data if data.endswith("\n") else data + "\n")
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: Parents) -> None:
    p = sub.add_parser(
        "pending",
        parents=parents.scoped,
        help="list the proposals waiting for approval (list_proposals)",
        description="Lists the proposals in PENDING.md waiting for approval: id, origin, age, "
        "how many active entries are similar, and title. `maka approve` / `maka reject` "
        "decide them; `maka review` goes through them one by one.",
    )
    p.set_defaults(func=cmd_pending)

    for name, func, text, description in (
        (
            "approve",
            cmd_approve,
            "activate proposals in MEMORY.md (approve)",
            "Moves the proposals named (or --all) from PENDING.md into MEMORY.md as active "
            "entries. On a terminal, a proposal close to an active entry asks whether it "
            "replaces that entry; --supersedes says so up front.",
        ),
        (
            "reject",
            cmd_reject,
            "reject proposals (reject)",
            "Removes the proposals named (or --all) from PENDING.md; the ledger keeps the "
            "rejection (and --reason): the same content proposed again is not queued.",
        ),
    ):
        p = sub.add_parser(name, parents=parents.scoped, help=text, description=description)
        p.add_argument(
            "ids",
            nargs="*",
            metavar="PROPOSAL_ID",
            help="proposal ids or unique prefixes of them (not titles)",
        )
        p.add_argument("--all", action="store_true", help="every proposal waiting")
        if name == "reject":
            p.add_argument("--reason", help="why (kept in the ledger)")
        else:
            p.add_argument(
                "--supersedes",
                metavar="ENTRY_ID",
                help="an active entry the approved one replaces (archived in the same write)",
            )
        p.set_defaults(func=func)

    p = sub.add_parser(
        "import",
        parents=parents.scoped,
        help="import memories from another tool into PENDING.md (import_memories)",
        description="FILE is an export file of another tool, a Claude Code "
        "memory directory, or plain text (one memory per line); the daemon reads it, "
        "so it is sent as an absolute path; - reads it from stdin (cat notes.md | maka import -). "
        "Binary and empty files are refused.",
    )
    p.add_argument("file", metavar="FILE", help="the file or folder to import, or - for stdin")
    p.add_argument(
        "--format",
        help="text (plain text, one memory per line), makad, mem0, openmemory, chatgpt, "
        "claude_code, claude_md, mcp_memory, letta, honcho, supermemory or markdown "
        "(default: detected)",
    )
    p.set_defaults(func=cmd_import)

    p = sub.add_parser(
        "export",
        parents=parents.scoped,
        help="print active entries as JSON or Markdown (export_memories)",
        description="Prints the workspace's active entries (with --archived, the archived ones "
        "too) as JSON, which `maka import --format makad` reads back, or as Markdown; -o FILE "
        "writes them to FILE instead.",
    )
    p.add_argument("--format", choices=["json", "markdown"], default="json", help="(default: json)")
    p.add_argument("-a", "--archived", action="store_true", help="include archived entries")
    p.add_argument("-o", "--output", metavar="FILE", type=user_path, help="write to FILE instead of stdout")
    p.set_defaults(func=cmd_export)

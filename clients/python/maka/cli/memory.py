"""`maka memory list|show|add|edit|pin|unpin|archive|restore|delete`: the user's own MEMORY.md
operations."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from maka.cli.common import (
    EXIT_OK,
    EXIT_REMOTE,
    USER_LEVEL,
    CliError,
    Command,
    Parents,
    did_you_mean,
    edit_in_editor,
    entry_form,
    maka_command,
    parse_entry_form,
    read_text_arg,
    resolve_ids,
    resolve_session,
    titled_ids,
    titled_text,
    user_path,
    with_workspace,
    workspace_of,
)
from maka.cli.decided import decision, lineage, refuse_decided_proposal
from maka.cli.output import (
    HAND_TYPED,
    age,
    entry_card,
    origin_label,
    print_json,
    short_id,
    short_ids,
    show_table,
    sources_text,
    timestamp,
)
from maka.cli.review import replacement_columns
from maka.client import Client
from maka.errors import Conflict, InvalidParams, MethodNotFound
from maka.ids import matching_ids
from maka.words import counted, redacted

# The tag that pins an entry (build_context always shows it, first).
PINNED_TAG = "pinned"


def csv_tags(value: str) -> list[str]:
    return [t.strip() for t in value.split(",") if t.strip()]


def days(text: str) -> float:
    """An argparse type: a number of days from 0 up (0: never)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"not a number of days from 0 up: {text!r}")
    return value


def tag_slug(tag: str) -> str:
    """A tag as the daemon stores it: lower case, runs of whitespace as ``-``."""
    return "-".join(tag.strip().lower().split())


def check_tags(given: list[str], known: set[str], noun: str) -> None:
    """A usage error for a tag filter that no entry (or episode: ``noun``) carries, so a typo
    is not mistaken for an empty list: it names the closest tag in use and every tag there is."""
    for tag in given:
        if tag_slug(tag) in known:
            continue
        close = did_you_mean(tag_slug(tag), known)
        hint = f": did you mean {close!r}?" if close else ""
        in_use = f"tags in use: {', '.join(sorted(known))}" if known else "no tags are in use"
        raise CliError(f"no {noun} is tagged {tag!r}{hint} ({in_use})")


def read_entries(client: Client, ws: str, archived: bool = True) -> dict[str, Any]:
    state: dict[str, Any] = client.call(
        "read_state", {"workspace": ws, "includeEntries": True, "includeArchived": archived}
    )
    return state


# What to do about a warning, beyond what its message says (the daemon's words are kept).
WARNING_FIXES = {
    "text_outside_entries": "put a `## Title` line above each memory in memory/MEMORY.md "
    "(makad's docs/FORMAT.md); bullets there (a list copied from a CLAUDE.md): `maka memory tidy "
    "--import` queues them for review in PENDING.md, then removes those lines from the top of the "
    "file (it asks first)",
    "not_a_heading": "type that line as ## Title (two #, a space) in memory/MEMORY.md "
    "(makad's docs/FORMAT.md)",
    "misplaced_file": "or queue its entries for review without moving it: maka import MEMORY.md",
    "pinned_over_share": "unpin some (maka memory unpin ID; maka memory list -t pinned lists them) "
    "or shorten them",
    **dict.fromkeys(
        ("unknown_value", "unknown_key", "bad_metadata", "duplicate_key", "duplicate_id", "unlikely_date"),
        "edit the metadata comment on that line of memory/MEMORY.md (makad's docs/FORMAT.md lists its keys "
        "and values); until then the entry works as the warning says and the file is left as typed",
    ),
}
OUTSIDE = "text_outside_entries"
# When every stray line's warning names the heading meant (`# Title` typed for `## Title`,
# `##Title`, `### Title`): no bullets to import, only headings to retype.
HEADINGS_FIX = (
    "type each heading named above as ## Title (two #, a space) in memory/MEMORY.md (makad's docs/FORMAT.md)"
)
# What lifts a memory status other than ok, for the line after it.
STATUS_FIXES = {
    "incognito_blocked": "`maka settings incognito=off` ends incognito here",
    "disabled": "`maka settings enabled=on` switches this workspace's memory on",
}


def warn_status(args: argparse.Namespace, state: dict[str, Any], tidy: dict[str, Any] | None = None) -> None:
    """The memory's status when it is not ok, and every warning with its fix, on stderr;
    ``tidy``: remove_outside_text's dry run, to say when the stray lines are imported."""
    status = state.get("status")
    reason = f": {state['reason']}" if state.get("reason") else ""
    if status == "error":  # the file could not be read (a folder, a symlink, permissions)
        folder = os.path.dirname(state.get("path") or "memory/MEMORY.md")
        print(f"maka: cannot read the memory in {folder}{reason}", file=sys.stderr)
    elif status != "ok":
        print(f"maka: {state.get('reason') or 'memory is not read'} ({status})", file=sys.stderr)
        if status in STATUS_FIXES:
            print(f"  {with_workspace(args, STATUS_FIXES[status])}", file=sys.stderr)
    warnings = state.get("warnings") or []
    for warning in warnings:
        print(f"maka: warning: {warning.get('message', warning.get('kind'))}", file=sys.stderr)
    fixes_shown: set[str] = set()
    for kind in dict.fromkeys(w.get("kind") for w in warnings):
        if kind == OUTSIDE and tidy and tidy.get("removed"):
            done = len(tidy["removed"])
            print(
                f"  fix: {done} of these lines were imported already: "
                f"`{maka_command(args, 'memory tidy')}` removes them (it asks first)"
                + (f"; {len(tidy['kept'])} are not imported yet" if tidy.get("kept") else ""),
                file=sys.stderr,
            )
        elif kind == OUTSIDE and all(
            "did you mean ## " in str(w.get("message", "")) for w in warnings if w.get("kind") == OUTSIDE
        ):
            fixes_shown.add(HEADINGS_FIX)
            print(f"  fix: {with_workspace(args, HEADINGS_FIX)}", file=sys.stderr)
        elif kind == "not_utf8":
            for path in _undecodable_files(state, warnings):
                print(f"  fix: {utf8_fix(path)}", file=sys.stderr)
        elif kind == "misplaced_file" and _in_memory_folder(state):
            continue  # the warning names the workspace meant; moving or importing would hurt
        elif kind in WARNING_FIXES and WARNING_FIXES[kind] not in fixes_shown:
            fixes_shown.add(WARNING_FIXES[kind])  # the metadata kinds share one fix
            print(f"  fix: {with_workspace(args, WARNING_FIXES[kind])}", file=sys.stderr)


def utf8_fix(path: str) -> str:
    """How to make a file that is not UTF-8 (cp1252, as the daemon shows it) UTF-8."""
    quoted, new = shlex.quote(path), shlex.quote(path + ".new")
    return (
        f"save {path} as UTF-8 in your editor (vim: `:set fileencoding=utf-8 | w`) or convert it: "
        f"`iconv -f cp1252 -t utf-8 {quoted} > {new} && mv {new} {quoted}`; its entries keep their ids"
    )


def _undecodable_files(state: dict[str, Any], warnings: list[dict[str, Any]]) -> list[str]:
    """The paths of the memory files the ``not_utf8`` warnings are about (their messages
    start with the file's name)."""
    folder = os.path.dirname(state.get("path") or "memory/MEMORY.md")
    names = {
        name
        for w in warnings
        if w.get("kind") == "not_utf8"
        for name in ("MEMORY.md", "PENDING.md")
        if str(w.get("message", "")).startswith(name)
    }
    return [os.path.join(folder, name) for name in ("MEMORY.md", "PENDING.md") if name in names]


def _in_memory_folder(state: dict[str, Any]) -> bool:
    """Whether the workspace read is itself named ``memory`` (MEMORY.md's path
    ``…/memory/memory/MEMORY.md``): a workspace's memory folder given as the workspace."""
    path = Path(str(state.get("path") or ""))
    return path.parent.parent.name == "memory"


def outside_text(client: Client, ws: str, state: dict[str, Any]) -> dict[str, Any] | None:
    """What `maka memory tidy` would remove, when read_state warned about stray lines."""
    if not any(w.get("kind") == OUTSIDE for w in state.get("warnings") or []):
        return None
    try:
        result: dict[str, Any] = client.call("remove_outside_text", {"workspace": ws, "dryRun": True})
    except MethodNotFound:  # an older daemon
        return None
    return result


def titles(entries: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Entry id → title, for naming the id of a title typed where an id goes."""
    return {e["id"]: str(e.get("title", "")) for e in entries}


def cmd_list(client: Client, args: argparse.Namespace) -> int:
    ws = workspace_of(args)
    if args.json:
        listing = read_entries(client, ws, archived=args.archived)
        if args.tag:
            every = listing.get("entries") or []
            check_tags(args.tag, {t for e in every for t in e.get("tags", [])}, "entry")
            listing["entries"] = [e for e in every if _tagged(e, args.tag)]
        print_json(listing)
        return EXIT_OK
    state = read_entries(client, ws)
    warn_status(args, state, outside_text(client, ws, state))
    if state.get("status") == "error":
        return EXIT_REMOTE  # said once above; the proposals cannot be read either
    every = state.get("entries") or []
    # Short ids must stay unambiguous for `maka memory show`, which also knows proposals.
    shown_ids = short_ids([*(e["id"] for e in every), *_pending_ids(client, ws)])
    if args.tag:
        check_tags(args.tag, {t for e in every for t in e.get("tags", [])}, "entry")
    entries = [
        e
        for e in every
        if (args.archived or e.get("status") == "active") and (not args.tag or _tagged(e, args.tag))
    ]
    if not entries:
        where = f" in {state['path']}" if state.get("path") else ""
        archived = sum(
            1 for e in every if e.get("status") == "archived" and (not args.tag or _tagged(e, args.tag))
        )
        if state.get("status") != "ok":
            print("Nothing to show.")
        elif archived and not args.archived:
            tags = "".join(f" -t {shlex.quote(tag)}" for tag in args.tag or [])
            shows = maka_command(args, f"memory list -a{tags}")
            print(f"No active entries{where} ({archived} archived: `{shows}` shows them).")
        elif state.get("path") and state.get("sha256") is None:  # status ok, no bytes on disk
            adds = maka_command(args, "memory add TITLE TEXT")
            print(
                f"No entries{where}: it does not exist yet. `{adds}` creates it; so does your "
                "editor (a `## Title` line and the text below it is an entry: makad's docs/FORMAT.md)."
            )
        elif len(args.tag or []) > 1:  # each tag is on some entry (check_tags), never all on one
            print(
                f"No entry{where} is tagged {' and '.join(map(repr, args.tag))} at once: "
                "with several tags, only the entries carrying every one are listed."
            )
        else:
            print(f"No entries{where}.")
        return EXIT_OK
    rows = [
        [
            shown_ids[e["id"]],
            e.get("status", ""),
            origin_label(e.get("origin")),
            age(e.get("updatedAt")),
            ",".join(e.get("tags", [])) or "-",
            e.get("title", ""),
        ]
        for e in entries
    ]
    show_table(["ID", "STATUS", "ORIGIN", "UPDATED", "TAGS", "TITLE"], rows)
    return EXIT_OK


def _tagged(entry: dict[str, Any], tags: list[str]) -> bool:
    """Whether the entry carries every one of the tags (as typed: stored as slugs)."""
    return {tag_slug(t) for t in tags} <= set(entry.get("tags", []))


def cmd_show(client: Client, args: argparse.Namespace) -> int:
    ws = workspace_of(args)
    state = read_entries(client, ws)
    entries = {e["id"]: e for e in state.get("entries") or []}
    pending = _pending_titles(client, ws)
    pool = [*entries, *pending]
    # An id of neither file (a proposal decided since, in its short form) is the ledger's.
    history = None if matching_ids(pool, args.id) else lineage(client, ws, args.id)
    if history is not None:
        entry_id = str(history["id"])
    else:
        entry_id = _id_or_title(args, entries, pending, args.id)
        try:
            history = client.call("memory_history", {"workspace": ws, "id": entry_id})
        except MethodNotFound:
            history = None
    entry = (history or {}).get("entry") or entries.get(entry_id)
    if args.json:
        print_json(history if history is not None else entry)
        return EXIT_OK
    if entry is None and history is None:
        raise CliError(f"no entry with id {entry_id!r}", EXIT_REMOTE)
    unresolved = set((history or {}).get("unresolvedRefs") or [])
    if entry is not None:
        about = [w for w in state.get("warnings") or [] if w.get("entryId") == entry_id]
        if about:
            warn_status(args, {"status": "ok", "warnings": about})
        print("\n".join(entry_card(entry, unresolved=unresolved)))
        if entry_id in pending and entry.get("supersedes"):
            _print_replaced(client, ws, entry_id)
    else:
        print(f"{entry_id}: {with_workspace(args, _fate(history or {}))}")
        became = decision(history or {})
        if became is not None and became[1] in entries:
            # Read-only, so shown through the proposal's id; a change needs the entry's own.
            print()
            print("\n".join(entry_card(entries[became[1]])))
    if history is not None:
        print()
        print("Why it is here:")
        if history.get("sourceRefs") and not (entry or {}).get("sourceRefs"):
            print("  sources " + sources_text(history["sourceRefs"], unresolved))
        if (
            not history.get("events")
            and entry is not None
            and origin_label(entry.get("origin")) == HAND_TYPED
        ):
            # Typed into the file before the daemon first read it: no save of it was seen.
            print(f"  {timestamp(entry.get('createdAt'))}  first seen in the file, typed by hand")
        for event in history.get("events", []):
            who = event.get("actor", "?")
            extra = how(event)
            if event.get("proposalId") and event.get("proposalId") != entry_id:
                extra += f" (proposal {short_id(event['proposalId'])})"
            print(f"  {timestamp(event.get('ts'))}  {event.get('action')} by {who}{extra}")
    return EXIT_OK


FILES = {"memory": "MEMORY.md", "pending": "PENDING.md"}


def _fate(history: dict[str, Any]) -> str:
    """What became of an id in neither file: the entry a proposal was approved as, its
    rejection, or that it is gone."""
    last = (history.get("events") or [{}])[-1]
    action, became = last.get("action"), last.get("entryId")
    if action == "approved" and became and became != history.get("id"):
        return f"a proposal, approved as entry {became} (maka memory show {short_id(became)})"
    if action == "rejected":
        return "a proposal, rejected; it is in neither MEMORY.md nor PENDING.md"
    return "no longer in MEMORY.md or PENDING.md"


def how(event: dict[str, Any]) -> str:
    """What a lineage step's data says about how it happened (a save of the file, a
    daemon's answer to a save that lacked the entry), or nothing."""
    data = event.get("data") or {}
    name = FILES.get(str(data.get("file")), "the file")
    if data.get("via") == "external_edit":
        return f", typed into {name}" if event.get("action") == "added" else f" in {name}"
    if event.get("action") == "rejected" and data.get("reason"):
        return f": {json.dumps(data['reason'], ensure_ascii=False)}"
    if event.get("action") == "returned":
        return " to PENDING.md: a save of the file lacked it"
    if data.get("via") == "stale_save":
        return f" into {name}: a save lacked it"
    return ""


def _print_replaced(client: Client, ws: str, proposal_id: str) -> None:
    """A waiting replacement: the entry it replaces, as it is now (the old beside the new)."""
    views = client.call("list_proposals", {"workspace": ws}).get("proposals", [])
    view = next((v for v in views if v["proposal"]["id"] == proposal_id), None)
    if view is None:
        return
    memory = {e["id"]: e for e in read_entries(client, ws).get("entries") or []}
    old, _ = replacement_columns(view, memory)
    print()
    print("\n".join(old))


def _id_or_title(
    args: argparse.Namespace, entries: dict[str, dict[str, Any]], pending: dict[str, str], given: str
) -> str:
    """The entry or waiting proposal ``given`` is the id (or a unique prefix of the id) of;
    else the one active entry titled ``given`` (exactly, else whatever the case).

    Only a command that reads takes a title: a title of several active entries is refused
    with their ids, and one of an archived entry or a waiting proposal is named with its id
    (an archived entry often shares its title with the active one that replaced it)."""
    pool = [*entries, *pending]
    if len(matching_ids(pool, given)) != 1:
        active = titles(e for e in entries.values() if e.get("status", "active") == "active")
        titled = titled_ids(active, given)
        if len(titled) > 1:
            raise CliError(f"{titled_text(given, titled, active, 'active entry')}: give one of them")
        if titled:
            return titled[0]
        for named, noun in (
            (titles(e for e in entries.values() if e["id"] not in active), "archived entry"),
            (pending, "proposal waiting"),
        ):
            titled = titled_ids(named, given)
            if titled:
                shows = (
                    f"`{maka_command(args, 'memory show ' + short_id(titled[0]))}` shows it"
                    if len(titled) == 1
                    else "give one of them"
                )
                raise CliError(
                    f"{titled_text(given, titled, named, noun)}, and no active entry has that title: {shows}",
                    EXIT_REMOTE,
                )
        _name_titles_holding(args, active, given)
    (entry_id,) = resolve_ids(pool, [given])
    return entry_id


# What could be an id or a prefix of one: the daemon's hex ids, hand-typed `h-…` ones.
_ID_LIKE = re.compile(r"(h-)?[0-9a-f]*", re.IGNORECASE)


def _name_titles_holding(args: argparse.Namespace, active: Mapping[str, str], given: str) -> None:
    """A usage error naming the active entries whose title holds ``given`` (words of a title
    typed for the whole title), so the user gets their ids; none is picked, since a part of
    a title never stands for the entry. Nothing when ``given`` looks like an id."""
    if _ID_LIKE.fullmatch(given.strip()):
        return
    wanted = " ".join(given.casefold().split())
    holding = [i for i, title in active.items() if wanted in " ".join(title.casefold().split())]
    if not holding:
        return
    named = "; ".join(f"{short_id(i)} {active[i]!r}" for i in holding[:5])
    named += "; …" if len(holding) > 5 else ""
    shows = maka_command(args, "memory show " + short_id(holding[0]))
    raise CliError(
        f"{given!r} is no id and no entry's whole title; active entries whose title holds it: {named} "
        f"(`{shows}` shows {'it' if len(holding) == 1 else 'the first'})",
        EXIT_REMOTE,
    )


def _pending_titles(client: Client, ws: str) -> dict[str, str]:
    """Each waiting proposal's id → its title."""
    try:
        listing = client.call("list_proposals", {"workspace": ws})
    except MethodNotFound:
        return {}
    return {v["proposal"]["id"]: str(v["proposal"].get("title", "")) for v in listing.get("proposals", [])}


def _pending_ids(client: Client, ws: str) -> list[str]:
    return list(_pending_titles(client, ws))


def cmd_add(client: Client, args: argparse.Namespace) -> int:
    if args.title is None and not sys.stdin.isatty():
        raise CliError(
            "memory add needs TITLE off a terminal: "
            f"`{maka_command(args, 'memory add TITLE TEXT')}` (or TEXT piped in); "
            "on a terminal, `maka memory add` alone opens $EDITOR on a form to fill in"
        )
    title: str = args.title or ""
    tags = csv_tags(args.tags) if args.tags is not None else []
    if args.content is not None:
        content = read_text_arg(args.content)
    elif not sys.stdin.isatty():
        content = sys.stdin.read()
    else:
        content = None
    if content is not None and args.content in (None, "-") and not content.strip():
        raise CliError(
            "no content: stdin was empty; give CONTENT after the title, pipe it in, or run "
            f"`{maka_command(args, 'memory add TITLE')}` on a terminal to write it in $EDITOR"
        )
    if content is None:
        edited = parse_entry_form(edit_in_editor(entry_form(title, tags, "")))
        if edited is None:
            print("Cancelled: the content was empty.", file=sys.stderr)
            return EXIT_OK
        title, tags, content = edited.title, edited.tags, edited.content
    params: dict[str, Any] = {
        "workspace": workspace_of(args),
        "title": title,
        "content": content.strip("\n"),
        "tags": tags,
    }
    if args.session:
        params.update(scope="session", sessionId=resolve_session(client, params["workspace"], args.session))
    if args.decay_days is not None:
        params["decayTtlMs"] = int(args.decay_days * 86_400_000)
    new_file = _memory_file(client, params["workspace"])
    if new_file is not None and new_file.exists():
        new_file = None
    result = client.call("add_entry", params)
    if args.json:
        print_json(result)
    else:
        entry = result["entry"]
        print(f"Added {entry['id']}: {entry['title']}")
        if new_file is not None and new_file.exists():
            print(f"Created {new_file}")
        _warn_redactions(result)
        _note_same_title(client, args, entry)
    return EXIT_OK


def _memory_file(client: Client, ws: str) -> Path | None:
    """A workspace's MEMORY.md; the user level's, which lives in the daemon's data (or
    where ``makad --user-memory`` put it), as the daemon names it."""
    if ws != USER_LEVEL:
        return Path(ws) / "memory" / "MEMORY.md"
    path = client.call("read_state", {"workspace": ws, "includeEntries": False, "includeContent": False}).get(
        "path"
    )
    return Path(path) if isinstance(path, str) and path else None


def _note_same_title(client: Client, args: argparse.Namespace, entry: dict[str, Any]) -> None:
    """A note on stderr when another active entry has the title just added (the agent would
    see both)."""
    key = " ".join(str(entry.get("title", "")).casefold().split())
    entries = read_entries(client, workspace_of(args)).get("entries") or []
    same = [
        e["id"]
        for e in entries
        if e["id"] != entry["id"]
        and e.get("status") == "active"
        and " ".join(str(e.get("title", "")).casefold().split()) == key
    ]
    if same:
        # Name the ids in the commands, so that they can be pasted as they are (the
        # prefixes the listing shows: legacy manual-<ms> ids share their first characters).
        shown = short_ids(e["id"] for e in entries)
        other = shown[same[0]] if len(same) == 1 else "ID"
        added = shown.get(str(entry["id"]), str(entry["id"]))
        print(
            f"note: {', '.join(shown[i] for i in same)} {'has' if len(same) == 1 else 'have'} the same "
            f"title; `{maka_command(args, f'memory show {other}')}` shows "
            f"{'it' if len(same) == 1 else 'one'}, `{maka_command(args, f'memory archive {other}')}` "
            f"retires it, `{maka_command(args, f'memory archive {added}')}` the one just added",
            file=sys.stderr,
        )


def _warn_redactions(result: dict[str, Any]) -> None:
    if result.get("redactions"):
        print(f"note: {redacted(result['redactions'])} before writing", file=sys.stderr)


def cmd_edit(client: Client, args: argparse.Namespace) -> int:
    ws = workspace_of(args)
    state = read_entries(client, ws)
    entries = {e["id"]: e for e in state.get("entries") or []}
    (entry_id,) = entry_ids(client, args, ws, entries, [args.id], "edit")
    params: dict[str, Any] = {"workspace": ws, "id": entry_id}
    if args.title is not None:
        params["title"] = args.title
    if args.content is not None:
        params["content"] = read_text_arg(args.content).strip("\n")
    if args.tags is not None:
        params["tags"] = csv_tags(args.tags)
    typed: str | None = None  # what the user typed in the editor, kept if the write fails
    if len(params) == 2:
        entry = entries.get(entry_id)
        if entry is None:
            raise CliError(f"no entry with id {entry_id!r}", EXIT_REMOTE)
        if args.from_file:
            typed = read_form_file(args.from_file)
        else:
            typed = edit_in_editor(entry_form(entry["title"], entry.get("tags", []), entry["content"]))
        edited = parse_entry_form(typed)
        if edited is None:
            print("Cancelled: the content was empty.", file=sys.stderr)
            return EXIT_OK
        changes = edited.changes(entry)
        if not changes:
            print("Nothing changed.", file=sys.stderr)
            return EXIT_OK
        # The editor may stay open a long time: refuse to overwrite a change made meanwhile.
        params.update(changes, expectedRevision=state["revision"])
    try:
        result = client.call("update_entry", params)
    except Conflict:
        if typed is not None and not args.from_file:
            kept = keep_typed_text(typed)
            print(
                f"maka: the memory changed while you were editing; your text is kept in {kept}\n"
                "  apply it to the current version: "
                + maka_command(args, f"memory edit {entry_id} --from {kept}"),
                file=sys.stderr,
            )
        raise
    if args.json:
        print_json(result)
    else:
        print(f"Updated {result['entry']['id']}: {result['entry']['title']}")
        _warn_redactions(result)
        if args.tags is not None and _pinned(entries.get(entry_id, {})) and not _pinned(result["entry"]):
            print(
                "note: the new tags leave out `pinned`, so the entry is no longer pinned; "
                f"`{maka_command(args, 'memory pin ' + short_id(entry_id))}` pins it again",
                file=sys.stderr,
            )
    return EXIT_OK


def _pinned(entry: dict[str, Any]) -> bool:
    return PINNED_TAG in [t.strip().casefold() for t in entry.get("tags", [])]


def keep_typed_text(text: str) -> str:
    """Save an edit the daemon refused in a private file (0600) that outlives the command."""
    handle, path = tempfile.mkstemp(prefix="maka-edit-", suffix=".md")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    return path


def read_form_file(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror}") from None


def cmd_tidy(client: Client, args: argparse.Namespace) -> int:
    """Remove the lines above the first entry that were imported (their memory is in
    MEMORY.md, waiting in PENDING.md, or was rejected); asks first on a terminal, needs -y
    elsewhere."""
    ws = workspace_of(args)
    out = sys.stderr if args.json else sys.stdout
    plan = client.call("remove_outside_text", {"workspace": ws, "dryRun": True})
    if args.import_lines and plan["kept"]:
        queue_outside_lines(client, args, plan["kept"], out)
        plan = client.call("remove_outside_text", {"workspace": ws, "dryRun": True})
    removable, kept = plan["removed"], plan["kept"]
    if not removable:
        if args.json:
            print_json(plan)
        print("Nothing to remove above the first entry." + _kept_note(args, kept, " "), file=out)
        return EXIT_OK
    one = len(removable) == 1
    print(
        ("This line" if one else f"These {len(removable)} lines")
        + f" above the first entry of memory/MEMORY.md {'was' if one else 'were'} imported "
        "(where each memory is now is shown beside it) and can go:",
        file=out,
    )
    for line in removable:
        print(f"  {line['line']:>4}  {line['text'].strip()}   → {WHERE[line['where']]}{_id(line)}", file=out)
    if kept:
        print(_kept_note(args, kept, "", other=True), file=out)
    if not args.yes:
        if not sys.stdin.isatty():
            print(
                f"Nothing removed: run `{maka_command(args, 'memory tidy -y')}` to remove "
                f"{'it' if one else 'them'}.",
                file=out,
            )
            if args.json:
                print_json(plan)
            return EXIT_OK
        these = "this line" if one else f"these {len(removable)} lines"
        answer = input(f"Remove {these}? (a backup is kept: {maka_command(args, 'undo')}) [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("Nothing removed.", file=out)
            return EXIT_OK
    done = client.call(
        "remove_outside_text",
        {
            "workspace": ws,
            "lines": [line["line"] for line in removable],
            "expectedRevision": plan["revision"],
        },
    )
    if args.json:
        print_json(done)
    else:
        removed = counted(len(done["removed"]), "line")
        them = "it" if len(done["removed"]) == 1 else "them"
        print(f"Removed {removed}; `{maka_command(args, 'undo')}` brings {them} back.")
    return EXIT_OK


def queue_outside_lines(
    client: Client, args: argparse.Namespace, lines: list[dict[str, Any]], out: TextIO
) -> None:
    """Import the bullets among the lines above the first entry (markdown: prose is no
    memory) into PENDING.md, for review."""
    ws = workspace_of(args)
    data = "".join(f"{line['text']}\n" for line in lines)
    try:
        result = client.call("import_memories", {"workspace": ws, "data": data, "format": "markdown"})
    except InvalidParams:
        print("No bullets above the first entry to import.", file=out)
        return
    print(
        f"Queued {counted(len(result['imported']), 'memory', 'memories')} from the lines above the "
        f"first entry in PENDING.md ({result['duplicates']} known already); "
        f"`{maka_command(args, 'review')}` decides {'it' if len(result['imported']) == 1 else 'them'}.",
        file=out,
    )


WHERE = {"memory": "in MEMORY.md", "pending": "waiting in PENDING.md", "rejected": "rejected before"}
KEPT_HINT = "`maka memory tidy --import` queues their bullets for review first"
# After --import, what stays above the first entry held no bullet to queue (prose, a heading).
PROSE_HINT = (
    "give a memory there a `## Title` line, or delete the line in your editor (makad's docs/FORMAT.md)"
)


def _kept_note(args: argparse.Namespace, kept: list[dict[str, Any]], lead: str, other: bool = False) -> str:
    """The lines tidy leaves above the first entry, and what to do about them: without
    --import, the command that queues their bullets; with it, that they are no bullets."""
    if not kept:
        return ""
    one = len(kept) == 1
    lines = counted(len(kept), "other line" if other else "line")
    are = "is" if one else "are"
    if args.import_lines:
        return f"{lead}{lines} there {are} no bullet and stay{'s' if one else ''}: {PROSE_HINT}"
    return f"{lead}{lines} there {are} not imported yet: {with_workspace(args, KEPT_HINT)}"


def entry_ids(
    client: Client,
    args: argparse.Namespace,
    ws: str,
    entries: dict[str, dict[str, Any]],
    given: list[str],
    command: str,
) -> list[str]:
    """The entries meant, as `resolve_ids` finds them; an id of no entry that names a
    proposal (decided or waiting) is refused with what became of it."""
    for wanted in given:
        if not matching_ids(entries, wanted):
            refuse_decided_proposal(client, args, ws, wanted, command, set(entries))
    return resolve_ids(entries, given, titles(entries.values()))


def _id(line: dict[str, Any]) -> str:
    return f" ({short_id(line['id'])})" if line.get("id") else ""


def _each(method: str, verb: str, name: str) -> Command:
    def run(client: Client, args: argparse.Namespace) -> int:
        ws = workspace_of(args)
        every = {e["id"]: e for e in read_entries(client, ws).get("entries") or []}
        ids = entry_ids(client, args, ws, every, args.ids, name)
        if method == "delete_entry" and not args.yes and sys.stdin.isatty():
            answer = input(
                f"Delete {len(ids)} entr{'y' if len(ids) == 1 else 'ies'} "
                f"from MEMORY.md? (backups are kept) [y/N] "
            )
            if answer.strip().lower() not in ("y", "yes"):
                print("Nothing deleted.", file=sys.stderr)
                return EXIT_OK
        results = [client.call(method, {"workspace": ws, "id": i}) for i in ids]
        if args.json:
            print_json(results if len(results) > 1 else results[0])
        else:
            for result in results:
                print(f"{verb} {result['entry']['id']}: {result['entry']['title']}")
        return EXIT_OK

    return run


def _pin(pinned: bool) -> Command:
    """`maka memory pin|unpin ID...`: the entry's `pinned` tag (pin_entry)."""

    def run(client: Client, args: argparse.Namespace) -> int:
        ws = workspace_of(args)
        state = read_entries(client, ws)
        entries = {e["id"]: e for e in state.get("entries") or []}
        ids = entry_ids(client, args, ws, entries, args.ids, "pin" if pinned else "unpin")
        results = [client.call("pin_entry", {"workspace": ws, "id": i, "pinned": pinned}) for i in ids]
        if args.json:
            print_json(results if len(results) > 1 else results[0])
            return EXIT_OK
        for entry_id, result in zip(ids, results, strict=True):
            entry = result["entry"]
            was = _pinned(entries[entry_id])
            if was == pinned:
                print(f"Already {'pinned' if pinned else 'not pinned'}: {entry['id']}: {entry['title']}")
            else:
                print(f"{'Pinned' if pinned else 'Unpinned'} {entry['id']}: {entry['title']}")
        if pinned:
            # The daemon says when the pinned entries no longer fit a small pack.
            after = client.call("read_state", {"workspace": ws, "includeContent": False})
            for warning in after.get("warnings") or []:
                if warning.get("kind") == "pinned_over_share":
                    print(f"maka: warning: {warning.get('message')}", file=sys.stderr)
        return EXIT_OK

    return run


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: Parents) -> None:
    group = sub.add_parser(
        "memory",
        help="list, show and change entries of MEMORY.md",
        description="The user's own operations on MEMORY.md.",
    )
    msub = group.add_subparsers(dest="memory_command", required=True, metavar="ACTION")

    p = msub.add_parser(
        "list",
        parents=parents.scoped,
        help="list entries (read_state)",
        description="Lists the entries of MEMORY.md (with --archived, the archived ones too; "
        "--tag narrows the list) with their short ids, which the other actions take.",
    )
    p.add_argument("-a", "--archived", action="store_true", help="include archived entries")
    p.add_argument(
        "-t",
        "--tag",
        action="extend",
        type=csv_tags,
        help="only entries with this tag; repeated (-t a -t b) or comma-separated (-t a,b): "
        "only entries with every one of them",
    )
    p.set_defaults(func=cmd_list)

    p = msub.add_parser(
        "tidy",
        parents=parents.scoped,
        help="remove the lines above the first entry that are in memory already (remove_outside_text)",
        description="Lines above the first `## ` entry are not memory (read_state warns "
        "text_outside_entries). Once their bullets are imported (--import queues them in "
        "PENDING.md), this removes those lines: it lists them and asks first (-y: without "
        "asking; off a terminal -y is needed). Lines not imported stay. A backup is kept: "
        "`maka undo` brings them back.",
    )
    p.add_argument("-y", "--yes", action="store_true", help="remove without asking")
    p.add_argument(
        "--import",
        dest="import_lines",
        action="store_true",
        help="first queue the bullets there that are not imported yet in PENDING.md (import_memories)",
    )
    p.set_defaults(func=cmd_tidy)

    p = msub.add_parser(
        "show",
        parents=parents.scoped,
        help="an entry and why it is there (memory_history)",
        description="Shows one entry (or a proposal waiting) and its history from the ledger: "
        "who proposed it, from which session, who approved or changed it, and when. It only "
        "reads, so an active entry's title works in place of its id (exactly as typed, else "
        "whatever the case; two entries of that title are named by id); the commands that "
        "change entries take ids only.",
    )
    p.add_argument("id", metavar="ENTRY_ID", help="an id, a unique prefix of one, or an active entry's title")
    p.set_defaults(func=cmd_show)

    p = msub.add_parser(
        "add",
        parents=parents.scoped,
        help="add your own entry, active at once (add_entry)",
        description="CONTENT may be - for stdin; without it, stdin is read when "
        "it is not a terminal, else $EDITOR opens (without TITLE too: the form asks for it).",
    )
    p.add_argument("title", nargs="?", metavar="TITLE", help="the entry's `## ` heading")
    p.add_argument("content", nargs="?", metavar="CONTENT", help="its text (- reads stdin)")
    p.add_argument("--tags", metavar="CSV", help="comma-separated tags")
    p.add_argument("--session", metavar="SESSION_ID", help="scope the entry to one session")
    p.add_argument(
        "--decay-days",
        type=days,
        metavar="DAYS",
        help="archive the entry automatically after this many days (0: never)",
    )
    p.set_defaults(func=cmd_add)

    p = msub.add_parser(
        "edit",
        parents=parents.scoped,
        help="change an entry (update_entry); $EDITOR when no field is given",
        description="Changes the title, content or tags given; without any, $EDITOR opens on "
        "the entry. When the write is refused, what was typed is kept in a file that --from "
        "applies later. A backup of MEMORY.md is kept: `maka undo` reverts the change.",
    )
    p.add_argument("id", metavar="ENTRY_ID", help="an id or a unique prefix of one (not a title)")
    p.add_argument("--title", help="the new title")
    p.add_argument("--content", help="new content, or - for stdin")
    p.add_argument("--tags", metavar="CSV", help='replace the tags ("" clears them)')
    p.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        type=user_path,
        help="apply an edit form saved earlier (the file a refused edit was kept in) instead of $EDITOR",
    )
    p.set_defaults(func=cmd_edit)

    for name, pinned, text, description in (
        (
            "pin",
            True,
            "always show entries to the agent, first in its memory (pin_entry: tag pinned)",
            "Tags the entries `pinned`: the agent's context always has them, first. Warns "
            "when pinned entries take more than their share of the context budget.",
        ),
        (
            "unpin",
            False,
            "stop pinning entries (pin_entry)",
            "Removes the `pinned` tag: the entries compete for the context like the others.",
        ),
    ):
        p = msub.add_parser(name, parents=parents.scoped, help=text, description=description)
        p.add_argument(
            "ids", nargs="+", metavar="ENTRY_ID", help="ids or unique prefixes of them (not titles)"
        )
        p.set_defaults(func=_pin(pinned))

    for name, method, verb, text, description in (
        (
            "archive",
            "archive_entry",
            "Archived",
            "archive entries (archive_entry)",
            "Archives the entries: they stay in MEMORY.md, marked archived, and leave the "
            "agent's context. `maka memory restore` makes them active again.",
        ),
        (
            "restore",
            "restore_entry",
            "Restored",
            "make archived entries active (restore_entry)",
            "Makes archived entries active again (back in the agent's context).",
        ),
        (
            "delete",
            "delete_entry",
            "Deleted",
            "delete entries (delete_entry; backups kept)",
            "Removes the entries from MEMORY.md; on a terminal it asks first (-y: without "
            "asking). A backup is kept: `maka undo` brings them back.",
        ),
    ):
        p = msub.add_parser(name, parents=parents.scoped, help=text, description=description)
        p.add_argument(
            "ids", nargs="+", metavar="ENTRY_ID", help="ids or unique prefixes of them (not titles)"
        )
        if name == "delete":
            p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
        p.set_defaults(func=_each(method, verb, name))

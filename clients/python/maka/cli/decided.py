"""An id given to the wrong kind of command: a proposal already decided given to a memory
command, an entry given to `maka approve`/`reject`.

Lists print proposals and entries alike by short id, and an approved proposal becomes an
entry with an id of its own, so the id a user saw in `maka pending` is no entry's id. The
lineage (`memory_history`, which takes a unique prefix) says what became of it; these
name it instead of a bare "no entry with that id". A change is never made through such an
id: the user is told the entry's id and the command to run with it.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from maka.cli.common import EXIT_REMOTE, CliError, maka_command
from maka.cli.output import short_id
from maka.client import Client
from maka.errors import InvalidParams, MethodNotFound, NotFound


def lineage(client: Client, ws: str, given: str) -> dict[str, Any] | None:
    """The daemon's `memory_history` of ``given`` (whole or a unique prefix), or None when
    it names nothing (or several ids, or the daemon predates the method)."""
    try:
        history: dict[str, Any] = client.call("memory_history", {"workspace": ws, "id": given})
    except (NotFound, InvalidParams, MethodNotFound):
        return None
    return history


def decision(history: dict[str, Any]) -> tuple[str, str | None, str | None] | None:
    """("approved", entry id, None) or ("rejected", None, reason) when the history is a
    proposal's that was decided and left PENDING.md; None otherwise."""
    if history.get("entry") is not None:
        return None  # still in one of the files, under this id
    last = (history.get("events") or [{}])[-1]
    action = last.get("action")
    if action == "approved" and last.get("entryId") and last["entryId"] != history.get("id"):
        return "approved", str(last["entryId"]), None
    if action == "rejected":
        reason = (last.get("data") or {}).get("reason")
        return "rejected", None, str(reason) if reason else None
    return None


def rejected_text(reason: str | None) -> str:
    """``rejected`` with its reason, quoted, when one was given."""
    return f"rejected ({json.dumps(reason, ensure_ascii=False)})" if reason else "rejected"


def refuse_decided_proposal(
    client: Client, args: argparse.Namespace, ws: str, given: str, command: str, entries: set[str]
) -> None:
    """CliError when ``given`` (no entry's id) names a proposal decided or waiting: the
    entry it became and ``maka memory COMMAND`` with that entry's id, or its rejection."""
    history = lineage(client, ws, given)
    if history is None:
        return
    whole = str(history.get("id") or given)
    if history.get("entry") is not None and whole not in entries:
        raise CliError(
            f"{short_id(whole)} is a proposal waiting for review, not an entry yet: "
            f"{maka_command(args, 'approve ' + short_id(whole))} (or reject) decides it",
            EXIT_REMOTE,
        )
    decided = decision(history)
    if decided is None:
        return
    action, entry_id, reason = decided
    if action == "rejected":
        raise CliError(
            f"{short_id(whole)} is a proposal that was {rejected_text(reason)}; it never became an entry",
            EXIT_REMOTE,
        )
    assert entry_id is not None
    if entry_id not in entries:
        raise CliError(
            f"{short_id(whole)} is a proposal, approved as entry {short_id(entry_id)}, "
            "which is no longer in MEMORY.md",
            EXIT_REMOTE,
        )
    raise CliError(
        f"{short_id(whole)} is a proposal, approved as entry {short_id(entry_id)}; to {command} "
        f"that entry: {maka_command(args, f'memory {command} {short_id(entry_id)}')}",
        EXIT_REMOTE,
    )


def refuse_not_waiting(client: Client, args: argparse.Namespace, ws: str, given: str, command: str) -> None:
    """CliError when ``given`` (no waiting proposal's id) names an entry of MEMORY.md or a
    proposal decided before: what it is, and what to run instead."""
    history = lineage(client, ws, given)
    if history is None:
        return
    whole = str(history.get("id") or given)
    entry = history.get("entry")
    if entry is not None and str(entry.get("id")) == whole:
        origin = history.get("proposalId")
        how = (
            f"was approved already (from proposal {short_id(origin)})"
            if origin and origin != whole
            else "is in memory already"
        )
        then = "memory archive" if command == "reject" else "memory show"
        raise CliError(
            f"{short_id(whole)} is an entry in MEMORY.md, not a proposal: it {how}; "
            f"{maka_command(args, f'{then} {short_id(whole)}')}"
            + (" retires it" if command == "reject" else " shows it"),
            EXIT_REMOTE,
        )
    decided = decision(history)
    if decided is None:
        return
    action, entry_id, reason = decided
    if action == "approved":
        assert entry_id is not None
        raise CliError(
            f"{short_id(whole)} is a proposal already approved, as entry {short_id(entry_id)}: "
            f"{maka_command(args, 'memory show ' + short_id(entry_id))}",
            EXIT_REMOTE,
        )
    raise CliError(f"{short_id(whole)} is a proposal already {rejected_text(reason)}", EXIT_REMOTE)

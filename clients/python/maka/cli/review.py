"""`maka review`: one pass over the proposal queues, each proposal beside its similar entries.

The workspace's queue first, then the user level's (`@user`); `--user` reviews that alone.

Keys: a approve · p approve and pin (always in the agent's context, first) · e edit then
approve · r reject (asks for a reason) · s skip · q quit · ? help.
When the proposal is close to an active entry: u approve it instead of that entry (which is
archived: supersede) · m merge both texts in the editor, the result replacing the entry.
On a terminal one key press is enough; from a pipe each line is a key (and the line after
`r` is the reason), so `printf 'a\\nr\\nstale\\n' | maka review` works too.
Each decision is sent at once: quitting keeps what was decided so far.
"""

from __future__ import annotations

import argparse
import os
import sys
import termios
import tty
from dataclasses import dataclass, field
from typing import Any, TextIO

from maka.cli.common import (
    EXIT_OK,
    USER_LEVEL,
    Parents,
    edit_in_editor,
    entry_form,
    parse_entry_form,
    workspace_of,
)
from maka.cli.output import entry_card, print_json, short_id, side_by_side, terminal_width, wrap_all
from maka.client import Client
from maka.errors import NotFound

KEYS_HELP = (
    "a approve · p approve and pin (always shown to the agent) · e edit then approve · r reject · "
    "s skip · q quit"
)
REPLACE_HELP = "u approve it instead of the similar entry (archived) · m merge both in the editor"
PROMPT = "[a]pprove [p]in [e]dit [r]eject [s]kip [q]uit [?] "
# p works here too (see ? for help): the prompt must fit a 70-column terminal.
REPLACE_PROMPT = "[a]pprove [u]se instead [m]erge [e]dit [r]eject [s]kip [q]uit [?] "
PINNED_TAG = "pinned"
SIDE_BY_SIDE_MIN_WIDTH = 100
RULE_WIDTH = 100
SIMILAR_CONTENT_LINES = 4


class Keys:
    """One key at a time from a terminal (cbreak mode), or one line per key from a pipe."""

    def __init__(self, stdin: TextIO, out: TextIO) -> None:
        self.stdin = stdin
        self.out = out
        self.tty = stdin.isatty()

    def key(self, prompt: str) -> str:
        self.out.write(prompt)
        self.out.flush()
        if not self.tty:
            line = self.stdin.readline()
            if not line:
                self.out.write("\n")
                return "q"
            key = line.strip()[:1].lower()
            self.out.write(key + "\n")
            return key
        fd = self.stdin.fileno()
        saved = termios.tcgetattr(fd)
        try:
            # TCSANOW, not the default TCSAFLUSH: keys typed ahead must not be thrown away.
            tty.setcbreak(fd, termios.TCSANOW)
            data = os.read(fd, 1)
        finally:
            termios.tcsetattr(fd, termios.TCSANOW, saved)
        if data in (b"", b"\x04"):
            self.out.write("\n")
            return "q"
        char = data.decode("utf-8", errors="replace")
        self.out.write((char if char.isprintable() else "") + "\n")
        return char.lower()

    def line(self, prompt: str) -> str:
        self.out.write(prompt)
        self.out.flush()
        text = self.stdin.readline()
        if not self.tty:
            self.out.write(text if text.endswith("\n") else text + "\n")
        return text.strip()


@dataclass
class Outcome:
    approved: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "approved": self.approved,
            "rejected": self.rejected,
            "skipped": self.skipped,
            "gone": self.gone,
        }


RETURNED = (
    "Returned to PENDING.md: a save of the file lacked it (an editor buffer older than the daemon's "
    "write?). Approve it to keep it (the same entry), reject it to delete it."
)


def card(
    view: dict[str, Any],
    index: int,
    total: int,
    memory: dict[str, dict[str, Any]],
    pending: dict[str, dict[str, Any]],
    width: int | None,
) -> list[str]:
    """A proposal, with its similar entries beside or below it; a replacement (one whose
    ``supersedes`` names an entry) as the old entry beside the new one.

    ``width``: the terminal's, lines wrapped between words to fit it; None off a terminal,
    where nothing is cut or wrapped (a pipe or a log gets every word of the proposal)."""
    proposal = view["proposal"]
    target = proposal.get("supersedes")
    title = f"── Proposal {index}/{total}{' · a replacement' if target else ''} "
    lines = ["", title + "─" * max(0, min(width or RULE_WIDTH, RULE_WIDTH) - len(title)), ""]
    if view.get("note"):  # queued back by the daemon, not proposed: say why it is here
        lines += wrap_all([RETURNED, ""], width) if width is not None else [RETURNED, ""]
    similar = [s for s in view.get("similarTo", []) if s != target]
    others = ["Similar entries:" if similar else "No similar entries."]
    for other in similar:
        others.extend(_brief(other, memory, pending))
    if target:
        old, new = replacement_columns(view, memory)
        columns = (old, new)
        rest = others if similar else []
    else:
        columns = (entry_card(proposal), others)
        rest = []
    if width is not None and width >= SIDE_BY_SIDE_MIN_WIDTH and (similar or target):
        lines.extend(side_by_side(*columns, width))
        lines.extend(wrap_all(["", *rest], width) if rest else [])
    elif width is not None:
        lines.extend(wrap_all([*columns[0], "", *columns[1], *(["", *rest] if rest else [])], width))
    else:
        lines.extend([*columns[0], "", *columns[1], *(["", *rest] if rest else [])])
    return [*lines, ""]


def replacement_columns(
    view: dict[str, Any], memory: dict[str, dict[str, Any]]
) -> tuple[list[str], list[str]]:
    """(old, new): the entry a replacement names as it is now, and the proposal. The
    daemon's ``replaces`` first; an older daemon's listing, MEMORY.md's entry by id."""
    proposal = view["proposal"]
    target = str(proposal.get("supersedes"))
    old = view.get("replaces") or memory.get(target)
    new = ["New — proposed instead:", *entry_card(proposal)]
    if old is None:
        return [f"Replaces {short_id(target)}: no longer in memory (approving only adds the new one)."], new
    if old.get("status", "active") != "active":
        head = f"Replaces {short_id(target)}, already {old.get('status')} (approving only adds the new one):"
    elif str(old.get("id", "")).startswith(f"{USER_LEVEL}/"):
        head = "Old — the user-level entry it overrides in this workspace (kept for the others):"
    else:
        head = "Old — now in memory, archived if you approve:"
    return [head, *entry_card(old)], new


def _brief(entry_id: str, memory: dict[str, dict[str, Any]], pending: dict[str, dict[str, Any]]) -> list[str]:
    entry = memory.get(entry_id) or pending.get(entry_id)
    if entry is None:
        return [f"• {short_id(entry_id)} (no longer there)"]
    where = "in MEMORY.md" if entry_id in memory else "also pending"
    head = f"• {entry.get('title', '')}  ({where}, {short_id(entry_id)})"
    body = str(entry.get("content", "")).splitlines()
    more = ["  …"] if len(body) > SIMILAR_CONTENT_LINES else []
    return [head, *("  " + line for line in body[:SIMILAR_CONTENT_LINES]), *more]


def cmd_review(client: Client, args: argparse.Namespace) -> int:
    """The workspace's queue, then the user level's ("@user": what ``propose`` with scope
    global queued from any workspace); ``--user`` reviews the user level's alone."""
    ws = workspace_of(args)
    out = sys.stderr if args.json else sys.stdout
    queues = [ws] if ws == USER_LEVEL else [ws, USER_LEVEL]
    waiting = [(q, client.call("list_proposals", {"workspace": q})["proposals"]) for q in queues]
    waiting = [(q, views) for q, views in waiting if views]
    outcome = Outcome()
    if not waiting:
        where = "the user level (@user)" if ws == USER_LEVEL else f"{ws} or the user level (@user)"
        print(f"No proposals waiting in {where}.", file=out)
        return _finish(outcome, args, out)
    keys = Keys(sys.stdin, out)
    try:
        return _review(client, waiting, len(queues) > 1, keys, outcome, args, out)
    except KeyboardInterrupt:
        # Every decision was sent as it was made: say which stand before exiting 130.
        left = sum(len(views) for _, views in waiting) - len(outcome.approved) - len(outcome.rejected)
        print(
            f"\nInterrupted: {len(outcome.approved)} approved, {len(outcome.rejected)} rejected, "
            f"{max(left, 0)} left waiting.",
            file=out,
        )
        raise


def _review(
    client: Client,
    waiting: list[tuple[str, list[dict[str, Any]]]],
    headed: bool,
    keys: Keys,
    outcome: Outcome,
    args: argparse.Namespace,
    out: TextIO,
) -> int:
    """Go through each queue of ``waiting`` (under a heading when ``headed``)."""
    width = terminal_width(out)
    for queue, views in waiting:
        if headed:
            name = "the user level (@user)" if queue == USER_LEVEL else queue
            print(f"Proposals for {name}: {len(views)}", file=out)
        state = client.call("read_state", {"workspace": queue, "includeEntries": True})
        memory = {e["id"]: e for e in state.get("entries") or []}
        pending = {v["proposal"]["id"]: v["proposal"] for v in views}
        for index, view in enumerate(views, 1):
            print("\n".join(card(view, index, len(views), memory, pending, width)), file=out)
            if not _decide(client, queue, view, memory, keys, outcome, out):
                outcome.skipped.extend(v["proposal"]["id"] for v in views[index - 1 :])
                return _finish(outcome, args, out)
    return _finish(outcome, args, out)


def replaceable(view: dict[str, Any], memory: dict[str, dict[str, Any]]) -> list[str]:
    """The active entries a proposal is similar to: what approving it could supersede."""
    return [
        s
        for s in view.get("similarTo", [])
        if s in memory
        and memory[s].get("status", "active") == "active"
        and s != view["proposal"].get("supersedes")
    ]


def _decide(
    client: Client,
    ws: str,
    view: dict[str, Any],
    memory: dict[str, dict[str, Any]],
    keys: Keys,
    outcome: Outcome,
    out: TextIO,
) -> bool:
    """Ask until one decision is made for this proposal; False when the user quits."""
    proposal = view["proposal"]
    pid = proposal["id"]
    targets = replaceable(view, memory)
    while True:
        key = keys.key(REPLACE_PROMPT if targets else PROMPT)
        try:
            if key == "a":
                _approve(client, ws, pid, {}, outcome, out)
                return True
            if key == "p":
                tags = [t for t in proposal.get("tags", []) if t.strip().casefold() != PINNED_TAG]
                _approve(client, ws, pid, {"tags": [*tags, PINNED_TAG]}, outcome, out)
                return True
            if key in ("u", "m") and targets:
                changes = replacement(key, proposal, targets, memory, keys, out)
                if changes is None:
                    continue
                _approve(client, ws, pid, changes, outcome, out)
                return True
            if key == "e":
                edited = parse_entry_form(
                    edit_in_editor(
                        entry_form(proposal["title"], proposal.get("tags", []), proposal["content"])
                    )
                )
                if edited is None:
                    print("Empty content: not approved. Choose again.", file=out)
                    continue
                _approve(client, ws, pid, edited.changes(proposal), outcome, out)
                return True
            if key == "r":
                reason = keys.line("Reason (optional, Enter to skip): ")
                params: dict[str, Any] = {"workspace": ws, "ids": [pid]}
                if reason:
                    params["reason"] = reason
                client.call("reject", params)
                outcome.rejected.append(pid)
                print(f"Rejected {short_id(pid)}.", file=out)
                return True
        except NotFound:
            print(f"{short_id(pid)} is no longer waiting (decided elsewhere).", file=out)
            outcome.gone.append(pid)
            return True
        if key == "s":
            outcome.skipped.append(pid)
            return True
        if key == "q":
            return False
        print(KEYS_HELP, file=out)
        if targets:
            print(REPLACE_HELP, file=out)


def replacement(
    key: str,
    proposal: dict[str, Any],
    targets: list[str],
    memory: dict[str, dict[str, Any]],
    keys: Keys,
    out: TextIO,
) -> dict[str, Any] | None:
    """The approval's edits for `u` (supersede a similar entry) or `m` (merge into it), or
    None when the user backs out."""
    target = _pick(targets, memory, keys, out)
    if target is None:
        return None
    changes: dict[str, Any] = {"supersedes": target}
    if key == "m":
        merged = _merge(proposal, memory[target])
        if merged is None:
            print("Empty content: not approved. Choose again.", file=out)
            return None
        changes.update(merged)
    return changes


def _pick(targets: list[str], memory: dict[str, dict[str, Any]], keys: Keys, out: TextIO) -> str | None:
    """The similar entry to replace: the only one, or the one the user picks by number."""
    if len(targets) == 1:
        return targets[0]
    for number, entry_id in enumerate(targets, 1):
        print(f"  {number}. {memory[entry_id].get('title', '')} ({short_id(entry_id)})", file=out)
    answer = keys.line(f"Which entry (1-{len(targets)}, Enter to go back)? ")
    if answer.isdigit() and 1 <= int(answer) <= len(targets):
        return targets[int(answer) - 1]
    return None


def _merge(proposal: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any] | None:
    """The proposal and the entry in one editor form; the fields of the saved text."""
    tags = list(dict.fromkeys([*proposal.get("tags", []), *entry.get("tags", [])]))
    both = f"{proposal['content']}\n\n{entry['content']}"
    edited = parse_entry_form(edit_in_editor(entry_form(proposal["title"], tags, both)))
    if edited is None:
        return None
    return {"title": edited.title, "content": edited.content, "tags": edited.tags}


def _approve(
    client: Client, ws: str, pid: str, changes: dict[str, Any], outcome: Outcome, out: TextIO
) -> None:
    params: dict[str, Any] = {"workspace": ws, "ids": [pid]}
    if changes:
        params["edits"] = {pid: changes}
    result = client.call("approve", params)
    for item in result["approved"]:
        outcome.approved.append({"proposalId": item["proposalId"], "entryId": item["entry"]["id"]})
        pinned = PINNED_TAG in changes.get("tags", []) and set(changes) == {"tags"}
        edited = " and pinned" if pinned else " (edited)" if set(changes) - {"supersedes"} else ""
        replaced = f", replacing {short_id(item['superseded'])} (archived)" if item.get("superseded") else ""
        print(f"Approved{edited} → entry {short_id(item['entry']['id'])}{replaced}.", file=out)


def _finish(outcome: Outcome, args: argparse.Namespace, out: TextIO) -> int:
    if args.json:
        print_json(outcome.as_dict())
    elif outcome.approved or outcome.rejected or outcome.skipped or outcome.gone:
        print(
            f"Done: {len(outcome.approved)} approved, {len(outcome.rejected)} rejected, "
            f"{len(outcome.skipped)} left waiting.",
            file=out,
        )
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: Parents) -> None:
    p = sub.add_parser(
        "review",
        parents=parents.scoped,
        help="go through the proposals one by one: approve, edit, reject, skip",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(func=cmd_review)

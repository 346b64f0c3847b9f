"""Editor saves racing daemon writes: ``scripts/soak --editor-races N``.

Each trial queues a proposal, then lets an "editor" (a thread of this process)
save MEMORY.md with a change of the user's own — a new note or an edit of an
earlier note — while ``approve`` writes the proposal into the same file. The
timings are drawn so that the save lands before, inside and after the
daemon's read-modify-rename. Five save styles take turns:

- ``rename``: write a temp file, rename it over MEMORY.md (most editors);
- ``in_place``: truncate MEMORY.md and write it (VS Code, nano), sometimes in two
  writes with a pause between them;
- ``backup_rename``: rename MEMORY.md to ``MEMORY.md~``, write a new MEMORY.md, remove
  the backup (vim's default);
- ``delayed_rename``: write the temp file, wait up to 150 ms, then rename it;
- ``stale_buffer``: read the file, wait for ``approve`` to answer, then save what was
  read plus the user's change (a buffer that predates the approval).

After both sides are done the daemon is asked to read the files (``read_state``,
``list_proposals``) and the outcome is checked against the files on disk:

- ``lost_user_edits``: the user's change is not in MEMORY.md;
- ``silently_lost_entries``: an approval that answered ok whose entry is neither in
  MEMORY.md nor back in PENDING.md (nor, when approve failed, the proposal still
  queued);
- ``false_user_deletions``: the ledger says the user deleted an entry the user never
  deleted;
- ``collateral``: an entry nobody touched in the trial went missing;
- ``lost_identity``: an entry returned to PENDING.md that is not queued under its own
  id, or that approving it again does not bring back under that id.

All five must be 0. Also reported per style: how many saves raced the write (the
approved entry was missing from the saved text), and how the daemon resolved
them (entries re-applied, entries returned to PENDING.md). A control run of
deliberate deletions (the user deletes an approved entry after having saved a
version holding it) must see each deletion honoured.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from maka import Client
from maka.errors import RemoteError
from soaklib.daemon import Daemon

STYLES = ("rename", "in_place", "backup_rename", "delayed_rename", "stale_buffer")
TRIALS_PER_WORKSPACE = 25
SEED_ENTRIES = 3
# Every how many trials a deliberate deletion is tried (the control).
DELETION_EVERY = 10


@dataclass
class Tally:
    trials: int = 0
    raced: int = 0
    lost_user_edits: int = 0
    silently_lost_entries: int = 0
    false_user_deletions: int = 0
    collateral: int = 0
    reapplied: int = 0
    returned_to_pending: int = 0
    lost_identity: int = 0
    approve_errors: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "approve_errors"}
        out["approve_errors"] = dict(self.approve_errors)
        return out


@dataclass
class Trial:
    index: int
    style: str
    workspace: Path
    proposal_id: str
    approved_content: str
    user_token: str
    edits_note: str | None  # the token of the earlier note this trial edits, if any
    saved_text: str = ""
    approve_result: dict[str, Any] | None = None
    approve_error: str | None = None


class EditorRaces:
    def __init__(
        self, trials: int, seed: int, progress: Callable[[str], None], env: dict[str, str] | None
    ) -> None:
        self.trials = trials
        self.rng = random.Random(seed)
        self.seed = seed
        self.root = Path(tempfile.mkdtemp(prefix="mkr", dir="/tmp"))
        self.daemon = Daemon(self.root, env=env)
        self.progress = progress
        self.tallies: dict[str, Tally] = defaultdict(Tally)
        self.deletions = Counter[str]()
        self.samples: list[str] = []
        self.notes: dict[Path, list[str]] = {}
        self._seed_ids: dict[str, list[str]] = {}

    # --- the run -----------------------------------------------------------------------

    def execute(self, keep: bool) -> dict[str, Any]:
        started = time.monotonic()
        try:
            self.daemon.start()
            with Client(str(self.daemon.socket), timeout=60) as client:
                workspace = self.root / "ws0"
                for index in range(self.trials):
                    if index % TRIALS_PER_WORKSPACE == 0:
                        workspace = self._new_workspace(client, index // TRIALS_PER_WORKSPACE)
                    style = STYLES[index % len(STYLES)]
                    self._trial(client, workspace, index, style)
                    if index % DELETION_EVERY == DELETION_EVERY - 1:
                        self._deliberate_deletion(client, workspace, index)
                    if (index + 1) % 100 == 0:
                        self.progress(f"editor races: {index + 1}/{self.trials}")
            exit_code = self.daemon.stop()
        finally:
            if self.daemon.alive():
                self.daemon.kill9()
        log = self.daemon.log_text()
        crashed = log.count('"request_crashed"')
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)
        total = Tally()
        for tally in self.tallies.values():
            for name in ("trials", "raced", "lost_user_edits", "silently_lost_entries"):
                setattr(total, name, getattr(total, name) + getattr(tally, name))
            for name in (
                "false_user_deletions",
                "collateral",
                "reapplied",
                "returned_to_pending",
                "lost_identity",
            ):
                setattr(total, name, getattr(total, name) + getattr(tally, name))
            total.approve_errors.update(tally.approve_errors)
        deletions_ok = self.deletions["honoured"] == self.deletions["trials"]
        passed = (
            total.lost_user_edits == 0
            and total.silently_lost_entries == 0
            and total.false_user_deletions == 0
            and total.collateral == 0
            and total.lost_identity == 0
            and deletions_ok
            and crashed == 0
            and exit_code == 0
        )
        return {
            "editor_races": {
                **total.as_dict(),
                "seed": self.seed,
                "per_style": {style: self.tallies[style].as_dict() for style in STYLES},
                "deliberate_deletions": dict(self.deletions),
                # Saves the daemon's rename displaced (then put back), and saves that lacked
                # what the daemon had written (merged), as its log counts them.
                "saves_displaced_in_log": log.count('"save_displaced"'),
                "stale_saves_in_log": log.count('"stale_save"'),
                "request_crashed_in_log": crashed,
                "exit_code": exit_code,
                "elapsed_s": round(time.monotonic() - started, 1),
                "samples": self.samples,
                "passed": passed,
            }
        }

    def _new_workspace(self, client: Client, number: int) -> Path:
        workspace = self.root / f"ws{number}"
        (workspace / "memory").mkdir(parents=True)
        ws = str(workspace)
        client.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "extractToolEnabled": True})
        self._seed_ids[ws] = [
            client.call(
                "add_entry", {"workspace": ws, "title": f"Seed {i}", "content": f"seed-{number}-{i}"}
            )["entry"]["id"]
            for i in range(SEED_ENTRIES)
        ]
        self.notes[workspace] = []
        return workspace

    # --- one trial ------------------------------------------------------------------------

    def _trial(self, client: Client, workspace: Path, index: int, style: str) -> None:
        ws = str(workspace)
        token = f"ap-{index}-{self.rng.randrange(1 << 30):08x}"
        proposal = client.call(
            "propose",
            {"workspace": ws, "title": f"Approved {index}", "content": f"{token} from the agent"},
        )["proposal"]
        notes = self.notes[workspace]
        edits = self.rng.choice(notes) if notes and self.rng.random() < 0.4 else None
        trial = Trial(
            index=index,
            style=style,
            workspace=workspace,
            proposal_id=proposal["id"],
            approved_content=token,
            user_token=f"ue-{index}-{self.rng.randrange(1 << 30):08x}",
            edits_note=edits,
        )
        approved = threading.Event()
        editor = threading.Thread(target=self._edit, args=(trial, approved))
        approver = threading.Thread(target=self._approve, args=(trial, approved))
        editor.start()
        approver.start()
        editor.join(30)
        approver.join(30)
        self._check(client, trial)
        if edits is not None:
            notes.remove(edits)
        notes.append(trial.user_token)

    def _approve(self, trial: Trial, approved: threading.Event) -> None:
        time.sleep(self.rng.uniform(0, 0.03) if trial.style != "stale_buffer" else 0.0)
        try:
            with Client(str(self.daemon.socket), timeout=60) as client:
                trial.approve_result = client.call(
                    "approve", {"workspace": str(trial.workspace), "ids": [trial.proposal_id]}
                )
        except RemoteError as exc:
            trial.approve_error = exc.kind
        finally:
            approved.set()

    def _edit(self, trial: Trial, approved: threading.Event) -> None:
        rng = random.Random(trial.index * 7919 + self.seed)
        path = trial.workspace / "memory" / "MEMORY.md"
        if trial.style == "stale_buffer":
            buffer = path.read_text(encoding="utf-8")
            approved.wait(30)
            time.sleep(rng.uniform(0, 0.01))
            text = self._with_user_change(buffer, trial)
            if rng.random() < 0.5:
                _save_rename(path, text)
            else:
                _save_in_place(path, text, rng)
            trial.saved_text = text
            return
        time.sleep(rng.uniform(0, 0.02))
        buffer = path.read_text(encoding="utf-8")
        time.sleep(rng.uniform(0, 0.02))  # the user types
        text = self._with_user_change(buffer, trial)
        trial.saved_text = text
        if trial.style == "rename":
            _save_rename(path, text)
        elif trial.style == "in_place":
            _save_in_place(path, text, rng)
        elif trial.style == "backup_rename":
            _save_backup_rename(path, text)
        else:
            _save_rename(path, text, delay=rng.uniform(0, 0.15))

    def _with_user_change(self, buffer: str, trial: Trial) -> str:
        if trial.edits_note is not None and trial.edits_note in buffer:
            return buffer.replace(trial.edits_note, f"{trial.edits_note} {trial.user_token}", 1)
        if not buffer.endswith("\n"):
            buffer += "\n"
        return buffer + f"\n## Note {trial.index}\n{trial.user_token} typed by hand\n"

    # --- checking -------------------------------------------------------------------------

    def _check(self, client: Client, trial: Trial) -> None:
        tally = self.tallies[trial.style]
        tally.trials += 1
        ws = str(trial.workspace)
        # Both calls read the files first: whatever the last save left is taken in here.
        state = client.call("read_state", {"workspace": ws, "includeEntries": True})
        pending = client.call("list_proposals", {"workspace": ws})["proposals"]
        memory_text = (trial.workspace / "memory" / "MEMORY.md").read_text(encoding="utf-8", errors="replace")
        active = [e for e in state["entries"] if e["status"] == "active"]
        queued = [p["proposal"] for p in pending]
        if trial.saved_text and trial.approved_content not in trial.saved_text:
            tally.raced += 1
        if trial.user_token not in memory_text:
            tally.lost_user_edits += 1
            self._sample(trial, "user edit lost")
        if trial.edits_note is not None and trial.edits_note not in memory_text:
            tally.lost_user_edits += 1
            self._sample(trial, "the edited note lost")
        for i in range(SEED_ENTRIES):
            if f"seed-{trial.workspace.name[2:]}-{i}" not in memory_text:
                tally.collateral += 1
                self._sample(trial, f"seed {i} lost")
                self._explain(client, trial, i)
        in_memory = [e for e in active if trial.approved_content in e["content"]]
        in_pending = [p for p in queued if trial.approved_content in p["content"]]
        if trial.approve_error is not None:
            tally.approve_errors[trial.approve_error] += 1
        if not in_memory and not in_pending:
            if trial.approve_error is None:
                tally.silently_lost_entries += 1
                self._sample(trial, "approved entry lost")
            else:
                tally.silently_lost_entries += 1
                self._sample(trial, f"proposal lost after {trial.approve_error}")
        if trial.approve_result is not None:
            entry_id = trial.approve_result["approved"][0]["entry"]["id"]
            history = client.call("memory_history", {"workspace": ws, "id": entry_id})["events"]
            actions = [(e["action"], e["actor"]) for e in history]
            if ("deleted", "user") in actions:
                tally.false_user_deletions += 1
                self._sample(trial, "ledger: deleted by the user")
            if not in_memory and in_pending:
                tally.returned_to_pending += 1
                self._approve_returned(client, trial, entry_id, in_pending[0])
            elif any(a == "reapplied" for a, _ in actions):
                tally.reapplied += 1

    def _approve_returned(self, client: Client, trial: Trial, entry_id: str, queued: dict[str, Any]) -> None:
        """The user approves the returned entry again: it must be the entry it was."""
        ws = str(trial.workspace)
        again = client.call("approve", {"workspace": ws, "ids": [queued["id"]]})["approved"][0]["entry"]
        if queued["id"] != entry_id or again["id"] != entry_id:
            self.tallies[trial.style].lost_identity += 1
            self._sample(
                trial, f"returned as {queued['id']}, approved again as {again['id']}, was {entry_id}"
            )

    def _deliberate_deletion(self, client: Client, workspace: Path, index: int) -> None:
        """The control: the user saves a version holding an approved entry, then deletes it."""
        ws = str(workspace)
        token = f"del-{index}-{self.rng.randrange(1 << 30):08x}"
        proposal = client.call(
            "propose", {"workspace": ws, "title": f"To delete {index}", "content": f"{token} doomed"}
        )["proposal"]
        entry = client.call("approve", {"workspace": ws, "ids": [proposal["id"]]})["approved"][0]["entry"]
        path = workspace / "memory" / "MEMORY.md"
        note = f"dn-{index}-{self.rng.randrange(1 << 30):08x}"
        _save_rename(path, path.read_text(encoding="utf-8") + f"\n## Seen {index}\n{note} seen it\n")
        client.call("read_state", {"workspace": ws})
        text = path.read_text(encoding="utf-8")
        _save_rename(path, _without_section(text, token))
        state = client.call("read_state", {"workspace": ws, "includeEntries": True})
        pending = client.call("list_proposals", {"workspace": ws})["proposals"]
        self.deletions["trials"] += 1
        kept = any(token in e["content"] for e in state["entries"])
        queued = any(token in p["proposal"]["content"] for p in pending)
        history = client.call("memory_history", {"workspace": ws, "id": entry["id"]})["events"]
        recorded = any(e["action"] == "deleted" and e["actor"] == "user" for e in history)
        if not kept and not queued and recorded:
            self.deletions["honoured"] += 1
        else:
            self.deletions["kept" if kept else "queued" if queued else "not_recorded"] += 1

    def _explain(self, client: Client, trial: Trial, seed: int) -> None:
        """What the ledger says about a seed entry that went missing (for the samples)."""
        ws = str(trial.workspace)
        entries = client.call(
            "read_state", {"workspace": ws, "includeEntries": True, "includeArchived": True}
        )
        self._sample(trial, f"entries now: {[e['title'] for e in entries['entries']]}")
        for event in client.call("memory_history", {"workspace": ws, "id": self._seed_ids[ws][seed]})[
            "events"
        ]:
            self._sample(trial, f"seed {seed}: {event['action']} by {event['actor']} {event.get('data')}")

    def _sample(self, trial: Trial, what: str) -> None:
        if len(self.samples) < 60:
            self.samples.append(f"trial {trial.index} ({trial.style}): {what}")


def _without_section(text: str, token: str) -> str:
    """``text`` minus the ``## `` section holding ``token``."""
    parts = re.split(r"(?m)^(?=## )", text)
    return "".join(part for part in parts if token not in part)


def _save_rename(path: Path, text: str, delay: float = 0.0) -> None:
    tmp = path.with_name(f".{path.name}.{threading.get_ident()}.swp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    if delay:
        time.sleep(delay)
    os.replace(tmp, path)


def _save_in_place(path: Path, text: str, rng: random.Random) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        if rng.random() < 0.3:
            cut = rng.randrange(len(text) + 1)
            fh.write(text[:cut])
            fh.flush()
            time.sleep(rng.uniform(0, 0.005))
            fh.write(text[cut:])
        else:
            fh.write(text)


def _save_backup_rename(path: Path, text: str) -> None:
    backup = path.with_name(path.name + "~")
    os.replace(path, backup)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.unlink(backup)


def run_editor_races(
    trials: int,
    seed: int = 1,
    progress: Callable[[str], None] | None = None,
    keep: bool = False,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run ``trials`` races and return ``{"editor_races": {...}}``."""
    return EditorRaces(trials, seed, progress or (lambda line: None), env).execute(keep)

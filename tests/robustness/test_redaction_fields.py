"""Every string field of every method, as the daemon advertises them (rpc.discover), gets a
secret: none of them reaches a file under the data dir, a memory dir, or the log.

The fields are not listed here: they are walked from the OpenRPC params, so a field
added later is planted too. Each one is planted twice — the secret alone (the shape an
identifier takes: a session id, a request id, a directory name) and inside prose — on
top of a valid template, so the call does its real work.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from maka.client import Client
from maka.errors import RemoteError
from makad.core.redaction import redact
from tests.robustness.planting import Schemas, Slot, github_token
from tests.support import DaemonProcess

SUMMARY = "# Current Goal\nShip it.\n\n# Current State\nHalf done.\n\n# Next Step\nTest.\n"
# Errors a planted value may meet (a lookup by a made-up id, a refused shape): nothing written.
REFUSALS = {
    "invalid_params",
    "not_found",
    "conflict",
    "too_large",
    "gate_closed",
    "insufficient_evidence",
    "invalid_summary",
    "invalid_workspace",
    "incognito_blocked",
}
# Writes that must go through with a secret in the field (they store it, redacted).
# ``propose.supersedes`` is not among them: it must name an existing entry, so a made-up
# value is refused (invalid_params) and, like every refusal, writes nothing.
MUST_SUCCEED = {
    "open_session.sessionId",
    "open_session.title",
    "open_session.workspace",
    "append_events.sessionId",
    "append_events.requestId",
    "append_events.events.[].text",
    "append_events.events.[].toolCallId",
    "append_events.events.[].meta.{value}",
    "add_entry.sessionId",
    "add_entry.requestId",
    "add_entry.content",
    "add_entry.workspace",
    "update_entry.requestId",
    "archive_entry.requestId",
    "restore_entry.requestId",
    "delete_entry.requestId",
    "propose.sessionId",
    "propose.requestId",
    "propose.sourceRefs.[]",
    "approve.requestId",
    "reject.requestId",
    "reject.reason",
    "import_memories.path",
    "import_memories.data",
    "import_memories.requestId",
    "set_working_state.sessionId",
    "set_working_state.requestId",
    "set_working_state.goals.[]",
    "record_episode.sessionId",
    "record_episode.requestId",
    "record_episode.summary",
    "compact.sessionId",
    "compact.requestId",
    "build_context.sessionId",
    "build_context.query",
    "close_session.sessionId",
    "consolidate.requestId",
    "set_settings.workspace",
}
SKIPPED_METHODS = {"shutdown"}
# How a secret is planted: alone (an identifier, a directory name), in prose, and in a
# source ref's session part (fields named ...Refs).
FORMS = {"alone": "{}", "prose": "note {} end", "ref": "event:{}:1"}


class Planter:
    """Valid templates for every method, and the objects (sessions, entries, proposals)
    they name, made fresh for each call so every call does real work."""

    def __init__(self, daemon: DaemonProcess, client: Client) -> None:
        self.d = daemon
        self.client = client
        self.ws = str(daemon.workspace)
        self.sid = self.session(self.ws)

    def call(self, method: str, params: dict[str, Any]) -> Any:
        return self.client.call(method, params)

    def quiet(self, method: str, params: dict[str, Any]) -> Any:
        with contextlib.suppress(RemoteError):
            return self.call(method, params)
        return None

    def open_gate(self, ws: str) -> None:
        self.quiet(
            "set_settings",
            {
                "workspace": ws,
                "agentReadEnabled": True,
                "extractToolEnabled": True,
                "historyRecallEnabled": True,
            },
        )

    def session(self, ws: str, sid: str | None = None) -> str:
        opened = self.quiet("open_session", {"workspace": ws, **({"sessionId": sid} if sid else {})})
        sid = opened["sessionId"] if opened else sid
        assert sid is not None
        turns = [
            event
            for i in range(8)
            for event in (
                {"type": "user_message", "text": f"question {i} about deploys"},
                {"type": "assistant_message", "text": "answer " + "word " * 200},
            )
        ]
        self.quiet("append_events", {"workspace": ws, "sessionId": sid, "events": turns})
        return sid

    def entry(self, ws: str) -> str:
        return str(
            self.call("add_entry", {"workspace": ws, "title": "E", "content": f"entry {self.counter()}"})[
                "entry"
            ]["id"]
        )

    def proposal(self, ws: str) -> str:
        return str(
            self.call("propose", {"workspace": ws, "title": "P", "content": f"proposal {self.counter()}"})[
                "proposal"
            ]["id"]
        )

    _count = 0

    def counter(self) -> int:
        Planter._count += 1
        return Planter._count

    def template(self, method: str, ws: str, sid: str) -> dict[str, Any]:
        """Valid params for ``method`` in ``ws``, naming session ``sid`` where one is needed."""
        fresh: dict[str, Callable[[], dict[str, Any]]] = {
            "update_entry": lambda: {"id": self.entry(ws), "content": "changed"},
            "archive_entry": lambda: {"id": self.entry(ws)},
            "restore_entry": lambda: {"id": self.archived(ws)},
            "delete_entry": lambda: {"id": self.entry(ws)},
            "memory_history": lambda: {"id": self.entry(ws)},
            "restore_backup": lambda: {"backupId": self.backup(ws)},
            "approve": lambda: (lambda pid: {"ids": [pid], "edits": {pid: {"title": "T"}}})(
                self.proposal(ws)
            ),
            "reject": lambda: {"ids": [self.proposal(ws)], "reason": "no"},
            # chatgpt: every line is a memory, so a planted value alone is imported too
            # (an import that finds nothing is an error, which would plant nothing).
            "import_memories": lambda: {
                "format": "chatgpt",
                "data": f"fact {self.counter()}\n",
            },
            "build_context": lambda: {"sessionId": sid, "budgetTokens": 2000, "query": "deploys"},
            "compact": lambda: {"sessionId": sid, "mode": "checkpoint", "keepRecentTokens": 50},
            "get_checkpoint": lambda: {"checkpointId": self.checkpoint(ws, sid)},
            "append_events": lambda: {
                "sessionId": sid,
                "events": [
                    {
                        "type": "tool_call",
                        "text": "{}",
                        "toolCallId": "c1",
                        "toolName": "shell",
                        "meta": {"cwd": "/srv"},
                    },
                    {"type": "tool_result", "text": "ok", "toolCallId": "c1", "toolName": "shell"},
                ],
            },
            "close_session": lambda: {"sessionId": sid},
            "delete_session": lambda: {"sessionId": sid},
            "retrieve": lambda: {"refs": [f"event:{sid}:1"], "sessionId": sid},
            "search_history": lambda: {"query": "deploys"},
            "set_working_state": lambda: {
                "sessionId": sid,
                "goals": ["ship"],
                "notes": {"Learnings": "tests first"},
            },
            "get_manifest": lambda: {"sessionId": sid, "callId": self.manifest(ws, sid)},
            "record_episode": lambda: {
                "sessionId": sid,
                "summary": f"deployed {self.counter()}",
                "sourceRefs": [f"event:{sid}:1"],
                "tags": ["deploys"],
            },
            "consolidate": lambda: {"tag": self.evidence(ws)},
            "propose": lambda: {
                "title": "P",
                "content": f"proposal {self.counter()}",
                "sessionId": sid,
                "sourceRefs": [f"event:{sid}:1"],
            },
        }
        base = fresh[method]() if method in fresh else {}
        session_methods = {"read_events", "list_checkpoints", "get_working_state"}
        if method in session_methods:
            base["sessionId"] = sid
        return {"workspace": ws, **base}

    def evidence(self, ws: str) -> str:
        """A fresh tag with enough episodes (5, from 2 sessions) to consolidate."""
        tag = f"deploys-{self.counter()}"
        sessions = [self.session(ws), self.session(ws)]
        for i in range(5):
            sid = sessions[i % 2]
            self.call(
                "record_episode",
                {
                    "workspace": ws,
                    "sessionId": sid,
                    "tags": [tag],
                    "summary": f"deployed {tag} {i}",
                    "sourceRefs": [f"event:{sid}:{i + 1}"],
                },
            )
        return tag

    def archived(self, ws: str) -> str:
        entry = self.entry(ws)
        self.call("archive_entry", {"workspace": ws, "id": entry})
        return entry

    def backup(self, ws: str) -> str:
        self.entry(ws)
        self.entry(ws)
        return str(self.call("list_backups", {"workspace": ws})["backups"][0]["backupId"])

    def checkpoint(self, ws: str, sid: str) -> str:
        found = self.quiet(
            "compact", {"workspace": ws, "sessionId": sid, "mode": "checkpoint", "keepRecentTokens": 50}
        )
        listed = self.quiet("list_checkpoints", {"workspace": ws, "sessionId": sid})
        if listed and listed["checkpoints"]:
            return str(listed["checkpoints"][-1]["checkpointId"])
        return str(found["checkpoint"]["checkpointId"]) if found else "none"

    def manifest(self, ws: str, sid: str) -> str:
        pack = self.quiet("build_context", {"workspace": ws, "sessionId": sid, "budgetTokens": 2000})
        return str(pack["callId"]) if pack else "none"


def plant(planter: Planter, schemas: Schemas, slot: Slot, value: str) -> str:
    """Call ``slot.method`` with ``value`` at the slot; 'ok' or the refusal's kind."""
    d = planter.d
    ws, sid = planter.ws, planter.sid
    if slot.top == "workspace":  # the secret names the workspace directory itself
        where = d.root / "workspaces" / value
        where.mkdir(parents=True, exist_ok=True)
        ws = str(where)
        planter.open_gate(ws)
        sid = planter.session(ws)
    elif slot.top == "sessionId" and slot.method != "open_session":
        sid = planter.session(ws, value)  # the session the secret names exists
    template = planter.template(slot.method, ws, sid)
    if slot.top == "path":  # a file whose name holds the secret
        source = d.root / "imports" / f"{value}.md"
        source.parent.mkdir(exist_ok=True)
        source.write_text(f"# N\n\n## K\n- imported fact {planter.counter()}\n")
        template.pop("data", None)
        value = str(source)
    params = schemas.place(template, schemas.params_schema(slot.method), slot.path, value)
    if slot.top == "workspace":
        params["workspace"] = ws
    try:
        planter.call(slot.method, params)
    except RemoteError as exc:
        assert exc.kind in REFUSALS, f"{slot.label}: {exc.kind} {exc}"
        return exc.kind
    return "ok"


TAIL = 16
ALNUM_RUN = re.compile(rb"[A-Za-z0-9]{%d,}" % TAIL)


def alnum_windows(data: bytes) -> set[bytes]:
    """Every run of ``TAIL`` letters and digits in ``data`` (a needle's tail is one, so one
    set lookup per window stands in for a scan of the whole file per needle)."""
    return {
        run[i : i + TAIL]
        for match in ALNUM_RUN.finditer(data)
        for run in (match.group(),)
        for i in range(len(run) - TAIL + 1)
    }


def leaks(needles: dict[str, str], roots: list[Path], names_under: Path) -> dict[str, list[str]]:
    """For each label whose needle's last 16 characters (so the needle too) are in a file's
    bytes, or in a file name under ``names_under``: the files."""
    tails = {label: needle[-TAIL:] for label, needle in needles.items()}
    assert all(ALNUM_RUN.fullmatch(tail.encode()) for tail in tails.values())
    # A file can go while it is read (a ledger closed when idle takes its -shm and -wal
    # with it, their pages checkpointed into the ledger): then the whole scan runs again,
    # so what moved into a file already read is not missed.
    for _ in range(5):
        try:
            return _leaks_once(tails, roots, names_under)
        except FileNotFoundError:
            continue
    return _leaks_once(tails, roots, names_under)


def _leaks_once(tails: dict[str, str], roots: list[Path], names_under: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    files = [
        p
        for root in roots
        if root.exists()
        for p in ([root] if root.is_file() else root.rglob("*"))
        if p.is_file()
    ]
    for path in files:
        windows = alnum_windows(path.read_bytes())
        name = str(path.relative_to(names_under)) if path.is_relative_to(names_under) else ""
        for label, tail in tails.items():
            if tail.encode() in windows or tail in name:
                found.setdefault(label, []).append(str(path))
    return found


def test_the_leak_check_finds_a_tail_anywhere_in_a_file(short_tmp: Path) -> None:
    """The check above finds a needle whole, its tail alone inside longer letters and digits,
    and its tail in a file name, and finds nothing in a file without them."""
    needle = github_token("check")
    (short_tmp / "whole").write_bytes(b"\x00\x01" + needle.encode() + b"\xff")
    (short_tmp / "tail").write_bytes(b"abc" + needle[-20:].encode() + b"XYZ0\n")
    (short_tmp / f"name-{needle[-TAIL:]}").write_bytes(b"")
    (short_tmp / "clean").write_bytes(needle[:-1].encode() + b" " + needle[-TAIL + 1 :].encode())
    found = leaks({"n": needle}, [short_tmp], short_tmp)
    assert sorted(Path(p).name for p in found["n"]) == ["name-" + needle[-TAIL:], "tail", "whole"]


def memory_dirs(root: Path) -> list[Path]:
    return [p for p in root.rglob("memory") if p.is_dir()]


@pytest.mark.slow
def test_a_secret_in_every_string_field_of_every_method_reaches_no_file_or_log(daemon: DaemonProcess) -> None:
    """Walked from rpc.discover: each string field of each method (nested ones, map keys
    and values included) holds a secret, alone and inside prose; the calls that store the
    field succeed, and afterwards no file under the data dir or any memory dir, no file
    name in the data dir, and no log line holds any of the secrets."""
    schemas = Schemas(daemon.call("rpc.discover"))
    planted: dict[str, str] = {}
    outcomes: dict[str, set[str]] = {}
    slots = [
        slot
        for method in schemas.methods()
        if method not in SKIPPED_METHODS
        for slot in schemas.string_slots(method)
    ]
    with daemon.client(timeout=60) as client:  # one connection for the few hundred calls
        planter = Planter(daemon, client)
        planter.open_gate(planter.ws)
        for slot in slots:
            for form, shape in FORMS.items():
                if form == "ref" and not slot.top.lower().endswith("refs"):
                    continue
                secret = github_token(f"{slot.label}:{form}")
                planted[f"{slot.label}:{form}"] = secret
                if form == "ref":  # the session the ref names exists, with events
                    planter.session(planter.ws, secret)
                outcome = plant(planter, schemas, slot, shape.format(secret))
                outcomes.setdefault(slot.label, set()).add(outcome)
    assert all(redact(s).count == 1 for s in planted.values())
    roots = [daemon.data_dir, daemon.stderr_path, *memory_dirs(daemon.root)]
    assert leaks(planted, roots, daemon.data_dir) == {}
    daemon.stop()
    assert leaks(planted, roots, daemon.data_dir) == {}
    failed = sorted(label for label in MUST_SUCCEED if "ok" not in outcomes.get(label, set()))
    assert failed == []

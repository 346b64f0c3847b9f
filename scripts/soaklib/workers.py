"""Clients of the crash loop: each owns its objects, records every write it sends.

A worker runs in its own thread with its own connection until the daemon dies
under it. The call that was in flight then is kept and sent again, with the
same ``requestId``, after the restart — what a real client does with a lost
reply — so the run also proves that a retry never duplicates a write.
"""

from __future__ import annotations

import os
import random
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from maka import Client
from maka.errors import MakaError, RemoteError
from makad.core import memory_format as fmt
from soaklib.model import ABSENT, Expectations, State, content, located


class ConnectionLost(Exception):
    """The daemon went away mid-call (it was killed): this worker's cycle is over."""


class SharedExclusiveLock:
    """Many daemon writers at once, or the hand editor alone.

    The editor's read-modify-write of a file would otherwise race the daemon's
    own writes, and then the user (not the daemon) would be the one losing them.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive:
                self._cond.wait()
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive or self._shared:
                self._cond.wait()
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


def _noop(*_: Any) -> None:
    return None


@dataclass
class Op:
    """One call: what to do with its answer, and which refusals are part of the plan."""

    method: str
    params: dict[str, Any]
    on_ack: Callable[[Any], None] = _noop
    on_refused: Callable[[str], None] = _noop
    expected: frozenset[str] = frozenset()
    writes: bool = True


@dataclass
class SessionModel:
    """What must be in one session: acknowledged batches, working state, checkpoints."""

    session_id: str
    batches: list[tuple[int, list[str]]] = field(default_factory=list)
    goals_must: list[str] | None = None
    goals_may: list[list[str]] = field(default_factory=list)
    checkpoints: set[str] = field(default_factory=set)
    closed: bool = False


@dataclass
class Run:
    """Everything the workers of one crash run share."""

    socket: Path
    workspace: Path
    expectations: Expectations
    rng_seed: int
    stopping: threading.Event = field(default_factory=threading.Event)
    edit_lock: SharedExclusiveLock = field(default_factory=SharedExclusiveLock)
    sessions: dict[str, SessionModel] = field(default_factory=dict)
    unexpected: Counter[str] = field(default_factory=Counter)
    expected_refusals: Counter[str] = field(default_factory=Counter)
    acked_ops: Counter[str] = field(default_factory=Counter)
    acked_writes: int = 0
    hand_edits: int = 0
    retried: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def ws(self) -> str:
        return str(self.workspace)

    def note_unexpected(self, what: str) -> None:
        with self.lock:
            self.unexpected[what] += 1


class Worker:
    """Base: a loop of ``step`` calls on one connection, and the retry of a lost call."""

    # Writers of the memory files wait while the hand editor saves (see SharedExclusiveLock).
    takes_edit_lock = False

    def __init__(self, run: Run, index: int) -> None:
        self.run = run
        self.index = index
        self.rng = random.Random(run.rng_seed * 1000 + index)
        self.inflight: Op | None = None
        self.client: Client | None = None
        self._counter = 0

    def new_marker(self, letter: str) -> str:
        self._counter += 1
        return f"{letter}-{self.index * 1_000_000 + self._counter}"

    def loop(self) -> None:
        try:
            with Client(str(self.run.socket), timeout=30) as client:
                self.client = client
                while not self.run.stopping.is_set():
                    self.step()
        except ConnectionLost:
            pass
        finally:
            self.client = None

    def step(self) -> None:
        raise NotImplementedError

    def execute(self, op: Op) -> None:
        assert self.client is not None
        self.inflight = op
        try:
            if op.writes and self.takes_edit_lock:
                with self.run.edit_lock.shared():
                    result = self.client.call(op.method, op.params)
            else:
                result = self.client.call(op.method, op.params)
        except RemoteError as exc:
            self.inflight = None
            self._refused(op, exc)
            return
        except (MakaError, OSError) as exc:
            if not op.writes:
                self.inflight = None
            raise ConnectionLost(str(exc)) from None
        self.inflight = None
        self._acked(op)
        op.on_ack(result)

    def _acked(self, op: Op) -> None:
        with self.run.lock:
            self.run.acked_ops[op.method] += 1
            self.run.acked_writes += op.writes

    def _refused(self, op: Op, exc: RemoteError) -> None:
        if exc.kind in op.expected:
            with self.run.lock:
                self.run.expected_refusals[f"{op.method}:{exc.kind}"] += 1
            op.on_refused(exc.kind)
            return
        self.run.note_unexpected(f"{op.method}:{exc.kind}")

    def retry(self) -> None:
        """Send the call the crash interrupted again, with the same requestId."""
        op, self.inflight = self.inflight, None
        if op is None:
            return
        self.run.retried += 1
        with Client(str(self.run.socket), timeout=30) as client:
            try:
                result = client.call(op.method, op.params)
            except RemoteError as exc:
                self._refused(op, exc)
                return
        self._acked(op)
        op.on_ack(result)


def request_id() -> str:
    return uuid.uuid4().hex


# ------------------------------------------------------------------- entries


class EntryWorker(Worker):
    """add / update / archive / restore / delete of its own entries, and stale CAS writes."""

    takes_edit_lock = True

    def __init__(self, run: Run, index: int) -> None:
        super().__init__(run, index)
        self.mine: list[str] = []
        self.stale_revision: int | None = None

    def _live(self) -> list[tuple[str, str, str, int]]:
        out = []
        for marker in self.mine:
            tracked = self.run.expectations.get(marker)
            if tracked.entry_id and tracked.must and not tracked.may:
                _, status, version = tracked.must[0]
                out.append((marker, tracked.entry_id, status, version))
        return out

    def step(self) -> None:
        live = self._live()
        roll = self.rng.random()
        if len(live) < 3 or (roll < 0.4 and len(live) < 25):
            self.add()
        elif roll < 0.62:
            self.update(*self.rng.choice(live))
        elif roll < 0.75:
            self.toggle(*self.rng.choice(live))
        elif roll < 0.9:
            self.delete(*self.rng.choice(live))
        else:
            self.stale_update(*self.rng.choice(live))

    def add(self) -> None:
        marker = self.new_marker("E")
        state = located("memory", "active", 0)
        self.mine.append(marker)
        self.run.expectations.begin(marker, state)

        def ack(result: Any) -> None:
            self.run.expectations.ack(marker, state, result["entry"]["id"])
            self.stale_revision = self.stale_revision or result["revision"]

        self.execute(
            Op(
                "add_entry",
                {
                    "workspace": self.run.ws,
                    "title": marker,
                    "content": content(marker, 0),
                    "tags": ["soak"],
                    "requestId": request_id(),
                },
                on_ack=ack,
            )
        )

    def _change(
        self,
        method: str,
        marker: str,
        entry_id: str,
        state: State,
        extra: dict[str, Any],
        expected: frozenset[str] = frozenset(),
    ) -> None:
        self.run.expectations.begin(marker, state)

        def ack(result: Any) -> None:
            self.run.expectations.ack(marker, state)
            if self.rng.random() < 0.3:
                self.stale_revision = result["revision"]

        self.execute(
            Op(
                method,
                {"workspace": self.run.ws, "id": entry_id, "requestId": request_id(), **extra},
                on_ack=ack,
                on_refused=lambda kind: self.run.expectations.refused(marker, state),
                expected=expected,
            )
        )

    def update(self, marker: str, entry_id: str, status: str, version: int) -> None:
        self._change(
            "update_entry",
            marker,
            entry_id,
            located("memory", status, version + 1),
            {"content": content(marker, version + 1)},
        )

    def toggle(self, marker: str, entry_id: str, status: str, version: int) -> None:
        method = "archive_entry" if status == "active" else "restore_entry"
        target = "archived" if status == "active" else "active"
        self._change(method, marker, entry_id, located("memory", target, version), {})

    def delete(self, marker: str, entry_id: str, status: str, version: int) -> None:
        self._change("delete_entry", marker, entry_id, ABSENT, {})

    def stale_update(self, marker: str, entry_id: str, status: str, version: int) -> None:
        """A compare-and-swap against a revision seen earlier: conflict is the plan."""
        if self.stale_revision is None:
            return
        self._change(
            "update_entry",
            marker,
            entry_id,
            located("memory", status, version + 1),
            {"content": content(marker, version + 1), "expectedRevision": self.stale_revision},
            expected=frozenset({"conflict"}),
        )


# ----------------------------------------------------------------- proposals


class ProposalWorker(Worker):
    """propose, approve (some with edits), reject, and delete what it approved."""

    takes_edit_lock = True

    def __init__(self, run: Run, index: int) -> None:
        super().__init__(run, index)
        self.mine: list[str] = []

    def _mine_in(self, file: str) -> list[tuple[str, str, int]]:
        out = []
        for marker in self.mine:
            tracked = self.run.expectations.get(marker)
            if tracked.entry_id and tracked.must and not tracked.may and tracked.must[0][0] == file:
                out.append((marker, tracked.entry_id, tracked.must[0][2]))
        return out

    def step(self) -> None:
        pending = self._mine_in("pending")
        approved = self._mine_in("memory")
        roll = self.rng.random()
        if len(approved) > 12:
            self.delete(*self.rng.choice(approved))
        elif len(pending) < 2 or (roll < 0.4 and len(pending) < 8):
            self.propose()
        elif roll < 0.7:
            self.approve(*self.rng.choice(pending))
        elif roll < 0.9:
            self.reject(*self.rng.choice(pending))
        else:
            self.execute(Op("list_proposals", {"workspace": self.run.ws}, writes=False))

    def propose(self) -> None:
        marker = self.new_marker("P")
        state = located("pending", "review_required", 0)
        self.mine.append(marker)
        self.run.expectations.begin(marker, state)

        def ack(result: Any) -> None:
            found = result["proposal"]
            if found is None:
                self.run.note_unexpected("propose:not_queued")
                return
            self.run.expectations.ack(marker, state, found["id"])

        self.execute(
            Op(
                "propose",
                {
                    "workspace": self.run.ws,
                    "title": marker,
                    "content": content(marker, 0),
                    "requestId": request_id(),
                },
                on_ack=ack,
            )
        )

    def approve(self, marker: str, proposal_id: str, version: int) -> None:
        edited = self.rng.random() < 0.3
        version = version + 1 if edited else version
        state = located("memory", "active", version)
        params: dict[str, Any] = {"workspace": self.run.ws, "ids": [proposal_id], "requestId": request_id()}
        if edited:
            params["edits"] = {proposal_id: {"content": content(marker, version)}}
        self.run.expectations.begin(marker, state)

        def ack(result: Any) -> None:
            self.run.expectations.ack(marker, state, result["approved"][0]["entry"]["id"])

        self.execute(Op("approve", params, on_ack=ack))

    def reject(self, marker: str, proposal_id: str, version: int) -> None:
        self.run.expectations.begin(marker, ABSENT)
        self.execute(
            Op(
                "reject",
                {
                    "workspace": self.run.ws,
                    "ids": [proposal_id],
                    "reason": f"not useful ({marker})",
                    "requestId": request_id(),
                },
                on_ack=lambda result: self.run.expectations.ack(marker, ABSENT),
            )
        )

    def delete(self, marker: str, entry_id: str, version: int) -> None:
        self.run.expectations.begin(marker, ABSENT)
        self.execute(
            Op(
                "delete_entry",
                {"workspace": self.run.ws, "id": entry_id, "requestId": request_id()},
                on_ack=lambda result: self.run.expectations.ack(marker, ABSENT),
            )
        )


# -------------------------------------------------------------------- ledger


class LedgerWorker(Worker):
    """Appends to its own session (expectedSeq + requestId), working state, compaction,
    build_context and reads; now and then closes the session and opens the next."""

    def __init__(self, run: Run, index: int) -> None:
        super().__init__(run, index)
        self.generation = 0
        self.session_id = ""
        self.last_seq = 0
        self.since_compact = 0
        self.goal_version = 0
        self.opened = False

    @property
    def model(self) -> SessionModel:
        return self.run.sessions[self.session_id]

    def step(self) -> None:
        if not self.opened:
            self.open_next()
            return
        roll = self.rng.random()
        if roll < 0.55:
            self.append()
        elif roll < 0.65:
            self.set_goals()
        elif roll < 0.73 and self.since_compact >= 6:
            self.compact()
        elif roll < 0.83:
            self.execute(
                Op(
                    "build_context",
                    {
                        "workspace": self.run.ws,
                        "budgetTokens": 3000,
                        "sessionId": self.session_id,
                        "query": f"module {self.rng.randrange(50)}",
                    },
                    writes=False,
                )
            )
        elif roll < 0.9:
            self.execute(
                Op(
                    "search_history",
                    {"workspace": self.run.ws, "query": f"module_{self.rng.randrange(50)}"},
                    writes=False,
                )
            )
        elif roll < 0.97 and self.last_seq:
            seq = self.rng.randint(1, self.last_seq)
            self.execute(
                Op(
                    "retrieve",
                    {"workspace": self.run.ws, "refs": [f"event:{self.session_id}:{seq}"]},
                    on_ack=self._check_retrieved,
                    writes=False,
                )
            )
        elif self.last_seq > 30:
            self.close()

    def _check_retrieved(self, result: Any) -> None:
        if not result["results"][0]["ok"]:
            self.run.note_unexpected("retrieve:not_ok")

    def open_next(self) -> None:
        self.generation += 1
        sid = f"soak-L{self.index}-{self.generation}"

        def ack(result: Any) -> None:
            self.session_id = sid
            self.last_seq = result["lastSeq"]
            self.opened = True
            with self.run.lock:
                self.run.sessions.setdefault(sid, SessionModel(sid))

        self.execute(
            Op(
                "open_session",
                {"workspace": self.run.ws, "sessionId": sid, "title": f"soak session {sid}"},
                on_ack=ack,
            )
        )

    def append(self) -> None:
        texts: list[str] = []
        events: list[dict[str, Any]] = []
        for _ in range(self.rng.randint(1, 3)):
            n = self.new_marker("L")
            module = int(n.split("-")[1]) % 50
            call_id = f"call-{n}"
            extra = self.rng.choice(["", " 中文字符 テスト", " ✓ émoji 😀"])
            turn: list[dict[str, Any]] = [
                {"type": "user_message", "text": f"{n}/u please fix module_{module}.py{extra}"},
                {"type": "assistant_message", "text": f"{n}/a looking at module_{module}.py"},
                {
                    "type": "tool_call",
                    "text": f'{{"path": "src/module_{module}.py"}} {n}/c',
                    "toolCallId": call_id,
                    "toolName": "read_file",
                },
                {
                    "type": "tool_result",
                    "text": f"{n}/r contents " + "x" * self.rng.randrange(200),
                    "toolCallId": call_id,
                    "toolName": "read_file",
                    "meta": {"exit": "0"},
                },
            ]
            events += turn
            texts += [e["text"] for e in turn]
        first = self.last_seq + 1
        sid = self.session_id

        def ack(result: Any) -> None:
            if result["firstSeq"] != first or result["lastSeq"] != first + len(texts) - 1:
                self.run.note_unexpected("append_events:wrong_seqs")
            with self.run.lock:
                self.run.sessions[sid].batches.append((result["firstSeq"], texts))
            self.last_seq = result["lastSeq"]
            self.since_compact += len(texts)

        self.execute(
            Op(
                "append_events",
                {
                    "workspace": self.run.ws,
                    "sessionId": sid,
                    "events": events,
                    "expectedSeq": self.last_seq,
                    "requestId": request_id(),
                },
                on_ack=ack,
            )
        )

    def set_goals(self) -> None:
        self.goal_version += 1
        goals = [f"goal {self.session_id} v{self.goal_version}"]
        model = self.model
        with self.run.lock:
            model.goals_may.append(goals)

        def ack(result: Any) -> None:
            with self.run.lock:
                model.goals_must = goals
                model.goals_may.clear()

        self.execute(
            Op(
                "set_working_state",
                {
                    "workspace": self.run.ws,
                    "sessionId": self.session_id,
                    "goals": goals,
                    "notes": {"Worklog": f"step {self.goal_version}"},
                    "requestId": request_id(),
                },
                on_ack=ack,
            )
        )

    def compact(self) -> None:
        model = self.model

        def ack(result: Any) -> None:
            with self.run.lock:
                model.checkpoints.add(result["checkpointId"])
            self.since_compact = 0

        self.execute(
            Op(
                "compact",
                {
                    "workspace": self.run.ws,
                    "sessionId": self.session_id,
                    "mode": "checkpoint",
                    "keepRecentTokens": 150,
                    "requestId": request_id(),
                },
                on_ack=ack,
                expected=frozenset({"invalid_params"}),
            )
        )

    def close(self) -> None:
        model = self.model

        def ack(result: Any) -> None:
            model.closed = True
            self.opened = False

        self.execute(
            Op("close_session", {"workspace": self.run.ws, "sessionId": self.session_id}, on_ack=ack)
        )

    def resync(self, client: Client) -> None:
        """After a restart: continue from the session's head as the daemon has it."""
        if self.opened:
            info = client.call("open_session", {"workspace": self.run.ws, "sessionId": self.session_id})
            self.last_seq = info["lastSeq"]
            if info["closedAt"] is not None:
                self.opened = False


# ---------------------------------------------------------------- the reader


class ReaderWorker(Worker):
    """Read-only calls: build_context, read_state, list_proposals, export, history."""

    def step(self) -> None:
        ws = self.run.ws
        roll = self.rng.random()
        if roll < 0.3:
            op = Op(
                "build_context",
                {"workspace": ws, "budgetTokens": 4000, "query": f"E-{self.rng.randrange(100)}"},
            )
        elif roll < 0.5:
            op = Op(
                "read_state",
                {"workspace": ws, "includeEntries": True, "includeArchived": True},
                on_ack=self._check_state,
            )
        elif roll < 0.65:
            op = Op("list_proposals", {"workspace": ws})
        elif roll < 0.75:
            op = Op("export_memories", {"workspace": ws, "format": "json"})
        elif roll < 0.85:
            op = Op("list_sessions", {"workspace": ws})
        else:
            op = Op("list_backups", {"workspace": ws})
        op.writes = False
        self.execute(op)

    def _check_state(self, result: Any) -> None:
        if result["status"] != "ok":
            self.run.note_unexpected(f"read_state:status:{result['status']}")


# ---------------------------------------------------------------- the editor


class HandEditor(Worker):
    """The user: edits MEMORY.md and PENDING.md in place, editor-style (temp + rename)."""

    def __init__(self, run: Run, index: int) -> None:
        super().__init__(run, index)
        self.entries: dict[str, int] = {}  # marker -> version, in MEMORY.md
        self.proposals: set[str] = set()  # markers, in PENDING.md
        self.edited = False

    def loop(self) -> None:
        while not self.run.stopping.wait(self.rng.uniform(0.02, 0.12)):
            with self.run.edit_lock.exclusive():
                before = self._counter, len(self.entries), len(self.proposals)
                self.step()
                if (self._counter, len(self.entries), len(self.proposals)) != before or self.edited:
                    self.run.hand_edits += 1
                self.edited = False

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.35 and len(self.entries) < 8:
            self.add_entry()
        elif roll < 0.6 and self.entries:
            self.edit_entry(self.rng.choice(sorted(self.entries)))
        elif roll < 0.7 and len(self.entries) > 4:
            self.remove(self.run.workspace / "memory" / "MEMORY.md", self.rng.choice(sorted(self.entries)))
        elif roll < 0.85 and len(self.proposals) < 4:
            self.add_proposal()
        elif self.proposals:
            self.remove(self.run.workspace / "memory" / "PENDING.md", self.rng.choice(sorted(self.proposals)))

    @staticmethod
    def _read(path: Path) -> str:
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""

    @staticmethod
    def _write(path: Path, text: str) -> None:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        tmp = path.with_name(f".{path.name}.hand-edit")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)

    @staticmethod
    def _section(marker: str, status: str, version: int) -> str:
        return (
            f"## {marker}\n<!-- maka-memory: id=hand-{marker} origin=manual "
            f"createdAt=1700000000000 updatedAt=1700000000000 status={status} tags=hand -->\n"
            f"{content(marker, version)} written by hand\n"
        )

    def _append(self, path: Path, section: str) -> None:
        text = self._read(path)
        if not text:
            text = "# Maka Memory\n\n"
        elif not text.endswith("\n"):
            text += "\n"
        # No blank line before the new heading: the previous section's bytes stay as they are.
        self._write(path, text + section)

    def add_entry(self) -> None:
        marker = self.new_marker("U")
        self._append(self.run.workspace / "memory" / "MEMORY.md", self._section(marker, "active", 0))
        self.entries[marker] = 0
        self.run.expectations.ack(marker, located("memory", "active", 0), f"hand-{marker}")

    def edit_entry(self, marker: str) -> None:
        path = self.run.workspace / "memory" / "MEMORY.md"
        version = self.entries[marker]
        text = self._read(path)
        old, new = content(marker, version) + " ", content(marker, version + 1) + " "
        if text.count(old) != 1:
            return  # verification reports it; editing blind would hide the evidence
        self._write(path, text.replace(old, new))
        self.entries[marker] = version + 1
        self.edited = True
        self.run.expectations.ack(marker, located("memory", "active", version + 1))

    def add_proposal(self) -> None:
        marker = self.new_marker("Q")
        self._append(
            self.run.workspace / "memory" / "PENDING.md", self._section(marker, "review_required", 0)
        )
        self.proposals.add(marker)
        self.run.expectations.ack(marker, located("pending", "review_required", 0), f"hand-{marker}")

    def remove(self, path: Path, marker: str) -> None:
        doc = fmt.parse(self._read(path))
        kept = [s.raw for s in doc.sections if not s.entry.content.startswith(f"{marker} v")]
        if len(kept) != len(doc.sections) - 1:
            return
        self._write(path, ("\ufeff" if doc.bom else "") + doc.preamble + "".join(kept))
        self.entries.pop(marker, None)
        self.proposals.discard(marker)
        self.run.expectations.ack(marker, ABSENT)

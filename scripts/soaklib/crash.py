"""The crash loop: a mixed workload while the daemon is kill -9ed at random moments.

Each cycle: start the daemon, resend the calls the last kill interrupted (same
requestId), verify everything on disk against what was acknowledged, run the
workload, kill -9 after a random time. A last clean stop and start is verified
too. Problems are counted once each, however many cycles see them.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from maka import Client
from soaklib import verify
from soaklib.daemon import Daemon
from soaklib.model import Expectations, observe
from soaklib.verify import Problem
from soaklib.workers import (
    EntryWorker,
    HandEditor,
    LedgerWorker,
    ProposalWorker,
    ReaderWorker,
    Run,
    Worker,
)

JOIN_TIMEOUT_S = 60.0


class CrashLoop:
    def __init__(
        self,
        cycles: int,
        seed: int,
        max_uptime_s: float = 1.2,
        root: Path | None = None,
        progress: Callable[[str], None] | None = None,
        env: dict[str, str] | None = None,
        required_methods: frozenset[str] = frozenset(),
        max_extra_cycles: int = 0,
    ) -> None:
        self.cycles = cycles
        # Coverage by count, not by time: on a loaded machine a short uptime may end
        # before a slow method (reject needs a proposal first) was ever acknowledged.
        self.required_methods = required_methods
        self.max_extra_cycles = max_extra_cycles
        self.rng = random.Random(seed)
        self.max_uptime_s = max_uptime_s
        self.own_root = root is None
        self.root = root or Path(tempfile.mkdtemp(prefix="mks", dir="/tmp"))
        workspace = self.root / "ws"
        workspace.mkdir(exist_ok=True)
        self.daemon = Daemon(self.root, env=env)
        self.run = Run(
            socket=self.daemon.socket, workspace=workspace, expectations=Expectations(), rng_seed=seed
        )
        self.workers: list[Worker] = [
            EntryWorker(self.run, 1),
            EntryWorker(self.run, 2),
            ProposalWorker(self.run, 3),
            LedgerWorker(self.run, 4),
            LedgerWorker(self.run, 5),
            ReaderWorker(self.run, 6),
            HandEditor(self.run, 7),
        ]
        self.problems: dict[str, Problem] = {}
        self.in_flight_at_kill = 0
        self.stray_temp_files = 0
        self.progress = progress or (lambda line: None)

    def execute(self) -> dict[str, Any]:
        started = time.monotonic()
        try:
            self.daemon.start()
            with Client(str(self.daemon.socket)) as client:
                client.call(
                    "set_settings",
                    {
                        "workspace": self.run.ws,
                        "agentReadEnabled": True,
                        "extractToolEnabled": True,
                        "historyRecallEnabled": True,
                    },
                )
            extra = 0
            for cycle in range(self.cycles):
                self.cycle()
                self.progress(
                    f"cycle {cycle + 1}/{self.cycles}: "
                    f"{self.run.acked_writes + self.run.hand_edits} acknowledged, "
                    f"{len(self.problems)} problems"
                )
            while self.required_methods - set(self.run.acked_ops) and extra < self.max_extra_cycles:
                extra += 1
                self.cycle()
            self.daemon.stop()
            self.daemon.start()
            self.check()
            clean_exit = self.daemon.stop()
            if clean_exit != 0:
                self.add(Problem("corrupt", "exit", f"the daemon exited {clean_exit} on SIGTERM"))
        finally:
            if self.daemon.alive():
                self.daemon.kill9()
        return self.report(time.monotonic() - started)

    def cycle(self) -> None:
        self.run.stopping.clear()
        threads = [threading.Thread(target=w.loop, name=type(w).__name__) for w in self.workers]
        for thread in threads:
            thread.start()
        time.sleep(self.rng.uniform(0.02, self.max_uptime_s))
        self.daemon.kill9()
        self.run.stopping.set()
        for thread in threads:
            thread.join(JOIN_TIMEOUT_S)
            if thread.is_alive():
                raise RuntimeError(f"worker {thread.name} did not stop")
        self.in_flight_at_kill += sum(w.inflight is not None for w in self.workers)
        self.daemon.start()
        self.resume()
        self.check()

    def resume(self) -> None:
        """Resend interrupted calls, then let the ledger workers pick up their heads."""
        for worker in self.workers:
            worker.retry()
        with Client(str(self.daemon.socket)) as client:
            for worker in self.workers:
                if isinstance(worker, LedgerWorker):
                    worker.resync(client)

    def add(self, problem: Problem) -> None:
        self.problems.setdefault(f"{problem.category}:{problem.key}", problem)

    def check(self) -> None:
        """Everything acknowledged is there exactly once, and every file and chain is whole."""
        ws = self.run.workspace
        memory = verify.read_memory_file(ws / "memory" / "MEMORY.md")
        pending = verify.read_memory_file(ws / "memory" / "PENDING.md")
        for problem in memory.problems + pending.problems:
            self.add(problem)
        self.stray_temp_files = len(verify.stray_temp_files(ws / "memory"))
        assert memory.doc is not None and pending.doc is not None
        observed, ids = observe(memory.doc, pending.doc)
        expectations = self.run.expectations
        for marker, tracked in expectations.snapshot().items():
            state = observed.get(marker, ())
            # A marker once duplicated stays one problem (deleting a copy leaves the other).
            if f"duplicated:marker:{marker}" in self.problems:
                continue
            if len(state) > 1:
                self.add(Problem("duplicated", f"marker:{marker}", f"found at {state}"))
            elif state not in tracked.acceptable():
                self.add(
                    Problem(
                        "lost",
                        f"marker:{marker}",
                        f"found {state}, expected {tracked.must} or one of {tracked.may}",
                    )
                )
        for marker, entry_id in ids.items():
            expectations.learn_id(marker, entry_id)
        expectations.settle(observed)
        with Client(str(self.daemon.socket)) as client:
            self._check_daemon_view(client, memory, pending)
            self._check_sessions(client)

    def _check_daemon_view(
        self, client: Client, memory: verify.MemoryFile, pending: verify.MemoryFile
    ) -> None:
        state = client.call("read_state", {"workspace": self.run.ws})
        active = [s for s in memory.sections if s.entry.status == "active"]
        if state["status"] != "ok":
            self.add(Problem("corrupt", "read_state", f"status {state['status']}"))
        elif state["entryCount"] != len(active):
            self.add(
                Problem(
                    "corrupt",
                    "read_state:count",
                    f"{state['entryCount']} entries served, {len(active)} in the file",
                )
            )
        listed = {
            p["proposal"]["id"]
            for p in client.call("list_proposals", {"workspace": self.run.ws})["proposals"]
        }
        on_disk = {s.entry.id for s in pending.sections if s.entry.status in ("review_required", "draft")}
        if listed != on_disk:
            self.add(Problem("corrupt", "list_proposals", "served proposals differ from PENDING.md"))

    def _check_sessions(self, client: Client) -> None:
        ws = self.run.ws
        infos = client.call("list_sessions", {"workspace": ws})["sessions"]
        by_id = {info["sessionId"]: info for info in infos}
        for info in infos:
            checked = verify.check_session(client, ws, info)
            for problem in checked.problems:
                self.add(problem)
            model = self.run.sessions.get(info["sessionId"])
            if model is not None:
                self._check_session_model(client, model, checked)
        for sid in self.run.sessions:
            if sid not in by_id:
                self.add(Problem("lost", f"session:{sid}", "an opened session is gone"))

    def _check_session_model(self, client: Client, model: Any, checked: verify.SessionCheck) -> None:
        sid = model.session_id
        texts = [e["text"] for e in checked.events]
        for first, batch in model.batches:
            if texts[first - 1 : first - 1 + len(batch)] != batch:
                self.add(
                    Problem("lost", f"append:{sid}:{first}", "acknowledged events are not at their seqs")
                )
        seen: dict[str, int] = {}
        for text in texts:
            seen[text] = seen.get(text, 0) + 1
        for text, count in seen.items():
            if count > 1:
                self.add(Problem("duplicated", f"event:{sid}:{text[:30]}", f"{count} copies"))
        listed = {c["checkpointId"] for c in checked.checkpoints}
        for checkpoint_id in model.checkpoints - listed:
            self.add(Problem("lost", f"checkpoint:{checkpoint_id}", "acknowledged checkpoint missing"))
        if model.goals_must is not None or model.goals_may:
            state = client.call("get_working_state", {"workspace": self.run.ws, "sessionId": sid})
            allowed = [model.goals_must or [], *model.goals_may]
            if state["goals"] not in allowed:
                self.add(
                    Problem(
                        "lost", f"working_state:{sid}", f"goals {state['goals']}, expected one of {allowed}"
                    )
                )
            elif model.goals_may:
                model.goals_must, model.goals_may = state["goals"], []
        if model.closed and checked.info["closedAt"] is None:
            self.add(Problem("lost", f"close:{sid}", "acknowledged close is undone"))

    def report(self, seconds: float) -> dict[str, Any]:
        counts = {"lost": 0, "duplicated": 0, "corrupt": 0}
        for problem in self.problems.values():
            counts[problem.category] += 1
        run = self.run
        return {
            "crash": {
                "cycles": self.cycles,
                "acknowledged": run.acked_writes + run.hand_edits,
                **counts,
                "unexpected_errors": sum(run.unexpected.values()),
                "in_flight_at_kill": self.in_flight_at_kill,
                "retried": run.retried,
                "hand_edits": run.hand_edits,
                "stray_temp_files": self.stray_temp_files,
                "events": sum(len(b) for m in run.sessions.values() for _, b in m.batches),
                "sessions": len(run.sessions),
                "acknowledged_by_method": dict(sorted(run.acked_ops.items())),
                "expected_refusals": dict(sorted(run.expected_refusals.items())),
                "unexpected": dict(sorted(run.unexpected.items())),
                "problems": [f"{p.category} {p.key}: {p.detail}" for p in list(self.problems.values())[:30]],
                "seconds": round(seconds, 1),
            }
        }

    def cleanup(self) -> None:
        if self.own_root:
            shutil.rmtree(self.root, ignore_errors=True)


def run_crash(
    cycles: int,
    seed: int,
    max_uptime_s: float = 1.2,
    progress: Callable[[str], None] | None = None,
    keep: bool = False,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run the crash loop and return ``{"crash": {...}}``; ``env`` is added to the daemon's."""
    loop = CrashLoop(cycles, seed, max_uptime_s, progress=progress, env=env)
    try:
        result = loop.execute()
    finally:
        if not keep:
            loop.cleanup()
    if keep:
        result["crash"]["root"] = str(loop.root)
    return result

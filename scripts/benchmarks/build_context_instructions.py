"""Instructions per build_context call at 10k entries / 100k events, counted by callgrind.

Wall-clock figures of a shared machine move with its load; the instructions a call
executes do not (to within ~0.1% run to run). The daemon's services run in-process
here (the same handlers, dispatcher and worker threads, no socket), on the
workspace ``build_context``'s benchmark builds; callgrind counts only while the
measured calls run (``--instr-atstart=no``, switched on and off around them with
``callgrind_control``). Not part of the default run: it needs valgrind, and the
set-up runs under it (a few minutes).

    scripts/bench build_context_instructions
    MAKA_BENCH_USER_ENTRIES=500 scripts/bench build_context_instructions   # + a user level
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT

CALLS = 16  # the benchmark's 16 queries, once each


def run(quick: bool) -> dict[str, Any]:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        return {"build_context_instructions": {"skipped": "valgrind (callgrind) is not installed"}}
    entries, events = (200, 2_000) if quick else (10_000, 100_000)
    # A user level (workspace "@user") of this many entries, merged into every call.
    user_entries = int(os.environ.get("MAKA_BENCH_USER_ENTRIES", "0"))
    with tempfile.TemporaryDirectory(prefix="mki", dir="/tmp") as tmp:
        out = Path(tmp) / "callgrind.out"
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                f"--callgrind-out-file={out}",
                sys.executable,
                __file__,
                tmp,
                str(entries),
                str(events),
                str(user_entries),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'scripts'}"},
            check=False,
        )
        found = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise RuntimeError(f"callgrind run failed: {done.stderr[-2000:]}")
    return {
        "build_context_instructions": {
            "instructions_per_call": int(found.group(1)) // CALLS,
            "calls": CALLS,
            "entries": entries,
            "events": events,
            "user_entries": user_entries,
        }
    }


def _measure(tmp: Path, entries: int, events: int, user_entries: int) -> None:
    """Under callgrind: build the workspace in-process, then count ``CALLS`` calls."""
    import json
    import random

    import anyio

    from benchmarks.build_context import TOPICS, Text, _memory_file
    from benchmarks.build_context_user import user_memory_file
    from makad import heap
    from makad.app import build_app
    from makad.rpc.dispatch import Dispatcher
    from makad.service.system import DaemonInfo
    from makad.settings import load
    from makad.wire.catalogue import CATALOGUE

    os.environ["LOCAL_MEMORY_MAX_BYTES"] = str(32 << 20)
    settings = load(
        ["--socket", str(tmp / "s.sock"), "--data-dir", str(tmp / "data"), "--log-level", "warning"],
        stderr_is_tty=False,
    )
    heap.configure_collector()
    (tmp / "data").mkdir(mode=0o700)
    workspace = tmp / "ws"
    (workspace / "memory").mkdir(parents=True, mode=0o700)
    text = Text(random.Random(7))
    (workspace / "memory" / "MEMORY.md").write_text(_memory_file(text, entries))
    if user_entries:
        (tmp / "data" / "user" / "memory").mkdir(parents=True, mode=0o700)
        (tmp / "data" / "user" / "memory" / "MEMORY.md").write_text(user_memory_file(user_entries))

    class Peer:
        id = 1
        subscriptions: set[object] = set()

        def notify(self, *args: object) -> None: ...
        def on_close(self, hook: object) -> None: ...

    async def main() -> None:
        app = build_app(DaemonInfo(settings=settings))
        dispatcher = Dispatcher(CATALOGUE, app.handlers, settings.max_reply_bytes)
        peer = Peer()
        async with anyio.create_task_group() as tg:
            app.notes.start(tg)  # the bench session passes 10,000 tokens: notes are derived
            await measure(app, dispatcher, peer)
            tg.cancel_scope.cancel()
        app.registry.close()

    async def measure(app: Any, dispatcher: Dispatcher, peer: Peer) -> None:

        async def call(method: str, **params: Any) -> Any:
            request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            reply = json.loads(await dispatcher.dispatch(json.dumps(request).encode(), peer) or b"{}")
            if "result" not in reply:
                raise RuntimeError(f"{method} failed: {reply}")
            return reply["result"]

        ws = str(workspace)
        await call("set_settings", workspace=ws, agentReadEnabled=True, historyRecallEnabled=True)
        if user_entries:
            await call("set_settings", workspace="@user", agentReadEnabled=True)
        sid = ""
        for s in range(max(1, events // 1000)):
            sid = (await call("open_session", workspace=ws))["sessionId"]
            batch = [
                {
                    "type": "user_message" if j % 2 == 0 else "assistant_message",
                    "text": text.sentence(TOPICS[(s + j) % len(TOPICS)], 20),
                }
                for j in range(min(1000, events))
            ]
            await call("append_events", workspace=ws, sessionId=sid, events=batch)
        with anyio.move_on_after(60):
            # The notes are written by the daemon's worker: there is no event to wait on.
            while not (await call("get_working_state", workspace=ws, sessionId=sid))["notes"]:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        queries = [text.query(t) for t in TOPICS]
        # Warmed as build_context's benchmark is: the memory index, caches.
        await call("build_context", workspace=ws, sessionId=sid, budgetTokens=8000, query=queries[0])
        heap.settle(full=True)  # as the daemon's housekeeping does
        pid = str(os.getpid())
        # Blocking on purpose: nothing else may run while counting is switched.
        subprocess.run(["callgrind_control", "-i", "on", pid], check=True, capture_output=True)  # noqa: ASYNC221
        for query in queries[:CALLS]:
            await call("build_context", workspace=ws, sessionId=sid, budgetTokens=8000, query=query)
        subprocess.run(["callgrind_control", "-i", "off", pid], check=True, capture_output=True)  # noqa: ASYNC221

    anyio.run(main)


if __name__ == "__main__":
    _measure(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))

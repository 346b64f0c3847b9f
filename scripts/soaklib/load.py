"""The load run: C concurrent clients mixing every method for a while.

Each client owns a connection, a session and its own entries and proposals
(so nothing it does races another client by accident) and keeps them bounded
(so the workspace stays the same size and memory can level off). Deliberate
refusals — stale compare-and-swaps, ids it deleted itself, the closed extract
gate, compaction with nothing to compact — are declared per call and counted
apart from unexpected errors. Every client first tours every method — again,
up to ``MAX_TOURS`` times, until it has called each one (a method that needs
state, like ``get_checkpoint``, can miss a round) — however long that takes:
coverage is counted, not timed; the random mix then runs until the deadline.

Reported: latency percentiles per method, calls and errors, the daemon's
resident memory and open file descriptors at start, after warm-up (counted in
calls, see ``warmed_up``) and at the end, and resident memory every 15 s.
Passing means no unexpected error, every method called, resident memory growth
after warm-up within 10%, no more open file descriptors once the clients have
gone than before they came, and a clean exit on SIGTERM.
"""

from __future__ import annotations

import math
import random
import shutil
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from maka import AsyncClient
from maka.errors import MakaError, RemoteError
from soaklib.daemon import Daemon

SHARED_WORKSPACES = 4
MAX_OWN_ENTRIES = 8
MAX_OWN_APPROVED = 4
MAX_OWN_PENDING = 4
RSS_GROWTH_LIMIT = 0.10
WARM_UP_CALLS_PER_CLIENT = 250
# Methods the run never calls (it would end the run).
NOT_EXERCISED = {"shutdown"}
MAX_TOURS = 5


def warmed_up(elapsed: float, seconds: float, calls: int, clients: int) -> bool:
    """Whether the run's resident-memory baseline is due: a quarter of the run has
    passed and the clients have made ``WARM_UP_CALLS_PER_CLIENT`` calls each on
    average, or half the run has passed (so there is always a window to measure).

    Until then the daemon's bounded memory is still filling, and how fast depends on
    the calls served, not the time: its SQLite page caches up to the soft heap
    limit, and the parsed files and recent versions of workspaces whose clients are
    still adding entries up to their own caps. Probed (``scripts/soak --probe``),
    both levelled off after 7,000-8,500 calls of a 32-client run — within 30 s on a
    quiet machine, after 80-100 s on a loaded one, where a baseline at a quarter of
    a two-minute run counted that filling as growth.
    """
    if elapsed >= seconds * 0.5:
        return True
    return elapsed >= seconds * 0.25 and calls >= WARM_UP_CALLS_PER_CLIENT * clients


def percentile(ordered: list[float], q: float) -> float:
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


@dataclass
class Stats:
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    # Clients that still had not called every method after MAX_TOURS tours.
    incomplete_clients: int = 0
    expected: Counter[str] = field(default_factory=Counter)
    unexpected: Counter[str] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)

    def surprise(self, key: str, detail: str) -> None:
        self.unexpected[key] += 1
        if len(self.samples) < 10:
            self.samples.append(f"{key}: {detail}"[:300])

    def methods(self) -> dict[str, dict[str, float]]:
        out = {}
        for method, samples in sorted(self.latency.items()):
            ordered = sorted(samples)
            out[method] = {
                "n": len(ordered),
                "p50_ms": round(percentile(ordered, 0.50) * 1000, 2),
                "p99_ms": round(percentile(ordered, 0.99) * 1000, 2),
            }
        return out


@dataclass
class Layout:
    """The workspaces of a load run."""

    root: Path
    shared: list[Path]
    gated: Path  # defaults: the extract gate is closed
    restore: Path  # restore_backup rewinds it, so nobody keeps anything there


class LoadClient:
    def __init__(self, index: int, socket: Path, layout: Layout, stats: Stats, seed: int) -> None:
        self.index = index
        self.socket = socket
        self.layout = layout
        self.stats = stats
        self.rng = random.Random(seed * 7919 + index)
        self.home = str(layout.shared[index % len(layout.shared)])
        self.client: AsyncClient | None = None
        self.entries: list[str] = []
        self.deleted: list[str] = []
        self.pending: list[str] = []
        self.approved: list[str] = []
        self.session = f"load-{index}"
        self.last_seq = 0
        self.since_compact = 0
        self.checkpoints: list[str] = []
        self.call_id: str | None = None
        self.counter = 0
        self.called: set[str] = set()
        # The revision of the last full read_state: the next poll may ask ifRevision.
        self.seen_revision: int | None = None

    # --- plumbing ---------------------------------------------------------------

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        expect: frozenset[str] | set[str] = frozenset(),
    ) -> Any:
        assert self.client is not None
        started = time.perf_counter()
        self.called.add(method)
        try:
            return await self.client.call(method, params)
        except RemoteError as exc:
            if exc.kind in expect:
                self.stats.expected[f"{method}:{exc.kind}"] += 1
            else:
                self.stats.surprise(f"{method}:{exc.kind}", f"{exc.message} {exc.data} <- {params}")
            return None
        except (MakaError, OSError, TimeoutError) as exc:
            self.stats.surprise(f"{method}:{type(exc).__name__}", f"{exc} <- {params}")
            return None
        finally:
            self.stats.latency[method].append(time.perf_counter() - started)

    def unique(self, what: str) -> str:
        self.counter += 1
        return f"{what} {self.index}-{self.counter} {uuid.uuid4().hex[:8]}"

    # --- the run ------------------------------------------------------------------

    async def main(self, deadline: float) -> None:
        async with AsyncClient(str(self.socket), timeout=60) as client:
            self.client = client
            await self.call(
                "open_session",
                {"workspace": self.home, "sessionId": self.session, "title": f"load client {self.index}"},
            )
            wanted = set(_catalogue()) - NOT_EXERCISED
            for _ in range(MAX_TOURS):
                await self.tour()
                if wanted <= self.called:
                    break
            else:
                self.stats.incomplete_clients += 1
            steps = self.steps()
            names = list(steps)
            weights = [steps[n][0] for n in names]
            while time.monotonic() < deadline:
                name = self.rng.choices(names, weights)[0]
                await steps[name][1]()

    def steps(self) -> dict[str, tuple[float, Callable[[], Any]]]:
        return {
            "ping": (2, lambda: self.call("ping")),
            "status": (1, lambda: self.call("status")),
            "discover": (0.1, lambda: self.call("rpc.discover")),
            "get_settings": (1, lambda: self.call("get_settings", {"workspace": self.home})),
            "set_settings": (0.3, self.set_settings),
            "read_state": (3, self.read_state),
            "add_or_delete": (4, self.add_or_delete),
            "update": (3, self.update),
            "archive_restore": (1.5, self.archive_restore),
            "pin": (0.8, self.pin),
            "stale_cas": (0.7, self.stale_cas),
            "delete_twice": (0.3, self.delete_twice),
            "backups": (0.7, self.backups),
            "subscribe": (0.4, self.subscribe),
            "propose": (2.5, self.propose),
            "gated_propose": (0.4, self.gated_propose),
            "list_proposals": (1.5, lambda: self.call("list_proposals", {"workspace": self.home})),
            "approve": (1.2, self.approve),
            "reject": (0.8, self.reject),
            "history": (1, self.history),
            "import": (0.25, self.import_memories),
            "outside_text": (
                0.2,
                lambda: self.call("remove_outside_text", {"workspace": self.home, "dryRun": True}),
            ),
            "export": (
                0.5,
                lambda: self.call("export_memories", {"workspace": self.home, "format": "markdown"}),
            ),
            "build_context": (3.5, self.build_context),
            "compact": (0.8, self.compact),
            "checkpoints": (0.6, self.checkpoints_read),
            "temp_session": (0.4, self.temp_session),
            "list_sessions": (
                0.5,
                lambda: self.call("list_sessions", {"workspace": self.home, "includeClosed": False}),
            ),
            "append": (6, self.append),
            "stale_append": (0.5, self.stale_append),
            "read_events": (2.5, self.read_events),
            "search": (2, self.search),
            "retrieve": (2, self.retrieve),
            "working_state": (1.5, self.working_state),
            "manifest": (0.7, self.manifest),
            "episode": (0.8, self.episode),
            "list_episodes": (
                0.5,
                lambda: self.call(
                    "list_episodes", {"workspace": self.home, "sessionId": self.session, "limit": 20}
                ),
            ),
            "candidates": (0.3, lambda: self.call("consolidation_candidates", {"workspace": self.home})),
            "attention": (0.3, lambda: self.call("get_attention", {"workspace": self.home})),
            "consolidate": (0.2, self.consolidate),
        }

    async def tour(self) -> None:
        """Every method once, in an order where each has what it needs."""
        for _ in range(4):
            await self.append()
        await self.add_or_delete()
        await self.update()
        await self.archive_restore()
        await self.archive_restore()
        await self.pin()
        await self.stale_cas()
        await self.delete_twice()
        await self.backups(force_restore=True)
        await self.subscribe()
        await self.propose()
        await self.propose()
        await self.gated_propose()
        await self.approve()
        await self.reject()
        await self.history()
        await self.import_memories()
        for name in (
            "ping",
            "status",
            "discover",
            "get_settings",
            "set_settings",
            "read_state",
            "list_proposals",
            "export",
            "outside_text",
            "list_sessions",
        ):
            await self.steps()[name][1]()
        await self.build_context()
        await self.manifest()
        await self.compact()
        await self.checkpoints_read()
        await self.temp_session()
        await self.stale_append()
        await self.read_events()
        await self.search()
        await self.retrieve()
        await self.working_state()
        await self.episode()
        for name in ("list_episodes", "candidates", "attention"):
            await self.steps()[name][1]()
        await self.consolidate()

    # --- memory ---------------------------------------------------------------------

    async def set_settings(self) -> None:
        await self.call(
            "set_settings", {"workspace": self.home, "historyRecallEnabled": self.rng.random() < 0.5}
        )

    async def read_state(self) -> None:
        params: dict[str, Any] = {"workspace": self.home, "includeEntries": self.rng.random() < 0.5}
        if self.seen_revision is not None and self.rng.random() < 0.5:  # a UI's conditional poll
            params["ifRevision"] = self.seen_revision
            params["includeContent"] = self.rng.random() < 0.5
        state = await self.call("read_state", params)
        if state is not None and state.get("notModified"):
            if state != {"notModified": True, "revision": params.get("ifRevision")}:
                self.stats.surprise("read_state:not_modified_shape", str(state))
            return
        if state is not None and state["status"] != "ok":
            self.stats.surprise(f"read_state:status:{state['status']}", str(state["reason"]))
        if state is not None:
            self.seen_revision = state["revision"]

    async def add_or_delete(self) -> None:
        if len(self.entries) >= MAX_OWN_ENTRIES:
            await self.delete(self.entries.pop(0))
            return
        text = self.unique("entry")
        result = await self.call(
            "add_entry",
            {
                "workspace": self.home,
                "title": text,
                "content": f"{text}: the build uses make.",
                "tags": ["load"],
                "requestId": uuid.uuid4().hex,
            },
        )
        if result is not None:
            self.entries.append(result["entry"]["id"])

    async def delete(self, entry_id: str) -> None:
        if await self.call("delete_entry", {"workspace": self.home, "id": entry_id}) is not None:
            self.deleted = [*self.deleted[-7:], entry_id]

    async def update(self) -> None:
        if not self.entries:
            return await self.add_or_delete()
        await self.call(
            "update_entry",
            {
                "workspace": self.home,
                "id": self.rng.choice(self.entries),
                "content": self.unique("updated entry"),
            },
        )

    async def archive_restore(self) -> None:
        if not self.entries:
            return await self.add_or_delete()
        entry_id = self.rng.choice(self.entries)
        await self.call("archive_entry", {"workspace": self.home, "id": entry_id})
        await self.call("restore_entry", {"workspace": self.home, "id": entry_id})

    async def pin(self) -> None:
        """Pin or unpin an entry (its pinned tag); another client may have deleted it."""
        if not self.entries:
            return await self.add_or_delete()
        await self.call(
            "pin_entry",
            {"workspace": self.home, "id": self.rng.choice(self.entries), "pinned": self.rng.random() < 0.5},
        )

    async def stale_cas(self) -> None:
        """Compare-and-swap against a revision other clients are busy moving on."""
        if not self.entries:
            return await self.add_or_delete()
        state = await self.call("get_settings", {"workspace": self.home})
        if state is None:
            return
        revision = (await self.call("read_state", {"workspace": self.home}) or {}).get("revision")
        await self.call(
            "update_entry",
            {
                "workspace": self.home,
                "id": self.rng.choice(self.entries),
                "content": self.unique("cas"),
                "expectedRevision": max(0, (revision or 1) - 1),
            },
            expect={"conflict"},
        )

    async def delete_twice(self) -> None:
        """Archive an id this client deleted itself: not_found is the plan."""
        if not self.deleted:
            await self.add_or_delete()
            if self.entries:
                await self.delete(self.entries.pop())
        if self.deleted:
            await self.call(
                "archive_entry", {"workspace": self.home, "id": self.deleted[-1]}, expect={"not_found"}
            )

    async def backups(self, force_restore: bool = False) -> None:
        ws = str(self.layout.restore)
        await self.call(
            "add_entry", {"workspace": ws, "title": self.unique("volatile"), "content": "restore playground"}
        )
        found = await self.call("list_backups", {"workspace": ws})
        if found and found["backups"] and (force_restore or self.rng.random() < 0.4):
            # Another client's write may prune that backup first: not_found is expected.
            await self.call(
                "restore_backup",
                {"workspace": ws, "backupId": found["backups"][-1]["backupId"]},
                expect={"not_found"},
            )

    async def subscribe(self) -> None:
        assert self.client is not None
        await self.call("subscribe", {"workspace": self.home})
        await self.call("ping")
        await self.call("unsubscribe", {"workspace": self.home})
        self.client.drain_notifications()

    # --- proposals --------------------------------------------------------------------

    async def propose(self) -> None:
        if len(self.pending) >= MAX_OWN_PENDING:
            return await self.reject()
        text = self.unique("proposal")
        result = await self.call(
            "propose",
            {
                "workspace": self.home,
                "title": text,
                "content": f"{text}: deploys happen on Fridays.",
                "sourceRefs": [f"event:{self.session}:1"],
            },
        )
        if result is not None and result["queued"]:
            self.pending.append(result["proposal"]["id"])

    async def gated_propose(self) -> None:
        await self.call(
            "propose",
            {
                "workspace": str(self.layout.gated),
                "title": "gated",
                "content": self.unique("gated"),
                "origin": "extracted",
            },
            expect={"gate_closed"},
        )

    async def approve(self) -> None:
        if (
            len(self.approved) >= MAX_OWN_APPROVED
            and await self.call("delete_entry", {"workspace": self.home, "id": self.approved.pop(0)}) is None
        ):
            return
        if not self.pending:
            await self.propose()
            if not self.pending:
                return
        proposal_id = self.pending.pop(0)
        edits = {proposal_id: {"title": self.unique("edited")}} if self.rng.random() < 0.3 else {}
        result = await self.call("approve", {"workspace": self.home, "ids": [proposal_id], "edits": edits})
        if result is not None:
            self.approved.append(result["approved"][0]["entry"]["id"])

    async def reject(self) -> None:
        if not self.pending:
            await self.propose()
            if not self.pending:
                return
        await self.call(
            "reject", {"workspace": self.home, "ids": [self.pending.pop(0)], "reason": "not needed"}
        )

    async def history(self) -> None:
        ids = self.entries + self.approved + self.pending
        if not ids:
            return await self.add_or_delete()
        await self.call("memory_history", {"workspace": self.home, "id": self.rng.choice(ids)})

    async def import_memories(self) -> None:
        fact = self.unique("imported fact")
        result = await self.call(
            "import_memories",
            {
                "workspace": self.home,
                "format": "markdown",
                "data": f"# Notes\n\n## Imported\n- {fact} about the staging database\n",
            },
        )
        if result is not None and result["imported"]:
            await self.call("reject", {"workspace": self.home, "ids": result["imported"]})

    # --- sessions -----------------------------------------------------------------------

    def turn(self) -> list[dict[str, Any]]:
        n = self.unique("turn").split()[1]
        module = self.rng.randrange(40)
        call_id = f"c-{n}"
        return [
            {"type": "user_message", "text": f"Please fix module_{module}.py ({n})."},
            {"type": "assistant_message", "text": f"Reading module_{module}.py first."},
            {
                "type": "tool_call",
                "text": f'{{"path": "src/module_{module}.py"}}',
                "toolCallId": call_id,
                "toolName": "read_file",
            },
            {
                "type": "tool_result",
                "text": "def f():\n    return 1\n" * self.rng.randrange(1, 30),
                "toolCallId": call_id,
                "toolName": "read_file",
            },
        ]

    async def append(self) -> None:
        events = self.turn()
        result = await self.call(
            "append_events",
            {
                "workspace": self.home,
                "sessionId": self.session,
                "events": events,
                "expectedSeq": self.last_seq,
                "requestId": uuid.uuid4().hex,
            },
        )
        if result is not None:
            self.last_seq = result["lastSeq"]
            self.since_compact += len(events)

    async def stale_append(self) -> None:
        """An append against a seq that is already taken: conflict is the plan."""
        if self.last_seq == 0:
            await self.append()
        await self.call(
            "append_events",
            {
                "workspace": self.home,
                "sessionId": self.session,
                "events": self.turn(),
                "expectedSeq": self.last_seq - 1,
            },
            expect={"conflict"},
        )

    async def build_context(self) -> None:
        result = await self.call(
            "build_context",
            {
                "workspace": self.home,
                "sessionId": self.session,
                "budgetTokens": 4000,
                "query": f"module_{self.rng.randrange(40)}.py",
            },
        )
        if result is not None:
            self.call_id = result["callId"]

    async def manifest(self) -> None:
        if self.call_id is None:
            await self.build_context()
        if self.call_id is not None:
            await self.call(
                "get_manifest", {"workspace": self.home, "sessionId": self.session, "callId": self.call_id}
            )

    async def compact(self) -> None:
        if self.since_compact < 12:
            for _ in range(3):
                await self.append()
        # "Nothing to compact" (invalid_params) is fine when the live history is short.
        result = await self.call(
            "compact",
            {
                "workspace": self.home,
                "sessionId": self.session,
                "mode": "checkpoint",
                "keepRecentTokens": 300,
            },
            expect={"invalid_params"},
        )
        if result is not None:
            self.since_compact = 0
            self.checkpoints = [*self.checkpoints[-3:], result["checkpointId"]]

    async def checkpoints_read(self) -> None:
        await self.call("list_checkpoints", {"workspace": self.home, "sessionId": self.session})
        if self.checkpoints:
            await self.call("get_checkpoint", {"workspace": self.home, "checkpointId": self.checkpoints[-1]})

    async def temp_session(self) -> None:
        """A short-lived session (incognito half the time): open, append, close, forget."""
        sid = f"tmp-{self.index}-{uuid.uuid4().hex[:12]}"
        opened = await self.call(
            "open_session", {"workspace": self.home, "sessionId": sid, "incognito": self.rng.random() < 0.5}
        )
        if opened is None:
            return
        await self.call("append_events", {"workspace": self.home, "sessionId": sid, "events": self.turn()})
        await self.call("build_context", {"workspace": self.home, "sessionId": sid, "budgetTokens": 2000})
        await self.call("close_session", {"workspace": self.home, "sessionId": sid})
        await self.call("delete_session", {"workspace": self.home, "sessionId": sid})

    async def episode(self) -> None:
        if self.last_seq == 0:
            await self.append()
        await self.call(
            "record_episode",
            {
                "workspace": self.home,
                "sessionId": self.session,
                "summary": self.unique("fixed a module"),
                "tags": [f"topic{self.rng.randrange(3)}"],
                "sourceRefs": [f"event:{self.session}:{max(1, self.last_seq)}"],
                "requestId": uuid.uuid4().hex,
            },
        )

    async def consolidate(self) -> None:
        """Another client may have consolidated the tag first: insufficient_evidence is fine."""
        result = await self.call(
            "consolidate",
            {"workspace": self.home, "sessionId": self.session, "tag": f"topic{self.rng.randrange(3)}"},
            expect={"insufficient_evidence"},
        )
        if result is not None and result["queued"]:
            self.pending.append(result["proposal"]["id"])

    async def read_events(self) -> None:
        await self.call(
            "read_events",
            {
                "workspace": self.home,
                "sessionId": self.session,
                "afterSeq": max(0, self.last_seq - 20),
                "limit": 20,
            },
        )

    async def search(self) -> None:
        await self.call(
            "search_history",
            {"workspace": self.home, "limit": 10, "query": f"module_{self.rng.randrange(40)}"},
        )

    async def retrieve(self) -> None:
        if self.last_seq == 0:
            await self.append()
        low = max(1, self.last_seq - 8)
        result = await self.call(
            "retrieve", {"workspace": self.home, "refs": [f"event:{self.session}:{low}-{self.last_seq}"]}
        )
        if result is not None and not all(r["ok"] for r in result["results"]):
            self.stats.surprise("retrieve:not_ok", str(result["results"])[:200])

    async def working_state(self) -> None:
        await self.call(
            "set_working_state",
            {
                "workspace": self.home,
                "sessionId": self.session,
                "goals": [self.unique("goal")],
                "notes": {"Worklog": self.unique("step")},
            },
        )
        await self.call("get_working_state", {"workspace": self.home, "sessionId": self.session})


def make_layout(root: Path, workspaces: int = SHARED_WORKSPACES) -> Layout:
    def directory(name: str) -> Path:
        path = root / name
        path.mkdir()
        return path

    return Layout(
        root=root,
        shared=[directory(f"ws{i}") for i in range(workspaces)],
        gated=directory("gated"),
        restore=directory("restore"),
    )


async def _prepare(socket: Path, layout: Layout) -> None:
    """Open the gate of the shared workspaces, and give every workspace its memory
    directory (so its watcher runs before the descriptors are first counted)."""
    async with AsyncClient(str(socket)) as client:
        for ws in layout.shared:
            await client.call(
                "set_settings", {"workspace": str(ws), "agentReadEnabled": True, "extractToolEnabled": True}
            )
        for ws in [*layout.shared, layout.gated, layout.restore]:
            added = await client.call(
                "add_entry", {"workspace": str(ws), "title": "Seed", "content": "the load starts"}
            )
            await client.call("delete_entry", {"workspace": str(ws), "id": added["entry"]["id"]})


async def _idle_fds(daemon: Daemon) -> int:
    """Open descriptors once every other client has gone (this one's connection included)."""
    async with AsyncClient(str(daemon.socket)) as client:
        with anyio.fail_after(30):
            while (await client.call("status"))["connections"] > 1:  # noqa: ASYNC110 - polling another process
                await anyio.sleep(0.05)
            # The file watcher restarts (new descriptors) when a directory is added: let it settle.
            readings = [daemon.fd_count()]
            while len(readings) < 4 or len(set(readings[-4:])) > 1:
                await anyio.sleep(0.1)
                readings.append(daemon.fd_count())
        return readings[-1]


async def _drive(
    daemon: Daemon,
    layout: Layout,
    seconds: float,
    clients: int,
    seed: int,
    stats: Stats,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    await _prepare(daemon.socket, layout)
    samples: dict[str, Any] = {
        "rss_start": daemon.rss_kib(),
        "fds_start": await _idle_fds(daemon),
        "rss_timeline": [],
    }
    started = time.monotonic()
    deadline = started + seconds

    async def monitor() -> None:
        rss_max = 0
        next_report = started + 15
        while time.monotonic() < deadline:
            rss_max = max(rss_max, daemon.rss_kib())
            now = time.monotonic()
            calls = sum(len(v) for v in stats.latency.values())
            if "rss_warm" not in samples and warmed_up(now - started, seconds, calls, clients):
                samples["rss_warm"], samples["fds_warm"] = daemon.rss_kib(), daemon.fd_count()
                samples["warm_at"], samples["warm_calls"] = now - started, calls
            if now >= next_report:
                samples["rss_timeline"].append([round(now - started), daemon.rss_kib()])
                progress(
                    f"{now - started:.0f}s: {calls} calls, rss {daemon.rss_kib()} KiB, "
                    f"fds {daemon.fd_count()}, unexpected {sum(stats.unexpected.values())}"
                )
                next_report += 15
            await anyio.sleep(min(0.25, max(0.0, deadline - now)))
        samples["rss_end"], samples["fds_end"] = daemon.rss_kib(), daemon.fd_count()
        samples["rss_max"] = max(rss_max, samples["rss_end"])
        samples.setdefault("rss_warm", samples["rss_end"])
        samples.setdefault("fds_warm", samples["fds_end"])
        samples.setdefault("warm_at", time.monotonic() - started)
        samples.setdefault("warm_calls", sum(len(v) for v in stats.latency.values()))

    async with anyio.create_task_group() as tg:
        tg.start_soon(monitor)
        for index in range(clients):
            tg.start_soon(LoadClient(index, daemon.socket, layout, stats, seed).main, deadline)
    samples["elapsed"] = time.monotonic() - started
    samples["fds_idle_end"] = await _idle_fds(daemon)
    return samples


def run_load(
    seconds: float,
    clients: int,
    seed: int = 1,
    progress: Callable[[str], None] | None = None,
    keep: bool = False,
    env: dict[str, str] | None = None,
    module: str = "makad",
) -> dict[str, Any]:
    """Run the load and return ``{"load": {...}}``; ``env`` is added to the daemon's,
    ``module`` is what ``python -m`` runs (``soaklib.memprobe`` for a probed daemon)."""
    root = Path(tempfile.mkdtemp(prefix="mkl", dir="/tmp"))
    daemon = Daemon(root, env=env, module=module)
    stats = Stats()
    layout = make_layout(root)
    say = progress or (lambda line: None)
    try:
        daemon.start()
        pid = daemon.pid
        samples = anyio.run(_drive, daemon, layout, seconds, clients, seed, stats, say)
        exit_code = daemon.stop()
    finally:
        if daemon.alive():
            daemon.kill9()
    crash_lines = [line for line in daemon.log_text().splitlines() if '"request_crashed"' in line]
    crashed_requests = len(crash_lines)
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    methods = stats.methods()
    wanted = set(_catalogue()) - NOT_EXERCISED
    missing = sorted(wanted - set(methods))
    growth = (samples["rss_end"] - samples["rss_warm"]) / samples["rss_warm"]
    calls = sum(m["n"] for m in methods.values())
    unexpected = sum(stats.unexpected.values())
    passed = (
        unexpected == 0
        and not missing
        and not stats.incomplete_clients
        and growth <= RSS_GROWTH_LIMIT
        and samples["fds_idle_end"] <= samples["fds_start"]
        and exit_code == 0
        and crashed_requests == 0
    )
    result: dict[str, Any] = {
        "seconds": round(samples["elapsed"], 1),
        "clients": clients,
        "calls": calls,
        "calls_per_s": round(calls / samples["elapsed"], 1),
        "unexpected_errors": unexpected,
        "unexpected": dict(sorted(stats.unexpected.items())),
        "unexpected_samples": stats.samples,
        "expected_errors": sum(stats.expected.values()),
        "expected": dict(sorted(stats.expected.items())),
        "request_crashed_in_log": crashed_requests,
        # The daemon's own record (traceback included) of the first few: the temp dir is gone.
        "request_crashed_samples": [line[:4000] for line in crash_lines[:3]],
        "rss_kib": {
            "start": samples["rss_start"],
            "after_warmup": samples["rss_warm"],
            "end": samples["rss_end"],
            "max": samples["rss_max"],
            "growth_after_warmup_pct": round(growth * 100, 1),
            "warmup_ended": {"seconds": round(samples["warm_at"], 1), "calls": samples["warm_calls"]},
            # [seconds into the run, KiB] every 15 s: where it levels off.
            "timeline": samples["rss_timeline"],
        },
        "fds": {
            "idle_start": samples["fds_start"],
            "after_warmup": samples["fds_warm"],
            "end": samples["fds_end"],
            "idle_end": samples["fds_idle_end"],
        },
        "exit_code": exit_code,
        "daemon_pid": pid,
        "methods_not_called": missing,
        "clients_missing_methods": stats.incomplete_clients,
        "methods": methods,
        "passed": passed,
    }
    if keep:
        result["root"] = str(root)
    return {"load": result}


def _catalogue() -> list[str]:
    """Every method the daemon serves, from the OpenRPC document in the repository."""
    import json

    doc = Path(__file__).resolve().parents[2] / "protocol" / "openrpc.json"
    return [m["name"] for m in json.loads(doc.read_text())["methods"]]

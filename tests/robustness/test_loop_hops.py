"""A call that needs the disk makes one worker-thread hop for it, not one per stat: the
workspace's identity check, its memory files' stats and (for a full read_state) the user
level's check and stats share that hop (each hop costs the daemon CPU)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest

from makad.store.shared_checks import CheckThreads
from tests.protocol.test_served_results import Session
from tests.robustness.test_loop_io import LoopWatch, serve_in_temp_dir


def _count_hops(monkeypatch: pytest.MonkeyPatch, watch: LoopWatch, hops: list[str]) -> None:
    """Record each hand-off to a worker thread made on the loop: ``anyio.to_thread.run_sync``
    and the shared checks' threads (``makad.store.shared_checks``)."""
    real = anyio.to_thread.run_sync
    real_submit = CheckThreads.submit

    async def run_sync(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if watch.on_loop():
            hops.append(getattr(fn, "__qualname__", repr(fn)))
        return await real(fn, *args, **kwargs)

    def submit(self: CheckThreads, loop: Any, fn: Callable[[], Any], done: Any) -> None:
        if watch.on_loop():
            hops.append(getattr(fn, "__qualname__", repr(fn)))
        real_submit(self, loop, fn, done)

    monkeypatch.setattr(anyio.to_thread, "run_sync", run_sync)
    monkeypatch.setattr(CheckThreads, "submit", submit)


def test_cheap_reads_make_one_hop(monkeypatch: pytest.MonkeyPatch) -> None:
    """get_settings and read_state (conditional, full or summary) each hop to a worker thread once."""
    watch = LoopWatch()
    hops: list[str] = []
    _count_hops(monkeypatch, watch, hops)
    found: dict[str, list[str]] = {}

    def exercise(s: Session, ws: str) -> None:
        s.call("add_entry", {"workspace": ws, "title": "Shell", "content": "Ana uses zsh."})
        s.call("add_entry", {"workspace": "@user", "title": "Editor", "content": "Ana uses vim."})
        revision = s.call("read_state", {"workspace": ws})["revision"]
        calls = {
            "get_settings": ("get_settings", {"workspace": ws}),
            "conditional": ("read_state", {"workspace": ws, "ifRevision": revision}),
            "full": ("read_state", {"workspace": ws}),
            "summary": ("read_state", {"workspace": ws, "includeContent": False}),
        }
        for name, (method, params) in calls.items():
            fewest: list[str] | None = None
            for _ in range(6):  # the fewest: a background task (the watcher) may hop meanwhile
                hops.clear()
                s.call(method, params)
                if fewest is None or len(hops) < len(fewest):
                    fewest = list(hops)
            found[name] = fewest or []
        s.call("shutdown")

    serve_in_temp_dir(watch, exercise)
    assert {name: len(h) for name, h in found.items()} == dict.fromkeys(found, 1), found


def test_a_full_read_sees_the_user_level_replaced() -> None:
    """The user level's memory removed between two full reads of a workspace: the second
    read's check of the user level (in the workspace's hop) sees it, and the user level is
    the new, empty one."""
    watch = LoopWatch()

    def exercise(s: Session, ws: str) -> None:
        s.call("add_entry", {"workspace": ws, "title": "Shell", "content": "Ana uses zsh."})
        s.call("add_entry", {"workspace": "@user", "title": "Editor", "content": "Ana uses vim."})
        s.call("read_state", {"workspace": ws})
        user = Path(s.call("read_state", {"workspace": "@user"})["path"]).parent.parent
        shutil.rmtree(user / "memory")
        assert s.call("read_state", {"workspace": ws})["status"] == "ok"
        state = s.call("read_state", {"workspace": "@user"})
        assert state["entryCount"] == 0, state
        assert "new_workspace" in {w["kind"] for w in state["warnings"]}, state
        s.call("shutdown")

    serve_in_temp_dir(watch, exercise)


def test_the_warnings_about_a_memory_file_are_worked_out_off_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """read_state's warnings about what MEMORY.md's comments hold (a "did you mean" guess
    per key it does not know: a second and more for a cloned repository's comment of
    14,000 keys) are worked out on a worker thread, and shown like the ones before."""
    import makad.service.memory as memory_service

    watch = LoopWatch()
    where: list[bool] = []
    real = memory_service.metadata

    def recorded(*args: Any, **kwargs: Any) -> Any:
        where.append(watch.on_loop())
        return real(*args, **kwargs)

    monkeypatch.setattr(memory_service, "metadata", recorded)
    found: dict[str, Any] = {}

    def exercise(s: Session, ws: str) -> None:
        memory = Path(ws) / "memory"
        memory.mkdir()
        unknown = " ".join(f"k{i}=v" for i in range(2_000))
        (memory / "MEMORY.md").write_text(
            f"## Shell\n<!-- maka-memory: stauts=active {unknown} -->\nAna uses zsh.\n"
        )
        found["state"] = s.call("read_state", {"workspace": ws})
        s.call("shutdown")

    serve_in_temp_dir(watch, exercise)
    assert where and not any(where), where
    kinds = {w["kind"] for w in found["state"]["warnings"]}
    assert "unknown_key" in kinds and found["state"]["entryCount"] == 1, found["state"]


def test_a_write_works_out_the_new_file_off_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every change a write makes to a memory file's document (an entry added, proposals
    imported, approved: one upsert each, a walk of the whole document or of one batch, so
    approving hundreds into a MEMORY.md of thousands of entries is real work) is made on a
    worker thread."""
    import makad.core.memory_format as fmt

    watch = LoopWatch()
    where: list[bool] = []
    real_upsert, real_batch_upsert = fmt.upsert, fmt.Upserts.upsert

    def recorded(*args: Any, **kwargs: Any) -> Any:
        where.append(watch.on_loop())
        return real_upsert(*args, **kwargs)

    def recorded_in_batch(self: fmt.Upserts, entry: Any) -> None:
        where.append(watch.on_loop())
        real_batch_upsert(self, entry)

    monkeypatch.setattr(fmt, "upsert", recorded)
    monkeypatch.setattr(fmt.Upserts, "upsert", recorded_in_batch)

    def exercise(s: Session, ws: str) -> None:
        s.call("add_entry", {"workspace": ws, "title": "Shell", "content": "Ana uses zsh."})
        s.call("import_memories", {"workspace": ws, "data": "# Notes\n\n- Ana uses vim.\n- Ana uses tmux.\n"})
        ids = [p["proposal"]["id"] for p in s.call("list_proposals", {"workspace": ws})["proposals"]]
        approved = s.call("approve", {"workspace": ws, "ids": ids})
        assert len(approved["approved"]) == 2, approved
        s.call("shutdown")

    serve_in_temp_dir(watch, exercise)
    assert len(where) >= 5 and not any(where), where

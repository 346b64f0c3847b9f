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

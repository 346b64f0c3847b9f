"""Python client parity with the Node one: subscriptions renewed after a reconnect, one
notifications API for the sync and async clients."""

from __future__ import annotations

import gc
import warnings
from typing import Any

import anyio
import pytest

from maka import AsyncClient, Client
from maka.errors import DaemonUnavailable
from tests.support import DaemonProcess

pytestmark = pytest.mark.anyio
PATIENT = 30  # reconnect attempts while a restart runs on a loaded machine (backoff capped at 2 s)


def change(d: DaemonProcess, title: str) -> int:
    """A daemon write to MEMORY.md; returns the workspace's new revision."""
    result = d.call("add_entry", {"workspace": str(d.workspace), "title": title, "content": title})
    return int(result["revision"])


def test_sync_notifications_carry_on_across_a_restart(daemon: DaemonProcess) -> None:
    """Client.notifications() reconnects after the daemon restarts, renews the subscription
    (a `reconnected` marker says so) and goes on yielding notifications."""
    ws = str(daemon.workspace)
    with Client(str(daemon.socket), timeout=20, reconnect_retries=PATIENT) as sub:
        sub.call("subscribe", {"workspace": ws})
        notes = sub.notifications()
        daemon.restart()
        assert next(notes) == {
            "jsonrpc": "2.0",
            "method": "daemon_stopping",
            "params": {"reason": "signal"},
        }  # an orderly stop (SIGTERM), announced
        marker = next(notes)
        assert marker == {"jsonrpc": "2.0", "method": "reconnected", "params": {"workspaces": [ws]}}
        revision = change(daemon, "after the restart")
        note = next(notes)
    assert note["method"] == "memory_changed"
    assert note["params"] == {"workspace": ws, "revision": revision, "cause": "daemon"}


def test_sync_call_after_restart_renews_too(daemon: DaemonProcess) -> None:
    """A plain call on a client whose daemon restarted reconnects and renews its subscriptions."""
    ws = str(daemon.workspace)
    with Client(str(daemon.socket), timeout=20) as sub:
        sub.m.subscribe(workspace=ws)
        daemon.restart()
        assert sub.call("ping") == "pong"
        assert [n["method"] for n in sub.drain_notifications()] == ["daemon_stopping", "reconnected"]
        revision = change(daemon, "seen")
        note = next(sub.notifications())
    assert note["method"] == "memory_changed" and note["params"]["revision"] == revision


def test_unsubscribe_is_not_renewed(daemon: DaemonProcess) -> None:
    """A workspace unsubscribed before the restart is not subscribed again."""
    ws = str(daemon.workspace)
    other = daemon.root / "other"
    other.mkdir()
    with Client(str(daemon.socket), timeout=20, reconnect_retries=PATIENT) as sub:
        sub.call("subscribe", {"workspace": ws})
        sub.call("subscribe", {"workspace": str(other)})
        sub.call("unsubscribe", {"workspace": ws})
        notes = sub.notifications()
        daemon.restart()
        assert next(notes)["method"] == "daemon_stopping"
        assert next(notes)["params"] == {"workspaces": [str(other)]}


def test_sync_subscription_lost_when_no_daemon_comes_back(daemon: DaemonProcess) -> None:
    """When the daemon stays away, each subscription gets a `subscription_lost` marker, then
    the iterator raises DaemonUnavailable."""
    ws = str(daemon.workspace)
    with Client(str(daemon.socket), timeout=20, reconnect_retries=1) as sub:
        sub.call("subscribe", {"workspace": ws})
        notes = sub.notifications()
        daemon.stop()
        assert next(notes)["method"] == "daemon_stopping"
        lost = next(notes)
        assert lost["method"] == "subscription_lost" and lost["params"]["workspace"] == ws
        assert "no makad is running" in lost["params"]["error"]
        with pytest.raises(DaemonUnavailable):
            next(notes)


async def test_async_notifications_carry_on_across_a_restart(daemon: DaemonProcess) -> None:
    """AsyncClient reconnects by itself after a restart (no call needed), renews the
    subscription and goes on yielding notifications, with the same shapes as Client; the
    lost connection is closed, not left to the garbage collector."""
    ws = str(daemon.workspace)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        async with AsyncClient(str(daemon.socket), timeout=20, reconnect_retries=PATIENT) as sub:
            await sub.m.subscribe(workspace=ws)
            notes = sub.notifications()
            await anyio.to_thread.run_sync(daemon.restart)
            with anyio.fail_after(60):
                assert await anext(notes) == {
                    "jsonrpc": "2.0",
                    "method": "daemon_stopping",
                    "params": {"reason": "signal"},
                }
                marker = await anext(notes)
                assert marker == {"jsonrpc": "2.0", "method": "reconnected", "params": {"workspaces": [ws]}}
                revision = await anyio.to_thread.run_sync(change, daemon, "after the restart")
                note = await anext(notes)
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
    assert note == {
        "jsonrpc": "2.0",
        "method": "memory_changed",
        "params": {"workspace": ws, "revision": revision, "cause": "daemon"},
    }


async def test_async_subscription_lost_then_unavailable(daemon: DaemonProcess) -> None:
    """AsyncClient: `subscription_lost` per workspace, then DaemonUnavailable from the iterator."""
    ws = str(daemon.workspace)
    async with AsyncClient(str(daemon.socket), timeout=20, reconnect_retries=1) as sub:
        await sub.call("subscribe", {"workspace": ws})
        notes = sub.notifications()
        await anyio.to_thread.run_sync(daemon.stop)
        with anyio.fail_after(60):
            assert (await anext(notes))["method"] == "daemon_stopping"
            lost = await anext(notes)
            assert lost["method"] == "subscription_lost" and lost["params"]["workspace"] == ws
            with pytest.raises(DaemonUnavailable):
                await anext(notes)


async def test_one_notifications_api(daemon: DaemonProcess) -> None:
    """The sync and async clients yield the same notification for the same change, and both
    drain what arrived without waiting."""
    ws = str(daemon.workspace)
    with Client(str(daemon.socket), timeout=20) as sync:
        async with AsyncClient(str(daemon.socket), timeout=20) as aio:
            sync.call("subscribe", {"workspace": ws})
            await aio.call("subscribe", {"workspace": ws})
            await anyio.to_thread.run_sync(change, daemon, "one change")
            from_sync = next(sync.notifications())
            with anyio.fail_after(20):
                from_async: Any = await anext(aio.notifications())
            assert from_sync == from_async
            await anyio.to_thread.run_sync(change, daemon, "another")
            await aio.call("ping")  # its reply follows the notification on the same connection
            sync.call("ping")
            assert [n["method"] for n in aio.drain_notifications()] == ["memory_changed"]
            assert [n["method"] for n in sync.drain_notifications()] == ["memory_changed"]


def test_on_notification_sees_progress_during_a_call(daemon: DaemonProcess) -> None:
    """Both clients hand each notification to on_notification as it is read, mid-call too."""
    data = "".join(f"- fact {i}\n" for i in range(120))
    seen: list[dict[str, Any]] = []
    with Client(str(daemon.socket), on_notification=seen.append) as c:
        c.call(
            "import_memories", workspace=str(daemon.workspace), data=data, format="markdown", progress=True
        )
    assert [n["params"]["done"] for n in seen if n["method"] == "import_progress"][-1] == 120

    async def run() -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        async with AsyncClient(str(daemon.socket), on_notification=got.append) as c:
            await c.call(
                "import_memories",
                workspace=str(daemon.workspace),
                data=data.replace("fact", "other"),
                format="markdown",
                progress=True,
            )
        return got

    got = anyio.run(run)
    assert [n["params"]["total"] for n in got if n["method"] == "import_progress"] and got[-1]["params"][
        "done"
    ] == 120

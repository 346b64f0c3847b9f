"""many_workspaces: what a daemon keeps for each folder it has served.

One daemon with a small open-ledger cap serves a few hundred folders in turn (each: an
entry added, a session opened, written to and closed, a read), then is left idle for a
few seconds. Reported: its resident size, descriptors and inotify watches after a warm-up
and after all the folders, and the growth per folder, twice: with idle workspaces released
at once (``MAKAD_WORKSPACE_RELEASE_MS=1``: what an idle folder still costs) and kept (an
hour: every workspace held, as before workspaces were released).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Daemon

CAP = 8
WARMUP = 20
SETTLE_S = 8.0  # a few of the release sweeps, and the attention keeper's rounds


def _watches(pid: int) -> int:
    """inotify watches the process holds (one line per watch in each inotify fd's fdinfo)."""
    count = 0
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in os.listdir(fd_dir):
        try:
            if os.readlink(fd_dir / fd) != "anon_inode:inotify":
                continue
            count += sum(
                1
                for line in (Path(f"/proc/{pid}/fdinfo") / fd).read_text().splitlines()
                if line.startswith("inotify wd:")
            )
        except OSError:
            continue
    return count


def _serve(d: Daemon, first: int, count: int) -> None:
    from maka import Client

    with Client(str(d.socket), timeout=60) as c:
        for n in range(first, first + count):
            ws = d.root / f"f{n}"
            ws.mkdir()
            c.call("add_entry", {"workspace": str(ws), "title": f"Folder {n}", "content": "a fact " * 20})
            sid = c.call("open_session", {"workspace": str(ws)})["sessionId"]
            events = [{"type": "user_message", "text": f"note {i} about folder {n}"} for i in range(5)]
            c.call("append_events", {"workspace": str(ws), "sessionId": sid, "events": events})
            c.call("close_session", {"workspace": str(ws), "sessionId": sid})
            c.call("read_state", {"workspace": str(ws), "includeEntries": True})


def _sample(d: Daemon) -> dict[str, Any]:
    assert d.proc is not None
    pid = d.proc.pid
    return {"rss_mib": d.rss_mib(), "fds": len(os.listdir(f"/proc/{pid}/fd")), "watches": _watches(pid)}


def run(quick: bool) -> dict[str, Any]:
    folders = 40 if quick else 400
    return {
        "many_workspaces": {
            "released": _one(folders, release_ms=1),
            "kept": _one(folders, release_ms=3_600_000),
        }
    }


def _one(folders: int, release_ms: int) -> dict[str, Any]:
    env = {"MAKAD_MAX_OPEN_WORKSPACES": str(CAP), "MAKAD_WORKSPACE_RELEASE_MS": str(release_ms)}
    with Daemon(env=env) as d:
        _serve(d, 0, WARMUP)
        time.sleep(SETTLE_S)
        before = _sample(d)
        started = time.perf_counter()
        _serve(d, WARMUP, folders)
        served_s = time.perf_counter() - started
        time.sleep(SETTLE_S)
        after = _sample(d)
    return {
        "folders": folders,
        "cap": CAP,
        "served_s": round(served_s, 2),
        "after_warmup": before,
        "after_all": after,
        "kib_per_folder": round((after["rss_mib"] - before["rss_mib"]) * 1024 / folders, 1),
    }

"""Edits that keep a memory file's size and put its modification time back are seen.

`rsync --inplace -t`, `cp -p`, `touch -r` and sync tools rewrite a file in place and then
restore its times: its inode, size and mtime are what the daemon last saw. Each tool's
own syscalls are reproduced (the real tool when it is installed, else the same calls
from Python), for MEMORY.md, PENDING.md and the user level's MEMORY.md; `read_state`
(also conditional), `build_context`, `list_proposals` and the watcher must all see the
new text.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from maka import Client
from makad.core import memory_format as fmt
from makad.core.types import Entry
from tests.support import DaemonProcess

USER = "@user"


def _old_times(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_atime_ns, st.st_mtime_ns


def in_place_then_utime(path: Path, data: bytes, scratch: Path) -> None:
    """A sync tool's own way: open the file, write over it, put its times back."""
    times = _old_times(path)
    with open(path, "r+b") as fh:
        fh.write(data)
        fh.truncate()
    os.utime(path, ns=times)


def cp_p(path: Path, data: bytes, scratch: Path) -> None:
    """`cp -p SRC FILE`: FILE opened with O_TRUNC (same inode), written, given SRC's times
    (here the file's own old ones, as a copy of an older save carries)."""
    src = scratch / "copy-source"
    src.write_bytes(data)
    os.utime(src, ns=_old_times(path))
    if shutil.which("cp"):
        subprocess.run(["cp", "-p", str(src), str(path)], check=True)
        return
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, data)
        os.utime(fd, ns=_old_times(src))
    finally:
        os.close(fd)


def touch_r(path: Path, data: bytes, scratch: Path) -> None:
    """An edit in place (which moves the mtime), then `touch -r REF FILE` puts the old
    times back from a reference file that kept them."""
    ref = scratch / "reference"
    ref.write_bytes(b"")
    os.utime(ref, ns=_old_times(path))
    with open(path, "r+b") as fh:
        fh.write(data)
    if shutil.which("touch"):
        subprocess.run(["touch", "-r", str(ref), str(path)], check=True)
    else:
        os.utime(path, ns=_old_times(ref))


def rsync_inplace_t(path: Path, data: bytes, scratch: Path) -> None:
    """`rsync --inplace -t -I SRC FILE` (-I: even with equal size and time), else its
    calls: write into the file in place, then set the source's times."""
    src = scratch / "rsync-source"
    src.write_bytes(data)
    os.utime(src, ns=_old_times(path))
    if shutil.which("rsync"):
        subprocess.run(["rsync", "--inplace", "-t", "-I", str(src), str(path)], check=True)
        return
    in_place_then_utime(path, data, scratch)
    os.utime(path, ns=_old_times(src))


TOOLS: dict[str, Callable[[Path, bytes, Path], None]] = {
    "in_place_then_utime": in_place_then_utime,
    "cp_p": cp_p,
    "touch_r": touch_r,
    "rsync_inplace_t": rsync_inplace_t,
}


def edit_keeping_size_and_times(path: Path, old: str, new: str, tool: str, scratch: Path) -> None:
    """Replace ``old`` by ``new`` (same length) with ``tool``; check that it really kept
    the inode, the size and the mtime, so the test tests what it says."""
    assert len(old) == len(new)
    before = os.stat(path)
    text = path.read_text()
    assert old in text
    scratch.mkdir(exist_ok=True)
    TOOLS[tool](path, text.replace(old, new).encode(), scratch)
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    assert new in path.read_text()


def memory_with(fact: str) -> str:
    entry = Entry(
        id="00000000000000a1", title="Fact", content=fact, origin="manual", created_at=1, updated_at=1
    )
    return fmt.render(fmt.upsert(fmt.new_document(), entry))


def contents(state: dict[str, Any]) -> list[str]:
    return [e["content"] for e in state["entries"]]


def open_reads(c: Client, workspace: str) -> None:
    c.call("set_settings", {"workspace": workspace, "agentReadEnabled": True})


def pack_text(c: Client, workspace: str, query: str) -> str:
    pack = c.call("build_context", {"workspace": workspace, "budgetTokens": 2000, "query": query})
    return "\n".join(s["text"] for s in pack["segments"] if s["kind"] == "memory")


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_memory_edit_keeping_size_and_times_is_read(
    module_daemon: DaemonProcess, new_ws: Path, tool: str
) -> None:
    """read_state, its conditional form and build_context all show the edited MEMORY.md."""
    path = new_ws / "memory" / "MEMORY.md"
    path.parent.mkdir(mode=0o700)
    path.write_text(memory_with(f"The build server is alpha-{tool}."))
    ws = str(new_ws)
    with module_daemon.client() as c:
        open_reads(c, ws)
        first = c.call("read_state", {"workspace": ws, "includeEntries": True})
        assert f"alpha-{tool}" in pack_text(c, ws, "build server")
        edit_keeping_size_and_times(path, f"alpha-{tool}", f"omega-{tool}", tool, new_ws / "scratch")
        state = c.call(
            "read_state", {"workspace": ws, "includeEntries": True, "ifRevision": first["revision"]}
        )
        assert "notModified" not in state
        assert contents(state) == [f"The build server is omega-{tool}."]
        assert state["revision"] != first["revision"]
        text = pack_text(c, ws, "build server")
        assert f"omega-{tool}" in text and f"alpha-{tool}" not in text


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_pending_edit_keeping_size_and_times_is_read(
    module_daemon: DaemonProcess, new_ws: Path, tool: str
) -> None:
    """A proposal edited in PENDING.md the same way is listed with its new text."""
    ws = str(new_ws)
    with module_daemon.client() as c:
        c.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "extractToolEnabled": True})
        c.call("propose", {"workspace": ws, "title": "Queue", "content": f"The queue is kappa-{tool}."})
        assert [
            p["proposal"]["content"] for p in c.call("list_proposals", {"workspace": ws})["proposals"]
        ] == [f"The queue is kappa-{tool}."]
        first = c.call("read_state", {"workspace": ws})
        pending = new_ws / "memory" / "PENDING.md"
        edit_keeping_size_and_times(pending, f"kappa-{tool}", f"sigma-{tool}", tool, new_ws / "scratch")
        listed = c.call("list_proposals", {"workspace": ws})["proposals"]
        assert [p["proposal"]["content"] for p in listed] == [f"The queue is sigma-{tool}."]
        assert (
            c.call("read_state", {"workspace": ws, "ifRevision": first["revision"]}).get("notModified")
            is None
        )


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_user_level_edit_keeping_size_and_times_is_read(module_daemon: DaemonProcess, tool: str) -> None:
    """The user level's MEMORY.md, edited the same way, is read by "@user" and merged into
    a workspace's context pack with its new text."""
    d = module_daemon
    workspace = d.root / f"reader-{tool}"
    workspace.mkdir(exist_ok=True)
    with d.client() as c:
        c.call("set_settings", {"workspace": USER, "enabled": True, "agentReadEnabled": True})
        open_reads(c, str(workspace))
        added = c.call(
            "add_entry", {"workspace": USER, "title": "Editor", "content": f"Editor is ed-{tool}-vim."}
        )
        path = Path(c.call("read_state", {"workspace": USER})["path"])
        assert f"ed-{tool}-vim" in pack_text(c, str(workspace), "editor")
        edit_keeping_size_and_times(
            path, f"ed-{tool}-vim", f"ed-{tool}-vi0", tool, d.root / f"scratch-{tool}"
        )
        state = c.call("read_state", {"workspace": USER, "includeEntries": True})
        mine = [e["content"] for e in state["entries"] if e["id"] == added["entry"]["id"]]
        assert mine == [f"Editor is ed-{tool}-vi0."]
        assert f"ed-{tool}-vi0" in pack_text(c, str(workspace), "editor")


def test_the_watcher_reports_such_an_edit_without_any_read(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """A subscriber hears memory_changed (external_edit) for an in-place edit that put the
    times back, with no read_state to find it: the watcher's own check sees it."""
    path = new_ws / "memory" / "MEMORY.md"
    path.parent.mkdir(mode=0o700)
    path.write_text(memory_with("The port is 8081."))
    ws = str(new_ws)
    with module_daemon.client() as c, Client(str(module_daemon.socket), timeout=20) as sub:
        base = c.call("read_state", {"workspace": ws})["revision"]
        sub.call("subscribe", {"workspace": ws})
        edit_keeping_size_and_times(path, "8081", "9091", "in_place_then_utime", new_ws / "scratch")
        note = next(n for n in sub.notifications() if n["method"] == "memory_changed")
        assert note["params"]["cause"] == "external_edit" and note["params"]["revision"] > base
        assert contents(c.call("read_state", {"workspace": ws, "includeEntries": True})) == [
            "The port is 9091."
        ]

"""Fault plumbing for the robustness tests: read-only directories, a full disk, snapshots."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from maka.errors import RemoteError
from tests.support import DaemonProcess

IS_ROOT = os.geteuid() == 0

# How long a daemon started with BRIEF_BUSY_ENV (the ``brief_busy_daemon`` fixture) waits
# for a ledger whose lock another process holds, where the ledger's own wait is 10 s: the
# same refusal (ledger_busy) by the same path, sooner (makad.faults).
BRIEF_BUSY_TIMEOUT_S = 2.0
BRIEF_BUSY_ENV = {"MAKAD_FAULT_BUSY_TIMEOUT_MS": str(int(BRIEF_BUSY_TIMEOUT_S * 1000))}


@contextlib.contextmanager
def read_only_dir(path: Path) -> Iterator[str]:
    """Make ``path`` refuse new entries and renames; yields how.

    chmod 0500 does not stop root (CAP_DAC_OVERRIDE), so as root the directory is
    made immutable with ``chattr +i`` instead; where that is not possible (tmpfs,
    overlayfs, no CAP_LINUX_IMMUTABLE) the test is skipped.
    """
    if not IS_ROOT:
        os.chmod(path, 0o500)
        try:
            yield "chmod 0500"
        finally:
            os.chmod(path, 0o700)
        return
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(
            f"running as root, and chattr +i failed ({done.stderr.strip()}): "
            "no way to make a directory read-only for root here"
        )
    try:
        yield "chattr +i"
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@contextlib.contextmanager
def immutable_file(path: Path) -> Iterator[None]:
    """As root: ``chattr +i`` on one file (writes to it fail with EPERM)."""
    if not IS_ROOT:
        pytest.skip("needs root for chattr +i")
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"chattr +i failed here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@contextlib.contextmanager
def tiny_tmpfs(path: Path, size_kib: int, *, inodes: int | None = None) -> Iterator[None]:
    """Mount a small tmpfs on ``path`` (root only), so the disk really fills up; with
    ``inodes``, room for only that many files."""
    if not IS_ROOT:
        pytest.skip("mounting a tmpfs needs root")
    path.mkdir(mode=0o700, exist_ok=True)
    options = f"size={size_kib}k,mode=0700" + (f",nr_inodes={inodes}" if inodes is not None else "")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill_disk(directory: Path) -> Path:
    """Write a filler file until the filesystem is full; returns it (delete it to free space)."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        chunk = b"\0" * 4096
        while True:
            os.write(fd, chunk)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)
    return filler


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file under ``root`` (bytes), directory and symlink (a marker), by relative path."""
    out: dict[str, bytes | str] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in dirnames + filenames:
            path = base / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = f"symlink->{os.readlink(path)}"
            elif path.is_dir():
                out[rel] = "dir"
            elif path.is_file():
                out[rel] = path.read_bytes()
    return out


def remote_error(d: DaemonProcess, method: str, params: dict[str, Any]) -> RemoteError:
    """The error ``method`` fails with (the test fails if it succeeds)."""
    with d.client() as client:
        try:
            result = client.call(method, params)
        except RemoteError as exc:
            return exc
    raise AssertionError(f"{method} succeeded: {str(result)[:200]}")


def generalized(exc: RemoteError, *secrets: str) -> bool:
    """The error names no path or content: none of ``secrets`` appear in message or data."""
    text = f"{exc.message} {exc.data}"
    return not any(s in text for s in secrets)


def serves_other_workspace(d: DaemonProcess, other: Path) -> None:
    """A second workspace is untouched by the fault: it reads, writes and appends."""
    other.mkdir(exist_ok=True)
    ws = str(other)
    added = d.call("add_entry", {"workspace": ws, "title": "Other", "content": "still fine"})
    state = d.call("read_state", {"workspace": ws, "includeEntries": True})
    assert state["status"] == "ok"
    assert added["entry"]["id"] in [e["id"] for e in state["entries"]]
    sid = d.call("open_session", {"workspace": ws})["sessionId"]
    got = d.call(
        "append_events",
        {"workspace": ws, "sessionId": sid, "events": [{"type": "user_message", "text": "hello"}]},
    )
    assert got["lastSeq"] == 1

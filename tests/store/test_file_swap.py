"""Replacing a memory file never destroys a save the daemon has not seen (real files)."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from makad.store import file_swap
from makad.store.file_swap import ChangedUnderfoot, read_settled, replace_verified, settled_stat

CAP = 1 << 20


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def put(path: Path, data: bytes, expect: bytes | None, kept: list[bytes]) -> file_swap.Replaced:
    return replace_verified(
        path, data, expect_sha=None if expect is None else sha(expect), max_bytes=CAP, keep=kept.append
    )


def test_the_expected_file_is_replaced_and_nothing_is_left_behind(tmp_path: Path) -> None:
    """The file is what the write was based on: replaced, no temp file left, nothing kept."""
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"old")
    kept: list[bytes] = []
    written = put(path, b"new", b"old", kept)
    assert path.read_bytes() == b"new" and written.displaced is None and kept == []
    assert written.signature == file_swap.signature_of(os.lstat(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MEMORY.md"]


def test_a_save_that_landed_meanwhile_is_returned_and_kept(tmp_path: Path) -> None:
    """The file changed since the daemon read it: its bytes go to ``keep`` and come back
    as ``displaced`` (with their mtime) for the caller to put back."""
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"the user's save")
    os.utime(path, ns=(1, 1_700_000_000_000_000_000))
    kept: list[bytes] = []
    written = put(path, b"daemon", b"what the daemon read", kept)
    assert written.displaced is not None
    assert written.displaced.data == b"the user's save" == kept[0]
    assert written.displaced.mtime_ns == 1_700_000_000_000_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MEMORY.md"]


def test_creating_never_replaces_a_file_that_appeared(tmp_path: Path) -> None:
    """Expected absent but there: ChangedUnderfoot, the file as the user left it."""
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"made by the user")
    with pytest.raises(ChangedUnderfoot):
        put(path, b"daemon", None, [])
    assert path.read_bytes() == b"made by the user"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MEMORY.md"]


def test_a_file_that_vanished_is_not_recreated_blindly(tmp_path: Path) -> None:
    """Expected present but gone (a save renaming it away, a deletion): ChangedUnderfoot."""
    path = tmp_path / "MEMORY.md"
    with pytest.raises(ChangedUnderfoot):
        put(path, b"daemon", b"old", [])
    assert list(tmp_path.iterdir()) == []


def test_without_renameat2_the_check_comes_right_before_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the exchange is not offered: a changed file is ChangedUnderfoot, an unchanged
    one is replaced."""
    monkeypatch.setattr(file_swap, "_RENAMEAT2", None)
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"the user's save")
    with pytest.raises(ChangedUnderfoot):
        put(path, b"daemon", b"old", [])
    assert path.read_bytes() == b"the user's save"
    assert put(path, b"daemon", b"the user's save", []).displaced is None
    assert path.read_bytes() == b"daemon"


def test_a_save_put_back_keeps_its_mtime(tmp_path: Path) -> None:
    """``mtime_ns`` gives the written file the save's own mtime."""
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"daemon")
    replace_verified(
        path, b"save", expect_sha=sha(b"daemon"), max_bytes=CAP, keep=[].append, mtime_ns=123_000_000_000
    )
    assert os.stat(path).st_mtime_ns == 123_000_000_000


def naps(monkeypatch: pytest.MonkeyPatch, during: Callable[[], None] = lambda: None) -> list[float]:
    """Every wait of a settle from now on, each also running ``during`` (what another
    process does while the daemon waits), instead of sleeping."""
    seen: list[float] = []

    def nap(seconds: float) -> None:
        seen.append(seconds)
        during()
        time.sleep(seconds)

    monkeypatch.setattr(file_swap, "_nap", nap)
    return seen


def test_an_empty_file_is_read_once_its_writer_has_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Truncated by an in-place save whose write lands while the read waits: the read
    waits for the text instead of taking the empty file."""
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"")

    def editor_writes() -> None:
        if path.stat().st_size == 0:
            path.write_bytes(b"the whole save")

    seen = naps(monkeypatch, editor_writes)
    settled = read_settled(path, CAP)
    assert seen  # it did wait on the empty file
    assert settled is not None and settled[1] == b"the whole save"


def test_an_emptied_file_is_given_its_wait_before_it_is_read_as_empty(tmp_path: Path) -> None:
    """Nobody fills it: it is read as empty, and not before ``emptied_ns`` after its mtime."""
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"")
    waits = file_swap.SaveWaits(emptied_ns=200_000_000)
    st = settled_stat(path, waits=waits)
    assert st is not None and st.st_size == 0
    assert time.time_ns() >= st.st_mtime_ns + waits.emptied_ns


def test_a_file_gone_for_good_is_missing_after_its_wait(tmp_path: Path) -> None:
    """A file that was there and does not come back: missing, and not before ``missing_ns``."""
    waits = file_swap.SaveWaits(missing_ns=200_000_000)
    started = time.monotonic_ns()
    assert settled_stat(tmp_path / "MEMORY.md", waits=waits) is None
    assert time.monotonic_ns() - started >= waits.missing_ns


def test_an_old_file_is_read_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file nobody touched for a while needs no waiting (the common case)."""
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"text")
    os.utime(path, ns=(1, time.time_ns() - 10_000_000_000))
    seen = naps(monkeypatch)
    assert settled_stat(path) is not None
    assert seen == []


def test_a_file_that_never_existed_is_not_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Missing and not known before: no grace period."""
    seen = naps(monkeypatch)
    assert settled_stat(tmp_path / "MEMORY.md", existed=False) is None
    assert seen == []

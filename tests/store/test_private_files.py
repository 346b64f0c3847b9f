"""makad.private_files: folders only we can change, files never opened through a trap."""

from __future__ import annotations

import os
import pwd
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from makad import private_files
from makad.private_files import (
    NotPrivate,
    NotRegularFile,
    create_private,
    make_dirs,
    open_private,
    private_group,
    read_regular,
    secure_folder,
    tighten_tree,
    write_private,
)

IS_ROOT = os.geteuid() == 0
try:
    NOBODY: int | None = pwd.getpwnam("nobody").pw_uid
except KeyError:
    NOBODY = None


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """A umask that takes nothing away (0000)."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_make_dirs_makes_every_missing_folder_exactly_0700(short_tmp: Path, loose_umask: None) -> None:
    """Under a umask of 0000 every folder made (the parents too) is 0700; one that was
    there keeps its mode."""
    (short_tmp / "a").mkdir(mode=0o755)
    make_dirs(short_tmp / "a" / "b" / "c" / "d")
    assert mode_of(short_tmp / "a") == 0o755
    for folder in ("a/b", "a/b/c", "a/b/c/d"):
        assert mode_of(short_tmp / folder) == 0o700


def test_secure_folder_makes_a_missing_chain_0700_whatever_the_umask(short_tmp: Path) -> None:
    """The folders it makes are 0700 even under a umask that would leave them unusable."""
    old = os.umask(0o777)
    try:
        secure_folder(short_tmp / "x" / "y", what="socket folder", elsewhere="--socket")
    finally:
        os.umask(old)
    assert mode_of(short_tmp / "x") == mode_of(short_tmp / "x" / "y") == 0o700


def test_create_private_never_follows_a_dangling_symlink(short_tmp: Path) -> None:
    """O_CREAT|O_EXCL: a dangling symlink at the path is an existing file; nothing is made
    where it points."""
    (short_tmp / "f").symlink_to(short_tmp / "target")
    with pytest.raises(FileExistsError):
        create_private(short_tmp / "f")
    assert not (short_tmp / "target").exists()


def test_create_private_is_exactly_0600_under_any_umask(short_tmp: Path, loose_umask: None) -> None:
    """The mode is set on the descriptor, not left to the umask."""
    os.close(create_private(short_tmp / "f"))
    assert mode_of(short_tmp / "f") == 0o600


def test_a_fifo_is_refused_at_once_not_waited_on(short_tmp: Path) -> None:
    """Reading or opening a FIFO (no writer) returns at once with a refusal."""
    fifo = short_tmp / "fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def attempt() -> None:
        for call in (lambda: read_regular(fifo), lambda: open_private(fifo)):
            try:
                call()
            except (NotRegularFile, NotPrivate) as exc:
                outcome.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "blocked on the FIFO"
    assert [type(e) for e in outcome] == [NotRegularFile, NotPrivate]


def test_open_private_refuses_a_hard_link_and_leaves_it_alone(short_tmp: Path) -> None:
    """A second name for another file: refused, and that file keeps its bytes and mode."""
    other = short_tmp / "other"
    other.write_text("keep")
    os.chmod(other, 0o644)
    os.link(other, short_tmp / "lock")
    with pytest.raises(NotPrivate, match="other hard link"):
        open_private(short_tmp / "lock")
    assert other.read_text() == "keep" and mode_of(other) == 0o644


def test_write_private_replaces_a_symlink_instead_of_writing_through_it(short_tmp: Path) -> None:
    """Renamed over the link: the link goes, its target keeps its bytes."""
    target = short_tmp / "target"
    target.write_text("keep")
    (short_tmp / "f").symlink_to(target)
    write_private(short_tmp / "f", b"new")
    assert target.read_text() == "keep"
    assert (short_tmp / "f").read_bytes() == b"new" and mode_of(short_tmp / "f") == 0o600


def test_tighten_tree_strips_group_and_others_and_leaves_links_alone(short_tmp: Path) -> None:
    """Folders and files lose group/other bits (the owner's stay); what a symlink leads to
    and a hard-linked file keep their modes; the count says how many changed."""
    root = short_tmp / "data"
    (root / "sub").mkdir(parents=True)
    outside = short_tmp / "outside"
    outside.write_text("x")
    (root / "sub" / "f").write_text("f")
    (root / "sub" / "ro").write_text("ro")
    (root / "link").symlink_to(outside)
    linked = short_tmp / "linked"
    linked.write_text("l")
    os.link(linked, root / "hard")
    for path, mode in (
        (root, 0o777),
        (root / "sub", 0o755),
        (root / "sub" / "f", 0o666),
        (root / "sub" / "ro", 0o444),
    ):
        os.chmod(path, mode)
    os.chmod(outside, 0o644)
    os.chmod(linked, 0o644)
    assert tighten_tree(root) == 4
    assert [mode_of(p) for p in (root, root / "sub", root / "sub" / "f", root / "sub" / "ro")] == [
        0o700,
        0o700,
        0o600,
        0o400,
    ]
    assert mode_of(outside) == 0o644 and mode_of(linked) == 0o644
    assert tighten_tree(root) == 0


# A folder in the chain: its mode, and whether another user (nobody) owns it.
FOLDER = st.tuples(
    st.sampled_from([0o700, 0o755, 0o750, 0o770, 0o775, 0o777, 0o1777, 0o1770, 0o705]), st.booleans()
)


def expected_refusal(chain: list[tuple[Path, int, bool]]) -> Path | None:
    """The first folder (from the top) that lets someone else change the last one."""
    for index, (path, mode, foreign) in enumerate(chain):
        last = index == len(chain) - 1
        if foreign:
            return path
        if mode & 0o022 and (last or not mode & 0o1000):
            return path
    return None


@pytest.mark.skipif(not IS_ROOT or NOBODY is None, reason="needs root and a nobody account to own folders")
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(FOLDER, min_size=1, max_size=3))
def test_secure_folder_refuses_exactly_the_chains_others_can_change(
    short_tmp: Path, chain_spec: list[tuple[int, bool]]
) -> None:
    """Over chains of folders with random modes and owners: refused (naming the first
    culprit from the top) exactly when a folder is another user's, the folder itself is
    writable by group or others, or a folder above it is without the sticky bit; an
    accepted chain is left exactly as it was. (Each example has a folder of its own.)"""
    base = Path(os.path.join(short_tmp, f"c{os.urandom(4).hex()}"))
    base.mkdir(mode=0o700)
    chain: list[tuple[Path, int, bool]] = []
    here = base
    for i, (mode, foreign) in enumerate(chain_spec):
        here = here / f"d{i}"
        here.mkdir()
        chain.append((here, mode, foreign))
    for path, mode, foreign in reversed(chain):
        os.chmod(path, mode)
        if foreign:
            assert NOBODY is not None
            os.chown(path, NOBODY, -1)
    culprit = expected_refusal(chain)
    if culprit is None:
        secure_folder(here, what="socket folder", elsewhere="--socket")
        assert [mode_of(p) for p, _, _ in chain] == [m for _, m, _ in chain]
    else:
        with pytest.raises(NotPrivate) as info:
            secure_folder(here, what="socket folder", elsewhere="--socket")
        assert info.value.path == str(culprit)


def test_a_private_group_is_the_owners_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Group-writable above the folder is accepted only for the owner's user-private group
    (named after them, no other member), never for root, another owner or a shared group.
    (Accounts are faked: a test cannot create users.)"""
    users = {1000: "alice", 1001: "bob", 0: "root"}
    groups = {
        1000: ("alice", []),
        1001: ("staff", ["alice", "bob"]),
        1002: ("alice", ["bob"]),
        0: ("root", []),
    }
    monkeypatch.setattr(private_files.pwd, "getpwuid", lambda uid: SimpleNamespace(pw_name=users[uid]))
    monkeypatch.setattr(
        private_files.grp,
        "getgrgid",
        lambda gid: SimpleNamespace(gr_name=groups[gid][0], gr_mem=groups[gid][1]),
    )
    assert private_group(1000, 1000, 1000)
    assert not private_group(1001, 1000, 1000)  # shared
    assert not private_group(1002, 1000, 1000)  # named after alice, but bob is in it
    assert not private_group(1000, 1001, 1000)  # another owner's folder
    assert not private_group(0, 0, 0)  # root's group never counts
    assert not private_group(4242, 1000, 1000)  # no such group

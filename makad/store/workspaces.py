"""Workspaces: validated paths, their private data directories and per-workspace state.

A workspace is a directory the client names by absolute path. Its memory files
live in ``<workspace>/memory/``; its ledger, backups and settings live under
``<data>/workspaces/<id>/`` where ``id`` is derived from the resolved path.
Which directory on disk the data belongs to is ``makad.store.identity``'s job:
the registry re-checks it on every call and opens a new workspace when the
directory at a path (or behind a spelling) is no longer the one it knew.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import sqlite3
import stat as stat_mod
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread

from makad.core import memory_format as fmt
from makad.core.levels import USER_LEVEL, Level, read_at_user_level
from makad.core.peer import Peer
from makad.core.redaction import redact
from makad.core.undecodable import display
from makad.errors import DISK_FULL_ERRNOS, ECHO_LIMIT, InvalidWorkspace, IOFailure, MakadError, echoed
from makad.faults import UNARMED, Faults
from makad.private_files import create_private, make_dirs, read_if_regular, write_all, write_private
from makad.store import attention_store, identity
from makad.store.identity import Stamp
from makad.store.ledger import Ledger, now_ms
from makad.store.ledger.pool import DEFAULT_MAX_OPEN_LEDGERS, LedgerPool
from makad.store.ledger.recovery import LedgerReset
from makad.store.memory_files import ensure_memory_dir, generalize
from makad.store.revision_clock import RevisionClock
from makad.store.shared_checks import SharedChecks
from makad.store.system_folders import dir_key, system_folder
from makad.store.tracked import TrackedFile
from makad.store.typed_ids import TypedIds
from makad.store.workspace_state import WorkspaceState

MEMORY_DIR = "memory"
# In the data directory: which folder the user level was (its workspace id).
USER_LEVEL_FILE = "user-level"
MEMORY_FILE = "MEMORY.md"
PENDING_FILE = "PENDING.md"
MAX_CACHED_SPELLINGS = 10_000
# Released workspaces whose memory files' hashes are kept (``WorkspaceRegistry.release``):
# about 300 bytes each.
MAX_REMEMBERED_FILES = 65_536
T = TypeVar("T")


def workspace_id(path: Path) -> str:
    return hashlib.sha256(os.fsencode(path)).hexdigest()[:16]


def resolve_workspace(raw: str) -> Path:
    """The canonical path of a workspace, or InvalidWorkspace saying what is wrong."""
    if not raw or "\0" in raw:
        raise InvalidWorkspace("workspace must be a non-empty path")
    if raw.startswith("@"):
        raise InvalidWorkspace(
            f'names starting with "@" are reserved: the only one is "{USER_LEVEL}" (the user-level memory)'
        )
    if not os.path.isabs(raw):
        raise InvalidWorkspace("workspace must be an absolute path")
    if (why := too_long(raw)) is not None:
        raise InvalidWorkspace(
            f"workspace path is too long: {why}; name the folder by a shorter path", reason="too_long"
        )
    try:
        resolved = Path(raw).resolve(strict=True)
    except (OSError, RuntimeError):
        raise InvalidWorkspace(
            f"workspace directory does not exist: {_echo(raw)}; create it first, or name an existing folder"
        ) from None
    if not resolved.is_dir():
        raise InvalidWorkspace(f"workspace is not a directory: {_echo(raw)}; name the folder that holds it")
    length, limit = len(os.fsencode(resolved)), _path_max(resolved)
    if length + len(_LONGEST_INSIDE) >= limit:
        raise InvalidWorkspace(
            f"workspace path is too long: its real path is {length} bytes, and its memory files "
            f"need {len(_LONGEST_INSIDE)} more under the system's limit of {limit - 1}; use a "
            "folder with a shorter path",
            reason="too_long",
        )
    return resolved


# The longest path the daemon writes inside a workspace: a memory file's temp file.
_LONGEST_INSIDE = "/memory/.PENDING.md.XXXXXXXX.tmp"


def path_limit() -> int:
    """The system's limit on a path's bytes (with its terminating NUL): no path this
    long (in characters, each at least a byte) names a file."""
    return _path_max(Path("/"))


def too_long(path: str) -> str | None:
    """Why ``path`` names no file, when it is as long as the system's limit or longer (no
    file has such a path; and resolving it one component at a time copies the rest at
    each step: ``/../../…`` of 6 MB kept a worker thread busy for hours); else None."""
    limit = path_limit()
    if len(path) < limit:
        return None
    return f"{len(path)} characters, and the system takes paths of at most {limit - 1} bytes"


def _path_max(path: Path) -> int:
    """The system's limit on a path's bytes (with its terminating NUL) below ``path``."""
    try:
        return os.pathconf(path, "PC_PATH_MAX")
    except (OSError, ValueError):
        return 4096


# An error names the path it refused, cut to this many characters.
_ECHO_CHARS = ECHO_LIMIT


def _echo(raw: str) -> str:
    """``raw`` as an error shows it: redacted, undecodable bytes readable, bounded."""
    shown = redact(display(raw)).text
    return echoed(shown, _ECHO_CHARS)


def reserved_folder(path: Path, data_dir: Path, user_dir: Path) -> str | None:
    """Why ``path`` (resolved) cannot be a workspace, or None when it can.

    Refused: the filesystem root, the kernel's folders (``system_folder``), the user
    level's folder and its ``memory/`` folder (two names for one folder would be two locks
    on one file), the data directory and anything
    inside it (the daemon's own files), a folder whose ``memory/`` is one of those, and a
    workspace's ``memory/`` folder (one holding its id file) and anything inside it. Folders are
    compared by (device, inode), so no spelling — a symlink, a bind mount, another case
    on a case-insensitive disk — gets past. Blocking: a few ``stat`` calls.
    """
    user = dir_key(user_dir)
    user_memory = dir_key(user_dir / MEMORY_DIR)
    data = dir_key(data_dir)
    own = dir_key(path)
    system = system_folder(path)
    if system is not None:
        return f"{system} is no workspace: name the project's own folder"
    if own is not None and own == user:
        return f'this folder holds the user-level memory: address it as workspace "{USER_LEVEL}"'
    if own is not None and own == user_memory:
        return (
            "this folder is the user-level memory's memory/ folder: address the user level as "
            f'workspace "{USER_LEVEL}"'
        )
    inside = {key for key in (data, user_memory) if key is not None}
    if inside:
        for ancestor in (path, *path.parents):
            key = dir_key(ancestor)
            if key in inside:
                where = "makad's data directory" if key == data else "the user-level memory's memory/ folder"
                how = "is" if ancestor is path else "is inside"
                return f"this folder {how} {where}: the daemon's own files are no workspace"
    memory = dir_key(path / MEMORY_DIR)
    if memory is not None and memory in {data, user, user_memory}:
        return (
            "this folder's memory/ is makad's data directory or the user-level memory: the "
            "daemon's own files are no workspace"
        )
    owner = _memory_folder_owner(path)
    if owner is not None:
        # A client started inside memory/ would otherwise get a memory/memory/ of its own.
        return (
            f"this folder is (or is inside) the memory/ folder of the workspace {_echo(str(owner))}: "
            "name that folder"
        )
    return None


def _memory_folder_owner(path: Path) -> Path | None:
    """The workspace whose ``memory/`` folder ``path`` (resolved) is or is inside: the
    nearest folder named memory holding a workspace id file."""
    for folder in (path, *path.parents):
        if folder.name != MEMORY_DIR:
            continue
        try:
            if stat_mod.S_ISREG(os.lstat(folder / identity.ID_FILE).st_mode):
                return folder.parent
        except (OSError, ValueError):
            continue
    return None


@dataclass(frozen=True)
class Notice:
    """Something the user should hear about a workspace (read_state and status warnings)."""

    kind: str  # "new_workspace" | "ledger_reset" | "ledger_read_only"
    message: str
    at: int


@dataclass
class Workspace:
    """Per-workspace runtime state; all mutation happens under ``lock``."""

    path: Path
    id: str
    data_dir: Path
    ledger: Ledger
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    memory: TrackedFile = field(default_factory=lambda: TrackedFile(MEMORY_FILE))
    pending: TrackedFile = field(default_factory=lambda: TrackedFile(PENDING_FILE))
    revision: int | None = None
    # Each subscribed connection, with the names it subscribed under (its notifications
    # carry the name: a client matches them to the subscription as it spelled it).
    subscribers: dict[Peer, set[str]] = field(default_factory=dict)
    watching: bool = False
    state: WorkspaceState = field(default_factory=WorkspaceState)
    # The id in memory/.maka-id the data directory is bound to (None: not bound yet).
    identity: str | None = None
    # identity.stamp of the directory when it was last checked.
    stamp: Stamp | None = None
    notices: list[Notice] = field(default_factory=list)
    # "user": the user-level memory (workspace "@user"): no sessions, its entries shown
    # in every workspace that allows it (makad.core.levels).
    level: Level = "workspace"
    # The ids of MEMORY.md's hand-typed entries (set up with the workspace).
    typed_ids: TypedIds = field(init=False, repr=False)
    # When a call last used it (``time.monotonic``), and whether the registry has let go
    # of it (``WorkspaceRegistry.release``; taken back by the next call that names it).
    last_used: float = field(default_factory=time.monotonic)
    released: bool = False
    # The memory files' hashes (``short_hash``) when the daemon last stopped watching
    # them: kept by the registry when it let go of this folder's workspace, else stored
    # with the revision (None: neither). A version read first that differs was saved
    # meanwhile: a change (``bump``).
    hashes_unwatched: dict[str, int | None] | None = None

    def __post_init__(self) -> None:
        self.typed_ids = TypedIds(self.ledger)
        # MEMORY.md just parsed, as this level reads it: hand-typed entries keep their ids,
        # and at the user level an entry naming no scope is global. Never a bound method
        # of the workspace: the file would hold it in a cycle, and a released workspace
        # must be freed as soon as nothing uses it, not at the next garbage collection.
        # (The level is asked at each parse: the registry sets it after construction.)
        typed, this = self.typed_ids, weakref.ref(self)

        def identify(doc: fmt.MemoryDocument) -> fmt.MemoryDocument:
            doc = typed.identify(doc)
            ws = this()
            return read_at_user_level(doc) if ws is not None and ws.level == "user" else doc

        self.memory.identify = identify

    @property
    def name(self) -> str:
        """How clients address it: "@user" for the user level, else its path."""
        return USER_LEVEL if self.level == "user" else str(self.path)

    # Computed once: ``path`` never changes, and these are on the path of every read.
    @cached_property
    def memory_dir(self) -> Path:
        return self.path / MEMORY_DIR

    @cached_property
    def memory_path(self) -> Path:
        return self.memory_dir / MEMORY_FILE

    @cached_property
    def pending_path(self) -> Path:
        return self.memory_dir / PENDING_FILE

    # The same as strings: what the per-request stat checks take.
    @cached_property
    def memory_dir_name(self) -> str:
        return os.fspath(self.memory_dir)

    @cached_property
    def memory_files(self) -> tuple[tuple[TrackedFile, str], tuple[TrackedFile, str]]:
        """(MEMORY.md, PENDING.md), each with its path as a string."""
        return ((self.memory, os.fspath(self.memory_path)), (self.pending, os.fspath(self.pending_path)))

    @property
    def backups_dir(self) -> Path:
        return self.data_dir / "backups"

    def warnings(self) -> list[Notice]:
        """Identity changes and ledger resets seen since this workspace was opened, and a
        ledger open read-only for want of disk space."""
        resets = [Notice("ledger_reset", _reset_message(reset), reset.at) for reset in self.ledger.resets]
        read_only_since = self.ledger.read_only_since
        if read_only_since is not None:
            resets.append(Notice("ledger_read_only", _READ_ONLY_MESSAGE, read_only_since))
        return [*self.notices, *resets]


_READ_ONLY_MESSAGE = (
    "the disk of makad's data directory is full: this workspace's ledger is open read-only, "
    "so reads are served as the ledger was and every write fails with disk_full (nothing is "
    "written, MEMORY.md included) until space is freed"
)


def _reset_message(reset: LedgerReset) -> str:
    if reset.versions is None:
        return (
            f"the ledger was corrupt: it was moved aside (kept as {reset.moved_to}) and a fresh "
            "one started; sessions, history and settings start over, privacy switches at their "
            "defaults"
        )
    found, supported = reset.versions
    return (
        f"the ledger was written by a newer makad (schema {found}; this makad reads up to "
        f"{supported}): it is not damaged and was moved aside unchanged (kept as "
        f"{reset.moved_to}), and a fresh one started; sessions, history and settings start over "
        "here, privacy switches at their defaults. To get them back, run the newer makad and "
        f"rename {reset.moved_to} (and its -wal and -shm, if any) back to {LEDGER_FILE}"
    )


class WorkspaceRegistry:
    """Opens each workspace once and hands out the same state to every service. Its
    ledger's connections are closed while others are used more recently, past
    ``max_open`` (``makad.store.ledger.pool``), and opened again by its next call.

    An idle workspace can be let go of (``release``: ``makad.service.idle_workspaces``
    decides which): the registry then holds it weakly only. While anything still holds
    it (a call in flight, a background task) every lookup finds that same object, so a
    folder never has two states at once; once nothing does, it is freed, and the next
    call opens the folder again as the daemon's start would.

    Every call re-checks that the spelling still names the same directory, on a
    worker thread (a slow or hung disk under one workspace then holds up only the
    calls that name it, never the event loop every client shares). A
    bound workspace needs one ``stat`` of its id file through the spelling: a
    symlink repointed, a folder deleted and made again or an id changed all give
    another inode (or none). A workspace not bound yet is checked by its stamp (the
    directory's dev/ino too: two stats). When the check fails, the path is resolved
    again and the workspace re-opened (``makad.store.identity``).
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        faults: Faults = UNARMED,  # armed by tests only: handed to each ledger
        user_dir: Path | None = None,
        max_open: int = DEFAULT_MAX_OPEN_LEDGERS,
    ) -> None:
        self._data_dir = data_dir
        self._faults = faults
        # At most this many workspaces keep their ledger open (``makad.store.ledger.pool``).
        self.ledgers = LedgerPool(max_open)
        # The user-level memory's folder (workspace "@user").
        self._user_dir = user_dir if user_dir is not None else data_dir / "user"
        self._open: dict[Path, Workspace] = {}
        # Released workspaces still held elsewhere (``release``).
        self._released: weakref.WeakValueDictionary[Path, Workspace] = weakref.WeakValueDictionary()
        # Released folders' memory file hashes by workspace id, oldest first
        # (``hashes_unwatched``).
        self._hashes: OrderedDict[str, dict[str, int | None]] = OrderedDict()
        # The spellings clients used, each with its workspace (held weakly: a released one
        # is not kept alive by its spellings) and its id file's path.
        self._by_raw: dict[str, tuple[weakref.ref[Workspace], str]] = {}
        self._lock = anyio.Lock()
        # The spelling checks, one run shared by the calls that ask for the same at once.
        self._checks = SharedChecks()
        # Every revision of every workspace here comes from it (unique across them all).
        self.clock = RevisionClock(data_dir)

    async def known(self, raw_path: str) -> Workspace | None:
        """The workspace this spelling named last time, if it still names it (the stat
        check above, on a worker thread): None means ``get`` must look."""
        found = await self.known_and(raw_path, _nothing)
        return None if found is None else found[0]

    async def known_and(self, raw_path: str, also: Callable[[Workspace], T]) -> tuple[Workspace, T] | None:
        """``known``, with ``also(workspace)`` run in the same worker-thread hop when the
        spelling still names it (one hop for the check and the caller's own stats). Calls
        asking with the same spelling and ``also`` at once share that hop, one that starts
        after each of them asked (``makad.store.shared_checks``): ``also`` only reads."""
        known = self._spelling(raw_path)
        if known is None or known[0].stamp is None:
            return None
        cached, id_file = known

        def check() -> tuple[Workspace, T] | None:
            return (cached, also(cached)) if self._still_named(raw_path, cached, id_file) else None

        # ``cached`` by identity: the spelling may name another workspace by the next call.
        return await self._checks.run((raw_path, id(cached), id_file, also), check)

    def known_now(self, raw_path: str) -> Workspace | None:
        """``known``'s answer for a caller already on a worker thread (blocking): another
        spelling's check in that caller's hop."""
        known = self._spelling(raw_path)
        if known is None or known[0].stamp is None:
            return None
        return known[0] if self._still_named(raw_path, *known) else None

    def _spelling(self, raw_path: str) -> tuple[Workspace, str] | None:
        """The workspace this spelling named last time (if it is alive) and its id file."""
        known = self._by_raw.get(raw_path)
        if known is None:
            return None
        workspace = known[0]()
        return None if workspace is None else (workspace, known[1])

    def _still_named(self, raw_path: str, cached: Workspace, id_file: str) -> bool:
        """Whether ``raw_path`` still names ``cached`` (blocking: one or two ``stat``)."""
        stamp = cached.stamp
        if stamp is None:
            return False
        if cached.identity is not None:
            found = identity.id_stamp(id_file)
            return found is not None and found == stamp[2:]
        spelling = str(self._user_dir) if raw_path == USER_LEVEL else raw_path
        return identity.stamp(spelling, id_file) == stamp

    async def get(self, raw_path: str) -> Workspace:
        cached = await self.known(raw_path)
        if cached is not None:
            self.keep(cached)
            return cached
        known = self._spelling(raw_path)
        user = raw_path == USER_LEVEL
        spelling = str(self._user_dir) if user else raw_path
        path = await anyio.to_thread.run_sync(self._resolve, spelling, user)
        async with self._lock:
            try:
                workspace = await anyio.to_thread.run_sync(self._current, path)
            except OSError as exc:
                raise _open_failure(exc) from exc
            if user:
                workspace.level = "user"
                if known is None or known[0] is not workspace:
                    await anyio.to_thread.run_sync(self._note_user_folder, workspace)
        if raw_path in self._by_raw or len(self._by_raw) < MAX_CACHED_SPELLINGS or self._forget_spellings():
            self._by_raw[raw_path] = (weakref.ref(workspace), identity.id_path(spelling))
        return workspace

    def _forget_spellings(self) -> bool:
        """Drop the spellings of workspaces that were released and freed; whether there is
        room for another now. (The user level's is kept: ``user_level_known``.)"""
        for raw, (ref, _) in list(self._by_raw.items()):
            if ref() is None and raw != USER_LEVEL:
                del self._by_raw[raw]
        return len(self._by_raw) < MAX_CACHED_SPELLINGS

    def _current(self, path: Path) -> Workspace:
        """The workspace open at ``path``, re-opened when its directory is no longer the
        one it was (blocking; under the registry's lock)."""
        workspace = self._open.get(path)
        if workspace is None:
            workspace = self._released.get(path)
            if workspace is not None:
                self.keep(workspace)
        if workspace is None or identity.stamp(path) != workspace.stamp:
            workspace = self._reopen(path, workspace)
        return workspace

    def keep(self, workspace: Workspace) -> None:
        """``workspace`` is in use: hold it again if it was released (a call found it
        through a spelling, or at its path, while something else still held it)."""
        workspace.last_used = time.monotonic()
        if workspace.released:
            workspace.released = False
            self._open.setdefault(workspace.path, workspace)

    async def release(
        self, candidates: Iterable[Workspace], still: Callable[[Workspace], bool]
    ) -> list[Workspace]:
        """Let go of each candidate that ``still`` finds idle (asked again under the
        registry's lock, so no open of the folder is under way): the registry holds it
        weakly from now on (see the class doc). Its memory files' hashes are kept (at most
        ``MAX_REMEMBERED_FILES`` folders'), so a version first read by the next state of
        the folder that differs from them counts as a change. Returns those released."""
        released: list[Workspace] = []
        async with self._lock:
            for workspace in candidates:
                if self._open.get(workspace.path) is not workspace or not still(workspace):
                    continue
                del self._open[workspace.path]
                workspace.released = True
                self._released[workspace.path] = workspace
                self._remember_hashes(workspace)
                released.append(workspace)
        return released

    def _remember_hashes(self, workspace: Workspace) -> None:
        files = {
            name: short_hash(tracked.sha256)
            for name, tracked in (("memory", workspace.memory), ("pending", workspace.pending))
            if tracked.loaded
        }
        if workspace.hashes_unwatched:  # never read since it was opened again: still those
            files = {**workspace.hashes_unwatched, **files}
        if not files:
            return
        self._hashes[workspace.id] = files
        self._hashes.move_to_end(workspace.id)
        while len(self._hashes) > MAX_REMEMBERED_FILES:
            self._hashes.popitem(last=False)

    def named(self, raw_path: str) -> Workspace | None:
        """The workspace this spelling named at its last call (it may name another now)."""
        known = self._spelling(raw_path)
        return None if known is None else known[0]

    def _note_user_folder(self, workspace: Workspace) -> None:
        """Say so when "@user" is not the folder it was (blocking): ``--user-memory`` changed,
        or its folder repointed (a symlink) or moved. The data directory remembers which
        folder the user level was (its workspace id: the path's hash); a folder replaced
        at the same path already says so (``_open_workspace``)."""
        record = self._data_dir / USER_LEVEL_FILE
        try:
            found = read_if_regular(record, 64)
        except OSError:
            found = None
        before = None if found is None else found.decode("ascii", "replace").strip()
        if before == workspace.id:
            return
        if before and not any(n.kind == "new_workspace" for n in workspace.notices):
            workspace.notices.append(
                Notice(
                    "new_workspace",
                    "the user-level memory is not the folder makad used before (--user-memory "
                    "changed, or its folder was moved, replaced or repointed): its entries and "
                    "settings are this folder's, and the previous folder is left as it was",
                    now_ms(),
                )
            )
        with contextlib.suppress(OSError):  # said again at the next start, at worst
            write_private(record, f"{workspace.id}\n".encode("ascii"))

    @property
    def user_dir(self) -> Path:
        return self._user_dir

    def user_level_known(self) -> bool:
        """Whether "@user" was opened already (its folder exists: it was made then)."""
        return USER_LEVEL in self._by_raw

    def _resolve(self, spelling: str, user: bool) -> Path:
        """The workspace's canonical path (blocking). The user level's folder is made when
        missing, and is reachable only as "@user": two names for one folder would be two
        locks on one file."""
        if user:
            try:
                make_dirs(self._user_dir)
            except OSError as exc:
                label = "the user-level memory folder"
                raise generalize(exc, self._user_dir.name, "made", label=label) from exc
            ensure_memory_dir(self._user_dir / MEMORY_DIR)
            return resolve_workspace(spelling)
        path = resolve_workspace(spelling)
        refused = reserved_folder(path, self._data_dir, self._user_dir)
        if refused is not None:
            raise InvalidWorkspace(refused, reason="reserved")
        return path

    def _reopen(self, path: Path, previous: Workspace | None) -> Workspace:
        """The workspace at ``path`` now: ``previous`` when it is still the same directory."""
        now_stamp = identity.stamp(path)
        found = identity.read_id(path / MEMORY_DIR)
        if (
            previous is not None
            and found == previous.identity
            and (found is not None or _same_directory(previous.stamp, now_stamp))
        ):
            previous.stamp = now_stamp  # e.g. the id file touched, or written by the binder
            return previous
        if (
            previous is not None
            and previous.identity is None
            and found is not None
            and _same_directory(previous.stamp, now_stamp)
            and identity.read_binding(previous.data_dir) in (None, found)
        ):
            # An unbound folder gained an id: its first write is binding it (on a worker
            # thread, the id written and the state not told yet), or someone wrote one,
            # which that write adopts. Still the same workspace: re-opening it would close
            # the ledger under the calls in flight and give the folder two states.
            previous.identity = found
            previous.stamp = now_stamp
            return previous
        workspace = self._open_workspace(path, found, previous)
        self._open[path] = workspace
        return workspace

    def _open_workspace(self, path: Path, found: str | None, previous: Workspace | None) -> Workspace:
        ws_id = workspace_id(path)
        data_dir = self._data_dir / "workspaces" / ws_id
        if previous is not None:
            previous.ledger.close()
        bound = identity.read_binding(data_dir)
        notices: list[Notice] = []
        if bound is not None and bound != found:
            identity.retire(self._data_dir, data_dir)
            notices.append(
                Notice(
                    "new_workspace",
                    "this folder is not the one makad knew at this path (its memory/.maka-id is "
                    "missing or different): it is a new workspace, its settings start at their "
                    "defaults (privacy switches off) and the previous workspace's data is kept "
                    "aside",
                    now_ms(),
                )
            )
        if found is None and _is_real_directory(path / MEMORY_DIR):
            found = _mint_quietly(path / MEMORY_DIR)
        make_dirs(data_dir)
        _write_marker(data_dir / "workspace-path", path)
        if found is not None and identity.read_binding(data_dir) != found:
            identity.write_binding(data_dir, found)
        binder = None if found is not None else _Binder(path, data_dir)
        ledger = Ledger(
            data_dir / LEDGER_FILE, before_first_write=binder, faults=self._faults, pool=self.ledgers
        )
        workspace = Workspace(
            path=path,
            id=ws_id,
            data_dir=data_dir,
            ledger=ledger,
            identity=found,
            stamp=identity.stamp(path),
            notices=notices,
        )
        if binder is not None:
            binder.workspace = workspace
        else:  # an unbound folder was never written: no session
            workspace.state.attention_work_left = _attention_work_left(ledger)
        if previous is not None:  # a subscription names the path: it carries over
            workspace.subscribers = previous.subscribers
            workspace.state.close_hooked = previous.state.close_hooked
        else:
            workspace.hashes_unwatched = self._hashes.pop(ws_id, None)
        return workspace

    def all(self) -> list[Workspace]:
        """The workspaces held (the released ones not among them)."""
        return list(self._open.values())

    def close(self) -> None:
        for workspace in [*self._open.values(), *self._released.values()]:
            workspace.ledger.close()
        self._open.clear()
        self.clock.close()


LEDGER_FILE = "ledger.sqlite3"


class _Binder:
    """Binds a workspace's data directory to its folder before the first ledger write:
    creates ``memory/`` (mode 0700) and its id file if needed and records the id."""

    def __init__(self, path: Path, data_dir: Path) -> None:
        self.path = path
        self.data_dir = data_dir
        # Held weakly: the workspace holds its ledger, which holds this (no cycle, so a
        # released workspace is freed as soon as nothing uses it).
        self._workspace: weakref.ref[Workspace] | None = None

    @property
    def workspace(self) -> Workspace | None:
        return None if self._workspace is None else self._workspace()

    @workspace.setter
    def workspace(self, workspace: Workspace | None) -> None:
        self._workspace = None if workspace is None else weakref.ref(workspace)

    def __call__(self) -> bool:
        memory_dir = self.path / MEMORY_DIR
        workspace = self.workspace
        try:
            ensure_memory_dir(memory_dir)
            found = identity.read_id(memory_dir) or identity.write_id(memory_dir)
            if workspace is not None:
                workspace.identity = found
            identity.write_binding(self.data_dir, found)
        except (OSError, MakadError):
            return False  # a read-only workspace stays unbound; tried again at the next write
        if workspace is not None:
            workspace.stamp = identity.stamp(self.path)
        return True


def _write_marker(marker: Path, path: Path) -> None:
    """The workspace's path, for people browsing the data dir (redacted like any text);
    written once, never through whatever is already there."""
    try:
        fd = create_private(marker)
    except FileExistsError:
        return
    try:
        write_all(fd, redact(str(path)).text.encode("utf-8", "surrogateescape"))
    finally:
        os.close(fd)


def short_hash(sha256: str | None) -> int | None:
    """A file's sha256 (hex) cut to 64 bits, as released workspaces' files are remembered."""
    return None if sha256 is None else int(sha256[:16], 16)


def _nothing(workspace: Workspace) -> None:
    return None


def _same_directory(before: Stamp | None, now: Stamp | None) -> bool:
    return before is not None and now is not None and before[:2] == now[:2]


def _attention_work_left(ledger: Ledger) -> bool:
    """``attention_store.work_left``, True when it cannot be told (the keeper looks)."""
    try:
        return attention_store.work_left(ledger)
    except (MakadError, sqlite3.Error):
        return True


def _is_real_directory(path: Path) -> bool:
    try:
        return stat_mod.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _mint_quietly(memory_dir: Path) -> str | None:
    try:
        return identity.write_id(memory_dir)
    except OSError:
        return None  # read-only: bound later, if ever


def _open_failure(exc: OSError) -> IOFailure:
    """What a workspace that could not be opened (its identity, its folder in the data
    directory) answers: a full disk and a refusal said as such, never a path."""
    code = exc.errno or 0
    if code in DISK_FULL_ERRNOS:
        return IOFailure("the disk is full: the workspace's state could not be written", reason="disk_full")
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return IOFailure(
            f"the workspace could not be opened: its data directory refuses it ({os.strerror(code)})",
            reason="permission_denied",
        )
    return IOFailure(
        "the workspace could not be opened: its identity or data directory is unreadable", reason="io_error"
    )

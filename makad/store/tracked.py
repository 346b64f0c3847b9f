"""What the daemon knows of one memory file: the version on disk and the last few before it.

``refresh`` re-reads only when the file's (inode, size, mtime, ctime) changed, and tells
whether its bytes differ from what the daemon last read or wrote: that is how a
user's edit is told apart from the daemon's own write (by content hash). A
changed file is read once it has stopped changing (``file_swap.settled_stat``).

Size and mtime alone are not enough: `rsync --inplace -t`, `cp -p`, `touch -r` and sync
tools rewrite a file in place and put its mtime back. They cannot put back the ctime,
which any write or utime moves to the kernel's clock, and the inode stays the file's.
That clock ticks coarsely on some systems (milliseconds), so a version read less than
``RACY_NS`` after its ctime might share it with a change made right after the read: such
a version is not trusted by its stat (``trusted``) and is read again, and compared by
content, at the next check (as git does with a racily clean index entry).

``history`` keeps the last ``HISTORY`` versions (each its entry fingerprints and
when it appeared; the last two also parsed), the daemon's own and the user's saves alike: a save is merged
against them (``makad.core.save_merge``) to tell a buffer that predates a daemon
write from a deliberate deletion.
"""

from __future__ import annotations

import dataclasses
import os
import stat as stat_mod
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from makad.core import memory_format as fmt
from makad.core.save_merge import KnownVersion, known_version, without_doc
from makad.errors import InvalidWorkspace
from makad.store.file_swap import DEFAULT_WAITS, Replaced, SaveWaits, Signature, signature_of
from makad.store.memory_files import check_not_symlink, lstat_memory_file, read_memory_file

HISTORY: Final = 16
# A version whose ctime was less than this old when it was read is read again at the next
# check: a later change could share its ctime (coarse kernel clocks tick every 1-10 ms).
RACY_NS: Final = 50_000_000
# Versions that keep their parsed document: the latest, and the one before it (the
# latest again when a merge's write is abandoned).
DOCS_KEPT: Final = 2


def _as_parsed(doc: fmt.MemoryDocument) -> fmt.MemoryDocument:
    return doc


@dataclass
class TrackedFile:
    name: str
    signature: Signature | None = None
    sha256: str | None = None
    text: str | None = None
    doc: fmt.MemoryDocument = field(default_factory=fmt.MemoryDocument)
    # ``text`` as ``fmt.parse`` read it (``doc`` before ``identify``): the next version is
    # parsed against it, each section it shares read once (``fmt.parse``'s ``earlier``).
    parsed: fmt.MemoryDocument = field(default_factory=fmt.MemoryDocument, repr=False)
    missing: bool = True
    too_large: bool = False
    size: int = 0
    loaded: bool = False
    # When the version on disk was written (its mtime; 0 when missing).
    mtime_ns: int = 0
    # Earliest createdAt + decayTtlMs among active entries (decay is due after it).
    next_expiry: int | None = None
    history: deque[KnownVersion] = field(default_factory=lambda: deque(maxlen=HISTORY))
    # What the daemon knew before the last re-read (``restore`` goes back to it).
    before: TrackedFile | None = field(default=None, repr=False)
    # Applied to each version parsed (read or written): MEMORY.md's gives the entries
    # typed by hand the ids they keep across edits (``makad.store.typed_ids``).
    identify: Callable[[fmt.MemoryDocument], fmt.MemoryDocument] = field(default=_as_parsed, repr=False)
    # Whether ``signature`` alone tells this version from any later one (see RACY_NS).
    trusted: bool = True

    def _derive(self) -> None:
        expiries = [
            e.created_at + e.decay_ttl_ms
            for e in fmt.entries(self.doc)
            if e.status == "active" and e.decay_ttl_ms  # None or 0: never decays
        ]
        self.next_expiry = min(expiries) if expiries else None

    def _record(self, visible_ns: int, *, by_daemon: bool = False) -> None:
        if self.too_large:
            self.history.clear()  # nothing to merge against while it is unreadable
        else:
            self.history.append(known_version(self.doc, visible_ns, by_daemon=by_daemon))
            if len(self.history) > DOCS_KEPT:  # older versions keep fingerprints only
                self.history[-DOCS_KEPT - 1] = without_doc(self.history[-DOCS_KEPT - 1])

    def remember(self, text: str, written: Replaced, doc: fmt.MemoryDocument) -> None:
        """Record the daemon's own write so it is not mistaken for a user edit (``doc``:
        ``text`` parsed, off the event loop)."""
        self.text = text
        self.sha256 = written.sha256
        self.parsed = doc
        self.doc = self.identify(doc)
        self._derive()
        self.missing = False
        self.too_large = False
        self.size = written.signature[1]
        self.signature = written.signature
        self.mtime_ns = written.signature[2]
        self.trusted = _trusted(written.signature)
        self.loaded = True
        self._record(written.visible_ns, by_daemon=True)

    def _snapshot(self) -> TrackedFile:
        return dataclasses.replace(self, history=deque(self.history, maxlen=HISTORY), before=None)

    def restore(self, earlier: TrackedFile) -> None:
        """Back to ``earlier``; the next refresh reads the file again."""
        for spec in dataclasses.fields(self):
            setattr(self, spec.name, getattr(earlier, spec.name))
        self.signature = None

    def forget_signature(self) -> None:
        """Make the next refresh read the file whatever its signature (a save put back)."""
        self.signature = None

    def unchanged(self, path: Path) -> bool:
        """Whether the file on disk is surely the one last read or written: loaded, its
        folder not a symlink, and its (inode, size, mtime) what ``refresh`` last saw.
        Stats only, no read; any doubt is False (``refresh`` then looks properly)."""
        name = os.fspath(path)
        return unchanged_in(os.path.dirname(name), ((self, name),))

    def _matches(self, name: str) -> bool:
        """``unchanged`` for a file whose folder is known to be no symlink."""
        if not self.loaded:
            return False
        try:
            st = os.lstat(name)
        except FileNotFoundError:
            return self.missing
        except OSError:
            return False
        if self.missing or not self.trusted or stat_mod.S_ISLNK(st.st_mode):
            return False
        return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) == self.signature

    def looks_current(self, path: Path) -> bool:
        """Whether the file on disk is still the version loaded (one ``lstat``: cheap enough
        for the event loop). False means: ``refresh`` (in a worker thread) to know."""
        try:
            st = path.lstat()
        except FileNotFoundError:
            return self.loaded and self.missing
        except OSError:
            return False
        return (
            self.loaded
            and self.trusted
            and (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) == self.signature
        )

    def refresh(self, path: Path, max_bytes: int, waits: SaveWaits = DEFAULT_WAITS) -> bool:
        """Re-read the file if it changed on disk; True when its content differs from before
        (``waits``: how long a file found emptied or gone is given to fill or come back)."""
        check_not_symlink(path.parent, "memory directory")
        st = lstat_memory_file(path)
        if st is not None and stat_mod.S_ISLNK(st.st_mode):
            raise InvalidWorkspace(
                "the memory file is a symlink; makad refuses to follow it", reason="symlink"
            )
        if st is None and self.loaded and self.missing:
            return False
        if st is not None and self.loaded and self.trusted and signature_of(st) == self.signature:
            return False
        self.before = self._snapshot()
        read = read_memory_file(
            path,
            max_bytes,
            was_empty=self.missing or self.size == 0,
            existed=self.loaded and not self.missing,
            waits=waits,
        )
        if self.loaded and read.sha256 is not None and read.sha256 == self.sha256 and not self.too_large:
            # The same bytes (touched, or checked again): keep the text and its parse.
            self.signature = read.signature
            self.mtime_ns = read.mtime_ns
            self.trusted = read.signature is None or _trusted(read.signature)
            return False
        before = (self.sha256, self.too_large, self.missing)
        self.signature = read.signature
        self.missing = read.missing
        self.too_large = read.too_large
        self.size = read.size
        self.sha256 = read.sha256
        self.text = read.text
        self.mtime_ns = read.mtime_ns
        self.trusted = read.signature is None or _trusted(read.signature)
        self.parsed = fmt.parse(read.text, self.parsed) if read.text is not None else fmt.MemoryDocument()
        self.doc = self.identify(self.parsed)
        self._derive()
        was_loaded = self.loaded
        self.loaded = True
        changed = was_loaded and before != (self.sha256, self.too_large, self.missing)
        if changed or not was_loaded:
            # A missing file has no mtime: 0 keeps it a possible base of any save.
            self._record(read.mtime_ns)
        return changed


def _trusted(signature: Signature) -> bool:
    """Whether a version just read is told from any later one by its signature: its ctime
    was at least RACY_NS old (a later change cannot share it)."""
    return time.time_ns() - signature[3] >= RACY_NS


def unchanged_in(folder: str, files: tuple[tuple[TrackedFile, str], ...]) -> bool:
    """``TrackedFile.unchanged`` for files of one folder (paths as strings): the folder
    is looked at once (one ``lstat`` for all of them, then one per file). A file known
    to be missing is looked for with ``access`` once a file of the folder was seen: no
    stat result to build, no FileNotFoundError raised, on every poll of a workspace
    without a PENDING.md (a present file's lstat passed, so the folder is searchable and
    ``access`` failing means it is not there)."""
    for tracked, _ in files:
        if not tracked.loaded:
            return False
    try:
        if stat_mod.S_ISLNK(os.lstat(folder).st_mode):
            return False
    except FileNotFoundError:
        return all(tracked.missing for tracked, _ in files)
    except OSError:
        return False
    seen = False
    for tracked, name in files:
        if not tracked.missing:
            if not tracked._matches(name):
                return False
            seen = True
    for tracked, name in files:
        if tracked.missing:
            if seen:
                if os.access(name, os.F_OK, follow_symlinks=False):
                    return False
            elif not tracked._matches(name):
                return False
    return True

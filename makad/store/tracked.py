"""What the daemon last saw of one memory file, refreshed cheaply by stat signature.

``refresh`` re-reads only when the file's (inode, size, mtime) changed, and tells
whether its bytes differ from what the daemon last read or wrote: that is how a
user's edit is told apart from the daemon's own write (by content hash).
"""

from __future__ import annotations

import os
import stat as stat_mod
from dataclasses import dataclass, field
from pathlib import Path

from makad.core import memory_format as fmt
from makad.errors import InvalidWorkspace
from makad.store.memory_files import check_not_symlink, read_memory_file

Signature = tuple[int, int, int]


@dataclass
class TrackedFile:
    name: str
    signature: Signature | None = None
    sha256: str | None = None
    text: str | None = None
    doc: fmt.MemoryDocument = field(default_factory=fmt.MemoryDocument)
    missing: bool = True
    too_large: bool = False
    size: int = 0
    loaded: bool = False
    # Earliest createdAt + decayTtlMs among active entries (decay is due after it).
    next_expiry: int | None = None

    def _derive(self) -> None:
        expiries = [
            e.created_at + e.decay_ttl_ms
            for e in fmt.entries(self.doc)
            if e.status == "active" and e.decay_ttl_ms is not None
        ]
        self.next_expiry = min(expiries) if expiries else None

    def remember(self, path: Path, text: str, sha256: str) -> None:
        """Record the daemon's own write so it is not mistaken for a user edit."""
        self.text = text
        self.sha256 = sha256
        self.doc = fmt.parse(text)
        self._derive()
        self.missing = False
        self.too_large = False
        self.size = len(text.encode("utf-8", "surrogateescape"))
        self.signature = _signature(path)
        self.loaded = True

    def unchanged(self, path: Path) -> bool:
        """Whether the file on disk is surely the one last read or written: loaded, its
        folder not a symlink, and its (inode, size, mtime) what ``refresh`` last saw.
        Stats only, no read; any doubt is False (``refresh`` then looks properly)."""
        if not self.loaded:
            return False
        name = os.fspath(path)
        try:
            if stat_mod.S_ISLNK(os.lstat(os.path.dirname(name)).st_mode):
                return False
            st = os.lstat(name)
        except FileNotFoundError:
            return self.missing
        except OSError:
            return False
        if self.missing or stat_mod.S_ISLNK(st.st_mode):
            return False
        return (st.st_ino, st.st_size, st.st_mtime_ns) == self.signature

    def refresh(self, path: Path, max_bytes: int) -> bool:
        """Re-read the file if it changed on disk; True when its content differs from before."""
        check_not_symlink(path.parent, "memory directory")
        try:
            st = path.lstat()
        except FileNotFoundError:
            changed = self.loaded and not self.missing
            self.signature, self.sha256, self.text = None, None, None
            self.doc = fmt.MemoryDocument()
            self.next_expiry = None
            self.missing, self.too_large, self.size, self.loaded = True, False, 0, True
            return changed
        if stat_mod.S_ISLNK(st.st_mode):
            raise InvalidWorkspace(
                "the memory file is a symlink; makad refuses to follow it", reason="symlink"
            )
        signature = (st.st_ino, st.st_size, st.st_mtime_ns)
        if self.loaded and signature == self.signature:
            return False
        read = read_memory_file(path, max_bytes)
        before = (self.sha256, self.too_large, self.missing)
        self.signature = signature
        self.missing = read.missing
        self.too_large = read.too_large
        self.size = read.size
        self.sha256 = read.sha256
        self.text = read.text
        self.doc = fmt.parse(read.text) if read.text is not None else fmt.MemoryDocument()
        self._derive()
        was_loaded = self.loaded
        self.loaded = True
        return was_loaded and before != (self.sha256, self.too_large, self.missing)


def _signature(path: Path) -> Signature | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)

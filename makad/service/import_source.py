"""Reading what ``import_memories`` is pointed at: a file or a memory directory, bounded.

The walk of a directory is bounded before any file is read: a directory with more
than ``MAX_DIR_ENTRIES`` entries below it (``/``, a home directory, a source tree)
is not a memory directory and is refused at once, and the sizes of its Markdown
files are summed from ``stat`` before one of them is opened. A file is read with a
bound too, because some (``/proc``) report a size of 0 and hold more.
"""

from __future__ import annotations

import codecs
import errno
import os
from pathlib import Path

from makad.core.undecodable import display
from makad.errors import InvalidParams, NotFound, TooLarge
from makad.private_files import NotRegularFile, read_open
from makad.store.identity import ID_FILE
from makad.store.memory_files import generalize
from makad.store.workspaces import too_long

MAX_IMPORT_BYTES = 16 * 1024 * 1024
# A Claude Code memory directory holds MEMORY.md and tens of topic files.
MAX_DIR_ENTRIES = 2_000


def read_import_source(
    path: str | None, data: str | None, own: Path | None = None
) -> tuple[str, dict[str, str] | None, str | None]:
    """(text, files of a directory import, file name) — the only file IO of an import.

    ``own``: the workspace's memory folder; importing it, or a file in it, is refused
    (``own_memory``): its entries are the workspace's already, and its PENDING.md would be
    queued as one proposal holding the whole queue."""
    if data is not None:
        if len(data.encode("utf-8", "surrogatepass")) > MAX_IMPORT_BYTES:
            raise TooLarge("import data is over 16 MiB", limit=MAX_IMPORT_BYTES)
        return data, None, None
    assert path is not None
    if not os.path.isabs(path):
        raise InvalidParams("path must be absolute", path="$.path")
    if "\0" in path:  # no file has one in its name; the system refuses to look one up
        raise InvalidParams("path holds a NUL character", path="$.path", reason="nul")
    if (why := too_long(path)) is not None:
        raise InvalidParams(f"path is too long: {why}", path="$.path", reason="too_long")
    path = str(makad_memory_file(Path(path)) or path)
    if own is not None and _inside(path, own):
        raise InvalidParams(
            "that is this workspace's own memory (its memory folder, MEMORY.md or PENDING.md): "
            "its entries are here already; import another tool's export or another "
            "workspace's MEMORY.md",
            path="$.path",
            reason="own_memory",
        )
    target = Path(path)
    if target.is_dir():
        # A name that is not UTF-8 (bytes a zip or an old file system left) is read as
        # cp1252, like such bytes in a file: it reaches proposals, replies and the ledger.
        found = {
            display(str(child.relative_to(target))): _read_bounded(child, MAX_IMPORT_BYTES, follow=False)
            for child in markdown_files(target)
        }
        return found.get("MEMORY.md", ""), found, "MEMORY.md"
    if not target.is_file():
        if os.path.exists(target):  # a FIFO, a device, a socket: there, but nothing to read
            raise _not_regular()
        raise NotFound("no file at that path", path="$.path")
    return _read_bounded(target, MAX_IMPORT_BYTES), None, target.name


def _not_regular() -> InvalidParams:
    return InvalidParams(
        "the import path is not a regular file (a FIFO, a device or a socket): name an export file "
        "or a memory directory",
        path="$.path",
        reason="not_regular_file",
    )


def makad_memory_file(target: Path) -> Path | None:
    """The MEMORY.md a folder of makad's stands for: a workspace (``target/memory/``) or
    its memory folder, known by the PENDING.md or ``.maka-id`` beside MEMORY.md. Read as a
    directory of notes, its MEMORY.md and PENDING.md would each be queued as one proposal
    holding the whole file; read as the file, its entries are. None for any other path (a
    Claude Code memory directory has neither file)."""
    if not target.is_dir():
        return None
    for folder in (target / "memory", target):
        memory = folder / "MEMORY.md"
        beside = any(os.path.lexists(folder / name) for name in ("PENDING.md", ID_FILE))
        if beside and memory.is_file() and not memory.is_symlink():
            return memory
    return None


def markdown_files(root: Path) -> list[Path]:
    """The ``.md`` files under ``root`` (symlinks not followed), in path order; refused
    with ``too_large`` when the tree is too big to be a memory directory or its files
    are over the import cap together — before any of them is read."""
    files: list[Path] = []
    seen = 0
    total = 0
    pending = [root]
    while pending:
        try:
            listing = os.scandir(pending.pop())
        except OSError:  # an unreadable subdirectory: nothing to import from it
            continue
        with listing:
            for entry in listing:
                seen += 1
                if seen > MAX_DIR_ENTRIES:
                    raise TooLarge(
                        f"the directory holds more than {MAX_DIR_ENTRIES} entries: "
                        "point the import at a memory directory or a file",
                        limit=MAX_DIR_ENTRIES,
                        path="$.path",
                    )
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                elif entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
                    files.append(Path(entry.path))
    if total > MAX_IMPORT_BYTES:
        raise TooLarge(
            "the directory's Markdown files are over 16 MiB together", limit=MAX_IMPORT_BYTES, path="$.path"
        )
    return sorted(files)


def _read_bounded(path: Path, limit: int, follow: bool = True) -> str:
    """``follow=False``: a file of a directory walk, which skipped symlinks; one swapped
    for a symlink since is refused, not followed out of the directory."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    name = display(path.name)  # errors name it: a name that is not UTF-8 read as cp1252
    try:
        # A FIFO or a device (renamed in since the walk) is refused, never waited on.
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise NotFound("no file at that path", path="$.path") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise InvalidParams(
                f"{name} became a symlink while the directory was read", path="$.path"
            ) from None
        # not ours to read, a path through a file …
        raise generalize(exc, name, "read") from None
    try:
        raw = read_open(fd, path, limit + 1)
    except NotRegularFile:
        raise _not_regular() from None
    except OSError as exc:  # a read the system fails (EIO; EAGAIN from a /proc file that waits)
        raise generalize(exc, name, "read") from None
    finally:
        os.close(fd)
    if len(raw) > limit:
        raise TooLarge("import file is over 16 MiB", limit=limit, path="$.path")
    wide = _wide_unicode(raw)
    if wide is not None:
        return wide
    # Bytes that are not UTF-8 read as cp1252, like memory files.
    return display(raw.decode("utf-8", "surrogateescape"))


# UTF-32's marks first: UTF-32 LE's begins with UTF-16 LE's.
_WIDE_MARKS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _wide_unicode(raw: bytes) -> str | None:
    """The text of a UTF-16 or UTF-32 file that starts with its byte order mark (Windows
    Notepad's "Unicode"), without the mark; None for any other file, and for one that is
    not valid in the encoding its mark names (refused as binary then: it holds NULs)."""
    for mark, encoding in _WIDE_MARKS:
        if raw.startswith(mark):
            try:
                return raw.decode(encoding)
            except UnicodeDecodeError:
                return None
    return None


def _inside(path: str, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or its MEMORY.md or PENDING.md (symlinks resolved)."""
    target, home = os.path.realpath(path), os.path.realpath(folder)
    return target in (home, os.path.join(home, "MEMORY.md"), os.path.join(home, "PENDING.md"))

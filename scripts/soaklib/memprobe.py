"""makad with a memory probe: ``python -m soaklib.memprobe <makad args>`` (``scripts/soak --probe FILE``).

A diagnostic, not part of the daemon: a thread samples the process every
``MAKAD_PROBE_EVERY`` seconds (default 10) and appends one JSON line to
``MAKAD_PROBE_OUT`` with what could make the resident size grow —

- the kernel's view: VmRSS, RssAnon, RssFile, threads (``/proc/self/status``),
  and resident KiB per kind of mapping (heap, thread stacks and other anonymous
  mappings, each shared library) from ``/proc/self/smaps``;
- glibc's view (``mallinfo2``): bytes in the arenas, in use and free inside them
  (free but kept is fragmentation), mmapped blocks;
- SQLite's own allocator (``sqlite3_memory_used``) and the open connections;
- the daemon's own bounded caches, KiB per kind (``makad.heap.cache_bytes``);
- pymalloc's arenas and the bytes in use inside them (not with tracemalloc on);
- Python's: gc generation counts, frozen objects, the modules imported, live
  objects per type that are not frozen (``gc.get_objects`` cannot see frozen
  ones), each against the first sample ``MAKAD_PROBE_BASE`` seconds in (default
  30);
- with ``MAKAD_PROBE_TRACEMALLOC=N``, the traced total and the allocation sites
  that grew most since that sample (N frames each; tracemalloc costs time and
  memory of its own, so run it apart);
- with ``MAKAD_PROBE_GARBAGE=1``, the reference cycles waiting for the collector,
  by type (collecting them changes when the daemon would have).
"""

from __future__ import annotations

import collections
import ctypes
import gc
import json
import os
import re
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _lib(name: str) -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


_LIBC = _lib("libc.so.6")
_SQLITE = _lib("libsqlite3.so.0")
if _LIBC is not None and hasattr(_LIBC, "mallinfo2"):
    _LIBC.mallinfo2.restype = _Mallinfo2
if _SQLITE is not None:
    _SQLITE.sqlite3_memory_used.restype = ctypes.c_int64
    _SQLITE.sqlite3_memory_highwater.restype = ctypes.c_int64
    _SQLITE.sqlite3_memory_highwater.argtypes = [ctypes.c_int]


def _status() -> dict[str, int]:
    wanted = {"VmRSS", "RssAnon", "RssFile", "RssShmem", "Threads", "VmData"}
    out: dict[str, int] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in wanted:
            out[key] = int(value.split()[0])
    return out


_MAPPING = re.compile(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$")


def _smaps() -> dict[str, int]:
    """Resident KiB per mapping kind: [heap], [stack], anon (big ones are arenas or
    thread stacks, counted apart), and each file by its base name."""
    rss: collections.Counter[str] = collections.Counter()
    name = ""
    size = 0
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = _MAPPING.match(line)
        if head:
            name = head.group(1).strip()
            size = 0
            continue
        if line.startswith("Size:"):
            size = int(line.split()[1])
        elif line.startswith("Rss:"):
            kib = int(line.split()[1])
            if not name:
                # 8 MiB (+guard) mappings are thread stacks, 64 MiB ones glibc arenas.
                kind = "anon:stack8M" if size in (8192, 8196) else "anon:64M" if size >= 65000 else "anon"
            elif name.startswith("["):
                kind = name
            else:
                kind = os.path.basename(name)
            rss[kind] += kib
    return dict(rss)


def _mallinfo() -> dict[str, int]:
    if _LIBC is None or not hasattr(_LIBC, "mallinfo2"):
        return {}
    info = _LIBC.mallinfo2()
    return {
        "arena_kib": info.arena // 1024,  # bytes the arenas took from the system (sbrk + arena mmaps)
        "in_use_kib": info.uordblks // 1024,
        "free_kib": info.fordblks // 1024,  # free but kept: fragmentation when it grows
        "mmapped_kib": info.hblkhd // 1024,
        "mmapped_blocks": info.hblks,
        "top_releasable_kib": info.keepcost // 1024,
    }


def _sqlite() -> dict[str, int]:
    out: dict[str, int] = {}
    if _SQLITE is not None:
        out["used_kib"] = _SQLITE.sqlite3_memory_used() // 1024
        out["highwater_kib"] = _SQLITE.sqlite3_memory_highwater(0) // 1024
    return out


_PYMALLOC_LINES = {
    "# arenas allocated current": "arenas",
    "# bytes in allocated blocks": "allocated_kib",
    "# bytes in available blocks": "available_kib",
    "# bytes in unused pools": "unused_pools_kib",
}


def _pymalloc() -> dict[str, int]:
    """pymalloc's arenas (1 MiB anonymous mappings), from ``sys._debugmallocstats``,
    which can only print to fd 2: it is pointed at a temp file for the call (a log
    line another thread writes in that instant lands there too — diagnostics only)."""
    import tempfile

    with tempfile.TemporaryFile() as sink:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(sink.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        text = sink.read().decode("utf-8", "replace")
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        name = _PYMALLOC_LINES.get(key.strip())
        if name:
            number = int(value.strip().replace(",", ""))
            out[name] = number if name == "arenas" else number // 1024
    return out


def _types() -> collections.Counter[str]:
    return collections.Counter(type(obj).__name__ for obj in gc.get_objects())


def _cyclic_garbage() -> dict[str, int]:
    """What the collector would free among the objects not frozen, by type: the
    reference cycles made since the last tick (it collects them, so it changes when
    the daemon would have)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = collections.Counter(type(obj).__name__ for obj in gc.garbage)
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
    return {"objects": sum(found.values()), **dict(found.most_common(15))}


class Probe:
    def __init__(self, out: Path, every: float, frames: int, base_s: float) -> None:
        self.out = out
        self.every = every
        self.frames = frames
        self.base_s = base_s
        self.started = time.monotonic()
        self.first_types: collections.Counter[str] | None = None
        self.first_snapshot: tracemalloc.Snapshot | None = None
        self.first_modules: set[str] | None = None

    def sample(self) -> dict[str, Any]:
        import sqlite3

        from makad.heap import cache_bytes

        types = _types()
        record: dict[str, Any] = {
            "t": round(time.monotonic() - self.started, 1),
            "status": _status(),
            "smaps": _smaps(),
            "malloc": _mallinfo(),
            "pymalloc": _pymalloc(),
            "sqlite": {**_sqlite(), "connections": types.get(sqlite3.Connection.__name__, 0)},
            "caches_kib": {name: size // 1024 for name, size in cache_bytes().items()},
            "gc": {
                "counts": list(gc.get_count()),
                "frozen": gc.get_freeze_count(),
                "objects": sum(types.values()),
                "collections": [s["collections"] for s in gc.get_stats()],
            },
            "threads": threading.active_count(),
            "modules": len(sys.modules),
        }
        modules = set(sys.modules)
        if self.first_modules is None:
            if record["t"] >= self.base_s:
                self.first_modules = modules
        else:
            record["modules_added"] = sorted(modules - self.first_modules)[:20]
        at_base = record["t"] >= self.base_s
        if self.first_types is None:
            if at_base:
                self.first_types = types
        else:
            grown = types - self.first_types
            record["types_grown"] = dict(grown.most_common(12))
        if os.environ.get("MAKAD_PROBE_GARBAGE"):
            record["cyclic_garbage"] = _cyclic_garbage()
        if tracemalloc.is_tracing():
            current, peak = tracemalloc.get_traced_memory()
            record["tracemalloc"] = {"current_kib": current // 1024, "peak_kib": peak // 1024}
            snapshot = tracemalloc.take_snapshot().filter_traces(
                [tracemalloc.Filter(False, tracemalloc.__file__)]
            )
            if self.first_snapshot is None:
                if at_base:
                    self.first_snapshot = snapshot
            else:
                key = "traceback" if self.frames > 1 else "lineno"
                diffs = snapshot.compare_to(self.first_snapshot, key)[:15]
                record["tracemalloc"]["top_growth"] = [
                    {
                        "kib": stat.size_diff // 1024,
                        "count": stat.count_diff,
                        "where": [
                            f"{f.filename.split('site-packages/')[-1]}:{f.lineno}" for f in stat.traceback
                        ],
                    }
                    for stat in diffs
                ]
        return record

    def run(self) -> None:
        while True:
            time.sleep(self.every)
            record = self.sample()
            with self.out.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")


def main() -> int:
    out = Path(os.environ["MAKAD_PROBE_OUT"])
    every = float(os.environ.get("MAKAD_PROBE_EVERY", "10"))
    frames = int(os.environ.get("MAKAD_PROBE_TRACEMALLOC", "0"))
    if frames:
        tracemalloc.start(frames)
    probe = Probe(out, every, frames, float(os.environ.get("MAKAD_PROBE_BASE", "30")))
    threading.Thread(target=probe.run, name="memprobe", daemon=True).start()
    from makad.daemon import main as makad_main

    return makad_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())

"""data_dir: making a data directory owner-only at start (a stat per entry), against a
plain ``os.walk`` of the same tree (a listing per folder, no stat per file)."""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT  # noqa: F401  (puts makad on the path)
from makad.private_files import tighten_tree

LEDGER_FILES = ("ledger.sqlite3", "ledger.sqlite3-wal", "ledger.sqlite3-shm", "identity", "workspace-path")
BACKUPS = 20  # MAX_BACKUPS a file kind: the most a workspace keeps


def _tree(root: Path, workspaces: int) -> int:
    """A data directory as a loose umask left it: every folder 0755, every file 0644."""
    entries = 0
    for i in range(workspaces):
        ws = root / "workspaces" / f"{i:016x}"
        (ws / "backups").mkdir(parents=True, mode=0o755)
        for name in LEDGER_FILES:
            (ws / name).write_bytes(b"x")
        for b in range(BACKUPS):
            (ws / "backups" / f"1700000000000-{b:06d}-MEMORY.md").write_bytes(b"x")
        entries += 2 + len(LEDGER_FILES) + BACKUPS
    for folder, _dirs, files in os.walk(root):
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
        os.chmod(folder, 0o755)
    return entries


def run(quick: bool) -> dict[str, Any]:
    workspaces = 50 if quick else 1000
    rounds = 3 if quick else 7
    base = Path(tempfile.mkdtemp(prefix="mkd", dir="/tmp"))
    try:
        root = base / "data"
        entries = _tree(root, workspaces)
        started = time.perf_counter()
        changed = tighten_tree(root)
        first_s = time.perf_counter() - started
        tight, walk = [], []
        for _ in range(rounds):  # alternated, so both see the same machine
            started = time.perf_counter()
            tighten_tree(root)
            tight.append(time.perf_counter() - started)
            started = time.perf_counter()
            sum(1 for _ in os.walk(root))
            walk.append(time.perf_counter() - started)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return {
        "data_dir": {
            "workspaces": workspaces,
            "entries": entries,
            "modes_changed_first_start": changed,
            "first_start_ms": round(first_s * 1000, 1),
            "tight_ms": round(statistics.median(tight) * 1000, 1),
            "os_walk_ms": round(statistics.median(walk) * 1000, 1),
            # Every later start: the check of an already private tree over a bare listing.
            "ratio": round(statistics.median(tight) / statistics.median(walk), 2),
        }
    }

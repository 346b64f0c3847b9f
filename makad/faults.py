"""The one fault seam: failure points the tests arm, inert in every real run.

The daemon builds one ``Faults`` from its settings (``MAKAD_FAULT_POINT``,
``MAKAD_FAULT_DISK_FULL``, ``MAKAD_FAULT_BUSY_TIMEOUT_MS``) and hands it to the
services, which name the steps between which a crash or a failure is worth testing.
Unarmed, every call is a no-op: nothing here changes what a real run does.
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog

log = structlog.get_logger("makad.faults")


@dataclass(frozen=True)
class Faults:
    """``point``: the step at which the process kills itself; ``disk_full``: every
    memory-file write fails as if the disk were full; ``busy_timeout_ms``: how long a
    ledger write waits for another process's lock, shorter than the ledger's own
    (``makad.store.ledger.base.BUSY_TIMEOUT_MS``) so a test of a locked ledger waits less."""

    point: str | None = None
    disk_full: bool = False
    busy_timeout_ms: int | None = None

    def crash(self, point: str) -> None:
        """SIGKILL this process when armed at ``point`` (a crash between two steps)."""
        if self.point == point:
            log.warning("fault_injected", point=point)
            os.kill(os.getpid(), signal.SIGKILL)

    def before_rename(self, path: Path) -> Callable[[], None] | None:
        """What runs right before a memory file's new version is renamed into place:
        the disk filling up (the write fails, the file stays as it was), or an editor
        saving at that very moment (``editor_save_before_rename``: ``.editor-rename.<file>``
        is renamed over the file, or ``.editor-in-place.<file>`` written into it in place,
        once). None when unarmed."""
        if self.disk_full:
            return _disk_full
        if self.point != "editor_save_before_rename":
            return None

        def save() -> None:
            renamed = path.with_name(f".editor-rename.{path.name}")
            in_place = path.with_name(f".editor-in-place.{path.name}")
            if renamed.exists():
                os.replace(renamed, path)
            elif in_place.exists():
                data = in_place.read_bytes()
                in_place.unlink()
                with open(path, "r+b") as fh:
                    fh.truncate(0)
                    fh.write(data)

        return save


# What every real run uses: nothing armed.
UNARMED: Final = Faults()


def _disk_full() -> None:
    raise OSError(errno.ENOSPC, "No space left on device (injected)")

"""The guard every lazy import of a request-only library runs under.

The libraries makad imports on first use (markdown-it, detect-secrets, rapidfuzz,
snowballstemmer) are also imported ahead of time by a background thread
(``makad.warmup``). Python's per-module import locks do not make that safe for a
package whose modules import each other: another thread can be handed the package half
initialised ("cannot import name 'WRatio' from partially initialized module
'rapidfuzz.fuzz'", seen under load). So each loader imports under ``loading()``. The
core holds no lock of its own (it stays free of threads): the warm-up installs one
before it starts, and until then the guard does nothing.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from typing import Any

_guard: AbstractContextManager[Any] = contextlib.nullcontext()


def use_guard(guard: AbstractContextManager[Any]) -> None:
    """Import under ``guard`` from now on (a reentrant lock: ``makad.warmup``)."""
    global _guard
    _guard = guard


def loading() -> AbstractContextManager[Any]:
    return _guard

"""Request-only libraries, imported in the background once a workspace is in use.

Start-up imports none of them (``tests/robustness/test_startup_imports.py``): each is
loaded where it is first needed. Left at that, the first request that needs one pays
for its import — detect-secrets alone (it pulls in requests) takes ~0.1–0.2 s, which
the first user edit's ``memory_changed`` or the first append would wait for. So the
first time a workspace is used, a background thread imports them all; a request that
needs one meanwhile waits only for what is left of that import (Python's import lock).
A daemon that is only pinged, or only asked for its status, still loads none of them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from makad.core import lazy_imports

log = structlog.get_logger("makad.warmup")


def load_request_libraries() -> None:
    """Import (and build) what requests use lazily: the secret scanner, the block parser,
    the stemmer and the fuzzy matcher."""
    from makad.core import entry_text, feedback, redaction
    from makad.core.lazy_imports import loading

    redaction.preload()
    entry_text.markdown()
    feedback.preload()
    with loading():  # as makad.core.canonical imports it on first use
        import rapidfuzz.fuzz  # noqa: F401


class Warmup:
    """``start()`` (idempotent, cheap): the first call loads the libraries in a thread."""

    def __init__(self, load: Callable[[], None] = load_request_libraries) -> None:
        self._load = load
        self._started = False
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        # Before the thread exists: from here on a lazy import waits for the warm-up's.
        lazy_imports.use_guard(threading.RLock())
        self.thread = threading.Thread(target=self._run, name="makad-warmup", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self._load()
        except Exception:  # a library that fails to load fails again at its first use, with its error
            log.warning("warmup_failed", exc_info=True)

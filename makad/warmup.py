"""Request-only libraries, imported in the background once a workspace is in use.

Start-up imports none of them (``tests/robustness/test_startup_imports.py``): each is
loaded where it is first needed. Left at that, the first request that needs one pays
for its import — detect-secrets alone (it pulls in requests) takes ~0.1–0.2 s, which
the first user edit's ``memory_changed`` or the first append would wait for. So the
first time a workspace is used, a worker thread imports them all, and workspace
requests wait until it is done: two threads importing one package at the same time can
each see the other's half-initialized module (rapidfuzz's ``process_py`` importing
``rapidfuzz.fuzz`` while the warm-up imports it failed a ``propose`` with ImportError),
so nothing else may import them while the warm-up runs. A daemon that is only pinged,
or only asked for its status, still loads none of them.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import structlog

log = structlog.get_logger("makad.warmup")


def load_request_libraries() -> None:
    """Import (and build) what requests use lazily: the secret scanner, the block parser,
    the stemmer, the fuzzy matcher and the character classes of Unicode normalisation."""
    from makad.core import entry_text, feedback, normal_form, redaction

    redaction.preload()
    entry_text.markdown()
    feedback.preload()
    normal_form.preload()
    import rapidfuzz.fuzz  # noqa: F401  # makad.core.canonical imports it on first use


class Warmup:
    """``ensure()``: the first call loads the libraries in a worker thread; every call
    returns once they are loaded (or failed to)."""

    def __init__(self, load: Callable[[], None] = load_request_libraries) -> None:
        self._load = load
        self._done: anyio.Event | None = None

    async def ensure(self) -> None:
        if self._done is None:
            self._done = anyio.Event()
            try:
                await anyio.to_thread.run_sync(self._run)
            finally:
                self._done.set()
        elif not self._done.is_set():
            await self._done.wait()

    def _run(self) -> None:
        try:
            self._load()
        except Exception:  # a library that fails to load fails again at its first use, with its error
            log.warning("warmup_failed", exc_info=True)

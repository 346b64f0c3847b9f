"""Backups hold no secret the user has removed from the memory files.

MEMORY.md and PENDING.md are the user's: a secret typed there stays there (the
agent only ever sees it redacted). The backups are the daemon's copies, so once
a secret is in neither file any more — the user deleted it, or a daemon write
replaced it — every backup holding it is rewritten with the secret redacted.

Each file version's secrets are found once and cached, so the common write
(nothing removed) costs a dictionary lookup.
"""

from __future__ import annotations

import contextlib

import structlog

from makad.core.redaction import redact_values, secrets_in
from makad.errors import IOFailure
from makad.private_files import read_if_regular
from makad.service.common import in_thread
from makad.store import memory_files as files
from makad.store.workspaces import Workspace

log = structlog.get_logger("makad.backups")

# Secrets of the last few versions of the two files, keyed by their text.
CACHED_VERSIONS = 8


async def scrub_removed_secrets(ws: Workspace, old_texts: list[str | None]) -> None:
    """Under ws.lock, after either file changed: redact from every backup each secret of
    ``old_texts`` (what the files held before) that neither file holds now."""
    olds = [text for text in old_texts if text]
    cache = _cache(ws)
    if not ws.state.secrets_to_scrub and all(not cache.get(text, True) for text in olds):
        return  # the versions replaced held no secret (the usual case): nothing to look at
    try:
        await in_thread(_scrub, ws, olds)
    except IOFailure as exc:  # the write itself is done: retried at the next change
        log.warning("backup_scrub_failed", workspace_id=ws.id, reason=exc.details.get("reason"))


def _scrub(ws: Workspace, olds: list[str]) -> int:
    held = frozenset().union(*(_secrets(ws, text) for text in olds), ws.state.secrets_to_scrub)
    # Looked at even when nothing was held: the live versions are the next write's old ones.
    live = frozenset().union(*(_secrets(ws, text) for text in (ws.memory.text, ws.pending.text) if text))
    gone = held - live
    if gone:
        # An editor saving in place shows a truncated file for a moment: what is on disk
        # now counts as live too, so a secret is scrubbed only when it is really gone.
        gone -= frozenset().union(*(secrets_in(text) for text in _on_disk(ws)))
    ws.state.secrets_to_scrub = gone
    if not gone:
        return 0
    rewritten = files.rewrite_backups(ws.backups_dir, lambda text: redact_values(text, gone).text)
    ws.state.secrets_to_scrub = frozenset()
    return rewritten


def _on_disk(ws: Workspace) -> list[str]:
    texts = []
    for path in (ws.memory_path, ws.pending_path):
        with contextlib.suppress(OSError):
            data = read_if_regular(path)  # never through a symlink, never waiting on a FIFO
            if data is not None:
                texts.append(data.decode("utf-8", "surrogateescape"))
    return texts


def _secrets(ws: Workspace, text: str) -> frozenset[str]:
    cache = _cache(ws)
    found = cache.get(text)
    if found is None:
        found = secrets_in(text)
        cache[text] = found
        while len(cache) > CACHED_VERSIONS:
            del cache[next(iter(cache))]
    return found


def _cache(ws: Workspace) -> dict[str, frozenset[str]]:
    return ws.state.secrets_by_text

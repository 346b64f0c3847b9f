"""Identifiers a client chooses (session ids, request ids, entry ids it names, tool call ids)
with no secret in them, consistently across calls.

Text fields are redacted where each service reads them (they count ``redactions``).
An identifier cannot become ``[REDACTED:kind]``: two different ids would merge
(two sessions into one, a retry answered with another request's result). So an
identifier holding a secret is replaced, before any handler sees it, by a keyed
hash of itself (``identifier_stand_in``): the same raw id always maps to the
same stand-in, so every later call that names it finds what the first one
stored, and the stand-in is itself a valid id (calls may use either).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import anyio.to_thread
import msgspec

from makad.core.redaction import identifier_stand_in, redact
from makad.core.refs import EVENT_PREFIX, ref_session
from makad.core.types import Entry
from makad.private_files import read_if_regular, read_regular
from makad.wire.base import Handler, MethodSpec

# Params fields holding an identifier the daemon stores or looks up by (Python names).
IDENTIFIER_FIELDS = frozenset({"session_id", "request_id", "supersedes"})
KEY_FILE = "identifier.key"
KEY_BYTES = 32
# Identifiers longer than this (together) are scrubbed on a worker thread.
INLINE_SCRUB_CHARS = 4096


class Identifiers:
    """Stand-ins for identifiers that hold a secret, keyed by this data directory's key."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self.scrub = lru_cache(maxsize=8192)(self._scrub)

    def _scrub(self, value: str) -> str:
        return identifier_stand_in(value, self._key)

    def _scrub_all(self, values: dict[str, str]) -> dict[str, str]:
        return {name: self.scrub(value) for name, value in values.items()}

    def scrub_optional(self, value: str | None) -> str | None:
        return None if value is None else self.scrub(value)

    def scrub_ref(self, ref: str) -> str:
        """A source ref: the session id of ``event:<session>:<seqs>`` as an identifier (so
        the ref still resolves), anything else redacted as text."""
        session = ref_session(ref)
        if session is not None:
            seqs = ref.rpartition(":")[2]
            return f"{EVENT_PREFIX}{self.scrub(session)}:{redact(seqs).text}"
        return redact(ref).text

    def scrub_refs(self, refs: list[str]) -> list[str]:
        return [self.scrub_ref(ref) for ref in refs]

    def scrub_entry(self, entry: Entry) -> Entry:
        """A memory entry's session, and the session of each of its ``event:`` refs, as every
        call names them (one holding a secret as its stand-in, as a makad that did not screen
        ids may have written it into MEMORY.md): the entry reaches its session, and its refs
        resolve, by the id the session is called by. The same entry when nothing changes;
        the rest of its text is left to ``redact_entry``."""
        session = self.scrub_optional(entry.session_id)
        refs = [self._scrub_event_ref(ref) for ref in entry.source_refs]
        if session == entry.session_id and refs == entry.source_refs:
            return entry
        return msgspec.structs.replace(entry, session_id=session, source_refs=refs)

    def _scrub_event_ref(self, ref: str) -> str:
        session = ref_session(ref)
        if session is None or (clean := self.scrub(session)) == session:
            return ref
        return f"{EVENT_PREFIX}{clean}:{ref.rpartition(':')[2]}"

    def wrap(
        self, catalogue: Mapping[str, MethodSpec], handlers: Mapping[str, Handler]
    ) -> dict[str, Handler]:
        """The handlers, each taking params whose identifier fields are already scrubbed."""
        wrapped: dict[str, Handler] = {}
        for name, handler in handlers.items():
            spec = catalogue.get(name)
            fields = (
                ()
                if spec is None
                else tuple(f for f in spec.params.__struct_fields__ if f in IDENTIFIER_FIELDS)
            )
            wrapped[name] = self._wrap_one(handler, fields) if fields else handler
        return wrapped

    def _wrap_one(self, handler: Handler, fields: tuple[str, ...]) -> Handler:
        async def scrubbed(params: Any, peer: Any) -> Any:
            values = {name: value for name in fields if isinstance(value := getattr(params, name), str)}
            if sum(map(len, values.values())) > INLINE_SCRUB_CHARS:
                # A megabyte "id" is megabytes the secret detector reads: not on the loop.
                cleaned = await anyio.to_thread.run_sync(
                    lambda: {n: self.scrub(v) for n, v in values.items()}
                )
            else:
                cleaned = {name: self.scrub(value) for name, value in values.items()}
            changes = {name: clean for name, clean in cleaned.items() if clean != values[name]}
            if changes:
                params = msgspec.structs.replace(params, **changes)
            return await handler(params, peer)

        return scrubbed


def load_or_create_key(data_dir: Path) -> bytes:
    """This data directory's identifier key: created once (mode 0600), never torn.

    Written to a temp file, then linked into place, so a crash leaves either no key
    or a whole one, and two daemons starting at once agree on the first. A key of
    the wrong size is replaced (only stand-ins made with it stop matching).
    """
    path = data_dir / KEY_FILE
    key = read_if_regular(path, KEY_BYTES + 1)
    if key is not None and len(key) == KEY_BYTES:
        return key
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # of the wrong size, or no file (a symlink, a FIFO): never read through
    fd, tmp = tempfile.mkstemp(prefix=".identifier.", dir=data_dir)
    try:
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, os.urandom(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another daemon made it first: use theirs
        except OSError:  # a file system without hard links
            if not os.path.lexists(path):
                os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return read_regular(path, KEY_BYTES + 1)

"""Incognito sessions: the ledger's session store (``makad.store.session_store``), held in
memory only.

An incognito session's events, working state and latest checkpoint never touch disk, so
they live here and vanish with the process. The rules match the SQLite ledger — gap-free
seqs from 1, the same hash chain, ``expectedSeq`` conflicts, ``requestId`` replay, the
working-state caps — checked by the same functions, so the service treats both stores alike.
Search is a plain term count over the same CJK-aware tokens (no BM25):
incognito sessions are small.
"""

from __future__ import annotations

import copy
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final, NoReturn, TypeVar, Unpack

from makad.core.chain import event_hash, first_bad_seq, verify_span
from makad.core.cjk import index_text, query_tokens
from makad.core.refs import checked_session_id, new_session_id, parse_event_refs
from makad.core.types import (
    AppendResult,
    Checkpoint,
    Event,
    EventInput,
    RefResult,
    SearchHit,
    SessionInfo,
    WorkingState,
)
from makad.core.working_state import WorkingStateChange, check_revision, patch_working_state
from makad.errors import NotFound, TooLarge
from makad.store.ledger.records import RequestRecord
from makad.store.ledger.sessions import AppendCall, admit, prepare_append
from makad.store.session_store import AppendOptions, HistoryScope

_WORD: Final = re.compile(r"[^\W_]+")
# The most characters of event text (and metadata) one workspace's incognito sessions hold
# at once. Nothing of them reaches disk, so without a cap an agent appending megabytes at
# a time grew the daemon without end (7 MB of resident memory per 7 MB event, until the
# system killed it and every incognito session with it). Deleting a session frees its share.
MAX_HELD_CHARS: Final = 128 * 1024 * 1024
# A retry is recognised by its request id among a session's latest this many appends and
# working-state changes (each of the latter keeps the state it made, up to ~200 KB): kept
# without end, distinct ids alone grew the daemon without bound.
MAX_KEPT_REQUESTS: Final = 1024
MAX_KEPT_STATE_REQUESTS: Final = 64

_R = TypeVar("_R")


@dataclass
class _Session:
    info: SessionInfo
    events: list[Event] = field(default_factory=list)
    requests: dict[str, AppendResult] = field(default_factory=dict)
    state: WorkingState = field(default_factory=WorkingState)
    state_requests: dict[str, WorkingState] = field(default_factory=dict)
    checkpoint: Checkpoint | None = None  # the latest only


def _keep(results: dict[str, _R], request_id: str, result: _R, most: int) -> None:
    """``result`` kept under ``request_id``, the oldest let go past ``most`` (dicts keep
    insertion order)."""
    results[request_id] = result
    while len(results) > most:
        del results[next(iter(results))]


class EphemeralSessions:
    """In-memory incognito sessions; thread-safe. A ``SessionStore``."""

    in_memory: ClassVar[bool] = True

    def __init__(self, max_held_chars: int = MAX_HELD_CHARS) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._max_held = max_held_chars
        self._held = 0  # characters of event text and metadata, over every session

    def open_session(
        self, session_id: str | None = None, *, title: str | None = None, now: int | None = None
    ) -> SessionInfo:
        at = _now() if now is None else now
        sid = new_session_id(at) if session_id is None else checked_session_id(session_id)
        with self._lock:
            found = self._sessions.get(sid)
            if found is None:
                found = self._sessions[sid] = _Session(
                    SessionInfo(
                        session_id=sid,
                        title=title,
                        created_at=at,
                        closed_at=None,
                        event_count=0,
                        last_seq=0,
                        last_hash="",
                    )
                )
            else:
                found.info.closed_at = None
                found.info.title = title or found.info.title
            return _copy(found.info)

    def has_session(self, session_id: str) -> bool:
        with self._lock:
            return session_id in self._sessions

    def empty(self) -> bool:
        """Whether no session is held (closed ones included: their events are here only)."""
        with self._lock:
            return not self._sessions

    def get_session(self, session_id: str) -> SessionInfo:
        with self._lock:
            return _copy(self._get(session_id).info)

    def list_sessions(self, *, include_closed: bool = True) -> list[SessionInfo]:
        """Sessions, newest first."""
        with self._lock:
            infos = [
                _copy(s.info) for s in self._sessions.values() if include_closed or s.info.closed_at is None
            ]
        return sorted(infos, key=lambda i: (i.created_at, i.session_id), reverse=True)

    def close_session(self, session_id: str, *, now: int | None = None) -> SessionInfo:
        with self._lock:
            info = self._get(session_id).info
            if info.closed_at is None:
                info.closed_at = _now() if now is None else now
            return _copy(info)

    def delete_session(self, session_id: str) -> int:
        """Drop a session and its events; returns how many events it had."""
        with self._lock:
            events = self._sessions.pop(self._get(session_id).info.session_id).events
            self._held -= sum(map(_held_chars, events))
            return len(events)

    def last_seq(self, session_id: str) -> int:
        with self._lock:
            return self._get(session_id).info.last_seq

    def append_events(
        self, session_id: str, events: Sequence[EventInput], **options: Unpack[AppendOptions]
    ) -> AppendResult:
        """Same contract as ``Ledger.append_events``, minus durability."""
        append = prepare_append(AppendCall(session_id, events, **options), _now())
        with self._lock:
            session = self._get(session_id)
            request_id = append.request_id
            if request_id is not None and request_id in session.requests:
                return session.requests[request_id]
            info = session.info
            admit(append, info.last_seq, info.closed_at)
            adding = sum(_held_chars(event) for event, _ in append.drafts)
            if self._held + adding > self._max_held:
                raise TooLarge(
                    f"incognito sessions hold at most {self._max_held} characters of events in "
                    "a workspace, all in memory: delete one (delete_session) or open a session "
                    "that is not incognito",
                    limit=self._max_held,
                    actual=self._held + adding,
                )
            self._held += adding
            result = AppendResult(
                first_seq=info.last_seq + 1,
                last_seq=info.last_seq + len(append.drafts),
                redactions=append.redactions,
            )
            for event, _ in append.drafts:
                event.session_id = session_id
                event.seq = info.last_seq + 1
                event.hash = event_hash(info.last_hash, event)
                info.last_seq, info.last_hash = event.seq, event.hash
                info.event_count += 1
                session.events.append(event)
            if request_id is not None:
                _keep(session.requests, request_id, result, MAX_KEPT_REQUESTS)
            return result

    def read_events(self, session_id: str, *, after_seq: int = 0, limit: int | None = None) -> list[Event]:
        with self._lock:
            events = self._get(session_id).events[max(after_seq, 0) :]
        chosen = events if limit is None else events[: max(limit, 0)]
        return [copy.copy(event) for event in chosen]

    def retrieve(self, refs: Sequence[str]) -> list[RefResult]:
        """Same contract as ``Ledger.retrieve``; unknown sessions come back as missing."""
        spans = parse_event_refs(refs)
        results: list[RefResult] = []
        with self._lock:
            for span in spans:
                _, session_id, first, last = span
                session = self._sessions.get(session_id)
                events = [] if session is None else session.events[max(first - 2, 0) : last + 1]
                head = None if session is None else (session.info.last_seq, session.info.last_hash)
                results.append(verify_span(span, {e.seq: e for e in events}, head))
        return results

    def verify_chain(self, session_id: str) -> tuple[bool, int | None]:
        with self._lock:
            session = self._get(session_id)
            bad = first_bad_seq(session.events, session.info.last_seq, session.info.last_hash)
        return bad is None, bad

    def get_working_state(self, session_id: str) -> WorkingState:
        with self._lock:
            return copy.deepcopy(self._get(session_id).state)

    def set_working_state(self, session_id: str, **change: Unpack[WorkingStateChange]) -> WorkingState:
        """Same contract as ``Ledger.set_working_state``."""
        request_id = change.get("request_id")
        with self._lock:
            session = self._get(session_id)
            if request_id is not None and request_id in session.state_requests:
                return copy.deepcopy(session.state_requests[request_id])
            check_revision(session_id, change.get("expected_revision"), session.state)
            state = patch_working_state(
                session.state,
                goals=change.get("goals"),
                open_threads=change.get("open_threads"),
                decisions=change.get("decisions"),
                notes=change.get("notes"),
            )
            session.state = state
            if request_id is not None:
                _keep(session.state_requests, request_id, state, MAX_KEPT_STATE_REQUESTS)
            return copy.deepcopy(state)

    def get_manifest(self, session_id: str, call_id: str | None = None) -> NoReturn:
        """Incognito sessions record no manifest: ``NotFound`` (for the session, or the call)."""
        self.get_session(session_id)
        raise NotFound("no such manifest", sessionId=session_id, callId=call_id)

    # --- checkpoints: the latest one of a session -----------------------------------

    def add_checkpoint(self, checkpoint: Checkpoint, *, request: RequestRecord | None = None) -> Checkpoint:
        """Keep ``checkpoint`` as its session's latest (``request``: nothing of an incognito
        call is recorded)."""
        with self._lock:
            self._get(checkpoint.session_id).checkpoint = checkpoint
        return checkpoint

    def latest_checkpoint(self, session_id: str) -> Checkpoint | None:
        with self._lock:
            session = self._sessions.get(session_id)
            return None if session is None else session.checkpoint

    def list_checkpoints(self, session_id: str) -> list[Checkpoint]:
        found = self.latest_checkpoint(session_id)
        return [found] if found is not None else []

    def find_checkpoint(self, checkpoint_id: str) -> Checkpoint | None:
        """The checkpoint with this id, in whichever session holds it."""
        with self._lock:
            for session in self._sessions.values():
                if session.checkpoint is not None and session.checkpoint.checkpoint_id == checkpoint_id:
                    return session.checkpoint
        return None

    def search_history(self, query: str, **scope: Unpack[HistoryScope]) -> list[SearchHit]:
        """Events ranked by how many of the query's tokens they contain."""
        session_id, limit = scope.get("session_id"), scope.get("limit", 20)
        before, after = scope.get("before"), scope.get("after")
        tokens = query_tokens(query)
        with self._lock:
            sessions = [self._get(session_id)] if session_id is not None else list(self._sessions.values())
            candidates = [
                e
                for s in sessions
                for e in s.events
                if (before is None or e.ts < before) and (after is None or e.ts > after)
            ]
        hits: list[SearchHit] = []
        for event in candidates:
            # Word by word: one findall over megabytes is a call no other thread runs in.
            words = {w.group().lower() for w in _WORD.finditer(index_text(event.text, bounded=True))}
            score = sum(
                1
                for token, prefix in tokens
                if (token in words if not prefix else any(w.startswith(token) for w in words))
            )
            if score:
                hits.append(SearchHit(event=event, score=float(score)))
        hits.sort(key=lambda h: (-h.score, -h.event.ts))
        return hits[: max(limit, 0)]

    def _get(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise NotFound("no such session", sessionId=session_id)
        return session


def _copy(info: SessionInfo) -> SessionInfo:
    return copy.copy(info)


def _held_chars(event: Event) -> int:
    """What an event counts against ``MAX_HELD_CHARS``: its text and metadata."""
    meta = event.meta or {}
    return len(event.text) + sum(len(k) + len(v) for k, v in meta.items())


def _now() -> int:
    return time.time_ns() // 1_000_000

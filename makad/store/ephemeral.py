"""Incognito sessions: the ledger's session and event API, held in memory only.

An incognito session's events and working state never touch disk, so they live
here and vanish with the process. The rules match the SQLite ledger — gap-free
seqs from 1, the same hash chain, ``expectedSeq`` conflicts, ``requestId``
replay, the working-state caps — so the service can treat both stores alike.
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
from typing import Final

from makad.core.chain import MAX_APPEND_EVENTS, event_hash, first_bad_seq, prepare_event, verify_span
from makad.core.cjk import index_text, query_tokens
from makad.core.refs import checked_session_id, new_session_id, parse_event_refs
from makad.core.types import AppendResult, Event, EventInput, RefResult, SearchHit, SessionInfo, WorkingState
from makad.core.working_state import patch_working_state
from makad.errors import Conflict, InvalidParams, NotFound, TooLarge

_WORD: Final = re.compile(r"[^\W_]+")


@dataclass
class _Session:
    info: SessionInfo
    events: list[Event] = field(default_factory=list)
    requests: dict[str, AppendResult] = field(default_factory=dict)
    state: WorkingState = field(default_factory=WorkingState)
    state_requests: dict[str, WorkingState] = field(default_factory=dict)


class EphemeralSessions:
    """In-memory incognito sessions; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}

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
            return len(self._sessions.pop(self._get(session_id).info.session_id).events)

    def append_events(
        self,
        session_id: str,
        events: Sequence[EventInput],
        *,
        expected_seq: int | None = None,
        request_id: str | None = None,
        redactions: int = 0,
        now: int | None = None,
    ) -> AppendResult:
        """Same contract as ``Ledger.append_events``, minus durability."""
        if not events:
            raise InvalidParams("append_events needs at least one event")
        if len(events) > MAX_APPEND_EVENTS:
            raise TooLarge("too many events in one call", limit=MAX_APPEND_EVENTS, count=len(events))
        at = _now() if now is None else now
        drafts = [prepare_event(new, at) for new in events]
        with self._lock:
            session = self._get(session_id)
            if request_id is not None and request_id in session.requests:
                return session.requests[request_id]
            info = session.info
            if info.closed_at is not None:
                raise Conflict("the session is closed", sessionId=session_id, reason="closed")
            if expected_seq is not None and expected_seq != info.last_seq:
                raise Conflict(
                    "the session has moved on",
                    sessionId=session_id,
                    expectedSeq=expected_seq,
                    currentSeq=info.last_seq,
                )
            result = AppendResult(
                first_seq=info.last_seq + 1, last_seq=info.last_seq + len(drafts), redactions=redactions
            )
            for event in drafts:
                event.session_id = session_id
                event.seq = info.last_seq + 1
                event.hash = event_hash(info.last_hash, event)
                info.last_seq, info.last_hash = event.seq, event.hash
                info.event_count += 1
                session.events.append(event)
            if request_id is not None:
                session.requests[request_id] = result
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

    def set_working_state(
        self,
        session_id: str,
        *,
        goals: list[str] | None = None,
        open_threads: list[str] | None = None,
        decisions: list[str] | None = None,
        notes: dict[str, str] | None = None,
        expected_revision: int | None = None,
        request_id: str | None = None,
    ) -> WorkingState:
        """Same contract as ``Ledger.set_working_state``."""
        with self._lock:
            session = self._get(session_id)
            if request_id is not None and request_id in session.state_requests:
                return copy.deepcopy(session.state_requests[request_id])
            current = session.state
            if expected_revision is not None and expected_revision != current.revision:
                raise Conflict(
                    "the working state has changed",
                    sessionId=session_id,
                    expectedRevision=expected_revision,
                    currentRevision=current.revision,
                )
            state = patch_working_state(
                current, goals=goals, open_threads=open_threads, decisions=decisions, notes=notes
            )
            session.state = state
            if request_id is not None:
                session.state_requests[request_id] = state
            return copy.deepcopy(state)

    def search_history(
        self,
        query: str,
        *,
        session_id: str | None = None,
        limit: int = 20,
        before: int | None = None,
        after: int | None = None,
    ) -> list[SearchHit]:
        """Events ranked by how many of the query's tokens they contain."""
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
            words = {w.lower() for w in _WORD.findall(index_text(event.text))}
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
    return SessionInfo(
        session_id=info.session_id,
        title=info.title,
        created_at=info.created_at,
        closed_at=info.closed_at,
        event_count=info.event_count,
        last_seq=info.last_seq,
        last_hash=info.last_hash,
    )


def _now() -> int:
    return time.time_ns() // 1_000_000

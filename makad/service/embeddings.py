"""The optional semantic channel (``makad[semantic]``): a sentence-embedding model, the
background indexer that keeps every workspace's vectors up to date, and the dense
candidates build_context and propose add to the lexical ones.

Off unless a model is named (``--embedding-model`` / ``MAKAD_EMBEDDING_MODEL``): then
``SemanticChannel`` loads it in a thread of its own once the daemon runs, and every
request goes on lexically until it is loaded (``status.semantic.state``). Nothing is
downloaded and nothing leaves the machine: the model is read from a local folder (or a
package that ships one) and run in this process (``makad.service.embedding_model``).

**Off the request path.** One indexer thread embeds what changed: events after they are
appended (the newest event id it has indexed is its cursor, so a backlog only means the
cursor is behind; appends never wait for it), and memory entries and proposals when
MEMORY.md or PENDING.md change (their redacted text, as the agent would see it). Vectors
go to the workspace's ledger (``makad.store.ledger.vectors``) and to an in-memory matrix
per workspace, searched flat with numpy. A request embeds only its query (one short text,
with the model's query prefix if it has one; the last ones are kept) and multiplies it by
that matrix: ``search_soon`` does both, and the dense history search, on the channel's own
threads while the caller reads the history and the full-text candidates; ``join`` then
adds what it found to the full-text hits, reading only the rows they did not bring.

**What the channel adds** (the rules are ``makad.core.semantic``'s): the memory entries
nearest the query join the candidates with their cosine as the ``semantic`` part of their
score; the events nearest the query join the full-text hits (with their neighbours), and
every hit carries its cosine into recall's ranking; a proposal's nearest entries join the
fuzzy matches in ``similarTo``.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import structlog

from makad.core import semantic as rules
from makad.core.context_types import RecallHit
from makad.core.counted import counted
from makad.core.redaction import redact_entry
from makad.core.types import Entry, Event
from makad.store.ledger import Ledger
from makad.store.ledger import vectors as store
from makad.store.workspaces import Workspace
from makad.wire.system import IndexFailure, SemanticStatus

log = structlog.get_logger("makad.semantic")

State = Literal["off", "loading", "ready", "failed"]

EVENT_BATCH: Final = 32
# Batches per workspace before the indexer turns to the next one (and to entries).
BATCHES_PER_TURN: Final = 8
LOAD_PAGE: Final = 5_000
QUERY_CACHE: Final = 256
IDLE_WAKE_S: Final = 2.0
# A workspace whose indexing turn failed is tried again after this, doubling with each
# failure in a row up to INDEX_RETRY_MAX_S.
INDEX_RETRY_S: Final = 2.0
INDEX_RETRY_MAX_S: Final = 300.0
RADIUS: Final = 2
# Speaker labels kept per workspace for masking queries (transcripts have a few).
MAX_SPEAKERS: Final = 64
# Threads embedding queries (requests may come from several connections at once).
QUERY_THREADS: Final = 2
# Sessions whose appended seqs a workspace's index remembers (the least recently appended
# to is forgotten first: a retry into it would be counted again, until the next count).
MAX_NOTIFIED_SESSIONS: Final = 4096


def retry_delay(attempts: int) -> float:
    """Seconds before the next indexing turn of a workspace whose last ``attempts`` failed."""
    return float(min(INDEX_RETRY_S * 2.0 ** min(max(attempts - 1, 0), 16), INDEX_RETRY_MAX_S))


def _one_line(exc: BaseException) -> str:
    """``Type: message``, and its cause's the same way (a ledger error wraps SQLite's), on
    one line of at most 300 characters."""
    parts: list[str] = []
    seen: BaseException | None = exc
    while seen is not None and len(parts) < 3:
        parts.append(f"{type(seen).__name__}: {seen}" if str(seen) else type(seen).__name__)
        seen = seen.__cause__
    return " ".join(" ← ".join(parts).split())[:300]


def newly_notified(notified: dict[str, list[tuple[int, int]]], session_id: str, first: int, last: int) -> int:
    """How many of the seqs ``first``..``last`` of ``session_id`` ``notified`` did not hold
    yet; they are added to it (ranges kept sorted, merged when they touch)."""
    if last < first:
        return 0
    ranges = notified.pop(session_id, [])
    if not ranges and len(notified) >= MAX_NOTIFIED_SESSIONS:
        notified.pop(next(iter(notified)))
    known = sum(max(0, min(hi, last) - max(lo, first) + 1) for lo, hi in ranges)
    merged: list[tuple[int, int]] = []
    lo, hi = first, last
    for a, b in ranges:
        if b < lo - 1 or a > hi + 1:
            merged.append((a, b))
        else:
            lo, hi = min(lo, a), max(hi, b)
    merged.append((lo, hi))
    notified[session_id] = sorted(merged)
    return last - first + 1 - known


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class _Index:
    """One workspace's vectors in memory, and how far indexing has got."""

    ws: Workspace
    ledger: Ledger
    generation: int
    loaded: bool = False
    cursor: int = 0  # the newest event id whose vector is known
    count: int = 0
    matrix: Any = None
    keys: list[tuple[str, int]] = field(default_factory=list)
    rows: dict[tuple[str, int], int] = field(default_factory=dict)
    speakers: dict[str, None] = field(default_factory=dict)  # speaker labels seen in events
    entries: dict[str, Any] = field(default_factory=dict)  # text hash → vector
    entry_queue: dict[str, str] = field(default_factory=dict)  # text hash → text
    seen_docs: tuple[str | None, str | None] = (None, None)
    # The last entry collection searched (kept by identity: a snapshot's ``by_id`` stays the
    # same object until MEMORY.md changes), its ids and their vectors as one matrix, when
    # every entry of it had a vector.
    searched: tuple[object, list[str], Any] | None = None
    pending_events: int = 0
    # Appends notified / seen by the indexer's latest scan: equal when it has looked
    # since the last append.
    appended: int = 0
    # Events those appends committed to the ledger (counted on the event loop, at append),
    # and how many of them had been notified when ``pending_events`` was last counted: the
    # ones since are pending too, though the indexer has not counted them yet.
    events_appended: int = 0
    # The seqs appends notified, per session, as ranges (first, last) merged when they
    # touch: a retried append (its requestId seen before: nothing appended) names seqs
    # already counted and adds nothing to ``events_appended``.
    notified: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    counted_at: int = 0
    scanned: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Indexing turns failed in a row, the latest error (one line), and when
    # (time.monotonic()) the next turn may run.
    failures: int = 0
    error: str | None = None
    retry_at: float = 0.0
    # The indexer is in a turn of it (its workspace is then in use: not released).
    stepping: bool = False

    def failure(self) -> IndexFailure | None:
        if self.error is None:
            return None
        return IndexFailure(
            workspace=str(self.ws.path),
            error=self.error,
            attempts=self.failures,
            retry_after_ms=round(retry_delay(self.failures) * 1000),
        )


@dataclass(frozen=True)
class NearestEvents:
    """The dense half of history recall for one query (``SemanticChannel.nearest_events``)."""

    sims: Any  # every indexed event's cosine with the query (calibrated), by row
    rows: Mapping[tuple[str, int], int]  # (session, seq) → row, for rows below ``count``
    count: int
    # ``"session\x00seq"`` and how near (the better of the two searches' cosines), best
    # first: the candidates before the full-text hits among them are left out.
    ranked: list[tuple[str, float]]


@dataclass(frozen=True)
class Dense:
    """What the channel found for one query (``SemanticChannel.search``)."""

    vector: Any
    events: NearestEvents | None
    memory: list[MemoryCosines | None]  # per level asked for: its entries' cosines


@dataclass(frozen=True)
class MemoryCosines:
    """A level's entries and their cosines with one query (calibrated), by position."""

    ids: Sequence[str]
    sims: Any

    def nearest(self, lexical: int) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        """``makad.core.semantic.memory_nearest`` (``lexical``: how many candidates
        full-text search found): only the rows that can be among its nearest are handed
        to it (a partial sort in numpy)."""
        want = rules.MEMORY_DENSE_K + lexical + rules.MEMORY_NEAR_K
        rows: Sequence[int] = range(len(self.ids))
        if len(self.ids) > want:
            rows = (-self.sims).argpartition(want - 1)[:want].tolist()
        scored = [(self.ids[row], float(self.sims[row])) for row in rows]
        return rules.memory_nearest(scored, lexical)


class SemanticChannel:
    """The model, the indexer thread and the per-workspace indexes (see module doc)."""

    def __init__(self, spec: str | None) -> None:
        self.spec = spec
        self.state: State = "off" if not spec else "loading"
        self.message: str | None = None
        self.model_name = ""
        self.load_ms: float | None = None
        self.events_indexed = 0
        self.index_seconds = 0.0
        self._encoder: Any = None
        self._baseline = 0.0
        self._np: Any = None
        self._indexes: dict[int, _Index] = {}
        self._lock = threading.Lock()
        self._encode_lock = threading.Lock()
        self._queries: OrderedDict[str, Any] = OrderedDict()
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._query_lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle

    @property
    def enabled(self) -> bool:
        return self.spec is not None

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def start(self) -> None:
        """Load the model and run the indexer in a thread of its own (a no-op when off)."""
        if self.spec is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="semantic-indexer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def touch(self, ws: Workspace) -> None:
        """A workspace is in use: index it (cheap; called on every request)."""
        if self.spec is None or self._stopping:
            return
        if id(ws) not in self._indexes:
            with self._lock:
                if id(ws) not in self._indexes:
                    self._indexes[id(ws)] = _Index(ws, ws.ledger, ws.ledger.generation)
        self._wake.set()

    def busy(self, ws: Workspace) -> bool:
        """Whether the indexer has work in ``ws`` or is at it (the workspace is then kept,
        not released: ``makad.service.idle_workspaces``). A failed model has none, nor has
        a workspace whose indexing failed last and waits for its retry: its work is in its
        ledger, so it is released when idle like any other (status stops listing it) and
        its next call indexes it again, as after a start."""
        index = self._indexes.get(id(ws))
        if index is None or index.ws is not ws or self.state not in ("loading", "ready"):
            return False
        if index.stepping:
            return True
        return index.failures == 0 and self._has_work(index)

    def forget(self, released: list[Workspace]) -> None:
        """Released workspaces: their vectors in memory are let go of. The next call naming
        one indexes it again as after the daemon's start: the ledger's vectors loaded, only
        what has none embedded."""
        with self._lock:
            for ws in released:
                index = self._indexes.get(id(ws))
                if ws.released and index is not None and index.ws is ws:
                    del self._indexes[id(ws)]

    def held(self, ws: Workspace) -> bool:
        """Whether the channel holds an index of ``ws`` (its vectors in memory)."""
        index = self._indexes.get(id(ws))
        return index is not None and index.ws is ws

    def _has_work(self, index: _Index) -> bool:
        """Whether a turn of the indexer would do anything for ``index``: not loaded yet, its
        ledger reopened on another file, appends not looked at, events or entries without a
        vector, a MEMORY.md or PENDING.md version not read, or a failed turn to retry. An
        index with none is left alone, so its ledger can rest and its workspace be released."""
        ws = index.ws
        ledger = ws.ledger
        return (
            not index.loaded
            or ledger is not index.ledger
            or ledger.generation != index.generation
            or index.failures > 0
            or index.scanned != index.appended
            or self._events_pending(index) > 0
            or bool(index.entry_queue)
            or (ws.memory.sha256, ws.pending.sha256) != index.seen_docs
        )

    def appended(self, ws: Workspace, session_id: str, first_seq: int, last_seq: int) -> None:
        """Events ``first_seq``..``last_seq`` of a session are in ``ws``'s ledger (committed,
        or committed before when the append was a retry): the indexer looks again."""
        if self.spec is None:
            return
        self.touch(ws)
        index = self._indexes.get(id(ws))
        if index is not None:
            index.appended += 1
            index.events_appended += newly_notified(index.notified, session_id, first_seq, last_seq)
            self._wake.set()

    @staticmethod
    def _events_pending(index: _Index) -> int:
        """Events of ``index``'s workspace without a vector: counted by the indexer once it
        has read the workspace, plus those appended since it counted; until then (the model
        loading, or failed), the events appended since the daemon started."""
        if not index.loaded:
            return index.events_appended
        return index.pending_events + index.events_appended - index.counted_at

    def status(self) -> SemanticStatus | None:
        if self.spec is None:
            return None
        indexes = list(self._indexes.values())
        pending_events = sum(self._events_pending(i) for i in indexes)
        pending_entries = sum(len(i.entry_queue) for i in indexes)
        caught_up = (
            self.state == "ready"
            and all(i.loaded and i.scanned == i.appended for i in indexes)
            and pending_events == 0
            and pending_entries == 0
        )
        rate = self.events_indexed / self.index_seconds if self.index_seconds > 0 else None
        failures = [f for f in (i.failure() for i in indexes) if f is not None]
        message = self.message
        if message is None and failures:
            first = failures[0]
            message = (
                f"indexing {first.workspace} failed {counted(first.attempts, 'time')} in a row: "
                f"{first.error}; tried again after {first.retry_after_ms / 1000:g} s"
                + (
                    f" (and {counted(len(failures) - 1, 'other workspace')}: indexFailures)"
                    if len(failures) > 1
                    else ""
                )
            )
        return SemanticStatus(
            model=self.model_name or (self.spec or ""),
            state="loading" if self.state == "off" else self.state,
            message=message,
            load_ms=None if self.load_ms is None else round(self.load_ms, 1),
            events_indexed=sum(i.count for i in indexes),
            events_pending=pending_events,
            entries_indexed=sum(len(i.entries) for i in indexes),
            entries_pending=pending_entries,
            caught_up=caught_up,
            events_per_second=None if rate is None else round(rate, 1),
            index_failures=failures,
        )

    def _run(self) -> None:
        started = time.perf_counter()
        try:
            from makad.service.embedding_model import ModelUnavailable, load, numpy_module

            try:
                numpy = numpy_module()
                encoder = load(self.spec or "")
            except ModelUnavailable as exc:
                self.state, self.message = "failed", str(exc)
                log.warning("semantic_model_unavailable", reason=str(exc))
                return
            # The first texts embedded: a model whose files load but do not fit together
            # (a config.json of another model) fails here, not later in the indexer.
            baseline = encoder.baseline()
        except Exception as exc:  # numpy missing, or a model that does not load or run
            self.state, self.message = "failed", f"the model could not be loaded: {_one_line(exc)}"
            log.warning("semantic_model_failed", exc_info=True)
            return
        self._np, self._encoder = numpy, encoder
        self._baseline = baseline
        self.model_name = encoder.name
        self.load_ms = (time.perf_counter() - started) * 1000
        self.state = "ready"
        log.info("semantic_model_loaded", model=encoder.name, load_ms=round(self.load_ms, 1))
        while not self._stopping:
            self._wake.wait(timeout=self._idle_wait())
            self._wake.clear()
            for index in list(self._indexes.values()):
                if self._stopping:
                    break
                if index.failures and time.monotonic() < index.retry_at:
                    continue  # failed lately: left alone until its retry time
                if not self._has_work(index):
                    continue  # caught up: its ledger is not read, so it can rest
                index.stepping = True
                try:
                    if index.ws.released:
                        continue  # let go of since the list was taken: forget() drops it
                    more = self._step(index)
                except Exception as exc:
                    self._failed(index, exc)
                    continue
                finally:
                    index.stepping = False
                if index.failures:
                    log.info("semantic_index_recovered", workspace=str(index.ws.path), after=index.failures)
                    index.failures, index.error = 0, None
                if more:
                    self._wake.set()  # more to do: another turn after the others

    def _idle_wait(self) -> float:
        """How long the indexer sleeps unless woken: IDLE_WAKE_S, or less when a failed
        workspace's retry time comes sooner."""
        due = [i.retry_at for i in self._indexes.values() if i.failures]
        if not due:
            return IDLE_WAKE_S
        return max(0.0, min(IDLE_WAKE_S, min(due) - time.monotonic()))

    def _failed(self, index: _Index, exc: Exception) -> None:
        """An indexing turn of ``index`` raised: back off (doubling), log the traceback
        the first time this error is seen, a one-line warning after."""
        error = _one_line(exc)
        index.failures += 1
        delay = retry_delay(index.failures)
        index.retry_at = time.monotonic() + delay
        workspace = str(index.ws.path)
        if error != index.error:
            log.warning(
                "semantic_index_failed",
                workspace=workspace,
                error=error,
                retry_in_s=delay,
                exc_info=(type(exc), exc, exc.__traceback__),
            )
        else:
            log.warning(
                "semantic_index_still_failing",
                workspace=workspace,
                error=error,
                attempts=index.failures,
                retry_in_s=delay,
            )
        index.error = error

    # ------------------------------------------------------------------ indexing

    def _embed(self, texts: list[str]) -> Any:
        with self._encode_lock:
            return self._encoder.embed(texts)

    def _step(self, index: _Index) -> bool:
        """One turn of indexing ``index``'s workspace; True when work remains."""
        np = self._np
        ledger = index.ws.ledger
        if ledger is not index.ledger or ledger.generation != index.generation:
            with self._lock:
                if self._indexes.get(id(index.ws)) is index:  # not forgotten meanwhile
                    self._indexes[id(index.ws)] = _Index(index.ws, ledger, ledger.generation)
            return True
        seen = index.appended
        if not index.loaded:
            self._load(index)
        self._queue_entries(index)
        if index.entry_queue:
            pairs = list(index.entry_queue.items())[:EVENT_BATCH]
            found = store.entry_vectors(ledger, self.model_name, [h for h, _ in pairs])
            missing = [(h, t) for h, t in pairs if h not in found]
            made = self._embed([t for _, t in missing]) if missing else np.zeros((0, 1), np.float32)
            store.write_entries(
                ledger, self.model_name, [(h, made[i].tobytes()) for i, (h, _) in enumerate(missing)]
            )
            for h, blob in found.items():
                index.entries[h] = np.frombuffer(blob, np.float32)
            for i, (h, _) in enumerate(missing):
                index.entries[h] = made[i]
            for h, _ in pairs:
                index.entry_queue.pop(h, None)
        # Counted before the turn embeds anything: a turn takes seconds, and status must not
        # report a backlog as caught up meanwhile (the first turn after a restart least of all).
        self._count_pending(index)
        for _ in range(BATCHES_PER_TURN):
            rows = store.events_after(ledger, index.cursor, EVENT_BATCH)
            if not rows:
                break
            started = time.perf_counter()
            self._note_speakers(index, [r[3] for r in rows])
            names = list(index.speakers)
            made = self._embed([rules.without_names(rules.event_text(r[3]), names) for r in rows])
            store.write_events(
                ledger, self.model_name, [(r[0], made[i].tobytes()) for i, r in enumerate(rows)]
            )
            self.index_seconds += time.perf_counter() - started
            self.events_indexed += len(rows)
            self._add(index, [(r[1], r[2]) for r in rows], made)
            index.cursor = rows[-1][0]
            index.pending_events = max(0, index.pending_events - len(rows))
        self._count_pending(index)
        index.scanned = seen
        return bool(index.pending_events or index.entry_queue or index.scanned != index.appended)

    def _load(self, index: _Index) -> None:
        """Read the vectors the ledger holds (dropping another model's, any of the wrong
        size, and this model's when its weights changed under the same name, first)."""
        np = self._np
        ledger = index.ledger
        size = self._encoder.dim * 4  # float32
        if store.has_other_models(ledger, self.model_name, size):
            dropped = store.drop_other_models(ledger, self.model_name, size)
            if dropped.models:
                log.info(
                    "semantic_model_changed",
                    workspace=str(index.ws.path),
                    old_model=",".join(dropped.models),
                    new_model=self.model_name,
                    event_vectors_dropped=dropped.events,
                    entry_vectors_dropped=dropped.entries,
                )
        settled, gone = store.settle_fingerprint(ledger, self.model_name, self._encoder.fingerprint)
        if settled == "changed":
            log.warning(
                "semantic_model_weights_changed",
                workspace=str(index.ws.path),
                model=self.model_name,
                event_vectors_dropped=gone,
            )
        elif settled == "adopted":
            log.info(
                "semantic_model_fingerprint_adopted", workspace=str(index.ws.path), model=self.model_name
            )
        after = 0
        while True:
            page = store.stored_events(ledger, self.model_name, after, LOAD_PAGE)
            if not page:
                break
            matrix = np.frombuffer(b"".join(r[3] for r in page), np.float32).reshape(len(page), -1)
            self._note_speakers(index, [r[4] for r in page])
            self._add(index, [(r[1], r[2]) for r in page], matrix)
            after = page[-1][0]
        index.cursor = after
        self._count_pending(index)
        index.loaded = True

    @staticmethod
    def _count_pending(index: _Index) -> None:
        """Count the events past the cursor in the ledger. The appends notified so far are
        noted first: one committed meanwhile is then counted twice until the next count,
        never missed."""
        notified = index.events_appended
        index.pending_events = store.count_after(index.ledger, index.cursor)
        index.counted_at = notified

    def _note_speakers(self, index: _Index, texts: list[str]) -> None:
        for text in texts:
            label = rules.speaker(text)
            if label is not None and len(index.speakers) < MAX_SPEAKERS:
                index.speakers.setdefault(label, None)

    def _add(self, index: _Index, keys: list[tuple[str, int]], matrix: Any) -> None:
        np = self._np
        with index.lock:
            need = index.count + len(keys)
            if index.matrix is None or index.matrix.shape[0] < need:
                grown = np.zeros((max(need, 2 * index.count, 1024), matrix.shape[1]), np.float32)
                if index.matrix is not None:
                    grown[: index.count] = index.matrix[: index.count]
                index.matrix = grown
            index.matrix[index.count : need] = matrix
            for offset, key in enumerate(keys):
                index.rows[key] = index.count + offset
            index.keys.extend(keys)
            index.count = need

    def _queue_entries(self, index: _Index) -> None:
        """Queue the entries and proposals of MEMORY.md / PENDING.md versions not seen yet."""
        ws = index.ws
        shas = (ws.memory.sha256, ws.pending.sha256)
        if shas == index.seen_docs:
            return
        index.seen_docs = shas
        texts: list[str] = []
        for tracked in (ws.memory, ws.pending):
            doc = tracked.doc
            for section in doc.sections:
                if section.entry.status in ("active", "proposed"):
                    texts.append(rules.entry_text(redact_entry(section.entry)))
        self.queue_texts(index, texts)

    def queue_texts(self, index: _Index, texts: Iterable[str]) -> None:
        for text in texts:
            key = text_hash(text)
            if key not in index.entries:
                index.entry_queue.setdefault(key, text)

    # ------------------------------------------------------------------ requests

    def search_soon(
        self,
        ws: Workspace,
        query: str,
        ceilings: Mapping[str, int] | None,
        history: bool,
        levels: Sequence[tuple[Workspace, Mapping[str, Entry]]] = (),
    ) -> Future[Dense | None]:
        """``search`` on the channel's own threads: the caller reads the history and the
        full-text candidates meanwhile and takes ``result()``."""
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(
                        max_workers=QUERY_THREADS, thread_name_prefix="semantic-query"
                    )
        return self._pool.submit(self.search, ws, query, ceilings, history, levels)

    def search(
        self,
        ws: Workspace,
        query: str,
        ceilings: Mapping[str, int] | None,
        history: bool,
        levels: Sequence[tuple[Workspace, Mapping[str, Entry]]] = (),
    ) -> Dense | None:
        """The query's vector; when ``history``, the events nearest it that the caller may
        see (``ceilings``: the newest seq per session; ``nearest_events``); and each level's
        entries' cosines with it (``levels``: a workspace and its entries by id;
        ``memory_cosines``, cut to the nearest by ``MemoryCosines.nearest``). None while
        there is no vector."""
        vector = self.query_vector(ws, query)
        if vector is None:
            return None
        events = self.nearest_events(ws, vector, ceilings) if history else None
        return Dense(vector, events, [self.memory_cosines(level, by_id, vector) for level, by_id in levels])

    def query_vector(self, ws: Workspace, query: str) -> Any:
        """The vector of ``query`` without the workspace's speaker names
        (``makad.core.semantic``), kept for the last ``QUERY_CACHE`` texts; None while the
        model is not ready or the workspace not yet loaded."""
        index = self._index(ws)
        if not self.ready or index is None or not index.loaded or not query.strip():
            return None
        text = rules.without_names(query, list(index.speakers))[: rules.EMBED_MAX_CHARS]
        with self._query_lock:
            found = self._queries.get(text)
            if found is not None:
                self._queries.move_to_end(text)
                return found
        vector = self._encoder.embed_queries([text])[0]
        with self._query_lock:
            self._queries[text] = vector
            while len(self._queries) > QUERY_CACHE:
                self._queries.popitem(last=False)
        return vector

    def _calibrated(self, cosines: Any) -> Any:
        """Cosines on the rules' scale (``makad.core.semantic.calibrated`` with the model's
        baseline): all-MiniLM-L6-v2's, onto which another model's are mapped."""
        return rules.calibrated(cosines, self._baseline)

    def _index(self, ws: Workspace) -> _Index | None:
        index = self._indexes.get(id(ws))
        if index is None:
            self.touch(ws)
            return None
        return index

    def memory_cosines(self, ws: Workspace, by_id: Mapping[str, Entry], vector: Any) -> MemoryCosines | None:
        """Every entry's cosine with ``vector`` (those without a vector yet are queued for
        the indexer and left out); None without any."""
        index = self._index(ws)
        if index is None or vector is None:
            return None
        np = self._np
        searched = index.searched
        if searched is not None and searched[0] is by_id:
            _, ids, matrix = searched
            return MemoryCosines(ids, self._calibrated(matrix @ vector))
        ids = []
        rows: list[Any] = []
        missing: list[str] = []
        for entry in by_id.values():
            text = rules.entry_text(entry)
            found = index.entries.get(text_hash(text))
            if found is None:
                missing.append(text)
            else:
                ids.append(entry.id)
                rows.append(found)
        if missing:
            self.queue_texts(index, missing)
            self._wake.set()
        if not rows:
            return None
        matrix = np.stack(rows)
        if not missing:
            index.searched = (by_id, ids, matrix)
        return MemoryCosines(ids, self._calibrated(matrix @ vector))

    def similar(
        self, ws: Workspace, content: str, candidates: Sequence[Entry], exclude: str | None = None
    ) -> list[tuple[str, float]]:
        """The candidates nearest ``content`` above the near-duplicate floor, by id."""
        index = self._index(ws)
        if index is None or not self.ready:
            return []
        vector = self._embed([content[: rules.EMBED_MAX_CHARS]])[0]
        np = self._np
        scored: list[tuple[str, float]] = []
        for entry in candidates:
            if entry.id == exclude:
                continue
            found = index.entries.get(text_hash(rules.entry_text(entry)))
            if found is not None:
                scored.append((entry.id, float(self._calibrated(np.dot(found, vector)))))
        return rules.nearest(scored, len(scored), rules.SIMILAR_MIN_COSINE)

    def proposed(self, ws: Workspace, entry: Entry) -> None:
        """A proposal was queued: its vector is made in the background."""
        index = self._index(ws)
        if index is not None:
            self.queue_texts(index, [rules.entry_text(entry)])
            self._wake.set()

    def _feedback_reach(
        self, matrix: Any, vector: Any, sims: Any, keys: list[tuple[str, int]], ceilings: Mapping[str, int]
    ) -> Any:
        """How near each event is, counting the second search: the larger of its cosine with
        the query (``sims``) and with the query moved toward the nearest events the caller
        may see (``makad.core.semantic.feedback_query``); ``sims`` when nothing moves it."""
        np = self._np
        k = rules.RECALL_FEEDBACK_K
        if k <= 0:
            return sims
        want = min(len(sims), 4 * k)
        top = np.argpartition(-sims, want - 1)[:want] if want < len(sims) else np.arange(len(sims))
        order = [int(row) for row in top[np.argsort(-sims[top], kind="stable")]]

        def allowed(row: int) -> bool:
            sid, seq = keys[row]
            ceiling = ceilings.get(sid)
            return ceiling is None or seq <= ceiling

        rows = rules.feedback_rows(order, sims, allowed, k)
        if not rows:
            return sims
        moved = rules.feedback_query(vector, matrix[rows], rules.RECALL_FEEDBACK_BETA)
        return np.maximum(sims, self._calibrated(matrix @ moved))

    def nearest_events(
        self, ws: Workspace, vector: Any, max_seq_by_session: Mapping[str, int] | None
    ) -> NearestEvents | None:
        """The dense half of history recall, which needs no full-text hit: every event's
        cosine with ``vector`` and the events nearest it (counting dense feedback), best
        first, at or above the floor and within ``max_seq_by_session``. None when the
        workspace has no vectors yet."""
        index = self._index(ws)
        if index is None or vector is None:
            return None
        np = self._np
        with index.lock:
            count = index.count
            matrix = index.matrix
            keys = index.keys
            rows = index.rows
        if count == 0:
            return None
        sims = self._calibrated(matrix[:count] @ vector)
        ceilings = max_seq_by_session or {}
        reach = self._feedback_reach(matrix[:count], vector, sims, keys, ceilings)
        # The best 3 × RECALL_DENSE_K by reach: enough that RECALL_DENSE_K remain once the
        # full-text hits among them are left out (``join``).
        want = min(count, rules.RECALL_DENSE_K * 3)
        top = np.argpartition(-reach, want - 1)[:want] if want < count else np.arange(count)
        top = top[np.asarray(reach[top], np.float64) >= rules.RECALL_MIN_COSINE]
        scored = []
        for row, score in zip(top.tolist(), reach[top].tolist(), strict=True):
            sid, seq = keys[row]
            ceiling = ceilings.get(sid)
            if ceiling is None or seq <= ceiling:
                scored.append((f"{sid}\x00{seq}", score))
        ranked = rules.nearest(scored, len(scored), rules.RECALL_MIN_COSINE)
        return NearestEvents(sims, rows, count, ranked)

    def join(
        self,
        ws: Workspace,
        hits: list[RecallHit],
        found: NearestEvents | None,
        max_seq_by_session: Mapping[str, int] | None,
    ) -> list[RecallHit]:
        """``hits`` with their cosine, plus the nearest events not among them (with their
        neighbours), as ``makad.core.semantic``'s history rule says. The neighbours the
        full-text hits came with are not read again."""
        if found is None:
            return hits
        sims, rows, count = found.sims, found.rows, found.count
        out = []
        seen: set[tuple[str, int]] = set()
        known: dict[tuple[str, int], Event] = {}
        for hit in hits:
            key = (hit.event.session_id, hit.event.seq)
            seen.add(key)
            known[key] = hit.event
            for other in hit.neighbours:
                known[(other.session_id, other.seq)] = other
            row = rows.get(key)
            out.append(hit if row is None or row >= count else _with_similarity(hit, float(sims[row])))
        chosen = []
        for joined, _ in found.ranked:
            place, number = joined.split("\x00")
            if (place, int(number)) not in seen:
                chosen.append((place, int(number)))
                if len(chosen) == rules.RECALL_DENSE_K:
                    break
        if not chosen:
            return out
        ceilings = max_seq_by_session or {}
        wanted: dict[str, set[int]] = {}
        for sid, seq in chosen:
            last = seq + RADIUS
            ceiling = ceilings.get(sid)
            if ceiling is not None:
                last = min(last, ceiling)
            for s in range(max(seq - RADIUS, 1), last + 1):
                if (sid, s) not in known:
                    wanted.setdefault(sid, set()).add(s)
        around = dict(known)
        spans = [(sid, first, last) for sid, seqs in wanted.items() for first, last in _runs(seqs)]
        around.update({(e.session_id, e.seq): e for e in ws.ledger.read_event_spans(spans)})
        for sid, seq in chosen:
            event = around.get((sid, seq))
            if event is None:  # forgotten since it was indexed
                continue
            ceiling = ceilings.get(sid)
            near = [
                around[(sid, s)]
                for s in range(seq - RADIUS, seq + RADIUS + 1)
                if s != seq and (sid, s) in around and (ceiling is None or s <= ceiling)
            ]
            # What it carries into the ranking: its cosine with the query itself.
            similarity = float(sims[rows[(sid, seq)]])
            out.append(RecallHit(event=event, bm25=0.0, neighbours=near, similarity=similarity))
        return out

    def recall(
        self,
        ws: Workspace,
        hits: list[RecallHit],
        vector: Any,
        max_seq_by_session: Mapping[str, int] | None,
    ) -> list[RecallHit]:
        """``hits`` joined by the events nearest ``vector`` (``nearest_events``, ``join``)."""
        return self.join(ws, hits, self.nearest_events(ws, vector, max_seq_by_session), max_seq_by_session)


def _runs(seqs: set[int]) -> list[tuple[int, int]]:
    """``seqs`` as ranges of consecutive numbers, first to last."""
    out: list[tuple[int, int]] = []
    for seq in sorted(seqs):
        if out and seq == out[-1][1] + 1:
            out[-1] = (out[-1][0], seq)
        else:
            out.append((seq, seq))
    return out


def _with_similarity(hit: RecallHit, similarity: float) -> RecallHit:
    return RecallHit(event=hit.event, bm25=hit.bm25, neighbours=hit.neighbours, similarity=similarity)

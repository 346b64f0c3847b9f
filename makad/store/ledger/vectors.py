"""The semantic channel's vectors in a workspace's ledger (tables ``event_vectors`` and
``entry_vectors``).

A vector is the raw little-endian float32 bytes of one unit row, tagged with the model
that made it: rows of another model are never read, and are dropped when a workspace is
indexed with a new one; so are rows of the wrong size (``size``: a damaged or foreign
ledger), and when an event's is, every event's of the model is (the indexer's cursor
only moves forward: the events are embedded again from the first). Beside them, in the
``meta`` table (key ``vector_fingerprint:<model>``), each model's fingerprint (its
weights' sampled blocks, then its tokenizer's and settings' digest): when either changes
under a name (a fine-tune exported into the same folder, another vocabulary or pooling),
that model's vectors are dropped too (``settle_fingerprint``). Vectors are derived
data, so they are written with relaxed commits (``LedgerBase.transaction(relaxed=True)``):
one lost to a power cut is computed again; and they are not counted among the ledger's
writes (``derived=True``: the attention keeper has no new input to look at). An event's
vector goes with the event when it is forgotten (a trigger). Callers run these in worker
threads; none of them reads or writes more than its arguments bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from makad.store.ledger import Ledger

FINGERPRINT_KEY: Final = "vector_fingerprint:"
# Every key starting with FINGERPRINT_KEY sorts from it up to (not including) this one.
_FINGERPRINT_END: Final = "vector_fingerprint;"
Settled = Literal["recorded", "adopted", "kept", "changed"]
# Separates a fingerprint's weights part from its settings part (tokenizer, pooling,
# prefixes); a stored fingerprint without it covers the weights alone.
_SETTINGS_MARK: Final = "+"

Pending = tuple[int, str, int, str]  # event id, session id, seq, text
Stored = tuple[int, str, int, bytes, str]  # event id, session id, seq, vector, text head


def newest_event_id(ledger: Ledger) -> int:
    """The id of the newest event (0 in an empty ledger)."""
    with ledger.snapshot() as conn:
        row = conn.execute("SELECT MAX(id) FROM events").fetchone()
    return int(row[0] or 0)


def events_after(ledger: Ledger, after_id: int, limit: int) -> list[Pending]:
    """Up to ``limit`` events with an id above ``after_id``, oldest first."""
    with ledger.snapshot() as conn:
        rows = conn.execute(
            "SELECT id, session_id, seq, text FROM events WHERE id > ? ORDER BY id LIMIT ?",
            (after_id, limit),
        ).fetchall()
    return [(int(r[0]), str(r[1]), int(r[2]), str(r[3])) for r in rows]


def count_after(ledger: Ledger, after_id: int) -> int:
    """How many events have an id above ``after_id``."""
    with ledger.snapshot() as conn:
        row = conn.execute("SELECT COUNT(*) FROM events WHERE id > ?", (after_id,)).fetchone()
    return int(row[0])


def stored_events(ledger: Ledger, model: str, after_id: int, limit: int) -> list[Stored]:
    """Up to ``limit`` of ``model``'s event vectors past ``after_id``, by event id, with the
    event's place and the first 100 characters of its text."""
    with ledger.snapshot() as conn:
        rows = conn.execute(
            "SELECT v.event_id, e.session_id, e.seq, v.vec, substr(e.text, 1, 100) FROM event_vectors v "
            "JOIN events e ON e.id = v.event_id WHERE v.model = ? AND v.event_id > ? "
            "ORDER BY v.event_id LIMIT ?",
            (model, after_id, limit),
        ).fetchall()
    return [(int(r[0]), str(r[1]), int(r[2]), bytes(r[3]), str(r[4])) for r in rows]


def write_events(ledger: Ledger, model: str, rows: Sequence[tuple[int, bytes]]) -> None:
    """Store event vectors (replacing any for the same events); skips forgotten events."""
    if not rows:
        return
    with ledger.transaction(relaxed=True, derived=True) as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO event_vectors (event_id, model, vec) "
            "SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM events WHERE id = ?)",
            [(event_id, model, vec, event_id) for event_id, vec in rows],
        )


def entry_vectors(ledger: Ledger, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
    """``model``'s stored vectors of the given entry-text hashes (those it has)."""
    wanted = list(dict.fromkeys(hashes))
    out: dict[str, bytes] = {}
    with ledger.snapshot() as conn:
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for text_hash, vec in conn.execute(
                f"SELECT text_hash, vec FROM entry_vectors WHERE model = ? AND text_hash IN ({marks})",
                (model, *chunk),
            ):
                out[str(text_hash)] = bytes(vec)
    return out


def write_entries(ledger: Ledger, model: str, rows: Sequence[tuple[str, bytes]]) -> None:
    """Store entry-text vectors by the text's hash."""
    if not rows:
        return
    with ledger.transaction(relaxed=True, derived=True) as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO entry_vectors (text_hash, model, vec) VALUES (?, ?, ?)",
            [(text_hash, model, vec) for text_hash, vec in rows],
        )


@dataclass(frozen=True)
class Dropped:
    """What ``drop_other_models`` deleted: the other models whose vectors were stored, and
    how many event and entry vectors went (``model``'s of the wrong size among them)."""

    models: tuple[str, ...]
    events: int
    entries: int


def drop_other_models(ledger: Ledger, model: str, size: int | None = None) -> Dropped:
    """Delete every vector another model made, and (``size``: a vector's bytes) every one
    of ``model``'s of another size (all its event vectors when one is)."""
    with ledger.transaction(relaxed=True, derived=True) as conn:
        others = tuple(
            sorted(
                str(name)
                for (name,) in conn.execute(
                    "SELECT model FROM event_vectors WHERE model != ? "
                    "UNION SELECT model FROM entry_vectors WHERE model != ?",
                    (model, model),
                )
            )
        )
        if conn.execute(_BAD_EVENT, (model, size, size)).fetchone()[0]:
            gone = conn.execute("DELETE FROM event_vectors").rowcount
        else:
            gone = conn.execute("DELETE FROM event_vectors WHERE model != ?", (model,)).rowcount
        entries = conn.execute(
            f"DELETE FROM entry_vectors WHERE model != ? OR {_WRONG_SIZE}", (model, size, size)
        ).rowcount
        conn.execute(
            "DELETE FROM meta WHERE key >= ? AND key < ? AND key != ?",
            (FINGERPRINT_KEY, _FINGERPRINT_END, FINGERPRINT_KEY + model),
        )
    return Dropped(others, int(gone), int(entries))


def settle_fingerprint(ledger: Ledger, model: str, fingerprint: str) -> tuple[Settled, int]:
    """Compare ``model``'s fingerprint with the one the ledger keeps: none kept and no
    vector of ``model`` (a workspace new to it) → ``fingerprint`` is recorded; none kept
    beside its vectors (written before fingerprints were), or one of the weights alone that
    matches ``fingerprint``'s weights part (written before settings were fingerprinted) →
    ``fingerprint`` is adopted, the vectors kept; the same → kept; another → every vector
    of ``model`` is dropped (they were made by other weights or settings under the same
    name) and ``fingerprint`` kept instead, in one transaction. The outcome, and how many
    event vectors went."""
    key = FINGERPRINT_KEY + model
    with ledger.snapshot() as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    if row is not None and str(row[0]) == fingerprint:
        return "kept", 0
    with ledger.transaction(relaxed=True, derived=True) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        stored = None if row is None else str(row[0])
        outcome: Settled = "kept" if stored == fingerprint else "changed"
        weights_only = stored is not None and _SETTINGS_MARK not in stored
        if stored is None or (weights_only and fingerprint.startswith(f"{stored}{_SETTINGS_MARK}")):
            outcome = "adopted"
        if stored is None and not conn.execute(_HAS_MODEL, (model, model)).fetchone()[0]:
            outcome = "recorded"
        gone = 0
        if outcome == "changed":
            gone = conn.execute("DELETE FROM event_vectors WHERE model = ?", (model,)).rowcount
            conn.execute("DELETE FROM entry_vectors WHERE model = ?", (model,))
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, fingerprint))
    return outcome, int(gone)


_HAS_MODEL = (
    "SELECT EXISTS (SELECT 1 FROM event_vectors WHERE model = ?) "
    "OR EXISTS (SELECT 1 FROM entry_vectors WHERE model = ?)"
)
_WRONG_SIZE = "(? IS NOT NULL AND (typeof(vec) != 'blob' OR length(vec) != ?))"
_BAD_EVENT = f"SELECT EXISTS (SELECT 1 FROM event_vectors WHERE model = ? AND {_WRONG_SIZE})"


def has_other_models(ledger: Ledger, model: str, size: int | None = None) -> bool:
    """Whether any vector of another model is stored, or (``size``) of ``model`` and
    another size."""
    with ledger.snapshot() as conn:
        row = conn.execute(
            f"SELECT EXISTS (SELECT 1 FROM event_vectors WHERE model != ? OR {_WRONG_SIZE}) "
            f"OR EXISTS (SELECT 1 FROM entry_vectors WHERE model != ? OR {_WRONG_SIZE})",
            (model, size, size, model, size, size),
        ).fetchone()
    return bool(row[0])

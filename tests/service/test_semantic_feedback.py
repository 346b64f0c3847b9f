"""The semantic channel's dense feedback in history recall, on a real ledger with hand-made
vectors: an event only the moved query reaches becomes a candidate, with its cosine with the
query itself as its similarity; the search runs apart from the full-text hits and reuses the
rows they read. Skipped, saying so, without numpy."""

from __future__ import annotations

from typing import Any, cast

import pytest

from makad.core import semantic as rules
from makad.core.context_types import RecallHit
from makad.core.types import Entry, Event, EventInput
from makad.service import embeddings
from makad.store.ledger import Ledger
from makad.store.workspaces import Workspace

NOW = 1_700_000_000_000


class _Workspace:
    """What the channel's recall reads of a workspace: its ledger."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger


def _channel(ledger: Ledger, vectors: list[list[float]]) -> tuple[embeddings.SemanticChannel, Workspace, Any]:
    """A ready channel whose index holds one session of events with ``vectors``, in order."""
    np = pytest.importorskip("numpy", reason="the semantic channel needs numpy")
    info = ledger.open_session("s" * 32, title="earlier", now=NOW)
    ledger.append_events(
        info.session_id,
        [EventInput(type="user_message", text=f"turn {i}", ts=NOW + i) for i in range(len(vectors))],
        now=NOW,
    )
    channel = embeddings.SemanticChannel("hand-made")
    channel.state, channel._np, channel._baseline = "ready", np, rules.REFERENCE_BASELINE
    ws = cast(Workspace, _Workspace(ledger))
    index = embeddings._Index(ws, ledger, ledger.generation, loaded=True)
    channel._indexes[id(ws)] = index
    keys = [(info.session_id, seq) for seq in range(1, len(vectors) + 1)]
    channel._add(index, keys, np.array(vectors, dtype=np.float32))
    return channel, ws, np


def test_feedback_adds_what_the_moved_query_reaches(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn orthogonal to the query but close to its best match is recalled, carrying its
    cosine with the query (0); without feedback it is not."""
    # Turn 1 answers the query; turn 4 shares turn 1's topic, not the query's; turn 7 neither.
    # Far apart, so that no turn is another's neighbour.
    vectors = [[0.0, 0.0, 1.0]] * 7
    vectors[0] = [0.8, 0.6, 0.0]
    vectors[3] = [0.0, 1.0, 0.0]
    channel, ws, np = _channel(ledger, vectors)
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    monkeypatch.setattr(rules, "RECALL_FEEDBACK_K", 1)
    found = {hit.event.seq: hit.similarity for hit in channel.recall(ws, [], query, None)}
    assert set(found) == {1, 4}
    assert found[1] == pytest.approx(0.8) and found[4] == pytest.approx(0.0)
    monkeypatch.setattr(rules, "RECALL_FEEDBACK_K", 0)
    assert {hit.event.seq for hit in channel.recall(ws, [], query, None)} == {1}


def test_feedback_ignores_what_the_caller_may_not_see(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events past the session's ceiling neither join nor move the query."""
    vectors = [[0.0, 0.0, 1.0]] * 7
    vectors[0] = [0.0, 1.0, 0.0]
    vectors[6] = [0.8, 0.6, 0.0]
    channel, ws, np = _channel(ledger, vectors)
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    monkeypatch.setattr(rules, "RECALL_FEEDBACK_K", 1)
    hits = channel.recall(ws, [], query, {"s" * 32: 5})
    assert hits == []


def test_dense_candidates_reuse_the_rows_full_text_read(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dense candidate beside a full-text hit gets all its neighbours, reading from the
    ledger only those the hit did not come with."""
    vectors = [[0.0, 0.0, 1.0]] * 12
    vectors[4] = [1.0, 0.0, 0.0]  # turn 5: the only one near the query
    channel, ws, np = _channel(ledger, vectors)
    sid = "s" * 32
    around = {e.seq: e for e in ledger.read_event_spans([(sid, 1, 12)])}
    hit = RecallHit(event=around[3], bm25=1.0, neighbours=[around[s] for s in (1, 2, 4, 5)])
    spans: list[tuple[str, int, int]] = []
    read = ledger.read_event_spans

    def counted(asked: list[tuple[str, int, int]]) -> list[Event]:
        spans.extend(asked)
        return read(asked)

    monkeypatch.setattr(ledger, "read_event_spans", counted)
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    found = channel.recall(ws, [hit], query, None)
    assert [h.event.seq for h in found] == [3, 5]
    assert [e.seq for e in found[1].neighbours] == [3, 4, 6, 7]
    assert [e.text for e in found[1].neighbours] == [around[s].text for s in (3, 4, 6, 7)]
    assert spans == [(sid, 6, 7)]


def test_search_runs_the_dense_history_search_with_the_vector(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``search`` gives the query's vector and, when asked for history, the events nearest
    it best first; without history only the vector."""
    monkeypatch.setattr(rules, "RECALL_FEEDBACK_K", 0)
    vectors = [[0.0, 0.0, 1.0]] * 6
    vectors[1] = [1.0, 0.0, 0.0]
    vectors[4] = [0.6, 0.8, 0.0]
    channel, ws, np = _channel(ledger, vectors)
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    channel.query_vector = lambda ws, text: query  # type: ignore[method-assign]
    found = channel.search_soon(ws, "which one", None, True).result()
    assert found is not None and found.events is not None
    assert found.vector is query
    assert [joined.split("\x00")[1] for joined, _ in found.events.ranked] == ["2", "5"]
    assert found.events.ranked[1][1] == pytest.approx(0.6)
    alone = channel.search(ws, "which one", None, False)
    assert alone is not None and alone.events is None and alone.memory == []
    channel.stop()


def test_search_matches_each_levels_entries(ledger: Ledger) -> None:
    """``search`` gives, per level asked for, its entries' cosines, whose nearest above the
    floor are the level's matches."""
    channel, ws, np = _channel(ledger, [[0.0, 0.0, 1.0]])
    near = Entry(id="near", title="Prefers pnpm", content="always pnpm")
    far = Entry(id="far", title="Deploys on Fridays", content="never")
    index = channel._indexes[id(ws)]
    index.entries[embeddings.text_hash(rules.entry_text(near))] = np.array([0.6, 0.8, 0.0], np.float32)
    index.entries[embeddings.text_hash(rules.entry_text(far))] = np.array([0.0, 1.0, 0.0], np.float32)
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    channel.query_vector = lambda ws, text: query  # type: ignore[method-assign]
    levels = [(ws, {"near": near, "far": far}), (ws, {"far": far})]
    found = channel.search(ws, "which package manager", None, False, levels)
    assert found is not None and all(level is not None for level in found.memory)
    matches = [level.nearest(0)[0] for level in found.memory if level is not None]
    assert [[entry_id for entry_id, _ in level] for level in matches] == [["near"], []]
    assert matches[0][0][1] == pytest.approx(0.6)

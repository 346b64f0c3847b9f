"""lab/recall_directions.py: query decomposition and hit fusion behave as lab/README.md describes."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "lab")]

from makad.core.context_types import RecallHit  # noqa: E402
from makad.core.types import Event  # noqa: E402
from recall_directions import fuse, sub_queries  # noqa: E402


def _event(seq: int, text: str = "Ann: hi") -> Event:
    return Event(session_id="s1", seq=seq, ts=seq, type="user_message", text=text)


def test_sub_queries_split_clauses_and_ask_once_per_named_entity() -> None:
    """A conjunctive question gives its clauses plus one query per entity (possessives and names ending in s kept whole)."""
    subs = sub_queries("What did Jess and Bob's sister both paint?", entities=True)
    assert "What did Jess" in subs
    assert any(s.startswith("Jess ") and "paint" in s for s in subs)
    assert any(s.startswith("Bob ") and "paint" in s for s in subs)


def test_a_question_with_one_clause_and_one_name_is_not_decomposed() -> None:
    """No connective and a single entity: nothing to split, so the first query stands alone."""
    assert sub_queries("What is Caroline's identity?", entities=True) == []


def test_fuse_scales_extra_hits_below_the_first_query_and_keeps_or_adds_strengths() -> None:
    """Extra hits are scaled to ``share`` of the first query's best; "max" keeps the stronger, "add" sums."""
    base = [RecallHit(event=_event(1), bm25=-10.0), RecallHit(event=_event(5), bm25=-2.0)]
    loaded: Any = SimpleNamespace(events={"s1": [_event(i) for i in range(1, 9)]})
    extra = [(_event(5), 4.0), (_event(7), 2.0)]
    by_seq = {h.event.seq: h for h in fuse(loaded, base, extra, 0.5, "max")}
    assert by_seq[1].bm25 == -10.0
    assert by_seq[5].bm25 == -5.0  # 4.0 scaled to 0.5 * 10 beats its own 2.0
    assert by_seq[7].bm25 == -2.5 and [e.seq for e in by_seq[7].neighbours] == [5, 6, 8]
    added = {h.event.seq: h for h in fuse(loaded, base, extra, 0.5, "add")}
    assert added[5].bm25 == -7.0

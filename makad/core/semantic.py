"""The optional semantic channel's rules: what text is embedded, which dense matches count.

The channel (``makad[semantic]``, ``makad.service.embeddings``) adds candidates a
sentence-embedding model finds to those full-text search finds — a union, never a
replacement — and hands each one's cosine to the ranking (``makad.core.ranking`` for
memory, ``makad.core.recall`` for history, where it is the ``semantic`` part of the
trace). These rules are pure so that the same inputs always give the same candidates:

- **Texts.** An entry is embedded as ``title. content`` (the redacted text the index
  holds); an event as its text without the speaker label it opens with (``Ann: …``),
  cut to ``EMBED_MAX_CHARS``. Events and queries lose the words of the names that label
  speakers in the workspace's history (known when the text is embedded): a name says
  who, not what, and would pull every turn of that speaker up (measured on
  LoCoMo-style data: masking lifted multi-hop recall).
- **Scale.** Models differ in the cosine they give unrelated texts (all-MiniLM-L6-v2
  about 0.04, e5 about 0.73), and the floors and weights here were measured with
  all-MiniLM-L6-v2. So every model's cosine is ``calibrated`` onto all-MiniLM-L6-v2's
  scale: linearly, its baseline (its mean query/document cosine over a fixed set of
  unrelated sentences) onto ``REFERENCE_BASELINE`` and 1 onto 1.
- **Memory.** The ``MEMORY_DENSE_K`` entries nearest the query with a cosine of at
  least ``MEMORY_MIN_COSINE`` join the candidates; only they carry a similarity, and
  their score's semantic part is their cosine over the best candidate's
  (``makad.core.ranking``). Memory's leftover room, after the entries that match (by a
  word, a tag or the channel), goes first to the ``MEMORY_NEAR_K`` entries nearest the
  query that match nothing, nearest first and whatever their cosine, then in fill order
  (``memory_nearest``; ``makad.core.memory_segment``).
- **History.** The ``RECALL_DENSE_K`` nearest events with a cosine of at least
  ``RECALL_MIN_COSINE`` join the full-text hits (their ``bm25`` 0); every hit the
  channel has a vector for carries its cosine, which also lifts the turns around it
  (``makad.core.recall``'s ``context`` part, ``DENSE_SPREAD``). "Nearest" counts two
  searches (dense pseudo-relevance feedback): one with the query, one with the query
  moved toward its ``RECALL_FEEDBACK_K`` nearest events (``feedback_query``); an event
  is as near as the better of its two cosines, so the turns that share a topic with the
  best matches but not the question's wording become candidates (the evidence of a
  multi-hop question is spread over several such turns). What a candidate carries into
  the ranking (the trace's ``semantic`` part) is still its cosine with the query itself.
- **Near-duplicate proposals.** An entry whose cosine with a proposal is at least
  ``SIMILAR_MIN_COSINE`` is similar to it, after those the fuzzy match finds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from makad.core.render import SPEAKER_LABEL
from makad.core.types import Entry

MEMORY_DENSE_K: Final = 20
MEMORY_MIN_COSINE: Final = 0.2
# How many entries past the matches fill memory's leftover room by their cosine first.
MEMORY_NEAR_K: Final = 100
RECALL_DENSE_K: Final = 50
RECALL_MIN_COSINE: Final = 0.2
SIMILAR_MIN_COSINE: Final = 0.6
# Dense feedback (``feedback_query``): how many of the events nearest the query move it, and
# how far (0 events: no second search).
RECALL_FEEDBACK_K: Final = 5
RECALL_FEEDBACK_BETA: Final = 0.5
EMBED_MAX_CHARS: Final = 2_000
# all-MiniLM-L6-v2's baseline (``Encoder.baseline()``): the scale the rules were measured on.
REFERENCE_BASELINE: Final = 0.0383
_LABEL_SCAN: Final = 100
_EDGE_PUNCTUATION: Final = "\"'“”‘’()[]{}<>,.;:!?"


def entry_text(entry: Entry) -> str:
    """What an entry is embedded as: its title and content."""
    title = entry.title.strip()
    content = entry.content.strip()
    text = f"{title}. {content}" if title and content else title or content
    return text[:EMBED_MAX_CHARS]


def event_text(text: str) -> str:
    """What an event is embedded as: its text without a leading speaker label."""
    head = text[:_LABEL_SCAN]
    if ":" in head:
        match = SPEAKER_LABEL.match(head)
        if match is not None:
            text = text[match.end() :]
    return text[:EMBED_MAX_CHARS]


def speaker(text: str) -> str | None:
    """The speaker label an event's text opens with, if any."""
    head = text[:_LABEL_SCAN]
    if ":" not in head:
        return None
    match = SPEAKER_LABEL.match(head)
    return match.group(1) if match else None


def without_names(text: str, speakers: Iterable[str]) -> str:
    """``text`` without the words of the given speaker names (and their ``'s``); a text of
    names only is kept whole."""
    names = {w.casefold() for name in speakers for w in name.split() if len(w) > 1}
    if not names:
        return text
    kept = []
    for word in text.split():
        bare = word.strip(_EDGE_PUNCTUATION)
        for suffix in ("'s", "’s"):
            bare = bare.removesuffix(suffix)
        if bare.casefold() not in names:
            kept.append(word)
    return " ".join(kept) or text


def calibrated(cosine: Any, baseline: float) -> Any:
    """``cosine`` (a number or an array) of a model whose unrelated texts score ``baseline``,
    on the reference scale: ``baseline`` maps to ``REFERENCE_BASELINE``, 1 to 1."""
    if baseline >= 1.0:
        return cosine
    return REFERENCE_BASELINE + (cosine - baseline) * ((1.0 - REFERENCE_BASELINE) / (1.0 - baseline))


def feedback_query(query: Any, nearest_rows: Any, beta: float) -> Any:
    """``query`` moved toward the mean of ``nearest_rows`` (Rocchio): the unit vector along
    ``query + beta * mean(nearest_rows)``; ``query`` itself when there are no rows, ``beta``
    is not positive or the sum is zero. For numpy vectors (a row per nearest event)."""
    if len(nearest_rows) == 0 or beta <= 0.0:
        return query
    moved = query + beta * (sum(nearest_rows) / len(nearest_rows))
    norm = float(moved @ moved) ** 0.5
    return query if norm == 0.0 else moved / norm


def feedback_rows(order: Iterable[int], cosines: Any, allowed: Callable[[int], bool], k: int) -> list[int]:
    """The first ``k`` rows of ``order`` (best first) that are ``allowed`` and have a cosine of
    at least ``RECALL_MIN_COSINE``: the events that move the query."""
    rows: list[int] = []
    if k <= 0:
        return rows
    for row in order:
        if cosines[row] < RECALL_MIN_COSINE:
            break
        if allowed(row):
            rows.append(row)
            if len(rows) == k:
                break
    return rows


def nearest(scores: Sequence[tuple[str, float]], k: int, floor: float) -> list[tuple[str, float]]:
    """The ``k`` best ``(key, cosine)`` pairs at or above ``floor``, best first (ties by key)."""
    kept = [(key, score) for key, score in scores if score >= floor]
    kept.sort(key=lambda pair: (-pair[1], pair[0]))
    return kept[:k]


def memory_nearest(
    scored: Sequence[tuple[str, float]], lexical: int
) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """The memory rule on every entry's ``(id, cosine)``: the matches (the ``MEMORY_DENSE_K``
    nearest at or above ``MEMORY_MIN_COSINE``) and the nearest whatever their cosine, best
    first, as many as the leftover-room rule may need to find ``MEMORY_NEAR_K`` past the
    matches (``lexical``: how many candidates full-text search found, which may match too)."""
    ordered = nearest(scored, MEMORY_DENSE_K + lexical + MEMORY_NEAR_K, float("-inf"))
    found = [pair for pair in ordered[:MEMORY_DENSE_K] if pair[1] >= MEMORY_MIN_COSINE]
    return found, ordered


def union_similar(fuzzy: Sequence[str], dense: Sequence[tuple[str, float]], limit: int) -> list[str]:
    """The fuzzy matches first, then the dense ones not among them, at most ``limit``."""
    out = list(fuzzy)
    for key, _ in dense:
        if key not in out:
            out.append(key)
    return out[:limit]

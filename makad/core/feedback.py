"""Expanding a recall query with words from its own best hits (pseudo-relevance feedback).

The turn that holds an answer often shares no word with the question ("which
package manager for the frontend" vs "we prefer pnpm over npm"), but it
shares words with the turns that do match: in this workspace, "frontend" sits
next to "pnpm". So after the first search, the words that recur across the
best ``FEEDBACK_DOCS`` hits, weighted by how strongly each hit matched, become
a second query (RM3-style feedback, computed from the workspace's own ledger
at query time: nothing to maintain at append time).

Its hits join the candidates with their BM25 scaled to at most ``FEEDBACK_SHARE``
of the first query's best, so they fill room the question's own words leave
and never outrank what the question matched directly.

Words are compared by their Porter stem (snowball's ``porter``, the algorithm
of the FTS5 ``porter`` tokenizer the ledger indexes with), so "activity" does
not come back as an expansion of "activities"; stop words and the words that
frame questions (``makad.core.cjk``), words of three letters or fewer, numbers
and the speaker labels that open transcript lines are not candidates. Pure and
deterministic: ties break alphabetically.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from functools import cache, lru_cache
from typing import Any, Final

from makad.core.cjk import QUERY_NOISE_WORDS, query_tokens
from makad.core.lazy_imports import loading
from makad.core.ranking import best_bm25
from makad.core.render import SPEAKER_LABEL

FEEDBACK_DOCS: Final = 10
FEEDBACK_TERMS: Final = 10
FEEDBACK_SHARE: Final = 0.3
MIN_SHARED_HITS: Final = 2
MIN_WORD_LENGTH: Final = 4

# Letters only (no digits or "_"), so numbers and identifiers' fragments never expand a query.
_WORD: Final = re.compile(r"[^\W\d_]+")


def preload() -> None:
    """Load the stemmer now rather than on the first recall (``makad.warmup``)."""
    _stemmer()


@cache
def _stemmer() -> Any:
    """Loaded on the first recall that expands a query, not at the daemon's start-up."""
    with loading():
        import snowballstemmer  # type: ignore[import-untyped]  # ships no type hints

    return snowballstemmer.stemmer("porter")


@lru_cache(maxsize=8192)
def stem(word: str) -> str:
    """The Porter stem of a lower-case word, as the ledger's FTS5 ``porter`` tokenizer stems it."""
    return str(_stemmer().stemWord(word))


def _content_words(text: str) -> set[str]:
    """The lower-cased candidate words of an event's text, its speaker label left out."""
    label = SPEAKER_LABEL.match(text)
    if label is not None:
        text = text[label.end() :]
    return {
        word
        for word in (w.lower() for w in _WORD.findall(text))
        if len(word) >= MIN_WORD_LENGTH and word not in QUERY_NOISE_WORDS
    }


def feedback_terms(
    query: str,
    hits: Sequence[tuple[str, float]],
    *,
    docs: int = FEEDBACK_DOCS,
    terms: int = FEEDBACK_TERMS,
) -> list[str]:
    """The expansion words for ``query`` from its first hits ``(text, strength)``, best first.

    A word's weight is the sum of the strengths (each hit's match over the
    best one's) of the hits among the first ``docs`` that contain it; words
    sharing a stem with a query word, or with a better word, are skipped.
    """
    head = [(text, strength) for text, strength in hits[:docs] if strength > 0]
    if not head:
        return []
    best = max(strength for _, strength in head)
    weight: dict[str, float] = {}
    seen_in: dict[str, int] = {}
    for text, strength in head:
        for word in _content_words(text):
            weight[word] = weight.get(word, 0.0) + strength / best
            seen_in[word] = seen_in.get(word, 0) + 1
    taken = {stem(token) for token, _ in query_tokens(query)}
    chosen: list[str] = []
    for word, _ in sorted(weight.items(), key=lambda item: (-item[1], item[0])):
        if seen_in[word] < MIN_SHARED_HITS:
            continue
        root = stem(word)
        if root in taken:
            continue
        taken.add(root)
        chosen.append(word)
        if len(chosen) >= terms:
            break
    return chosen


def scaled_bm25(raw: Iterable[float], first_best: float, share: float = FEEDBACK_SHARE) -> list[float]:
    """Feedback hits' FTS5 ``bm25()`` values rescaled so their best is ``share`` of ``first_best``.

    ``first_best`` is the first query's best match as a positive strength;
    values that are not negative finite numbers become 0 (no match).
    """
    values = list(raw)
    second_best = best_bm25(values)
    if second_best <= 0 or first_best <= 0:
        return [0.0 for _ in values]
    factor = share * first_best / second_best
    return [v * factor if math.isfinite(v) and v < 0 else 0.0 for v in values]

"""When two memories say the same thing: one canonical form for every comparison.

Duplicate, near-duplicate and previously-rejected checks all compare this
form, so no spelling of the same content gets past them: line endings, case,
runs of whitespace, decomposed or precomposed accents (NFC: a file macOS saved
decomposed holds the same memory as an agent's precomposed text), and the
backslashes that keep a ``## `` line from starting a section (however many a
writer added) make no difference. Compatibility forms stay apart (NFC, not
NFKC): ``x²`` is not ``x2``.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import chain
from typing import Final

from makad.core.normal_form import normalized
from makad.core.types import Entry

# Near duplicates: rapidfuzz token_sort_ratio (0-100, word order ignored) at or above this.
SIMILARITY_THRESHOLD: Final = 85
MAX_SIMILAR: Final = 5
# Short texts are near duplicates too when they share their content words: "We use pnpm"
# and "The project uses pnpm" score 56 above, though their words agree. Each side's content
# words (casefolded, stop words and possessive 's dropped, a plural or third-person s
# stripped) are compared when the shorter side has 2 to SHORT_WORDS of them and the longer
# at most SHORT_OTHER_WORDS: at least SHORT_OVERLAP of the shorter side's words must be the
# other's, and both or neither must say "not"/"never"/"no". Chosen on the tuning split of
# scripts/eval_recall/near_duplicates.py.
SHORT_WORDS: Final = 6
SHORT_OTHER_WORDS: Final = 10
SHORT_OVERLAP: Final = 0.75
# Contents whose hash is kept: an approval hashes every active entry of MEMORY.md to find a
# proposal already there, and the next one meets the same entries (the same strings). Only
# contents of up to ``HASHED_CHARS_KEPT`` characters are kept (the cache holds them: at most
# 40 MB of ASCII text), longer ones hashed each time.
HASHES_KEPT: Final = 20_000
HASHED_CHARS_KEPT: Final = 2_048

_HEADING_ESCAPE: Final = re.compile(r"^([ \t]*)\\+(?=##)", re.MULTILINE)
_LINE_BREAK: Final = re.compile(r"\r\n?")
# A word: letters and digits, joined by single dots, colons or hyphens (09:30, 3.11, on-call).
_WORD: Final = re.compile(r"\w+(?:[.:-]\w+)*")
_CONTRACTED_NOT: Final = re.compile(r"n['\u2019]t\b")
_POSSESSIVE: Final = re.compile(r"['\u2019]s\b")
_NEGATIONS: Final = frozenset({"not", "no", "never", "nor", "without"})
# fmt: off
_STOP_WORDS: Final = frozenset({
    "a", "an", "the", "and", "or", "but", "if", "then", "of", "to", "in", "on", "at", "by", "for",
    "with", "from", "as", "is", "are", "was", "were", "be", "been", "being", "it", "its", "this",
    "that", "these", "those", "we", "our", "us", "you", "your", "i", "me", "my", "they", "them",
    "their", "he", "she", "his", "her", "there", "here", "do", "does", "did", "has", "have", "had",
    "so", "than", "too", "very", "can", "will", "just", "about", "into", "over", "all", "any",
    "each", "every", "also",
})
# fmt: on
# Longer than this (canonical characters), a text has more than SHORT_OTHER_WORDS words.
_SHORT_CHARS: Final = 400


def canonical(content: str) -> str:
    """The form two contents are compared in."""
    text = _HEADING_ESCAPE.sub(r"\1", _LINE_BREAK.sub("\n", normalized(content, "NFC")))
    return " ".join(text.casefold().split())


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def content_words(form: str) -> tuple[frozenset[str], bool] | None:
    """The content words of a canonical ``form`` and whether it negates, or None when it
    has more than SHORT_OTHER_WORDS content words (too long for the short-text rule)."""
    if len(form) > _SHORT_CHARS:
        return None
    text = _POSSESSIVE.sub("", _CONTRACTED_NOT.sub(" not", form))
    words = {w for w in _WORD.findall(text) if w not in _STOP_WORDS}
    negated = not words.isdisjoint(_NEGATIONS)
    kept = frozenset(_stem(w) for w in words - _NEGATIONS)
    return (kept, negated) if len(kept) <= SHORT_OTHER_WORDS else None


def short_overlap(a: tuple[frozenset[str], bool], b: tuple[frozenset[str], bool]) -> float:
    """The share of the shorter text's content words found in the other (0 when the rule
    does not apply: the shorter has fewer than 2 or more than SHORT_WORDS, or only one
    side negates)."""
    (words_a, neg_a), (words_b, neg_b) = a, b
    shorter = min(len(words_a), len(words_b))
    if neg_a != neg_b or shorter < 2 or shorter > SHORT_WORDS:
        return 0.0
    return len(words_a & words_b) / shorter


def _sharing_words(
    mine: tuple[frozenset[str], bool],
    short: list[tuple[str, tuple[frozenset[str], bool]]],
    by_word: dict[str, list[int]],
    skip: set[str | None],
) -> list[str]:
    """The ids of the ``short`` candidates (``by_word``: their indexes under each of their
    words) whose ``short_overlap`` with ``mine`` reaches SHORT_OVERLAP, most shared first.
    Only candidates sharing two words or more are compared."""
    shared = Counter(chain.from_iterable(by_word.get(word, ()) for word in mine[0]))
    scored = []
    for k, count in shared.items():
        entry_id, theirs = short[k]
        if count >= 2 and entry_id not in skip and (overlap := short_overlap(mine, theirs)) >= SHORT_OVERLAP:
            scored.append((-overlap, entry_id))
    return [entry_id for _, entry_id in sorted(scored)]


def content_hash(content: str) -> str:
    """What makes two memories the same: sha256 of their canonical form."""
    return _kept_hash(content) if len(content) <= HASHED_CHARS_KEPT else _hash(content)


def _hash(content: str) -> str:
    return hashlib.sha256(canonical(content).encode("utf-8", "surrogatepass")).hexdigest()


_kept_hash = lru_cache(maxsize=HASHES_KEPT)(_hash)


def similar_ids(content: str, candidates: Iterable[Entry], exclude: str | None = None) -> list[str]:
    """Ids of the candidates most like ``content`` (best first, at most MAX_SIMILAR)."""
    return similar_ids_each([(content, exclude)], candidates)[0]


def similar_ids_each(
    targets: Sequence[tuple[str, str | None]], candidates: Iterable[Entry]
) -> list[list[str]]:
    """``similar_ids(content, candidates, exclude)`` for each ``(content, exclude)`` of
    ``targets``. Each candidate is put in canonical form once, and each target is compared
    with all of them in one call into rapidfuzz (the score cutoff lets it skip a pair whose
    lengths alone rule it out): hundreds of proposals against thousands of entries stay
    well under a second, where one comparison at a time in Python took seconds. Short
    texts sharing their content words (``short_overlap``) follow the fuzzy matches; only
    the short candidates are compared that way."""
    from rapidfuzz import fuzz, process  # on the first comparison, not at the daemon's start-up

    known = list(candidates)
    forms = [canonical(e.content) for e in known]
    short = [
        (e.id, w) for e, form in zip(known, forms, strict=True) if (w := content_words(form)) is not None
    ]
    by_word: dict[str, list[int]] = {}
    for k, (_, (words, _)) in enumerate(short):
        for word in words:
            by_word.setdefault(word, []).append(k)
    found: list[list[str]] = []
    for content, exclude in targets:
        target = canonical(content)
        matches = process.extract(
            target, forms, scorer=fuzz.token_sort_ratio, score_cutoff=SIMILARITY_THRESHOLD, limit=None
        )
        ids = (known[index].id for _, _, index in matches)
        scored = sorted((-score, i) for (_, score, _), i in zip(matches, ids, strict=True) if i != exclude)
        named = [entry_id for _, entry_id in scored]
        mine = content_words(target)
        if mine is not None and len(named) < MAX_SIMILAR:
            named += _sharing_words(mine, short, by_word, {*named, exclude})
        found.append(named[:MAX_SIMILAR])
    return found

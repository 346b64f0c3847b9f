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
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Final

from makad.core.normal_form import normalized
from makad.core.types import Entry

# Near duplicates: rapidfuzz token_sort_ratio (0-100, word order ignored) at or above this.
SIMILARITY_THRESHOLD: Final = 85
MAX_SIMILAR: Final = 5
# Contents whose hash is kept: an approval hashes every active entry of MEMORY.md to find a
# proposal already there, and the next one meets the same entries (the same strings). Only
# contents of up to ``HASHED_CHARS_KEPT`` characters are kept (the cache holds them: at most
# 40 MB of ASCII text), longer ones hashed each time.
HASHES_KEPT: Final = 20_000
HASHED_CHARS_KEPT: Final = 2_048

_HEADING_ESCAPE: Final = re.compile(r"^([ \t]*)\\+(?=##)", re.MULTILINE)
_LINE_BREAK: Final = re.compile(r"\r\n?")


def canonical(content: str) -> str:
    """The form two contents are compared in."""
    text = _HEADING_ESCAPE.sub(r"\1", _LINE_BREAK.sub("\n", normalized(content, "NFC")))
    return " ".join(text.casefold().split())


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
    well under a second, where one comparison at a time in Python took seconds."""
    from rapidfuzz import fuzz, process  # on the first comparison, not at the daemon's start-up

    known = list(candidates)
    forms = [canonical(e.content) for e in known]
    found: list[list[str]] = []
    for content, exclude in targets:
        target = canonical(content)
        matches = process.extract(
            target, forms, scorer=fuzz.token_sort_ratio, score_cutoff=SIMILARITY_THRESHOLD, limit=None
        )
        ids = (known[index].id for _, _, index in matches)
        scored = sorted((-score, i) for (_, score, _), i in zip(matches, ids, strict=True) if i != exclude)
        found.append([entry_id for _, entry_id in scored[:MAX_SIMILAR]])
    return found

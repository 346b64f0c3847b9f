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
from collections.abc import Iterable
from typing import Final

from makad.core.normal_form import normalized
from makad.core.types import Entry

# Near duplicates: rapidfuzz token_sort_ratio (0-100, word order ignored) at or above this.
SIMILARITY_THRESHOLD: Final = 85
MAX_SIMILAR: Final = 5

_HEADING_ESCAPE: Final = re.compile(r"^([ \t]*)\\+(?=##)", re.MULTILINE)
_LINE_BREAK: Final = re.compile(r"\r\n?")


def canonical(content: str) -> str:
    """The form two contents are compared in."""
    text = _HEADING_ESCAPE.sub(r"\1", _LINE_BREAK.sub("\n", normalized(content, "NFC")))
    return " ".join(text.casefold().split())


def content_hash(content: str) -> str:
    """What makes two memories the same: sha256 of their canonical form."""
    return hashlib.sha256(canonical(content).encode("utf-8", "surrogatepass")).hexdigest()


def similar_ids(content: str, candidates: Iterable[Entry], exclude: str | None = None) -> list[str]:
    """Ids of the candidates most like ``content`` (best first, at most MAX_SIMILAR)."""
    from rapidfuzz import fuzz  # on the first comparison, not at the daemon's start-up

    target = canonical(content)
    scored = [
        (fuzz.token_sort_ratio(target, canonical(e.content)), e.id) for e in candidates if e.id != exclude
    ]
    return [i for score, i in sorted(scored, key=lambda p: (-p[0], p[1])) if score >= SIMILARITY_THRESHOLD][
        :MAX_SIMILAR
    ]

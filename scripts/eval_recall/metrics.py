"""Evidence recall over refs: what share of a question's evidence turns a list of refs covers."""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence

_REF = re.compile(r"event:(?P<sid>[^:]+):(?P<first>\d+)(?:-(?P<last>\d+))?")

KS: tuple[int, ...] = (5, 10, 25, 50)


def expand_ref(ref: str) -> list[tuple[str, int]]:
    """``event:s:3-5`` → ``[(s, 3), (s, 4), (s, 5)]``; anything else → ``[]``."""
    match = _REF.fullmatch(ref)
    if match is None:
        return []
    first = int(match["first"])
    last = first if match["last"] is None else int(match["last"])
    return [(match["sid"], seq) for seq in range(first, last + 1)]


def covered(refs: Iterable[str], turn_of: Mapping[tuple[str, int], str]) -> set[str]:
    """The dia_ids the refs name."""
    found: set[str] = set()
    for ref in refs:
        for key in expand_ref(ref):
            dia = turn_of.get(key)
            if dia is not None:
                found.add(dia)
    return found


def recall(evidence: Sequence[str], found: set[str]) -> float:
    """Share of the evidence found; a question without evidence counts 1 (as LoCoMo scores it)."""
    if not evidence:
        return 1.0
    return sum(1 for e in evidence if e in found) / len(evidence)


def recall_at_k(
    evidence: Sequence[str], ranked_refs: Sequence[str], k: int, turn_of: Mapping[tuple[str, int], str]
) -> float:
    return recall(evidence, covered(ranked_refs[:k], turn_of))


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def mean(values: Iterable[float]) -> float:
    listed = list(values)
    return round(statistics.fmean(listed), 4) if listed else 0.0

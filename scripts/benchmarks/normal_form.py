"""Unicode normalisation in bounded work (``makad.core.normal_form``), in-process.

Each text is normalised by ``normalized`` and, as the same-run baseline, by one
``unicodedata.normalize`` call of the whole (for the 80,000 marks, of what the bound keeps
of them: the whole would take seconds). ``ratio`` = ``normalized`` time / baseline time.
The texts: 480 characters of ASCII, of accented Latin, of Chinese (no ASCII at all: one
long non-ASCII run), of Chinese with full-width punctuation (which NFKC changes), 20,000
Chinese characters, and a letter followed by 80,000 combining marks of two classes.
``index_fdfa_100k``: an event's index text (``index_text(bounded=True)``) of 100,000
U+FDFA, which NFKC makes 18 characters each; its baseline is the same text indexed whole.
"""

from __future__ import annotations

import random
import timeit
import unicodedata
from typing import Any

from makad.core.cjk import index_text
from makad.core.normal_form import MAX_NON_STARTERS, normalized, preload

_HANZI = (
    "的一是不了人我在有他这为之大来以个中上们到说国和地也子"
    "时道出而要于就下得可你年生自会那后能对着事其里所去行过家十用发天如然作方成者多日都"
)


def _texts() -> dict[str, tuple[str, str]]:
    """name -> (text, the text one unicodedata call is timed on)."""
    rng = random.Random(1)
    marks = "a" + "\u0301\u0316" * 40_000
    kept = "a" + "\u0301\u0316" * (MAX_NON_STARTERS // 2)
    texts = {
        "ascii_480": ("The quick brown fox jumps over the lazy dog. " * 11)[:480],
        "latin_480": ("Préfère le thé à la crème, naïve façade, über Straße. " * 10)[:480],
        "cjk_480": "".join(rng.choices(_HANZI, k=480)),
        "cjk_punctuated_480": ("我们今天讨论了部署流程，决定周二发布。" * 30)[:480],
        "cjk_20k": "".join(rng.choices(_HANZI, k=20_000)),
    }
    return {**{name: (text, text) for name, text in texts.items()}, "marks_80k": (marks, kept)}


def _best_us(action: Any, number: int, repeat: int) -> float:
    return min(timeit.repeat(action, number=number, repeat=repeat)) / number * 1e6


def run(quick: bool) -> dict[str, Any]:
    preload()  # the daemon builds its character classes at warm-up, not in a request
    repeat = 2 if quick else 7
    out: dict[str, Any] = {}
    for name, (text, baseline_text) in _texts().items():
        number = 5 if len(text) > 1_000 else (20 if quick else 300)
        took = _best_us(lambda text=text: normalized(text), number, repeat)
        base = _best_us(lambda t=baseline_text: unicodedata.normalize("NFKC", t), number, repeat)
        out[name] = {"us": round(took, 1), "baseline_us": round(base, 1), "ratio": round(took / base, 1)}
    fdfa = "\ufdfa" * 100_000
    took = _best_us(lambda: index_text(fdfa, bounded=True), 1, repeat)
    base = _best_us(lambda: index_text(fdfa), 1, repeat)
    out["index_fdfa_100k"] = {
        "us": round(took, 1),
        "baseline_us": round(base, 1),
        "ratio": round(took / base, 2),
        "index_chars": len(index_text(fdfa, bounded=True)),
        "baseline_index_chars": len(index_text(fdfa)),
    }
    return {"normal_form": out}

"""Normalisation in bounded work: the same text as ``unicodedata.normalize`` gives for
the whole, cut into pieces where nothing combines across the cut, with a run of
combining marks kept to Unicode's stream-safe 30."""

from __future__ import annotations

import random
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core import cjk
from makad.core.cjk import index_text, query_tokens
from makad.core.normal_form import MAX_NON_STARTERS, PIECE_CHARS, normalized

# Characters that meet at a cut in every way that matters: ASCII letters and spaces,
# combining marks of two classes (reordered), precomposed and compatibility forms,
# Hangul jamo that compose with what precedes them, Indic vowel signs that do, CJK, and
# U+FDFA (one character that NFKC makes 18).
PARTS = [
    "a", "e", " ", "\n", "\u0301", "\u0316", "\u0327", "é", "ﬁ", "Ａ", "\u1100", "\u1161",
    "\u11a8", "가", "\u0bc6", "\u0bbe", "\u0b95", "漢", "字", "\ufdfa", "\u3163", "\u0f73", "½",
]  # fmt: skip


def _joined(parts: list[str], min_size: int, max_size: int) -> st.SearchStrategy[str]:
    """Texts of ``min_size`` to ``max_size`` of ``parts`` in a seeded random order. A list
    strategy draws thousands of elements one by one, most of a test's time, and keeps most
    lists short: too short to be cut into pieces."""
    return st.builds(
        lambda size, seed: "".join(random.Random(seed).choices(parts, k=size)),
        st.integers(min_size, max_size),
        st.integers(0, 2**32 - 1),
    )


@settings(max_examples=200, deadline=None)
@given(_joined(PARTS, 0, 3 * PIECE_CHARS), st.sampled_from(["NFKC", "NFC", "NFD"]))
def test_pieces_give_what_the_whole_gives(text: str, form: str) -> None:
    """Any text of these characters (runs of marks short, as in real text), long enough to
    be cut into pieces, normalises exactly as it does in one call."""
    if any(len(run) > MAX_NON_STARTERS for run in _mark_runs(text)):
        return
    assert normalized(text, form) == unicodedata.normalize(form, text)  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(
    _joined(PARTS, 0, 3 * PIECE_CHARS),
    st.sampled_from(["NFKC", "NFC", "NFD"]),
    st.integers(0, 4 * PIECE_CHARS),
)
def test_a_limit_gives_the_head_of_the_whole(text: str, form: str, limit: int) -> None:
    """With a limit, the first ``limit`` characters of what the whole text normalises to."""
    assert normalized(text, form, limit=limit) == normalized(text, form)[:limit]  # type: ignore[arg-type]


def _mark_runs(text: str) -> list[str]:
    runs, current = [], ""
    for char in text:
        if unicodedata.combining(unicodedata.normalize("NFKD", char)[:1] or char):
            current += char
        else:
            runs.append(current)
            current = ""
    return [*runs, current]


@pytest.mark.parametrize("repeat", [1, 3])
def test_long_texts_of_any_script_match(repeat: int) -> None:
    """Long prose in several scripts, no ASCII in thousands of characters, matches too."""
    text = ("Ｈｅｌｌｏ ﬁne café — 漢字仮名交じり文、한국어 텍스트。தமிழ் கொ ½ ") * 2000 * repeat
    assert normalized(text) == unicodedata.normalize("NFKC", text)
    cjk = "漢字仮名交じり文" * 5000 * repeat
    assert normalized(cjk) == unicodedata.normalize("NFKC", cjk)


def test_a_run_of_marks_is_kept_to_the_stream_safe_bound() -> None:
    """A letter followed by a million combining marks of alternating classes (sorting them
    took ``unicodedata`` hours, holding the interpreter): the letter with its first 30
    marks, put in canonical order; the text after the run is kept."""
    text = "a" + "\u0301\u0316" * 500_000 + " done"
    kept = "a" + "\u0301\u0316" * (MAX_NON_STARTERS // 2) + " done"
    assert normalized(text) == unicodedata.normalize("NFKC", kept)
    assert normalized(text, "NFD") == unicodedata.normalize("NFD", kept)


def test_a_million_marks_in_a_search_query_or_an_indexed_text() -> None:
    """The search index's text and a query's tokens of such a text: bounded, and the
    words around the marks are still there."""
    text = "alpha " + "b" + "\u0301\u0316" * 500_000 + " omega"
    assert index_text(text).split()[0] == "alpha" and index_text(text).split()[-1] == "omega"
    assert [token for token, _ in query_tokens(text)][:1] and ("omega", False) in query_tokens(text)


def test_an_expanding_character_is_normalised_in_pieces_with_the_same_result() -> None:
    """Five hundred thousand U+FDFA (18 characters each in NFKC): the same text as one call."""
    text = "\ufdfa" * 500_000
    assert normalized(text) == unicodedata.normalize("NFKC", text)


def test_a_long_index_text_is_bigrammed_in_pieces_as_it_is_whole() -> None:
    """Index text longer than a piece (CJK runs straddling every cut, U+FDFA expanding it):
    the same bigrams as one pass over the whole."""
    text = ("漢字仮名交じり文" * 70_000 + " x \ufdfa ") * 3
    whole = cjk._CJK_RUN.sub(cjk._bigrammed, unicodedata.normalize("NFKC", text))
    assert len(whole) > cjk.INDEX_PIECE_CHARS
    assert index_text(text) == whole


def _bounded_by_hand(text: str, form: str) -> str:
    """The specification, one character at a time: each run of more than
    ``MAX_NON_STARTERS`` marks cut to its first ones, then one call for the whole."""
    kept: list[str] = []
    marks = 0
    for char in text:
        if unicodedata.combining(unicodedata.normalize("NFKD", char)[:1] or char):
            marks += 1
            if marks > MAX_NON_STARTERS:
                continue
        else:
            marks = 0
        kept.append(char)
    return unicodedata.normalize(form, "".join(kept))  # type: ignore[arg-type]


# Long runs without ASCII: CJK, Hangul syllables and jamo, Indic vowel signs, marks of
# several classes (in runs past the bound), U+FDFA, halfwidth kana and their voicing marks
# (a starter whose NFKD is a mark), Tibetan vowels that decompose to marks; past U+FFFF,
# musical combining marks, a Chakma vowel sign that joins backward, and an emoji.
LONG_RUN_PARTS = [
    "漢", "字", "가", "\u1100", "\u1161", "\u11a8", "\u0b95", "\u0bc6", "\u0bbe", "é",
    "\u0301" * 20, "\u0316" * 25, "\u0327", "\ufdfa", "\uff76", "\uff9e", "\u0f73", "\u3099", "ﬁ",
    "\U0001d165", "\U0001d16d" * 20, "\U00011127", "\U00011131", "\U0001f44d",
]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(_joined(LONG_RUN_PARTS, 200, 2 * PIECE_CHARS), st.sampled_from(["NFKC", "NFC", "NFD"]))
def test_long_runs_normalise_as_the_specification_does(text: str, form: str) -> None:
    """Long runs of non-ASCII text, marks past the bound included, some long enough to be
    cut into pieces, give what cutting each mark run to 30 and one call for the whole give."""
    assert normalized(text, form) == _bounded_by_hand(text, form)  # type: ignore[arg-type]


def test_the_blocks_never_scanned_hold_only_characters_a_piece_may_start_at() -> None:
    """The character classes are found once, skipping the blocks of ideographs, Hangul
    syllables, private use and planes without combining characters: every character
    there is one a piece may start at, as ``_kind`` reads it."""
    from makad.core.normal_form import _CUT, _STARTER_BLOCKS, _kind

    for low, high in _STARTER_BLOCKS:
        assert all(_kind(chr(code)) == _CUT for code in range(low, high + 1)), hex(low)

"""CJK-aware search text: bigram index text and safe FTS5 queries (pure)."""

from __future__ import annotations

import re
import sys
import tracemalloc
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.cjk import (
    _CJK_RUN,
    GRAM_PIECE_CHARS,
    MAX_INDEX_GROWTH,
    MAX_QUERY_TERMS,
    cjk_grams,
    index_text,
    is_cjk,
    match_expression,
    query_terms,
    query_tokens,
)

TERM = re.compile(r'"[^"\s]+"\*?')


def test_runs_become_bigrams_plus_their_last_character() -> None:
    """A CJK run is indexed as overlapping bigrams and its final character."""
    assert cjk_grams("東京大学") == ["東京", "京大", "大学", "学"]
    assert cjk_grams("猫") == ["猫"]
    assert index_text("我爱Python和SQLite").split() == ["我爱", "爱", "Python", "和", "SQLite"]


def test_punctuation_splits_runs_and_latin_is_left_to_fts() -> None:
    """CJK punctuation ends a run; Latin text passes through NFKC unchanged."""
    assert index_text("東京。大阪").split() == ["東京", "京", "。", "大阪", "阪"]
    assert index_text("Ｈｅｌｌｏ, wörld") == "Hello, wörld"


def test_is_cjk_covers_han_kana_hangul_not_punctuation() -> None:
    """Ideographs, kana, the long-vowel mark and hangul are CJK letters; 、。・ are not."""
    assert all(is_cjk(c) for c in "漢ひカー한々")
    assert not any(is_cjk(c) for c in "、。・a1 ")


def test_query_terms_drop_stop_words_and_quote_everything() -> None:
    """Stop words go, words are lower-cased and quoted, CJK runs become bigrams."""
    assert query_terms("What is the Deploy process?") == ['"deploy"', '"process"']
    assert query_terms("数据库") == ['"数据"', '"据库"']
    assert query_terms("猫") == ['"猫"*']
    assert query_terms("the the") == ['"the"']
    assert match_expression("...") is None
    assert match_expression("tabs spaces") == '"tabs" OR "spaces"'


def test_the_tail_of_a_contraction_or_possessive_is_no_search_term() -> None:
    """ "What's", "Ann's" and "we’ll" search for neither "s" nor "ll"; a lone letter still counts."""
    assert query_terms("What's Ann's plan?") == ['"ann"', '"plan"']
    assert query_terms("we’ll see") == ['"see"']
    assert query_terms("the s key") == ['"s"', '"key"']


def test_question_framing_words_are_dropped_unless_alone() -> None:
    """ "Would Ann likely enjoy…" searches for what it asks about, not for "likely"."""
    assert query_terms("Would Ann likely enjoy hiking?") == ['"ann"', '"enjoy"', '"hiking"']
    assert query_terms("Has Bo ever mentioned both things?") == ['"bo"']
    assert query_terms("likely") == ['"likely"']


def test_long_queries_keep_the_longest_terms() -> None:
    """Over MAX_QUERY_TERMS distinct terms, the longest are kept."""
    words = [f"w{'x' * i}" for i in range(MAX_QUERY_TERMS + 10)]
    kept = query_tokens(" ".join(words))
    assert len(kept) == MAX_QUERY_TERMS
    assert kept[0][0] == words[-1]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_match_expression_is_only_quoted_terms(query: str) -> None:
    """Whatever the input, the expression is quoted terms joined by OR, nothing else."""
    expression = match_expression(query)
    if expression is not None:
        assert all(TERM.fullmatch(part) for part in expression.split(" OR "))


def _index_text_unshortened(text: str) -> str:
    normalized = unicodedata.normalize("NFKC", text)
    return _CJK_RUN.sub(lambda m: " " + " ".join(cjk_grams(m.group())) + " ", normalized)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127)) | st.text())
def test_ascii_text_is_indexed_as_it_is(text: str) -> None:
    """index_text's shortcut for ASCII gives what NFKC and the bigram pass give."""
    assert index_text(text) == _index_text_unshortened(text)


def test_a_run_longer_than_a_piece_gives_the_same_bigrams() -> None:
    """A CJK run made in pieces is indexed exactly as the whole run would be."""
    for length in (GRAM_PIECE_CHARS - 1, GRAM_PIECE_CHARS, GRAM_PIECE_CHARS + 1, 3 * GRAM_PIECE_CHARS + 2):
        run = "".join(chr(0x4E00 + (i * 7919) % 20_000) for i in range(length))
        assert index_text(run) == _index_text_unshortened(run)


def test_a_long_kana_run_is_indexed_without_a_string_per_character() -> None:
    """Characters NFKC makes four katakana each (U+3300) index as one long run while
    holding a few times the index text, not a list of one string per character (some
    50 bytes each: over half a gigabyte for one 8 MB event)."""
    text = "\u3300" * 50_000
    tracemalloc.start()
    try:
        indexed = index_text(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert indexed == _index_text_unshortened(text)
    assert peak < 6 * sys.getsizeof(indexed), (peak, sys.getsizeof(indexed))


def test_text_that_nfkc_multiplies_is_indexed_for_its_head_only() -> None:
    """Bounded (an event's), a run of U+FDFA (18 characters each under NFKC) gives index
    text at most ``MAX_INDEX_GROWTH`` times its length, the head of what the whole would
    give; prose of several scripts is indexed whole."""
    text = "start " + "\ufdfa" * 100_000
    out = index_text(text, bounded=True)
    assert len(out) == MAX_INDEX_GROWTH * len(text)
    assert unicodedata.normalize("NFKC", text).startswith(out) and out.startswith("start ")
    prose = "Ｈｅｌｌｏ ﬁne café — 한국어 텍스트 ½ ﬃ ﷺ " * 50
    whole = unicodedata.normalize("NFKC", prose)
    assert len(whole) < MAX_INDEX_GROWTH * len(prose)
    assert index_text(prose, bounded=True) == _CJK_RUN.sub(
        lambda m: " " + " ".join(cjk_grams(m.group())) + " ", whole
    )

"""The conservative token estimator and its interface."""

from __future__ import annotations

import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.tokens import HeuristicCounter, TokenCounter, estimate_tokens

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def _baseline(text: str) -> int:
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


def test_empty_text_costs_nothing() -> None:
    """The empty string is zero tokens."""
    assert estimate_tokens("") == 0


def test_english_prose_is_about_four_characters_a_token() -> None:
    """Plain lower-case prose costs a quarter token a character, rounded up."""
    assert estimate_tokens("the quick brown fox jumps") == math.ceil(25 / 4)


def test_digits_and_punctuation_count_double() -> None:
    """Code and JSON split finely, so their symbols cost half a token each."""
    assert estimate_tokens('{"a": 1}') == math.ceil((8 + 6) / 4)
    assert estimate_tokens('{"a": 1}') > math.ceil(8 / 4)


def test_each_cjk_character_is_at_least_one_token() -> None:
    """Chinese, Japanese and Korean characters cost one token each."""
    assert estimate_tokens("数据库迁移") == 5
    assert estimate_tokens("これはテスト") == 6
    assert estimate_tokens("안녕하세요") == 5


def test_mixed_text_adds_both_rules() -> None:
    """ASCII runs and CJK characters are priced by their own rules and added."""
    assert estimate_tokens("deploy 部署 now") == 2 + math.ceil(11 / 4)


def test_emoji_outside_the_bmp_costs_two() -> None:
    """A character beyond the Basic Multilingual Plane costs two tokens."""
    assert estimate_tokens("🚀") == 2


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_never_below_the_baseline_rule(text: str) -> None:
    """The estimate is never lower than CJK-as-one plus a quarter per other character."""
    assert estimate_tokens(text) >= _baseline(text)


@settings(max_examples=100, deadline=None)
@given(st.text(), st.text())
def test_concatenation_never_costs_more_than_the_parts(a: str, b: str) -> None:
    """Summing the estimates of parts never undercounts their concatenation."""
    assert estimate_tokens(a + b) <= estimate_tokens(a) + estimate_tokens(b)


def test_heuristic_counter_is_a_token_counter() -> None:
    """The default counter satisfies the protocol and delegates to the estimator."""
    counter: TokenCounter = HeuristicCounter()
    assert counter.count("数据 and text") == estimate_tokens("数据 and text")


_DENSE_CHARS = frozenset("0123456789!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\n")


def _per_character(text: str) -> int:
    """The module doc's rule, one character at a time (the estimator counts it in bulk)."""
    whole = quarters = 0
    for char in text:
        if ord(char) > 0xFFFF:
            whole += 2
        elif not char.isascii():
            whole += 1
        else:
            quarters += 2 if char in _DENSE_CHARS else 1
    return whole + -(-quarters // 4)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",))))
def test_the_estimate_is_the_per_character_rule(text: str) -> None:
    """Counting in bulk gives exactly what the documented per-character rule gives."""
    assert estimate_tokens(text) == _per_character(text)

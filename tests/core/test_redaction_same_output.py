"""The redactor finds and replaces exactly what it did when the hashes in
``tests/data/redaction_hashes.txt`` were recorded, on every item of the fixed corpus
(``tests.core.redaction_corpus``): the test inputs, the secret corpus, and seeded
mixtures of the costly shapes with secrets in them."""

from __future__ import annotations

import pytest
from detect_secrets.filters import heuristic
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.keyword_values import general_values, keyword_values
from makad.core.secret_detectors import is_sequential_string, library
from tests.core.redaction_corpus import HASHES, digest, items


@pytest.mark.slow
def test_every_corpus_item_is_redacted_as_recorded() -> None:
    """Each item's spans, redacted texts, counts and kinds hash to the recorded value."""
    recorded = dict(line.split(" ", 1) for line in HASHES.read_text(encoding="utf-8").splitlines())
    seen = {name: digest(texts) for name, texts in items()}
    assert seen.keys() == recorded.keys()
    changed = [name for name, value in seen.items() if recorded[name] != value]
    assert changed == []


def _one_of(*options: str) -> st.SearchStrategy[str]:
    return st.sampled_from(options)


_PIECES = (
    "",
    " ",
    "\t",
    "'",
    '"',
    "`",
    ";",
    ",",
    ".",
    ")",
    "]",
    "(",
    "[",
    "-",
    "+",
    "=",
    ":",
    "$",
    "é",
    "\x0b",
)
# ``key = value`` lines and near misses: each part drawn from what fits and what does not.
_LINES = st.tuples(
    _one_of("", " ", "\t  ", "-- ", "("),
    _one_of("", "export ", "export\t", "set "),
    _one_of(
        "password", "PASSWORD", "api_key", "db_pass", "name", "my_secret_x", "pwd", "passwordsecret", "x-pwd"
    ),
    _one_of("", "]", "'", '"', "']"),
    _one_of("=", " = ", "==", ":", ": ", " : ", ":=", "=>", "!=", " ", "\t=\t", ":::"),
    _one_of("", "'", '"', "`"),
    _one_of(
        "hunter2",
        "abc123",
        "x",
        "-abc",
        "+k9",
        "password9",
        "a=b",
        "a:b",
        "a,",
        "abc.",
        "a b",
        "İx",
        "$X",
        "",
    ),
    st.lists(st.sampled_from(_PIECES), max_size=3).map("".join),
    _one_of("", "'", '"', "`"),
    _one_of("", " ", "\t", " ;", " # note", " pwd=abc123", ")"),
).map("".join)


@pytest.mark.slow
@given(_LINES)
@settings(max_examples=1500, deadline=None)
def test_the_simple_line_shortcut_finds_what_the_general_reading_finds(line: str) -> None:
    """On ``key = value`` lines and lines a part away from one (another operator, quote,
    bracket, prefix or tail), ``keyword_values`` (which reads the simple ones by one regex)
    yields what ``general_values`` does."""
    found = library()
    general = list(general_values(line, found.keyword, found.keyword_any_case))
    assert list(keyword_values(line, found.keyword, found.keyword_any_case)) == general


@given(st.text(alphabet="ABCDEFXYZabcxyz0123456789+/=-_ .", max_size=40))
@settings(max_examples=2000, deadline=None)
def test_sequential_strings_are_detect_secrets_ones(value: str) -> None:
    """``is_sequential_string`` answers as detect-secrets' own test does."""
    assert is_sequential_string(value) == heuristic.is_sequential_string(value)


@pytest.mark.parametrize(
    "line",
    ['"abc123" !! password', "'abc123' !!! secret", 'secret "abc123";', "--password abc123", "pwd: abc123"],
)
def test_a_line_with_one_operator_character_keeps_its_value(line: str) -> None:
    """A line whose only operator is ``!!``, ``;``, ``--`` or ``:`` is still read for values
    (a line with none of ``= : ! ;`` and no ``--`` is skipped unread)."""
    found = library()
    assert [line[v.start : v.end] for v in keyword_values(line, found.keyword, found.keyword_any_case)] == [
        "abc123"
    ]

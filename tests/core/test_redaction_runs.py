"""Long runs of one character (separator lines, base64 padding, ``AAAA…`` blobs) around
secrets change nothing the redactor finds: the text between the runs is redacted as it
is alone, and the runs themselves stay."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from makad.core.redaction import redact
from makad.core.secret_detectors import OVERLAP, WINDOW, holds, library
from tests.core.secret_corpus import CASES, COMBINED, SecretCase

# Longer than one scan window, so the text is read in overlapping windows.
RUN = WINDOW + 2 * OVERLAP + 1000
RUN_CHARS = ["=", "-", "_", "/", "\\", "+", ".", "%", "A", "a", "0", " ", "t", "e"]
# A token cut by path separators, found only by joining the segments.
SPLIT_PATH = "open /tmp/cache/sk-bmxSp4DxB/euceiu/dt0CgT3BlbkFJAhmhOhrIg1DHLfN3DpK9/x"


@pytest.mark.parametrize("char", RUN_CHARS)
def test_secrets_between_long_runs_are_redacted_as_alone(char: str) -> None:
    """The whole corpus and a path-split token, each between two runs of one character
    on their own lines: redacted exactly as without the runs, the runs untouched."""
    run = char * RUN
    for inner in (COMBINED, SPLIT_PATH):
        alone = redact(inner)
        assert alone.count > 0
        result = redact(f"{run}\n{inner}\n{run}")
        assert result.text == f"{run}\n{alone.text}\n{run}"
        assert (result.count, result.kinds) == (alone.count, alone.kinds)


@pytest.mark.parametrize("char", ["/", "\\", "-", "A"])
def test_a_token_glued_to_a_long_run_is_redacted(char: str) -> None:
    """A token right after a run of one character (a separator line running into it) is
    still found, and the run before it stays."""
    token = "sk-ant-api03-" + "x7Kq9" * 8
    result = redact(char * RUN + " " + token)
    assert result.text == char * RUN + " [REDACTED:anthropic_key]"


@pytest.mark.parametrize("case", CASES, ids=[f"{c.kind}-{i}" for i, c in enumerate(CASES)])
def test_a_rule_matches_only_where_its_needs_are(case: SecretCase) -> None:
    """Each rule skipped for lack of its ``needs`` would have found nothing: wherever its
    regex matches a corpus text, the lower-cased text holds one of them and all of
    ``needs_all``."""
    folded = case.text.lower()
    for rule in library().rules:
        if rule.regex.search(case.text) is None:
            continue
        assert not rule.needs or any(holds(folded, needed) for needed in rule.needs), rule
        assert all(holds(folded, needed) for needed in rule.needs_all), rule


@given(st.text(alphabet="ab-tokenwy", max_size=30), st.text(alphabet="ab-tokenwy", min_size=1, max_size=6))
def test_the_character_prefilter_agrees_with_a_substring_search(text: str, word: str) -> None:
    """``holds`` answers exactly ``word in text``."""
    assert holds(text, word) == (word in text)

"""Secret redaction: recall on fabricated secrets, precision on prose, idempotence."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.redaction import Redacted, redact
from makad.core.secret_detectors import has_long_run
from tests.core.secret_corpus import ALNUM, CASES, COMBINED, NEAR_MISSES, SecretCase, fake

PROSE = [
    "Hey Mel! Good to see you! How have you been?",
    "I went to a LGBTQ support group yesterday and it was so powerful.",
    "Caroline's secret to a good pie is cold butter, she told me.",
    "We painted a sunrise last weekend at the lake; the kids loved it.",
    "The key to success is consistency — keep going, even on hard days.",
    "I forgot my password again, so I had to reset it at the library.",
    "我们周末去爬山了，天气很好。",
    "Check out https://example.com/gallery/2023/summer-camp-photos-and-memories for the pics.",
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.kind}-{i}" for i, c in enumerate(CASES)])
def test_corpus_secret_is_caught_with_its_kind(case: SecretCase) -> None:
    """Every fabricated secret disappears and is reported under its own kind, once."""
    result = redact(case.text)
    assert case.secret not in result.text
    assert f"[REDACTED:{case.kind}]" in result.text
    assert result.kinds == [case.kind]
    assert result.count == 1


def test_all_secrets_in_one_text_are_caught() -> None:
    """A long text holding the whole corpus loses every secret and counts each one."""
    result = redact(COMBINED)
    assert [c.secret for c in CASES if c.secret in result.text] == []
    assert result.count == len(CASES)
    assert result.kinds == sorted({c.kind for c in CASES})


@pytest.mark.parametrize("text", NEAR_MISSES + PROSE)
def test_text_without_secrets_is_untouched(text: str) -> None:
    """Prose, placeholders and references that only look secret-ish are left alone."""
    assert redact(text) == Redacted(text, 0, [])


@pytest.mark.parametrize("case", CASES, ids=[f"{c.kind}-{i}" for i, c in enumerate(CASES)])
def test_redacting_twice_changes_nothing(case: SecretCase) -> None:
    """Markers are never redacted again."""
    once = redact(case.text)
    assert redact(once.text) == Redacted(once.text, 0, [])


def test_url_password_keeps_user_and_host() -> None:
    """Only the password of a URL's userinfo is replaced."""
    result = redact("clone https://alice:pw-" + fake("u", 12) + "@git.example.com/repo.git now")
    assert result.text == "clone https://alice:[REDACTED:url_password]@git.example.com/repo.git now"


def test_url_without_password_is_untouched() -> None:
    """A user name alone, or a port, is not a password."""
    for text in ("ssh://git@example.com/x", "http://example.com:8080/a@b", "mailto:bob@x.org"):
        assert redact(text).count == 0


def test_specific_kind_wins_over_generic_assignment() -> None:
    """`SLACK_BOT_TOKEN=xoxb-...` is a Slack token, not a generic secret."""
    token = "xoxb-1234567890-1234567890123-" + fake("s", 24)
    result = redact(f"SLACK_BOT_TOKEN={token}")
    assert result.kinds == ["slack_token"]
    assert result.text == "SLACK_BOT_TOKEN=[REDACTED:slack_token]"


def test_secret_inside_url_password_is_reported_once() -> None:
    """A token used as a URL password is one secret, under its specific kind."""
    token = "ghp_" + fake("g", 36)
    result = redact(f"https://x-access-token:{token}@github.com/acme/app")
    assert result.count == 1
    assert result.kinds == ["github_token"]


def test_truncated_private_key_is_redacted_to_its_last_base64_line() -> None:
    """A PEM block cut off before its END line still loses its key material."""
    body = "\n".join(fake(f"k{i}", 64, ALNUM + "+/") for i in range(3))
    text = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\nthat was all I had"
    result = redact(text)
    assert result.text == "[REDACTED:private_key]\nthat was all I had"


def test_several_secrets_on_one_line_are_each_counted() -> None:
    """Two keyword assignments on one line are two redactions."""
    result = redact("user=bob password=s3cret-Value9 api_key=Zq81-xk29-Lp0q")
    assert result.text == ("user=bob password=[REDACTED:generic_secret] api_key=[REDACTED:generic_secret]")
    assert result.count == 2


def test_keyword_values_that_are_references_or_placeholders_stay() -> None:
    """Variables, calls, templates and placeholders after a keyword are not secrets."""
    for text in (
        'password = "${DB_PASSWORD}"',
        "password = os.environ['DB_PASSWORD']",
        "secret: {{ vault_secret }}",
        "api_key: <your-api-key>",
        "passwd = fallback_getpass(prompt,",
        'password = "password"',
        "password: ******",
    ):
        assert redact(text).count == 0, text


def test_text_whose_lowercase_is_longer_still_maps_positions() -> None:
    """Characters that grow when lower-cased (U+0130) do not shift the redaction."""
    result = redact("İİİ password = 'Tr0ub4dor&3x' İİİ")
    assert result.text == "İİİ password = '[REDACTED:generic_secret]' İİİ"


def test_redaction_is_deterministic() -> None:
    """The same input always gives the same output."""
    assert redact(COMBINED) == redact(COMBINED)


_pieces = st.sampled_from([c.text for c in CASES] + NEAR_MISSES + PROSE)
_mixed = st.lists(st.one_of(_pieces, st.text(max_size=40)), max_size=6).map(lambda parts: "\n".join(parts))


@settings(max_examples=200, deadline=None)
@given(_mixed)
def test_redaction_is_idempotent_on_mixed_text(text: str) -> None:
    """Redacting already-redacted text finds nothing more."""
    once = redact(text)
    assert redact(once.text) == Redacted(once.text, 0, [])


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_redaction_never_raises_and_counts_markers(text: str) -> None:
    """Any text is accepted; the count equals the markers added."""
    result = redact(text)
    assert result.count == result.text.count("[REDACTED:") - text.count("[REDACTED:")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "the",
                "a",
                "secret",
                "key",
                "Password",
                "token",
                "sk",
                "was",
                "is",
                ":",
                "=",
                "-",
                "big",
                "2023",
                "AKIA",
            ]
        ),
        max_size=30,
    )
)
def test_short_words_never_look_like_secrets(words: list[str]) -> None:
    """Sentences made of short words and punctuation are never redacted."""
    text = " ".join(words)
    assert redact(text).count == 0


_LONG_RUN_REGEX = re.compile(r"[A-Za-z0-9_+/=.-]{20}")
_RUN_ALPHABET = st.sampled_from([*ALNUM, *"_+/=.-", " ", "\n", "é", "\u200b", "ｓ", "猫", "\ud800", "🔑"])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(_RUN_ALPHABET, st.integers(1, 25)), max_size=12))
def test_the_long_run_prefilter_agrees_with_its_regex(pieces: list[tuple[str, int]]) -> None:
    """The byte-table test for 20 run characters in a row says what the regex says, on
    texts made of runs of every length around 20 mixed with non-ASCII characters,
    surrogates and separators."""
    text = "".join(char * count for char, count in pieces)
    assert has_long_run(text) == (_LONG_RUN_REGEX.search(text) is not None)


def test_the_long_run_prefilter_agrees_on_the_secret_corpus() -> None:
    """On every case of the secret corpus, the near misses, and each text cut at every
    length, the byte-table test agrees with the regex."""
    texts = [c.text for c in CASES] + NEAR_MISSES + [c.secret for c in CASES]
    for text in texts:
        for cut in (text, text[:20], text[:19], text[1:21], text[-20:], text[-19:]):
            assert has_long_run(cut) == (_LONG_RUN_REGEX.search(cut) is not None), cut

"""Redaction after normalization: invisible characters, look-alike forms, base64 wrapping,
secrets split across texts, identifiers, and the helpers built on the same detector."""

from __future__ import annotations

import base64
import itertools
import re
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.base64_texts import decoded_texts
from makad.core.redaction import (
    IDENTIFIER_PREFIX,
    MARKER_PREFIX,
    Redacted,
    identifier_stand_in,
    redact,
    redact_entry,
    redact_joined,
    redact_tree,
    redact_values,
    secrets_in,
)
from makad.core.secret_views import is_ignorable, normalized_view
from makad.core.types import Entry
from tests.core.secret_corpus import CASES, NEAR_MISSES, SecretCase
from tests.core.test_redaction import PROSE

TOKENS = [c for c in CASES if " " not in c.secret and "\n" not in c.secret and len(c.secret) >= 20]
INVISIBLE = [
    "\u200b",
    "\u200c",
    "\u200d",
    "\u2060",
    "\ufeff",
    "\u00ad",
    "\u180e",
    "\u2062",
    "\u034f",
    "\ufe0f",
    "\U000e0020",
]
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def gone(secret: str, text: str, size: int = 10) -> bool:
    """No chunk of the secret (10 characters, every 5) is left in the text, read the way
    the detector reads it (invisible characters dropped, look-alikes folded)."""
    view = normalized_view(text)
    seen = text if view is None else view.text
    return not any(secret[i : i + size] in seen for i in range(0, max(1, len(secret) - size + 1), 5))


def test_every_format_character_is_invisible_to_the_detector() -> None:
    """Each code point of category Cf in this Python's Unicode database is dropped."""
    missing = [
        hex(c)
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) == "Cf" and not is_ignorable(chr(c))
    ]
    assert missing == []


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TOKENS), st.data())
def test_invisible_characters_inside_a_secret_do_not_hide_it(case: SecretCase, data: st.DataObject) -> None:
    """Zero-width and other format characters anywhere inside a token: it is redacted whole,
    and every character outside it — invisible ones included — is kept."""
    positions = data.draw(st.lists(st.integers(1, len(case.secret) - 1), min_size=1, max_size=4))
    hidden = case.secret
    for at in sorted(positions, reverse=True):
        hidden = hidden[:at] + data.draw(st.sampled_from(INVISIBLE)) + hidden[at:]
    before, after = data.draw(st.sampled_from(["", "\u200bsee ", "key: "])), " \u200d end"
    text = before + case.text.replace(case.secret, hidden) + after
    result = redact(text)
    assert gone(case.secret, result.text) and MARKER_PREFIX + case.kind in result.text
    assert result.text.startswith(before) and result.text.endswith(after)
    assert redact(result.text) == Redacted(result.text, 0, [])


@pytest.mark.parametrize("case", TOKENS, ids=[c.kind for c in TOKENS])
def test_full_width_letters_do_not_hide_a_secret(case: SecretCase) -> None:
    """A token written in full-width (compatibility) characters is redacted as its kind."""
    wide = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in case.secret)
    result = redact(case.text.replace(case.secret, wide))
    assert gone(case.secret, result.text) and f"{MARKER_PREFIX}{case.kind}]" in result.text


def test_text_without_suspects_needs_no_view() -> None:
    """ASCII text, and non-ASCII text without invisible or look-alike characters, is read as is."""
    assert normalized_view("plain ascii") is None
    assert normalized_view("我们周末去爬山了") is None
    view = normalized_view("a\u200bb")
    assert view is not None and view.text == "ab" and view.original(0, 2) == (0, 3)


ENCODINGS = [base64.b64encode, base64.urlsafe_b64encode]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.kind}-{i}" for i, c in enumerate(CASES)])
@pytest.mark.parametrize("encode", ENCODINGS, ids=["standard", "urlsafe"])
def test_a_base64_wrapped_secret_is_redacted_whole(case: SecretCase, encode: object) -> None:
    """The base64 of a text holding a secret (padded or not) becomes one marker naming the
    kind found inside; the words around it stay."""
    assert callable(encode)
    for run in (encode(case.text.encode()).decode(), encode(case.text.encode()).decode().rstrip("=")):
        result = redact(f"blob: {run} (from the vault)")
        assert result.text == f"blob: [REDACTED:base64_{case.kind}] (from the vault)", run


def test_base64_inside_base64_is_found() -> None:
    """Twice-encoded secrets are found; the kind keeps one base64_ prefix."""
    case = TOKENS[0]
    twice = base64.b64encode(base64.b64encode(case.text.encode())).decode()
    assert redact(twice).text == f"[REDACTED:base64_{case.kind}]"


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(min_size=15, max_size=200), st.sampled_from(PROSE + NEAR_MISSES).map(str.encode)))
def test_base64_of_binary_or_prose_is_left_alone(raw: bytes) -> None:
    """Base64 that decodes to binary data or to text without a secret is not redacted."""
    for encode in ENCODINGS:
        text = f"data {encode(raw).decode()} end"
        assert redact(text) == Redacted(text, 0, [])


def test_base64_runs_are_decoded_whole_only_when_they_are_text() -> None:
    """A run that encodes text alone decodes whole; binary data and a path do not (what
    their alignments yield is garbage: short, or no text at all)."""
    whole = [d.text for d in decoded_texts(base64.b64encode(b"hello there, friend").decode()) if d.whole]
    assert whole == ["hello there, friend"]
    assert [d for d in decoded_texts(base64.b64encode(bytes(range(30))).decode()) if d.whole] == []
    assert [d for d in decoded_texts("path/to/some_file-name/and/more") if d.whole] == []


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(CASES), st.data())
def test_a_secret_split_across_texts_is_redacted_in_each(case: SecretCase, data: st.DataObject) -> None:
    """Cut anywhere inside the secret into two to four consecutive texts: no piece of the
    secret is left in any of them, the text around it is kept, and it counts once."""
    start = case.text.index(case.secret)
    cuts = data.draw(
        st.lists(st.integers(start + 1, start + len(case.secret) - 1), min_size=1, max_size=3, unique=True)
    )
    bounds = [0, *sorted(cuts), len(case.text)]
    texts = [case.text[a:b] for a, b in itertools.pairwise(bounds)]
    results, count = redact_joined(texts)
    joined = "".join(r.text for r in results)
    assert gone(case.secret, joined)
    assert count == 1
    assert joined.startswith(case.text[:start]) or case.kind in ("telegram_bot_token", "mailchimp_key")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PROSE + NEAR_MISSES + ["", " ", "\n"]), min_size=2, max_size=8))
def test_joining_texts_without_secrets_finds_none(texts: list[str]) -> None:
    """Consecutive messages with no secret in any of them, joined at their boundaries, stay
    exactly as they were. (Bare fragments glued mid-word are another matter: the stream
    reads them as the word they make, as it would in one text.)"""
    results, count = redact_joined(texts)
    assert count == 0 and [r.text for r in results] == texts


def test_a_key_whose_name_is_in_the_previous_text_is_found() -> None:
    """`api_key =` at the end of one text and its value at the start of the next."""
    results, count = redact_joined(["export api_key =", " Zq81xk29Lp0q77abc", " next"])
    assert [r.text for r in results] == ["export api_key =", " [REDACTED:generic_secret]", " next"]
    assert count == 1


@pytest.mark.parametrize(
    "texts",
    [
        ["aws key AKIAQWERTYUI", "OPASDFGH done"],  # letters only: still a split key
        ["the google key AIzaSyAbcdefghijklmnopq", "rstuvwxyzABCDEFG now"],
        ["db pass", "word = Tr0ub4dor&3x"],  # the keyword itself cut in two
        ["Authorization: Bearer ejNxudDE41", "oapkKhzkiJ46GDhZ37jMG4 ok"],  # context a word away
    ],
)
def test_splits_the_cheap_checks_must_not_skip(texts: list[str]) -> None:
    """Boundaries the joined scan could skip by its cheap tests, but must not: a key of
    letters alone, a keyword cut in two, a value whose context is a word before the cut."""
    results, count = redact_joined(texts)
    assert count == 1 and any(MARKER_PREFIX in r.text for r in results)
    joined = "".join(r.text for r in results)
    assert "QWERTYUIOPASDFGH" not in joined and "rstuvwxyz" not in joined
    assert "Tr0ub4dor" not in joined and "oapkKhzkiJ" not in joined


def test_long_words_cut_in_two_are_left_alone() -> None:
    """Prose whose long words run across a boundary (streamed text) is kept as is."""
    texts = ["internationali", "zationcharacteristically yes", "incomprehensibilities", "andmore"]
    assert redact_joined(texts) == ([redact(t) for t in texts], 0)


def test_a_private_key_split_far_from_its_header_is_redacted_to_its_end() -> None:
    """A PEM block split after thousands of characters of key material: both halves go."""
    case = next(c for c in CASES if c.kind == "private_key" and len(c.secret) > 300)
    middle = case.text.index(case.secret) + len(case.secret) // 2
    results, _ = redact_joined([case.text[:middle], case.text[middle:]])
    assert gone(case.secret, "".join(r.text for r in results), 16)


def test_one_text_joined_is_plain_redaction() -> None:
    """A single text gives the same result as redact."""
    for case in CASES[:5]:
        assert redact_joined([case.text]) == ([redact(case.text)], 1)


def test_identifier_stand_ins_are_stable_distinct_and_valid() -> None:
    """An id holding a secret maps to the same valid session id every time, different
    ids (or keys) to different stand-ins; a clean id is unchanged; a stand-in maps to itself."""
    first, second = TOKENS[0].secret, TOKENS[1].secret
    one = identifier_stand_in(first, b"k1")
    assert one == identifier_stand_in(first, b"k1") and one.startswith(IDENTIFIER_PREFIX)
    assert SESSION_ID.fullmatch(one) and first not in one
    assert one != identifier_stand_in(second, b"k1") != identifier_stand_in(first, b"k2")
    assert (
        identifier_stand_in("01a2307cf5de17cee0273488fa6e5f21", b"k1") == "01a2307cf5de17cee0273488fa6e5f21"
    )
    assert identifier_stand_in(one, b"k1") == one


def test_secret_values_compare_across_spellings() -> None:
    """secrets_in gives the same value for a secret with invisible characters inside;
    redact_values redacts only the values asked for."""
    token, other = TOKENS[0].secret, TOKENS[1].secret
    assert secrets_in(f"a {token[:6]}\u200b{token[6:]} b") == secrets_in(f"x {token}") == {token}
    text = f"{token} and {other}"
    assert redact_values(text, frozenset({token})).text == f"[REDACTED:{TOKENS[0].kind}] and {other}"


def test_redact_tree_and_entry() -> None:
    """Every string of a JSON-like value, keys included, is redacted; an entry's title,
    content, tags and refs are, and a clean entry is returned as is."""
    token = TOKENS[0].secret
    assert redact_tree({token: [token, 1, {"k": (token,)}], "n": None}) == {
        f"[REDACTED:{TOKENS[0].kind}]": [
            f"[REDACTED:{TOKENS[0].kind}]",
            1,
            {"k": [f"[REDACTED:{TOKENS[0].kind}]"]},
        ],
        "n": None,
    }
    clean = Entry(id="e1", title="T", content="fine")
    assert redact_entry(clean) is clean
    dirty = redact_entry(Entry(id="e1", title=token, content=f"c {token}", tags=[token], source_refs=[token]))
    assert token not in repr(dirty) and dirty.id == "e1"

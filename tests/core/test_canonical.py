"""One canonical form for duplicate, near-duplicate and rejection checks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.canonical import canonical, content_hash, similar_ids
from makad.core.entry_text import escape, prepare
from makad.core.types import Entry


def test_spellings_of_the_same_content_hash_alike() -> None:
    """Escaped `## ` lines, CRLF, case and spacing make no difference."""
    variants = [
        "## Deploy\nOn Tuesdays",
        "\\## Deploy\nOn Tuesdays",
        "\\\\## deploy\r\non  tuesdays",
        "  ## DEPLOY\r\nOn Tuesdays  ",
    ]
    assert len({content_hash(v) for v in variants}) == 1
    assert content_hash("## Deploy\nOn Wednesdays") != content_hash(variants[0])


def test_decomposed_and_precomposed_accents_hash_alike() -> None:
    """Text saved decomposed (macOS: e + a combining accent) is the same content as the
    precomposed spelling; a compatibility form (x²) stays what it is."""
    assert content_hash("Prefers re\u0301sume\u0301 format") == content_hash("Prefers résumé format")
    assert content_hash("한국어") == content_hash("\u1112\u1161\u11ab\u1100\u116e\u11a8\u110b\u1165")
    assert content_hash("x² = 4") != content_hash("x2 = 4")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["## a", "\\## b", "text", "```", "- x", "", "#"]), max_size=8))
def test_the_written_form_hashes_like_the_content(lines: list[str]) -> None:
    """What the daemon writes on disk (escaped) compares equal to the content it came from."""
    content = prepare("\n".join(lines)).content
    written = escape(content.split("\n"))
    assert written is not None
    assert content_hash("\r\n".join(written)) == content_hash(content)


def test_similar_ids_use_the_canonical_form() -> None:
    """Near duplicates are found whatever the escaping; the excluded id never comes back."""
    candidates = [
        Entry(id="a", title="t", content="\\## Deploy days\nwe deploy on tuesdays"),
        Entry(id="b", title="t", content="something else entirely"),
    ]
    assert similar_ids("## deploy days\nWe deploy on Tuesdays!", candidates) == ["a"]
    assert similar_ids("## deploy days\nwe deploy on tuesdays", candidates, exclude="a") == []
    assert canonical("A\r\n\\## B") == "a ## b"


def test_short_texts_sharing_their_content_words_are_similar() -> None:
    """Short texts whose content words agree (stop words, an s, 's and case aside) are near
    duplicates after the fuzzy matches; one shared word of two, a negation on one side only,
    or an entry too long to be short is not."""
    candidates = [
        Entry(id="fuzzy", title="t", content="We use pnpm!"),
        Entry(id="short", title="t", content="The project uses pnpm"),
        Entry(id="tabs", title="t", content="We use tabs."),
        Entry(id="not", title="t", content="We don't use pnpm."),
        Entry(id="long", title="t", content="pnpm " + " ".join(f"tool{i}" for i in range(12)) + " use"),
    ]
    assert similar_ids("we use pnpm", candidates) == ["fuzzy", "short"]
    assert similar_ids("Never use PNPM", candidates) == ["not"]
    assert similar_ids(
        "Maya's editor is Neovim", [Entry(id="e", title="t", content="Neovim, Maya's editor")]
    ) == ["e"]
    assert similar_ids("pnpm", candidates, exclude="fuzzy") == []


def test_many_contents_read_each_candidate_in_canonical_form_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Comparing 40 proposals with 120 candidates puts each text in canonical form once
    (160 times, not 40 x 120), and finds for each what ``similar_ids`` finds alone."""
    from makad.core import canonical as module

    candidates = [
        Entry(id=f"e{i:03}", title="t", content=f"we deploy service {i % 7} on day {i % 5}")
        for i in range(120)
    ]
    targets = [(f"We deploy service {i % 7} on day {i % 3}!", f"e{i:03}") for i in range(40)]
    expected = [similar_ids(content, candidates, exclude=exclude) for content, exclude in targets]
    assert any(expected)
    calls = 0
    real = module.canonical

    def counted(content: str) -> str:
        nonlocal calls
        calls += 1
        return real(content)

    monkeypatch.setattr(module, "canonical", counted)
    assert module.similar_ids_each(targets, candidates) == expected
    assert calls == len(targets) + len(candidates)

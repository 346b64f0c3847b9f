"""The sites that used to run a regex over unbounded text: each now looks at a bounded
part of it (a title's first line, the detector's windows, JSON in batches) or reads it
with string methods, and says what the old regex said."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import pytest
from detect_secrets.filters.heuristic import is_indirect_reference as library_indirect_reference
from hypothesis import example, given, settings
from hypothesis import strategies as st

from makad.core import bounded_json, entry_text, secret_detectors
from makad.core.importers import records
from makad.core.importers.records import TITLE_SCAN_CHARS, clean_title
from makad.core.keyword_values import is_indirect_reference
from makad.core.markdown_lines import atx_heading, without_comments
from makad.core.memory_format import _without_closing_hashes
from makad.core.redaction import redact
from tests.core.secret_corpus import CASES


class Recording:
    """A compiled pattern that remembers how much text each call was given."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.sizes: list[int] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.pattern, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            text = next((a for a in args if isinstance(a, str)), "")
            self.sizes.append(len(text))
            return method(*args, **kwargs)

        return call


LINE_PIECES = st.sampled_from(
    ["[", "]", "(", ")", "[a](", "#", " ", "*", "**", "`", "-", "a", "é", "\t", "1."]
)


@st.composite
def long_first_lines(draw: st.DrawFn) -> str:
    """Blank lines, then a first line of thousands of link and Markdown characters."""
    unit = "".join(draw(st.lists(LINE_PIECES, min_size=1, max_size=4)))
    blank = draw(st.sampled_from(["", "\n", "  \n\t\n", "\u2028"]))
    return blank + unit * draw(st.integers(300, 3000)) + draw(st.sampled_from(["", "\nnext line"]))


@settings(max_examples=60, deadline=None)
@given(long_first_lines())
@example("[" * 60_000)
@example("- " + "[" * 30_000 + "\n")
def test_a_title_reads_only_the_start_of_the_first_line(text: str) -> None:
    """The title of any text is the title of the first TITLE_SCAN_CHARS characters of its
    first non-blank line, and the title regexes are never given more than that."""
    stripped = text.lstrip()
    first = stripped[:TITLE_SCAN_CHARS].splitlines()[0] if stripped else ""
    patterns = {name: Recording(getattr(records, name)) for name in ("_LINK", "_MARKUP", "_EMPHASIS")}
    saved = {name: getattr(records, name) for name in patterns}
    try:
        for name, recording in patterns.items():
            setattr(records, name, recording)
        title = clean_title(text)
    finally:
        for name, pattern in saved.items():
            setattr(records, name, pattern)
    assert title == clean_title(first)
    assert max(size for r in patterns.values() for size in r.sizes) <= TITLE_SCAN_CHARS
    assert len(title) <= records.TITLE_MAX_CHARS


OLD_HEADING = re.compile(r"^ {0,3}#{1,6}(?:\s+(?P<text>.*?))?\s*#*\s*$")
OLD_COMPACTION_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
OLD_COMMENT = re.compile(r"<!--.*?-->")
OLD_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+[ \t]*\Z")
LINE = st.lists(
    st.sampled_from(["#", " ", "\t", "a", "\u2003", "\r", "<!--", "-->", "<", "!", "-"]), max_size=14
).map("".join)


@settings(max_examples=400, deadline=None)
@given(LINE)
def test_headings_and_comments_read_as_the_old_regexes_did(line: str) -> None:
    """On any line, ``atx_heading`` gives the heading and text the importer's and the
    compaction's regexes gave, ``without_comments`` what ``<!--.*?-->`` removed, and the
    closing hashes go as ``(?:^|[ \\t]+)#+[ \\t]*\\Z`` took them."""
    old = OLD_HEADING.match(line)
    new = atx_heading(line)
    assert (old is None) == (new is None)
    assert old is None or new is None or old.group("text") == new.text
    old_compaction = OLD_COMPACTION_HEADING.match(line)
    heading = atx_heading(line, any_indent=True)
    new_compaction = heading if heading is not None and heading.text is not None else None
    assert (old_compaction is None) == (new_compaction is None)
    if old_compaction is not None and new_compaction is not None:
        assert (len(old_compaction.group(1)), old_compaction.group(2)) == new_compaction
    assert without_comments(line) == OLD_COMMENT.sub("", line)
    stripped = line.strip(" \t")
    assert _without_closing_hashes(stripped).strip(" \t") == OLD_CLOSING_HASHES.sub("", stripped).strip(" \t")


@pytest.mark.parametrize(
    "line",
    ["# a" + " " * 200_000 + "b", "- x " + "<!--" * 50_000, "## t" + " \t" * 100_000 + "#", "#" * 200_000],
    ids=["blanks", "open-comments", "closing-blanks", "hashes"],
)
def test_long_pathological_lines_are_read_in_one_pass(line: str) -> None:
    """Lines of hundreds of thousands of characters that made the old regexes quadratic
    or cubic are read (the test would not finish otherwise) with the same results."""
    heading = atx_heading(line)
    assert heading is None or heading.text is None or len(heading.text) < len(line)
    assert without_comments(line).startswith(line[:4])
    assert _without_closing_hashes(line.strip(" \t")) is not None


@settings(max_examples=400, deadline=None)
@given(
    st.text(
        st.sampled_from(["=", "!", ":", " ", "\t", "a", ".", "-", "(", ")", "[", "]", "\x0b", "'"]),
        max_size=24,
    )
)
@example("secret = get_secret()")
@example("key = headers['k']")
@example("password" + " " * 20 + "x")
def test_the_indirect_reference_test_says_what_detect_secrets_says(line: str) -> None:
    """On short lines (where detect-secrets' own regex is still fast), the linear test
    agrees with ``is_indirect_reference``."""
    assert is_indirect_reference(line) == library_indirect_reference(line)


def test_the_keyword_reader_is_linear_in_the_line() -> None:
    """Lines of 2,000 characters that took detect-secrets' regexes seconds (a keyword
    repeated, blanks after one, backticks) are read, and their values found, at once."""
    for line in [
        "password" * 250,
        "password:" + " " * 1990 + "x",
        "`a" * 1000 + " password",
        "password " * 222,
    ]:
        redact(line)
    assert redact("password" + " " * 990 + "x").text.startswith("password")
    assert "[REDACTED" in redact("db_password = 'hunter2secret' " * 100).text


def test_the_detector_reads_a_long_text_in_bounded_windows() -> None:
    """A text far longer than a window is read window by window (no scan over more than
    WINDOW + 2 * OVERLAP characters) and every secret in it is found, those astride a
    window's edge included."""
    window = secret_detectors.WINDOW
    tokens = [case for case in CASES if " " not in case.secret and "\n" not in case.secret]
    filler = "lorem ipsum dolor sit amet " * (window // 9)
    spots = [window - 3, window + 1, 2 * window - len(tokens[0].secret) // 2, 3 * window - 10, 3 * window + 7]
    text = filler
    for spot, case in zip(spots, tokens, strict=False):
        text = text[:spot] + " " + case.text + " " + text[spot:]
    sizes: list[int] = []
    original = secret_detectors._find_normalized

    def recording(piece: str, depth: int) -> list[secret_detectors.Span]:
        sizes.append(len(piece))
        return original(piece, depth)

    secret_detectors._find_normalized = recording  # type: ignore[assignment]
    try:
        result = redact(text)
    finally:
        secret_detectors._find_normalized = original  # type: ignore[assignment]
    assert max(sizes) <= window + 2 * secret_detectors.OVERLAP and len(sizes) > 3
    leaked = [case.secret for case in tokens[: len(spots)] if case.secret in result.text]
    assert leaked == []
    assert result.count >= len(spots)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(st.sampled_from('a,é😀"\\\n{}[]: ')),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.sampled_from("abc,"), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(JSON, st.integers(1, 12), st.sampled_from(["", " ", "\n\t"]))
def test_json_in_batches_is_json_loads(value: Any, piece: int, blank: str) -> None:
    """Whatever the batch size, ``bounded_json.loads`` gives ``json.loads``' value (keys
    in the same order) and refuses what it refuses."""
    text = blank + json.dumps(value, ensure_ascii=False, separators=("," + blank, ":" + blank)) + blank
    saved = bounded_json.PIECE_CHARS
    bounded_json.PIECE_CHARS = piece
    try:
        for candidate in (text, text[:-1], text + ",", "[" + text, text.replace("]", ",]", 1)):
            assert _outcome(bounded_json.loads, candidate) == _outcome(json.loads, candidate)
    finally:
        bounded_json.PIECE_CHARS = saved


def _outcome(loads: Any, text: str) -> tuple[str, Any]:
    """The value and its key order, or that it was refused."""
    try:
        value = loads(text)
    except (ValueError, RecursionError):
        return ("refused", None)
    return ("value", json.dumps(value))


def test_a_large_json_document_is_decoded_in_bounded_calls() -> None:
    """A 6 MiB array of records is decoded by calls of the C decoder of at most two
    batches' worth of text each; the result is json.loads'."""
    text = json.dumps({"results": [{"memory": f"likes tea {i}", "n": i} for i in range(150_000)]})
    sizes: list[int] = []
    original = json.loads

    def recording(piece: str, *args: Any, **kwargs: Any) -> Any:
        sizes.append(len(piece))
        return original(piece, *args, **kwargs)

    bounded_json.json.loads = recording  # type: ignore[attr-defined]
    try:
        value = bounded_json.loads(text)
    finally:
        bounded_json.json.loads = original  # type: ignore[attr-defined]
    assert value == json.loads(text)
    assert len(sizes) > 10 and max(sizes) <= 2 * bounded_json.PIECE_CHARS


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from("a\r\n\u2028"), max_size=40), st.integers(1, 6))
def test_lines_split_in_pieces_are_the_lines_of_one_split(text: str, piece: int) -> None:
    """Split in pieces that end at a line break, a text has the lines one ``findall`` gives,
    CRLFs, lone CRs and a last line without an ending included."""
    assert entry_text.split_lines(text, piece) == entry_text.LINE.findall(text)


def test_a_long_text_is_split_into_lines_by_bounded_calls() -> None:
    """A 2 MiB text of short lines (CRLF and LF, or CR alone) is split by calls over at
    most a piece and one line each (one call over all of it held the interpreter for
    seconds at 16 MiB)."""
    for text in ("## h\r\nx\n" * 250_000, "## h\rx\r" * 250_000):
        _split_in_bounded_calls(text)


def _split_in_bounded_calls(text: str) -> None:
    """Split ``text`` recording the span of each ``findall``; check the lines and spans."""
    spans: list[int] = []
    original = entry_text.LINE

    class Recording:
        def findall(self, whole: str, pos: int = 0, endpos: int = sys.maxsize) -> list[str]:
            spans.append(min(endpos, len(whole)) - pos)
            return original.findall(whole, pos, endpos)

    entry_text.LINE = Recording()  # type: ignore[assignment]
    try:
        lines = entry_text.split_lines(text)
    finally:
        entry_text.LINE = original  # type: ignore[misc]
    assert lines == original.findall(text)
    assert len(spans) > 10 and max(spans) <= entry_text.LINE_PIECE_CHARS + len("## h\r\n")


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from("a\r\n\v\x1c\x85\u2028"), max_size=40), st.integers(1, 6))
def test_text_lines_in_pieces_are_splitlines(text: str, piece: int) -> None:
    """Split in pieces that end at any line break ``str.splitlines`` knows, a text has the
    lines of one ``splitlines`` call."""
    assert entry_text.text_lines(text, piece) == text.splitlines()


def test_a_long_import_is_split_into_lines_in_pieces() -> None:
    """Texts of 200,000 one-character lines (LF, CR or U+2028) are cut into pieces of at
    most one piece and one line break each before ``splitlines`` runs on them."""
    for text in ("a\n" * 200_000, "a\r" * 200_000, "a\u2028" * 200_000):
        cuts = _cuts_of(text)
        sizes = [end - begin for begin, end in zip([0, *cuts[:-1]], cuts, strict=True)]
        assert len(cuts) > 5 and max(sizes) <= entry_text.LINE_PIECE_CHARS + 1


def _cuts_of(text: str) -> list[int]:
    """Where ``text_lines`` cuts ``text`` (the end of each piece), checking its lines."""
    cuts: list[int] = []
    pattern = entry_text._ANY_LINE_END

    class Recording:
        def search(self, string: str, pos: int) -> re.Match[str] | None:
            found = pattern.search(string, pos)
            cuts.append(found.end() if found else len(string))
            return found

    entry_text._ANY_LINE_END = Recording()  # type: ignore[assignment]
    try:
        assert entry_text.text_lines(text) == text.splitlines()
    finally:
        entry_text._ANY_LINE_END = pattern  # type: ignore[misc]
    return cuts


@pytest.mark.parametrize("unit", ["pwd=\\/", "pwd='';", 'secret="', "p\u200bwd=\\/", "pwd%3D%2F"])
def test_a_long_line_too_dense_with_keywords_is_redacted_whole(unit: str) -> None:
    """A long line holding a keyword every few characters is not read value by value: the
    stretch too dense to read is redacted whole (``dense_keywords``), and a real key-value
    secret inside it never comes through."""
    secret = "password=Zx9kQ2vT7wLm4Rp8"
    text = unit * 20_000 + " " + secret + " " + unit * 20_000
    redacted = redact(text)
    assert "Zx9kQ2vT7wLm4Rp8" not in redacted.text
    assert secret_detectors.DENSE_KIND in redacted.kinds
    assert len(redacted.text) < len(text) // 10


def test_a_long_line_with_keywords_further_apart_is_read_value_by_value() -> None:
    """Minified JSON with a keyword every ~15 characters is read as before: each value
    judged on its own, nothing redacted for density."""
    text = '{"items":[' + ",".join(f'{{"password":"p","api_key":"k{i % 10}"}}' for i in range(3_000)) + "]}"
    text += ',"password":"Zx9kQ2vT7wLm4Rp8"'
    redacted = redact(text)
    assert secret_detectors.DENSE_KIND not in redacted.kinds
    assert "Zx9kQ2vT7wLm4Rp8" not in redacted.text
    assert '"api_key":"k3"' in redacted.text


@pytest.mark.parametrize("unit", ["sk-ant-\\/", "xoxb-\\/", "github_pat_\\/", "sk-proj-/"])
def test_token_starts_cut_by_separators_past_the_joins_budget_are_redacted_whole(unit: str) -> None:
    """Past the number of cut token starts whose segments are joined and read
    (``_joins_budget``), a segment holding a token's start is redacted whole with the
    segments it would join (``dense_token_cuts``): a real token cut in two there never
    comes through."""
    token = "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"
    cut_token = token[:14] + "/" + token[14:]
    text = unit * 5_000 + " " + cut_token + " " + unit * 5_000
    redacted = redact(text)
    assert token[14:] not in redacted.text and token[:14] not in redacted.text
    assert secret_detectors.DENSE_CUTS_KIND in redacted.kinds

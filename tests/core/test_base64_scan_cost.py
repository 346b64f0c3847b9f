"""The base64 stage of the secret scan finds exactly what a plain reading finds (every
run by regex search, every piece decoded and searched whole), while doing work linear in
the text and skipping, in C, what cannot hold text: runs of one character (``AAAA…``,
``====…``, ``aaaa…``) and long stretches of random base64 stay cheap."""

from __future__ import annotations

import base64
import binascii
import random
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core import base64_texts, secret_detectors
from makad.core.base64_texts import BASE64_RUN, DecodedText, base64_runs, decoded_texts
from makad.core.redaction import redact
from tests.core.secret_corpus import CASES, COMBINED

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-"

# --- the plain reading, kept as the reference ----------------------------------------

_TEXT = re.compile(r"[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\udc80-\udcff]{8,}+")
_NOT_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\udc80-\udcff]")
_PIECES = {"standard": re.compile(r"[A-Za-z0-9+/]++"), "urlsafe": re.compile(r"[A-Za-z0-9_-]++")}


def _plain_decode(chars: str) -> bytes:
    chars = chars[: len(chars) - (1 if len(chars) % 4 == 1 else 0)]
    return binascii.a2b_base64(chars + "=" * (-len(chars) % 4))


def _plain_whole(chars: str) -> str | None:
    try:
        text = _plain_decode(chars).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if len(text) < 8 or _NOT_TEXT.search(text) else text


def plain_decoded_texts(run: str) -> Iterator[DecodedText]:
    """Every piece in every alignment decoded and searched, offsets counted from the start."""
    body = run.rstrip("=")
    if base64_texts._ASCII_GROUPS.search(body) is None:
        return
    standard = re.search(r"[+/]", body) is not None
    urlsafe = re.search(r"[-_]", body) is not None
    if standard == urlsafe:
        names = ("standard", "urlsafe") if standard else ("standard",)
    else:
        names = ("urlsafe", "standard") if standard else ("standard", "urlsafe")
    for name in names:
        for piece in _PIECES[name].finditer(body):
            start, end = piece.span()
            chars = piece.group()
            if end - start < 14 or base64_texts._ASCII_GROUPS.search(chars) is None:
                continue
            standard_chars = chars.translate(str.maketrans("-_", "+/"))
            for alignment in range(4):
                if end - start - alignment < 14 or not re.search(r"[A-Za-f]{2}", chars[alignment::4]):
                    continue
                if alignment == 0:
                    whole = _plain_whole(standard_chars)
                    if whole is not None:
                        padded_end = len(run) if end == len(body) else end
                        yield DecodedText(whole, start, padded_end, True, start, end, 0, 0)
                        break
                decoded = _plain_decode(standard_chars[alignment:]).decode("utf-8", "surrogateescape")
                for stretch in _TEXT.finditer(decoded):
                    offset = len(decoded[: stretch.start()].encode("utf-8", "surrogateescape"))
                    yield DecodedText(stretch.group(), start, end, False, start, end, alignment, offset)


def _mixed_corpus() -> list[str]:
    """Secrets plain and encoded, glued to paths and runs, random base64 and hex, noise."""
    rnd = random.Random(7)
    noise = _B64 + "=. \n:\"'é€"
    texts = [case.text for case in CASES] + [COMBINED]
    for _ in range(120):
        parts = []
        for _ in range(rnd.randint(1, 6)):
            kind = rnd.randrange(8)
            secret = rnd.choice(CASES).text.encode()
            if kind == 0:
                parts.append(secret.decode())
            elif kind == 1:
                parts.append(base64.b64encode(secret).decode())
            elif kind == 2:
                parts.append(base64.urlsafe_b64encode(b"x" * rnd.randint(0, 5) + secret).decode())
            elif kind == 3:
                parts.append(rnd.choice("A=/a-_+w") * rnd.randint(1, 3000))
            elif kind == 4:
                parts.append(base64.b64encode(rnd.randbytes(rnd.randint(1, 3000))).decode())
            elif kind == 5:
                parts.append("/v1/files/" + base64.b64encode(secret).decode()[rnd.randint(0, 3) :])
            elif kind == 6:
                parts.append("".join(rnd.choice(noise) for _ in range(rnd.randint(1, 400))))
            else:
                parts.append(rnd.randbytes(rnd.randint(1, 300)).hex())
        texts.append(rnd.choice(["", " ", "\n", "/", "="]).join(parts))
    return texts


MIXED = _mixed_corpus()


def test_the_mixed_corpus_holds_secrets_and_base64_ones() -> None:
    """The corpus exercises the stage: plain secrets and base64-encoded ones are found."""
    kinds = {kind for text in MIXED for kind in redact(text).kinds}
    assert any(kind.startswith("base64_") for kind in kinds)
    assert len(kinds) > 10


def test_decoded_texts_match_the_plain_reading_on_the_mixed_corpus() -> None:
    """Every run of every corpus text decodes to the same texts, positions and offsets."""
    for text in MIXED:
        for match in BASE64_RUN.finditer(text):
            assert list(decoded_texts(match.group())) == list(plain_decoded_texts(match.group()))


def test_redaction_matches_the_plain_reading_on_the_mixed_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Redacting each corpus text gives the same text, count and kinds as with the plain
    base64 reading (runs by regex search, pieces decoded and searched whole)."""
    fast = [redact(text) for text in MIXED]
    monkeypatch.setattr(secret_detectors, "base64_runs", BASE64_RUN.finditer)
    monkeypatch.setattr(secret_detectors, "decoded_texts", plain_decoded_texts)
    assert [redact(text) for text in MIXED] == fast


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_B64 + "==.é€ \n", max_size=200))
def test_runs_are_the_regex_matches(text: str) -> None:
    """``base64_runs`` finds exactly the matches a regex search finds."""
    assert [m.span() for m in base64_runs(text)] == [m.span() for m in BASE64_RUN.finditer(text)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_B64), min_size=1, max_size=6, unique=True), st.integers(0, 2**32))
def test_the_group_test_on_a_long_piece_agrees_with_the_regex(chars: list[str], seed: int) -> None:
    """On pieces long enough for the integer test, it answers what the regex does."""
    rnd = random.Random(seed)
    piece = "".join(rnd.choice(chars) for _ in range(base64_texts._LONG_PIECE + rnd.randrange(64)))
    want = base64_texts._ASCII_GROUPS.search(piece) is not None
    assert base64_texts._has_ascii_groups(piece) == want


def test_the_group_test_finds_one_group_pair_in_a_long_run() -> None:
    """A single encoding of ASCII text inside a long run of ``/`` is seen, at either end."""
    encoded = base64.b64encode(b"password").decode().rstrip("=")
    for piece in ("/" * 5000 + encoded, encoded + "/" * 5000, "/" * 5000 + encoded[:7]):
        want = base64_texts._ASCII_GROUPS.search(piece) is not None
        assert base64_texts._has_ascii_groups(piece) == want
    assert base64_texts._has_ascii_groups("/" * 5000 + encoded)


class _Counting:
    """A compiled pattern that counts its calls by method."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.pattern, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return method(*args, **kwargs)

        return counted


def _count(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> _Counting:
    counting = _Counting(getattr(module, name))
    monkeypatch.setattr(module, name, counting)
    return counting


def test_a_run_of_padding_is_never_searched_by_regex(monkeypatch: pytest.MonkeyPatch) -> None:
    """A megabyte of ``=`` holds no base64 run: the run regex is not called at all."""
    runs = _count(monkeypatch, base64_texts, "BASE64_RUN")
    assert list(base64_runs("=" * 1_000_000)) == []
    assert runs.calls == {}


def test_each_run_is_matched_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs between long stretches of other characters cost one regex match each."""
    runs = _count(monkeypatch, base64_texts, "BASE64_RUN")
    text = ("=" * 50_000 + "A" * 30 + "==") * 5
    assert len(list(base64_runs(text))) == 5
    assert runs.calls == {"match": 5}


def test_a_run_of_zero_bytes_is_not_searched_for_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long run of ``A`` decodes to zero bytes in every alignment: the text regex never
    runs over them, and nothing is found."""
    text_regex = _count(monkeypatch, base64_texts, "_TEXT")
    assert list(decoded_texts("A" * 200_000)) == []
    assert text_regex.calls == {}


def test_a_long_run_that_cannot_hold_ascii_skips_the_group_regex(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long run of ``a`` is rejected without the group regex searching it."""
    groups = _count(monkeypatch, base64_texts, "_ASCII_GROUPS")
    assert list(decoded_texts("a" * 200_000)) == []
    assert groups.calls == {}


def test_random_base64_offsets_are_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random base64 decodes to many short stretches; finding their byte offsets encodes
    each decoded character about once, not once per stretch after it."""
    encoded: list[int] = []
    real = base64_texts._utf8_length

    def counting(text: str) -> int:
        encoded.append(len(text))
        return real(text)

    monkeypatch.setattr(base64_texts, "_utf8_length", counting)
    run = base64.b64encode(random.Random(3).randbytes(60_000)).decode().rstrip("=")
    found = list(decoded_texts(run))
    assert sum(1 for decoded in found if not decoded.whole) > 50
    assert sum(encoded) <= 4 * len(run)

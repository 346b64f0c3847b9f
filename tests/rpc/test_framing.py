"""Sans-IO framing: NDJSON and Content-Length decoders."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.rpc.framing import FrameError, LspDecoder, NdjsonDecoder, detect, encode


def test_detect_by_first_non_blank_byte() -> None:
    """C means Content-Length; anything else is NDJSON; blanks alone are undecided."""
    assert detect(b"  \r\n") is None
    assert detect(b"\nContent-Length: 2") == "lsp"
    assert detect(b"{") == "ndjson"
    assert detect(b"garbage") == "ndjson"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.binary(min_size=1, max_size=50).filter(lambda b: b"\n" not in b and b.strip(b" \t\r\n")),
        max_size=10,
    ),
    st.integers(1, 7),
)
def test_ndjson_split_anywhere(messages: list[bytes], cut: int) -> None:
    """Messages come out whole however the stream is chunked."""
    stream = b"".join(encode("ndjson", m) for m in messages)
    decoder = NdjsonDecoder(1 << 20)
    out: list[bytes] = []
    for i in range(0, len(stream), cut):
        out += decoder.feed(stream[i : i + cut])
    assert out == messages


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=50), max_size=10), st.integers(1, 7))
def test_lsp_split_anywhere(messages: list[bytes], cut: int) -> None:
    """Content-Length frames come out whole however the stream is chunked."""
    stream = b"".join(encode("lsp", m) for m in messages)
    decoder = LspDecoder(1 << 20)
    out: list[bytes] = []
    for i in range(0, len(stream), cut):
        out += decoder.feed(stream[i : i + cut])
    assert out == messages


def test_ndjson_one_whole_message_per_read() -> None:
    """A read holding exactly one message (a request-reply client's) comes out the same as
    one split anywhere: blank lines skipped, a cap-sized line kept, a longer one refused."""
    decoder = NdjsonDecoder(10)
    assert decoder.feed(b"abc\n") == [b"abc"]
    assert decoder.feed(b" \t\r\n") == []
    assert decoder.feed(b"x" * 10 + b"\n") == [b"x" * 10]
    assert decoder.feed(b"de") == [] and decoder.has_partial()
    assert decoder.feed(b"f\n") == [b"def"] and not decoder.has_partial()
    with pytest.raises(FrameError) as info:
        decoder.feed(b"y" * 11 + b"\n")
    assert info.value.kind == "too_large"


def test_ndjson_cap() -> None:
    """A line longer than the cap raises too_large even before its newline arrives."""
    decoder = NdjsonDecoder(10)
    with pytest.raises(FrameError) as info:
        decoder.feed(b"x" * 11)
    assert info.value.kind == "too_large"


def test_lsp_missing_length() -> None:
    """A header block without Content-Length is a bad frame."""
    with pytest.raises(FrameError) as info:
        LspDecoder(100).feed(b"Content-Type: x\r\n\r\n")
    assert info.value.kind == "bad_frame"


@pytest.mark.parametrize(
    "header",
    [
        b"Content-Length: 2\r\nContent-Length: 2",
        b"Content-Length: 2\r\ncontent-length: 12",
    ],
)
def test_lsp_length_given_twice(header: bytes) -> None:
    """Two Content-Length headers are a bad frame, equal or not: readers disagree on which one counts."""
    with pytest.raises(FrameError) as info:
        LspDecoder(100).feed(header + b"\r\n\r\n{}")
    assert info.value.kind == "bad_frame"


@pytest.mark.parametrize("value", [b"+2", b"2_0", b"-1", b"0x2", b"2 0", b"", b"\xd9\xa2"])
def test_lsp_length_is_plain_digits(value: bytes) -> None:
    """A Content-Length that is not ASCII digits (a sign, an underscore, hex, none) is a bad frame."""
    with pytest.raises(FrameError) as info:
        LspDecoder(100).feed(b"Content-Length: " + value + b"\r\n\r\n{}")
    assert info.value.kind == "bad_frame"


def test_lsp_length_may_have_blanks_around_it() -> None:
    """Blanks around the Content-Length value, and any spelling of its name, are fine."""
    assert LspDecoder(100).feed(b"content-LENGTH:  2 \r\n\r\n{}") == [b"{}"]


@pytest.mark.parametrize("ending", [b"\n\n", b"\r\n\n", b"\n\r\n"])
def test_lsp_header_lines_must_end_with_crlf(ending: bytes) -> None:
    """A header block ended by bare newlines is a bad frame at once, not a wait for more headers."""
    with pytest.raises(FrameError) as info:
        LspDecoder(100).feed(b"Content-Length: 2" + ending + b"{}")
    assert info.value.kind == "bad_frame"


def test_lsp_length_of_many_digits_is_too_large() -> None:
    """A Content-Length of thousands of digits is too_large, not a failure to convert it."""
    with pytest.raises(FrameError) as info:
        LspDecoder(100).feed(b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n{}")
    assert info.value.kind == "too_large"


def test_lsp_error_carries_the_frames_before_it() -> None:
    """A bad header block hands over the whole frames the same read held before it, in order."""
    decoder = LspDecoder(1 << 20)
    with pytest.raises(FrameError) as caught:
        decoder.feed(encode("lsp", b"one") + encode("lsp", b"two") + b"Content-Length: x\r\n\r\n")
    assert caught.value.kind == "bad_frame"
    assert caught.value.frames == [b"one", b"two"]


@pytest.mark.parametrize("tail", [b"x" * 20 + b"\n", b"x" * 20], ids=["whole_line", "unfinished_line"])
def test_ndjson_error_carries_the_lines_before_it(tail: bytes) -> None:
    """A line over the cap hands over the whole lines the same read held before it, in order."""
    decoder = NdjsonDecoder(10)
    with pytest.raises(FrameError) as caught:
        decoder.feed(b"one\ntwo\n" + tail)
    assert caught.value.kind == "too_large"
    assert caught.value.frames == [b"one", b"two"]

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

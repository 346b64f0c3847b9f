"""The value cap's count: array elements and object members (an empty container one),
never what is inside strings, the same whatever the piece size it scans in."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.rpc import value_cap
from makad.rpc.value_cap import count_members, count_values, over_cap

_TRICKY = st.sampled_from(['"', "\\", ",", ":", "[", "{", "]", "}", "\\u0022", "a", "é"])
_TEXT = st.lists(_TRICKY, max_size=12).map("".join)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_TEXT, inner, max_size=5),
    max_leaves=40,
)


def _reference(value: Any) -> int:
    """Each container counts its children, or one when it has none."""
    if isinstance(value, list):
        return max(len(value), 1) + sum(_reference(v) for v in value)
    if isinstance(value, dict):
        return max(len(value), 1) + sum(_reference(v) for v in value.values())
    return 0


@settings(max_examples=300, deadline=None)
@given(value=_JSON, piece=st.sampled_from([1, 2, 3, 7, 64, 256 * 1024]), compact=st.booleans())
def test_the_count_is_the_structure_of_the_value(value: Any, piece: int, compact: bool) -> None:
    """Any JSON value, compact or spaced, any piece size: the count is its elements and
    members (an empty container one), strings' contents never counted."""
    saved = value_cap.PIECE_BYTES
    value_cap.PIECE_BYTES = piece
    try:
        separators = (",", ":") if compact else (", ", ": ")
        payload = json.dumps(value, separators=separators, ensure_ascii=False).encode()
        assert count_values(payload, stop_above=10**9) == _reference(value)
    finally:
        value_cap.PIECE_BYTES = saved


def _members(value: Any) -> int:
    if isinstance(value, list):
        return sum(_members(v) for v in value)
    if isinstance(value, dict):
        return len(value) + sum(_members(v) for v in value.values())
    return 0


@settings(max_examples=200, deadline=None)
@given(value=_JSON, piece=st.sampled_from([1, 5, 256 * 1024]))
def test_members_are_the_colons_outside_strings(value: Any, piece: int) -> None:
    """Any JSON value, any piece size: ``count_members`` is its objects' members, colons
    and escaped quotes inside strings never counted."""
    saved = value_cap.PIECE_BYTES
    value_cap.PIECE_BYTES = piece
    try:
        assert count_members(json.dumps(value, ensure_ascii=False).encode()) == _members(value)
    finally:
        value_cap.PIECE_BYTES = saved


@pytest.mark.parametrize(
    ("payload", "over"),
    [
        (b"[" + b",".join([b"0"] * 11) + b"]", True),
        (b"[" + b",".join([b"0"] * 10) + b"]", False),
        (b'["' + b",,,,,,,,,,,,,,,,,,,,,,,,,,,," + b'"]', False),
        (b'{"a":"\\\\",' + b",".join([b'"k%d":0' % i for i in range(10)]) + b"}", True),
    ],
)
def test_over_cap_compares_with_the_limit(payload: bytes, over: bool) -> None:
    """Over the limit when it holds more values; commas in strings do not count."""
    assert over_cap(payload, limit=10) is over

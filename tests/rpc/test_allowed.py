"""The values a params field allows, found along msgspec's error path (data.allowed)."""

from __future__ import annotations

import enum
from typing import Annotated, Literal

import msgspec
import pytest

from makad.rpc.allowed import allowed_values


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Inner(msgspec.Struct, rename="camel"):
    the_mode: Literal["a", "b"] | None = None
    colour: Colour = Colour.RED
    limit: Annotated[int, msgspec.Meta(ge=0)] = 0


class Outer(msgspec.Struct, rename="camel"):
    by_name: dict[str, Inner] = {}
    items: list[Inner] = []
    pair: tuple[Literal["x"], Literal["y", "z"]] = ("x", "y")
    kind: Annotated[Literal["one", "two"], msgspec.Meta(title="kind")] = "one"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("$.kind", ("one", "two")),
        ("$.byName[...].theMode", ("a", "b")),
        ("$.items[3].colour", ("red", "blue")),
        ("$.pair[1]", ("y", "z")),
        ("$.items[0].limit", ()),
        ("$.nothing", ()),
        ("$.items[0].theMode.deeper", ()),
        ("$", ()),
    ],
)
def test_allowed_values_follow_the_path(path: str, expected: tuple[str, ...]) -> None:
    """Literal and enum fields (nested in dicts, lists, tuples, optional) give their values; others none."""
    assert allowed_values(Outer, path) == expected


def test_the_path_is_the_one_msgspec_reports() -> None:
    """msgspec's own error path for a bad enum value leads to the field's values."""
    with pytest.raises(msgspec.ValidationError) as raised:
        msgspec.convert({"byName": {"k": {"theMode": "c"}}}, Outer)
    path = str(raised.value).rsplit("`", 2)[1]
    assert allowed_values(Outer, path) == ("a", "b")

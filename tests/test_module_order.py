"""The suite hands its modules to the xdist workers with the most work first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pytest

from tests.conftest import SLOW_WEIGHT, pytest_collection_modifyitems


@dataclass
class Collected:
    nodeid: str
    slow: bool = False

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "slow" and self.slow else None


def _ordered(items: list[Collected]) -> list[str]:
    as_items = cast(list[pytest.Item], items)
    pytest_collection_modifyitems(as_items)
    return [cast(Any, item).nodeid for item in as_items]


def test_a_module_with_a_slow_test_goes_before_one_of_many_quick_tests() -> None:
    """One slow test outweighs fewer than SLOW_WEIGHT quick ones: its module goes first, and
    each module's tests stay together in their own order."""
    quick = [Collected(f"tests/a.py::t{i}") for i in range(SLOW_WEIGHT - 1)]
    items = [*quick, Collected("tests/b.py::quick"), Collected("tests/b.py::long", slow=True)]
    assert _ordered(items) == ["tests/b.py::quick", "tests/b.py::long", *(c.nodeid for c in quick)]


def test_modules_of_equal_work_keep_their_collection_order() -> None:
    """Without slow tests the module with more tests goes first; equal ones keep their order."""
    items = [
        Collected("tests/a.py::t"),
        Collected("tests/b.py::t"),
        *(Collected(f"tests/c.py::t{i}") for i in range(2)),
    ]
    assert _ordered(items) == ["tests/c.py::t0", "tests/c.py::t1", "tests/a.py::t", "tests/b.py::t"]

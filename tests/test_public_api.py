"""The public modules say what they export, and export what they define."""

from __future__ import annotations

import types

import pytest

import maka
import makad.errors
import makad.wire.catalogue

PUBLIC = [maka, makad.errors, makad.wire.catalogue]


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_all_names_exist_and_cover_every_public_attribute(module: types.ModuleType) -> None:
    """Every name in ``__all__`` is there, and every public attribute the package itself
    defines (re-exports included; modules and imports from elsewhere aside) is listed
    (anyio's test_all_attributes style)."""
    exported = set(module.__all__)
    assert len(exported) == len(module.__all__), "a name is listed twice"
    assert all(hasattr(module, name) for name in exported)
    package = module.__name__.split(".")[0]
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and getattr(value, "__module__", module.__name__).split(".")[0] == package
        and name != "annotations"
    }
    assert public == exported

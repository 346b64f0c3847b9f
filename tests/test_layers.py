"""The layers import one way (docs/ARCHITECTURE.md): core below wire and store, both below
service, service below rpc; the pure core touches no IO at all."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import makad

ROOT = Path(makad.__file__).parent
IO = ("sqlite3", "anyio", "os", "socket", "subprocess", "threading", "shutil", "tempfile")
ABOVE_CORE = ("makad.wire", "makad.store", "makad.service", "makad.rpc", "makad.daemon", "makad.watcher")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "core": (*ABOVE_CORE, "makad.settings", *IO),
    "wire": ("makad.store", "makad.service", "makad.rpc", "makad.daemon"),
    "store": ("makad.wire", "makad.service", "makad.rpc", "makad.daemon"),
    "service": ("makad.rpc", "makad.daemon"),
    "rpc": ("makad.service", "makad.store", "makad.daemon"),
}


def imported(path: Path) -> Iterator[str]:
    """Every module a file imports: at the top, inside functions and under TYPE_CHECKING."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_no_import_points_the_wrong_way(layer: str) -> None:
    """No module of a layer imports a layer above it (nor, in core, an IO module)."""
    wrong = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / layer).rglob("*.py"))
        for name in imported(path)
        if any(name == banned or name.startswith(f"{banned}.") for banned in FORBIDDEN[layer])
    ]
    assert wrong == []


def test_the_walk_sees_imports_that_run_late() -> None:
    """An import under TYPE_CHECKING counts like any other (the check is not blind to it)."""
    assert "makad.store.ledger" in set(imported(ROOT / "store" / "pack_state.py"))

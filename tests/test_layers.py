"""The layers import one way (docs/ARCHITECTURE.md): core below wire and store, both below
service, service below rpc; the pure core touches no IO at all; and no modules import
each other in a cycle, at any distance."""

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


def module_name(path: Path, root: Path = ROOT) -> str:
    """``makad/store/ledger/base.py`` → ``makad.store.ledger.base`` (a package: its ``__init__``)."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module → the modules of the same package it imports (``from p import m`` counts ``p.m``
    when ``m`` is a module; importing a package counts its ``__init__`` only; relative
    imports count like absolute ones)."""
    modules = {module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names if alias.name in modules)
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                source = node.module if not node.level else ".".join(filter(None, (base, node.module)))
                if source not in modules:
                    continue
                subs = {f"{source}.{alias.name}" for alias in node.names}
                found = subs & modules.keys()
                targets.update(found)
                if len(found) < len(subs):
                    targets.add(source)
        targets.discard(name)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import each other, directly or through others
    (the strongly connected components of more than one module), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_modules_import_each_other() -> None:
    """No module imports itself back, directly or through a chain of other modules."""
    assert cycles(import_graph(ROOT)) == []


def test_a_planted_cycle_is_found(tmp_path: Path) -> None:
    """Three modules importing in a ring (one relatively, one only under TYPE_CHECKING) fail the check."""
    pkg = tmp_path / "planted"
    (pkg / "inner").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "inner" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from planted.inner import b\n")
    (pkg / "inner" / "b.py").write_text("from .. import c\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from planted import a\n"
    )
    (pkg / "d.py").write_text("from planted import a, c\n")
    assert cycles(import_graph(pkg)) == [["planted.a", "planted.c", "planted.inner.b"]]


def test_the_walk_sees_imports_that_run_late() -> None:
    """An import under TYPE_CHECKING counts like any other (the check is not blind to it)."""
    assert "makad.store.ledger" in set(imported(ROOT / "store" / "typed_ids.py"))

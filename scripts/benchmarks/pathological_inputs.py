"""pathological_inputs: the CPU seconds one pathological text costs the secret scan
(``redact``) and the memory-file reader (``memory_format.parse``), in-process. Shapes: 8 MB
runs of one character, random base64 (one run, and in 76-character lines), random hex;
MEMORY.md files of 32k empty headings, 100k lines of ``-``, 100k ``## a`` lines, 10k
daemon-written entries, 5k nested list items, 50k setext headings; and an import asked
to read 50k ``## a`` lines as ``markdown`` (it finds no bullet, so the file is read again
as the format it is detected as, before the ``no_memories`` error). And the word bridge
(``bridged_terms``, what ``build_context`` adds to a query's words) on queries of 1k, 2k
and 4k words (a ``build_context`` query is read up to 16,384 characters, ~3k words): the
three figures should grow about as the words do.

``--tree DIR`` (repeatable) measures each given source tree in its own subprocess, so an
old tree and a new one are compared in the same run (``git worktree add /tmp/old REV``);
without it, this tree. Each figure is the best of ``--repeats`` (CPU time, so waiting for
a core on a shared machine does not count).

    PYTHONPATH=.:clients/python:scripts .venv/bin/python scripts/benchmarks/pathological_inputs.py \\
        [--quick] [--tree DIR ...] [--repeats N] [SHAPE...]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _redact_shapes(size: int) -> dict[str, Callable[[], str]]:
    rnd = random.Random(1)
    shapes: dict[str, Callable[[], str]] = {
        f"redact_run_{name}": (lambda c=char: c * size)
        for name, char in (("A", "A"), ("equals", "="), ("slash", "/"), ("a", "a"))
    }
    shapes["redact_random_base64"] = lambda: base64.b64encode(rnd.randbytes(size * 3 // 4)).decode()[:size]
    shapes["redact_base64_lines"] = lambda: "\n".join(
        base64.b64encode(rnd.randbytes(57)).decode() for _ in range(size // 77)
    )
    shapes["redact_hex"] = lambda: rnd.randbytes(size // 2).hex()
    return shapes


def _memory_shapes(scale: int) -> dict[str, Callable[[], str]]:
    def daemon_written(count: int) -> str:
        return "# Maka Memory\n\n" + "".join(
            f"## Entry {i}\n<!-- maka-memory: id={i:016x} -->\n- a list\n```\ncode\n```\n\n"
            for i in range(count)
        )

    return {
        "parse_empty_headings": lambda: "## \n" * (32_768 // scale),
        "parse_dash_lines": lambda: "-\n" * (100_000 // scale),
        "parse_h2_lines": lambda: "## a\n" * (100_000 // scale),
        "parse_daemon_written_entries": lambda: daemon_written(10_000 // scale),
        "parse_nested_lists": lambda: "".join("  " * (i % 200) + "- a\n" for i in range(5_000 // scale)),
        "parse_setext_headings": lambda: "a\n---\n" * (50_000 // scale),
    }


def _bridge_shapes(scale: int) -> dict[str, Callable[[], str]]:
    words = ["postgres", "deploy", "which", "day", "leave", "kitty", "build", "package", "manager"]

    def query(count: int) -> str:
        return " ".join(words[i % len(words)] for i in range(count))

    return {f"bridge_query_{k}k_words": (lambda n=k * 1000 // scale: query(n)) for k in (1, 2, 4)}


def _bridge(query: str) -> object:
    from makad.core.bridge import bridged_terms, query_words

    return bridged_terms(query_words(query))


def _import_as_markdown(data: str) -> object:
    """What ``import_memories`` does with ``data`` and format ``markdown`` before it
    queues anything (reading, detecting, and the ``no_memories`` error)."""
    from makad.errors import InvalidParams
    from makad.service.imports import _parse

    try:
        return _parse("markdown", data, None, None, "$.data")
    except InvalidParams as exc:
        return exc


def measure(quick: bool, only: list[str] | None, repeats: int) -> dict[str, dict[str, float]]:
    """In this process: each shape's size and its best CPU seconds."""
    from makad.core import memory_format
    from makad.core.redaction import preload, redact

    preload()
    actions: dict[str, tuple[Callable[[], str], Callable[[str], object]]] = {}
    for name, build in _redact_shapes(200_000 if quick else 8 * 2**20).items():
        actions[name] = (build, redact)
    for name, build in _memory_shapes(50 if quick else 1).items():
        actions[name] = (build, memory_format.parse)
    for name, build in _bridge_shapes(50 if quick else 1).items():
        actions[name] = (build, _bridge)
    h2_lines = 50_000 // (50 if quick else 1)
    actions["import_markdown_h2_lines"] = (lambda: "## a\n" * h2_lines, _import_as_markdown)
    report: dict[str, dict[str, float]] = {}
    for name, (build, action) in actions.items():
        if only and name not in only:
            continue
        text = build()
        best = float("inf")
        for _ in range(repeats):
            start = time.process_time()
            action(text)
            best = min(best, time.process_time() - start)
        report[name] = {"chars": len(text), "cpu_s": round(best, 3)}
    return report


def _in_tree(tree: Path, quick: bool, only: list[str] | None, repeats: int) -> dict[str, dict[str, float]]:
    args = [sys.executable, __file__, "--worker", "--repeats", str(repeats), *(["--quick"] if quick else [])]
    env = {**os.environ, "PYTHONPATH": f"{tree}:{tree / 'clients' / 'python'}"}
    out = subprocess.run([*args, *(only or [])], env=env, check=True, capture_output=True, text=True).stdout
    result: dict[str, dict[str, float]] = json.loads(out)
    return result


def run(
    quick: bool, only: list[str] | None = None, trees: list[Path] | None = None, repeats: int = 3
) -> dict[str, Any]:
    """Each shape in each tree: ``{shape: {"chars": n, "<tree>": cpu_s, ...}}``."""
    report: dict[str, dict[str, Any]] = {}
    for tree in trees or [ROOT]:
        for name, figures in _in_tree(tree, quick, only, repeats).items():
            report.setdefault(name, {"chars": figures["chars"]})[str(tree)] = figures["cpu_s"]
    return {"pathological_inputs": report}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("shapes", nargs="*")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tree", action="append", type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.quick, args.shapes or None, args.repeats)))
    else:
        print(json.dumps(run(args.quick, args.shapes or None, args.tree, args.repeats), indent=2))

"""redaction_cost: the CPU microseconds per character (per byte: every shape is ASCII)
``redact`` spends on one text of each shape, at 1 MiB and 8 MiB (``growth`` is the 8 MiB
figure over the 1 MiB one: about 1 when the cost is linear). In-process, best of
``--repeats`` (CPU time, so waiting for a core on a shared machine does not count).

Shapes: prose, Python-like code, dense ``key = value`` lines with random values (most of
them redacted), ``password: x`` lines (too short to be secrets), runs of words and
punctuation without a blank, base64 in 76-character lines, near-miss keywords
(``passwd keys pass secretive keyboard``), minified JSON with many string values, and the
shapes that cost the scanner most per character: keyword values the scanner reads and
rejects one after the other on one long line (``pwd=\\/``: read in the text and in its
unescaped view; ``pwd='';``: an empty quoted value, then a ``"…";`` candidate; ``pwd-``:
a word that could open a command-line option), a quoted keyword value after every keyword
(``password='``) and token starts cut by path separators (``sk-\\/``, ``eyJ/``).

``--tree DIR`` (repeatable) measures each given source tree in its own subprocess, so an
old tree and a new one are compared in the same run (``git archive REV makad | tar -x -C
/tmp/old``); without it, this tree.

    PYTHONPATH=.:clients/python:scripts .venv/bin/python scripts/benchmarks/redaction_cost.py \\
        [--quick] [--tree DIR ...] [--repeats N] [--sizes MIB ...] [SHAPE...]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import string
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MIB = 2**20

_PROSE = [
    "The deploy went fine on Tuesday, and we agreed to keep the staging cluster until the migration is done.",
    "She said the key to the garden is under the third stone; the password to the wifi is on the fridge.",
    "We compared three build systems and picked the one whose cache survived a clean checkout.",
    "Remember to water the plants, call the plumber about the leak, and book the train for Friday.",
]
_WORDS = ["data", "user", "config", "index", "main", "build", "value", "count", "items", "path", "name"]


def _repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _lines(size: int, line: Callable[[random.Random], str], sep: str = "\n") -> str:
    rnd = random.Random(size)
    parts: list[str] = []
    total = 0
    while total < size:
        parts.append(line(rnd) + sep)
        total += len(parts[-1])
    return "".join(parts)[:size]


def _code_line(rnd: random.Random) -> str:
    a, b, c = rnd.choices(_WORDS, k=3)
    return rnd.choice(
        [
            f"    {a}_{b} = {c}.get('{a}', {rnd.randrange(100)})",
            f"def {a}_{b}(self, {c}: int) -> list[str]:",
            f"        return [{a} for {a} in self.{b} if {a}.{c} > {rnd.randrange(9)}]",
            f"    # {rnd.choice(_PROSE)[:60]}",
            f"    if not {a}:\n        raise ValueError(f'bad {b}: {{{c}!r}}')",
        ]
    )


def _key_value_line(rnd: random.Random) -> str:
    value = "".join(rnd.choices(string.ascii_letters + string.digits, k=rnd.randrange(8, 24)))
    key = rnd.choice(["password", "api_key", "secret", "DB_PASS", "client_secret", "auth_key"])
    return rnd.choice([f"{key}={value}", f"{key}: {value}", f'{key} = "{value}"', f"export {key}='{value}'"])


def _no_blank(rnd: random.Random) -> str:
    return rnd.choice(_WORDS) + rnd.choice("-_./:=,")


def _json(size: int) -> str:
    rnd = random.Random(size)
    items: list[str] = []
    total = 0
    while total < size:
        key = rnd.choice([*_WORDS, "password_hint", "secret_name", "api_key_header"]) + str(len(items))
        value = rnd.choice(_PROSE)[: rnd.randrange(5, 60)]
        items.append(json.dumps(key) + ":" + json.dumps(value))
        total += len(items[-1]) + 1
    return ("{" + ",".join(items) + "}")[:size]


def shapes(size: int) -> dict[str, Callable[[], str]]:
    """Each shape's text of ``size`` characters."""
    return {
        "prose": lambda: _lines(size, lambda rnd: rnd.choice(_PROSE), " "),
        "code": lambda: _lines(size, _code_line),
        "key_values": lambda: _lines(size, _key_value_line),
        "password_colon_x": lambda: _repeat("password: x\n", size),
        "no_blank_run": lambda: _lines(size, _no_blank, ""),
        "base64_lines": lambda: _lines(size, lambda rnd: base64.b64encode(rnd.randbytes(57)).decode()),
        "near_miss_keywords": lambda: _repeat("passwd keys pass secretive keyboard ", size),
        "json_strings": lambda: _json(size),
        "worst_pwd_escaped_slash": lambda: _repeat("pwd=\\/", size),
        "worst_pwd_empty_quotes": lambda: _repeat("pwd='';", size),
        "worst_pwd_dash": lambda: _repeat("pwd-", size),
        "worst_password_quote": lambda: _repeat("password='", size),
        "worst_cut_token_start": lambda: _repeat("sk-\\/", size),
        "worst_cut_jwt_start": lambda: _repeat("eyJ/", size),
    }


def measure(sizes: list[float], only: list[str] | None, repeats: int) -> dict[str, dict[str, float]]:
    """In this process: each shape's µs per character at each size, and the growth."""
    from makad.core.redaction import preload, redact

    preload()
    report: dict[str, dict[str, float]] = {}
    for size_mib in sizes:
        size = int(size_mib * MIB)
        for name, build in shapes(size).items():
            if only and name not in only:
                continue
            text = build()
            best = float("inf")
            for _ in range(repeats):
                start = time.process_time()
                redact(text)
                best = min(best, time.process_time() - start)
            report.setdefault(name, {})[f"{size_mib:g}MiB"] = round(best * 1e6 / len(text), 3)
    for figures in report.values():
        values = list(figures.values())
        if len(values) > 1 and values[0] > 0:
            figures["growth"] = round(values[-1] / values[0], 2)
    return report


def _in_tree(tree: Path, sizes: list[float], only: list[str] | None, repeats: int) -> dict[str, Any]:
    args = [sys.executable, __file__, "--worker", "--repeats", str(repeats), *(only or [])]
    env = {**os.environ, "PYTHONPATH": f"{tree}:{tree / 'clients' / 'python'}"}
    args += ["--sizes", *map(str, sizes)]
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out)
    return result


def run(
    quick: bool,
    only: list[str] | None = None,
    trees: list[Path] | None = None,
    repeats: int = 1,
    sizes: list[float] | None = None,
) -> dict[str, Any]:
    """``{shape: {"<tree>": {"1MiB": us, "8MiB": us, "growth": ratio}}}`` (this tree alone:
    the figures without the tree level)."""
    sizes = sizes or ([1 / 16, 1 / 4] if quick else [1, 8])
    report: dict[str, Any] = {}
    for tree in trees or [ROOT]:
        for name, figures in _in_tree(tree, sizes, only, repeats).items():
            if trees:
                report.setdefault(name, {})[str(tree)] = figures
            else:
                report[name] = figures
    return {"redaction_cost": {"us_per_char": report}}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("shapes", nargs="*")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tree", action="append", type=Path)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--sizes", nargs="+", type=float, help="text sizes in MiB (default 1 8)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.sizes, args.shapes or None, args.repeats)))
    else:
        print(json.dumps(run(args.quick, args.shapes or None, args.tree, args.repeats, args.sizes), indent=2))

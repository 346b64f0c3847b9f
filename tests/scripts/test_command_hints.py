"""Commands the tests and scripts tell a reader to run are ones that run as written: the
dev virtualenv's Python (``.venv/bin/python``, which scripts/test and scripts/run create),
not a bare ``python`` that many machines lack or that lacks makad's dependencies."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# `python` at the head of a command line, after PYTHONPATH=…, or after "run"/"with".
BARE_PYTHON_HINT = re.compile(
    r"(?:^[ \t]+|PYTHONPATH=\S+ |\brun:? +|Regenerate with ``)python3? +(?:-m +\w|[\w./-]+\.py\b|scripts/)",
    re.MULTILINE,
)


def hinting_files() -> list[Path]:
    """The tests' and scripts' sources, the client's generator and what it writes."""
    found = [*ROOT.joinpath("tests").rglob("*.py"), *ROOT.joinpath("clients/python/scripts").rglob("*.py")]
    found += [
        p for p in ROOT.joinpath("scripts").rglob("*") if p.is_file() and p.suffix in {"", ".py", ".sh"}
    ]
    found += [ROOT / "clients/python/maka/generated.py", ROOT / "clients/python/maka/generated_methods.py"]
    return found


def test_no_hint_names_a_bare_python() -> None:
    """No test, script or generated module tells the reader to run `python …`."""
    hits = {
        f"{path.relative_to(ROOT)}: {m.group(0).strip()}"
        for path in hinting_files()
        for m in BARE_PYTHON_HINT.finditer(path.read_text(encoding="utf-8", errors="replace"))
    }
    assert hits == set()


def test_gen_protocol_without_the_virtualenv_says_how_to_run_it() -> None:
    """scripts/gen-protocol run by a Python without makad's dependencies names the command that
    works instead of ending in a traceback."""
    # -S: no site-packages, so msgspec (and so makad) cannot be imported.
    result = subprocess.run(
        [sys.executable, "-S", str(ROOT / "scripts" / "gen-protocol")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert ".venv/bin/python scripts/gen-protocol" in result.stderr and "Traceback" not in result.stderr

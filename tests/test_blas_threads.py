"""numpy in a test process runs one BLAS thread, whichever module imports it first."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_numpy_imported_after_the_conftest_runs_one_blas_thread() -> None:
    """numpy imported after the suite's conftest (by nltk, say, before makad's embedding
    module sets its thread count) starts no BLAS threads of its own: on CI's 2 cores they
    spin against the other pytest worker and the daemons, each matrix product many times
    slower."""
    if importlib.util.find_spec("numpy") is None:
        pytest.skip("numpy is not installed")
    if not Path("/proc/self/task").is_dir():
        pytest.skip("threads are counted in /proc/self/task, which this system lacks")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    code = "import tests.conftest, numpy, os; print(len(os.listdir('/proc/self/task')))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "1"

"""Shared fixtures: a real makad subprocess on a real socket in a short temp dir."""

from __future__ import annotations

import compileall
import itertools
import os
import shutil
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from makad.store.ledger import Ledger
from tests.support import DaemonProcess, SharedDaemon, daemon_in_tmp, short_temp_dir

# pytest keeps each test module with its asserts rewritten in __pycache__, unless bytecode
# is not to be written (PYTHONDONTWRITEBYTECODE, as on the shared test machines): then every
# xdist worker rewrites all ~380 modules on every run, ~20 s of CPU each, two thirds of
# collecting. Set before any test module is imported; __pycache__ is in .gitignore.
sys.dont_write_bytecode = False

# No test may start a daemon on the user's own data directory by accident (the CLI and
# `maka mcp` autostart one by default): the autostart tests turn it back on, in a temp home.
os.environ["MAKA_NO_AUTOSTART"] = "1"

# One BLAS thread in the test processes, as makad's embedding module asks for in the
# daemon: here another module (nltk, for scripts/ab's scores) imports numpy first during
# collection, and OpenBLAS's own threads would spin against the other pytest worker and the
# daemons on CI's 2 cores, each matrix product many times slower. Set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Property tests check what holds, never how fast: on a loaded machine (CI's 2 cores, the
# other test workers) an example can take longer than Hypothesis's 200 ms deadline, or the
# data longer to draw than its too_slow health check allows, and neither is a failure.
settings.register_profile("makad", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("makad")

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """Compile makad and the maka client to bytecode once, before any test runs.

    Every daemon a test starts and every ``maka`` command it runs is a new interpreter
    importing these packages; with PYTHONDONTWRITEBYTECODE set (as on the shared test
    machines) none of them leaves bytecode behind, so each compiled all of it again (~0.8 s
    of CPU per daemon, ~0.2 s per command), where an installed makad starts from the
    bytecode pip wrote. compileall writes it whatever that variable says and skips what is
    up to date; done in the controller only (xdist starts its workers after this hook)."""
    if hasattr(config, "workerinput"):
        return
    for package in ("makad", "clients/python/maka"):
        compileall.compile_dir(ROOT / package, quiet=1)


# A test marked ``slow`` (a benchmark run, a kill -9 loop) counts as this many ordinary ones
# when the modules are ordered for the workers.
SLOW_WEIGHT = 25


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules with the most work first (a ``slow`` test counting SLOW_WEIGHT): pytest-xdist
    hands each worker whole modules in this order (scripts/test), so a long module is not
    started last while the other worker has nothing left to do. A module's own tests keep
    their order."""
    weights: Counter[str] = Counter()
    for item in items:
        weights[_module_of(item)] += SLOW_WEIGHT if item.get_closest_marker("slow") else 1
    items.sort(key=lambda item: -weights[_module_of(item)])


def _module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio only (the daemon's backend)."""
    return "asyncio"


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    """A fresh workspace ledger (the store tier's, also used by the service tier), closed
    after the test."""
    opened = Ledger(tmp_path / "ws" / "ledger.db")
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temp dir with a short path, under $TMPDIR when that leaves room for a socket path
    (AF_UNIX socket paths are limited to 107 bytes), else under /tmp."""
    path = short_temp_dir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def daemon(short_tmp: Path) -> Iterator[DaemonProcess]:
    """A started makad with its own socket, data dir and workspace root."""
    proc = DaemonProcess(short_tmp)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def module_daemon() -> Iterator[DaemonProcess]:
    """One daemon for a whole test module (use with ``new_ws``: a workspace per test)."""
    yield from daemon_in_tmp()


_workspace_names = itertools.count()


@pytest.fixture
def new_ws(module_daemon: DaemonProcess) -> Path:
    """A fresh, empty workspace folder beside the module daemon's."""
    path = module_daemon.root / f"w{next(_workspace_names)}"
    path.mkdir()
    return path


@pytest.fixture
def shared_daemon(module_daemon: DaemonProcess, new_ws: Path) -> DaemonProcess:
    """The module's daemon with a fresh workspace of this test's own as ``.workspace``: for
    tests that neither stop it nor depend on state outside their workspace (one start-up
    per module instead of one per test, ~1 s of CPU each)."""
    return SharedDaemon(module_daemon, new_ws)

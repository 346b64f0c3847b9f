"""What `pipx install .` and `uv tool install .` do, done by hand: build the wheel, install
it into a fresh virtualenv, run the installed `maka` and `makad`."""

from __future__ import annotations

import importlib.util
import site
import subprocess
import sys
from pathlib import Path

import pytest

from makad import __version__

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str | Path, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=180, **kw)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv holding the wheel built from this tree (its bin directory).

    The wheel is built by the build backend's hook in this environment (hatchling from
    the dev extra, as pip calls it without build isolation) and installed without its
    dependencies, which the fresh environment borrows from the test environment through
    a .pth line: no network, and every file of makad and maka is the wheel's.
    """
    if importlib.util.find_spec("hatchling") is None:
        pytest.skip("hatchling (the dev extra's build backend) is not installed")
    tmp = tmp_path_factory.mktemp("dist")
    # The build backend's PEP 517 hook, as pip calls it without build isolation (pip's own
    # start and its wheel cache add a second of CPU and nothing to what is built).
    hook = "import sys; from hatchling.build import build_wheel; build_wheel(sys.argv[1])"
    built = run(sys.executable, "-c", hook, tmp, cwd=ROOT)
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp.glob("makad-*.whl")
    venv = tmp / "fresh"
    assert run(sys.executable, "-m", "venv", "--without-pip", venv).returncode == 0
    python = venv / "bin" / "python"
    purelib = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    (Path(purelib) / "borrowed-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    done = run(
        sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel
    )
    assert done.returncode == 0, done.stderr
    return venv / "bin"


@pytest.mark.slow
def test_installed_commands_run_and_know_their_version(installed: Path) -> None:
    """`maka --version` and `makad --version` from the installed wheel print this version."""
    for command in ("maka", "makad"):
        result = run(installed / command, "--version")
        assert result.returncode == 0, result.stderr
        assert __version__ in result.stdout


def test_the_wheel_holds_both_packages(installed: Path) -> None:
    """makad and maka import from the fresh environment, not from the source tree."""
    code = "import makad, maka, maka.cli; print(makad.__file__); print(maka.__file__)"
    result = run(installed / "python", "-c", code, cwd=installed)  # not the source tree's cwd
    assert result.returncode == 0, result.stderr
    for path in result.stdout.split():
        assert path.startswith(str(installed.parent)), path


def test_installed_daemon_serves_the_installed_cli(installed: Path, short_tmp: Path) -> None:
    """The installed makad starts and the installed maka talks to it (status, a write)."""
    sock = short_tmp / "s.sock"
    proc = subprocess.Popen(
        [installed / "makad", "--socket", sock, "--data-dir", short_tmp / "data", "--log-format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None and "listening on" in proc.stdout.readline()
        ws = short_tmp / "ws"
        ws.mkdir()
        added = run(installed / "maka", "--socket", sock, "-w", ws, "memory", "add", "Installed", "works")
        assert added.returncode == 0, added.stderr
        assert "works" in (ws / "memory" / "MEMORY.md").read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        assert proc.stdout is not None
        proc.stdout.close()

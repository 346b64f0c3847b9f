"""The fixtures' temp dirs follow $TMPDIR while a daemon's socket still fits below them."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support import (
    FALLBACK_TEMP_ROOT,
    DaemonProcess,
    ping_ok,
    short_temp_dir,
    short_temp_root,
)


def test_short_tmp_is_under_the_temp_dir_python_uses(short_tmp: Path) -> None:
    """short_tmp lives in $TMPDIR (tempfile's temp dir) when that is short enough."""
    assert short_tmp.parent == Path(short_temp_root())
    if len(tempfile.gettempdir()) < 60:
        assert short_temp_root() == tempfile.gettempdir()


@pytest.mark.parametrize("extra", [0, 80])
def test_a_daemon_serves_below_tmpdir_or_falls_back(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, extra: int
) -> None:
    """With $TMPDIR set to a short dir, the daemon's socket and data go there; set to one so
    long that a socket below it would pass the AF_UNIX limit, they go to /tmp instead."""
    base = short_tmp / ("t" * extra if extra else "t")
    base.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    root = short_temp_dir()
    try:
        assert root.parent == (base if not extra else Path(FALLBACK_TEMP_ROOT))
        d = DaemonProcess(root)
        d.start()
        try:
            assert ping_ok(d.socket)
        finally:
            assert d.stop() == 0
    finally:
        shutil.rmtree(root, ignore_errors=True)

"""Start-up stays lean: nothing heavy is imported or opened on the way to the first pong.

The daemon is run as users run it (``python -m makad``) with ``PYTHONPROFILEIMPORTTIME``
(the environment form of ``-X importtime``), so every module it imports is listed on
its stderr. Each library below is needed only by some request (markdown-it to check
content, detect-secrets to redact it, rapidfuzz for near duplicates, snowballstemmer for
recall, watchfiles once a workspace is watched, mcp only by ``maka mcp``) and costs
more start-up time than makad's own modules, so each is imported when first needed, or in
the background once a workspace is in use (``makad.warmup``).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import DaemonProcess, ping_ok

HEAVY = (
    "markdown_it",
    "detect_secrets",
    "requests",
    "rapidfuzz",
    "snowballstemmer",
    "mcp",
    "watchfiles",
    "maka",
)


class QuietDaemon(DaemonProcess):
    """At ``warning`` no line is logged before the first pong. (At ``info`` the
    start-up line is redacted like every line, which loads detect-secrets.)"""

    def command(self) -> list[str]:
        return [*super().command(), "--log-level", "warning"]


@pytest.fixture(scope="module")
def started() -> Iterator[tuple[DaemonProcess, set[str]]]:
    root = Path(tempfile.mkdtemp(prefix="mk", dir="/tmp"))
    proc = QuietDaemon(root, env={"PYTHONPROFILEIMPORTTIME": "1"})
    proc.start()
    try:
        assert ping_ok(proc.socket)
        files = {p.name for p in proc.data_dir.rglob("*")}
        proc.stop()
        yield proc, files
    finally:
        proc.stop()
        shutil.rmtree(root, ignore_errors=True)


def imported(log: str) -> set[str]:
    """Top-level package names in ``-X importtime`` lines."""
    names = set()
    for line in log.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            names.add(name.split(".")[0])
    return names


def test_start_up_imports_none_of_the_heavy_libraries(started: tuple[DaemonProcess, set[str]]) -> None:
    """From exec to the first pong and shutdown, none of the request-only libraries is imported."""
    proc, _ = started
    names = imported(proc.log_text())
    assert "makad" in names and "anyio" in names  # the listing itself works
    assert sorted(names & set(HEAVY)) == []


def test_start_up_opens_no_database(started: tuple[DaemonProcess, set[str]]) -> None:
    """Before any workspace is used, the data dir holds only the identifier key (no ledger)."""
    _, files = started
    assert files == {"identifier.key"}


def test_a_request_that_needs_a_library_still_gets_it(short_tmp: Path) -> None:
    """Imported on first use: a write that redacts and checks content works in a fresh daemon."""
    proc = QuietDaemon(short_tmp)
    proc.start()
    try:
        ws = str(proc.workspace)
        written = proc.call(
            "add_entry",
            {"workspace": ws, "title": "Key", "content": "```\nkey sk-ant-api03-" + "a" * 40 + "\n"},
        )
        text = (proc.workspace / "memory" / "MEMORY.md").read_text()
        assert "[REDACTED:anthropic_key]" in text and "sk-ant-api03" not in text
        assert written["entry"]["content"].count("```") == 2  # markdown-it closed the fence
    finally:
        proc.stop()


def test_first_workspace_use_loads_the_libraries_in_the_background(short_tmp: Path) -> None:
    """Once a workspace is used (here get_settings, which needs none of them), the request
    libraries are loaded (in a worker thread, before the request goes on), so the first user
    edit or recall does not wait for them."""
    proc = QuietDaemon(short_tmp, env={"PYTHONPROFILEIMPORTTIME": "1"})
    proc.start()
    try:
        proc.call("get_settings", {"workspace": str(proc.workspace)})
        wanted = {"detect_secrets", "markdown_it", "snowballstemmer", "rapidfuzz"}
        deadline = time.monotonic() + 20
        while not wanted <= imported(proc.log_text()):
            assert time.monotonic() < deadline, sorted(wanted - imported(proc.log_text()))
            time.sleep(0.05)
        assert proc.call("ping") == "pong"
    finally:
        proc.stop()

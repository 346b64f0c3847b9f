"""Start-up stays lean: nothing heavy is imported or opened on the way to the first pong.

The daemon is run as users run it (``python -m makad``) with ``PYTHONPROFILEIMPORTTIME``
(the environment form of ``-X importtime``), so every module it imports is listed on
its stderr. Each library below is needed only by some request (markdown-it to check
content, detect-secrets to redact it, rapidfuzz for near duplicates, snowballstemmer for
recall, watchfiles once a workspace is watched, mcp only by ``maka mcp``; rich only by
maka's output for people; jsonschema by no request: makad validates with msgspec) and costs
more start-up time than makad's own modules, so each is imported when first needed, or in
the background once a workspace is in use (``makad.warmup``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import DaemonProcess, ping_ok, short_temp_dir

HEAVY = (
    "jsonschema",  # jsonrpcserver's __init__ imports it for a validator makad does not use
    "markdown_it",
    "detect_secrets",
    "requests",
    "rapidfuzz",
    "snowballstemmer",
    "mcp",
    "watchfiles",
    "maka",
)
# structlog tries to import these (for pretty tracebacks makad turns off); makad hides them
# while it loads, so ``-X importtime`` lists the attempt: only sys.modules tells.
BEHIND_STRUCTLOG = ("rich", "pygments")

# Runs the daemon in-process and, at its first pong, prints the top-level packages loaded.
PROBE = r"""
import os, signal, socket, sys, threading, time

sock_path, data_dir = sys.argv[1], sys.argv[2]


def probe():
    while True:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(sock_path)
            s.sendall(b'{"jsonrpc":"2.0","method":"ping","id":1}\n')
            if b"pong" in s.recv(4096):
                break
        except OSError:
            time.sleep(0.01)
        finally:
            s.close()
    loaded = {name.split(".")[0] for name, module in list(sys.modules.items()) if module is not None}
    print("LOADED " + ",".join(sorted(loaded)), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)


threading.Thread(target=probe, daemon=True).start()
from makad.daemon import main

sys.exit(main(["--socket", sock_path, "--data-dir", data_dir, "--log-level", "warning"]))
"""


class QuietDaemon(DaemonProcess):
    """At ``warning`` no line is logged before the first pong. (At ``info`` the
    ``listening`` line, logged once the services are loaded, is redacted like every line,
    which loads detect-secrets.)"""

    def command(self) -> list[str]:
        return [*super().command(), "--log-level", "warning"]


@pytest.fixture(scope="module")
def started() -> Iterator[tuple[DaemonProcess, set[str]]]:
    root = short_temp_dir()
    proc = QuietDaemon(root, env={"PYTHONPROFILEIMPORTTIME": "1"})
    proc.start()
    try:
        assert ping_ok(proc.socket)
        proc.call("rpc.discover")  # answered once the whole daemon is loaded (makad.daemon)
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


def test_at_the_first_pong_no_heavy_library_is_loaded(short_tmp: Path) -> None:
    """Counted in the daemon's own sys.modules at its first pong: none of the request-only
    libraries, nor rich and pygments behind structlog, is loaded."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(short_tmp / "s.sock"), str(short_tmp / "data")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("LOADED "))
    loaded = set(line.removeprefix("LOADED ").split(","))
    assert {"makad", "anyio", "msgspec", "structlog", "jsonrpcserver"} <= loaded  # the probe sees the daemon
    assert sorted(loaded & {*HEAVY, *BEHIND_STRUCTLOG}) == []


# jsonrpcserver's dispatch modules are loaded without its package __init__
# (makad.rpc.jsonrpcserver_parts); a plain import afterwards still gets the whole package.
AFTER_DISPATCH = r"""
import sys
import makad.rpc.dispatch as dispatch
assert "jsonschema" not in sys.modules and "http.server" not in sys.modules, "loaded early"
import jsonrpcserver
import jsonrpcserver.async_dispatcher
from jsonrpcserver import Success, method

@method
def hello(name):
    return Success("hi " + name)

print(jsonrpcserver.dispatch('{"jsonrpc": "2.0", "method": "hello", "params": ["x"], "id": 1}'))
print(jsonrpcserver.async_dispatcher.call is dispatch.call, "jsonschema" in sys.modules)
import oslash  # loaded the same way (only its Either, for jsonrpcserver's results)
assert oslash.Just(1).map(lambda x: x + 1) == oslash.Just(2) and oslash.Right is oslash.either.Right
"""


def test_jsonrpcserver_is_whole_to_a_later_plain_import() -> None:
    """Once makad's dispatcher is loaded (without jsonschema), ``import jsonrpcserver`` in the
    same process gets the full package: its own dispatch (validating with jsonschema) works,
    on the very submodules makad dispatches with; ``import oslash`` gets all of oslash."""
    done = subprocess.run([sys.executable, "-c", AFTER_DISPATCH], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    reply, shared = done.stdout.splitlines()
    assert json.loads(reply) == {"jsonrpc": "2.0", "result": "hi x", "id": 1}
    assert shared == "True True"


def test_start_up_opens_no_database(started: tuple[DaemonProcess, set[str]]) -> None:
    """Loaded but before any workspace is used, the data dir holds only the identifier key
    and the lock that keeps it to one daemon (no ledger)."""
    _, files = started
    assert files == {"identifier.key", "makad.lock"}


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

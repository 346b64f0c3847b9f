"""Running `maka` as a subprocess: plainly, or on a pseudo-terminal like a person would."""

from __future__ import annotations

import contextlib
import io
import os
import select
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from maka.cli import main
from tests.support import DaemonProcess

MAKA = [sys.executable, "-m", "maka.cli"]
PTY_TIMEOUT_S = 20.0


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def run_maka(
    d: DaemonProcess,
    *args: str,
    input: str = "",
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    workspace: bool = True,
) -> Result:
    """`maka --socket S ARGS… [-w WS]` run in this process, stdin from ``input`` (not a tty).

    In-process to keep the tests fast; `test_maka_cli.py` covers the real entry point.
    """
    ws = ["-w", str(d.workspace)] if workspace else []
    out, err = io.StringIO(), io.StringIO()
    saved_cwd, saved_stdin = os.getcwd(), sys.stdin
    try:
        sys.stdin = io.StringIO(input)
        if cwd is not None:
            os.chdir(cwd)
        with (
            mock.patch.dict(os.environ, env or {}),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                code = main(["--socket", str(d.socket), *args, *ws])
            except SystemExit as exc:  # argparse usage errors
                code = int(exc.code or 0)
    finally:
        sys.stdin = saved_stdin
        os.chdir(saved_cwd)
    return Result(code, out.getvalue(), err.getvalue())


def call(d: DaemonProcess, method: str, **params: Any) -> Any:
    return d.call(method, {"workspace": str(d.workspace), **params})


def methods(d: DaemonProcess) -> set[str]:
    """The methods the running daemon offers (from rpc.discover)."""
    return {m["name"] for m in d.call("rpc.discover")["methods"]}


def editor_script(directory: Path, body: str) -> str:
    """An $EDITOR that replaces the edited file by running this Python ``body``.

    The body sees ``path`` (a pathlib.Path) and ``text`` (the file's contents).
    """
    script = directory / "fake-editor.py"
    script.write_text(
        "import pathlib, sys\npath = pathlib.Path(sys.argv[1])\ntext = path.read_text()\n" + body + "\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return f"{sys.executable} {script}"


class Pty:
    """A child process on a pseudo-terminal: ``expect`` output, ``send`` key presses."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        master, slave = os.openpty()
        self.master = master
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
        os.close(slave)
        self.output = ""

    def expect(self, text: str) -> str:
        """Read until ``text`` has appeared after the previous match; return what was read."""
        while text not in self.output:
            ready, _, _ = select.select([self.master], [], [], PTY_TIMEOUT_S)
            if not ready:
                raise TimeoutError(f"never saw {text!r}; got:\n{self.output}")
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # EIO: the child closed the terminal
                chunk = b""
            if not chunk:
                raise EOFError(f"exited before {text!r}; got:\n{self.output}")
            self.output += chunk.decode("utf-8", errors="replace")
        seen, _, self.output = self.output.partition(text)
        return seen + text

    def send(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def wait(self) -> tuple[int, str]:
        """The exit code and whatever was printed after the last match."""
        rest = []
        while True:
            ready, _, _ = select.select([self.master], [], [], PTY_TIMEOUT_S)
            if not ready:
                break
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                break
            if not chunk:
                break
            rest.append(chunk.decode("utf-8", errors="replace"))
        code = self.proc.wait(timeout=PTY_TIMEOUT_S)
        os.close(self.master)
        return code, self.output + "".join(rest)

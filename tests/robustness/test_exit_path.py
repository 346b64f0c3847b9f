"""The ``makad`` command's way out after ``main()``: without the interpreter's module
teardown, but with what the interpreter would do before it."""

from __future__ import annotations

import subprocess
import sys

# main() stands in for the daemon: it returns 3 with a thread pool left open, a non-daemon
# thread still at work and an exit handler registered, and run_and_exit() takes over.
PROGRAM = """
import atexit, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
import makad.daemon

pool = ThreadPoolExecutor(2)
pool.submit(time.sleep, 0.2)

def late() -> None:
    time.sleep(0.5)
    print("thread finished", flush=True)

def main(argv=None) -> int:
    threading.Thread(target=late).start()
    atexit.register(lambda: print("exit handler ran"))  # left in stdout's buffer
    return 3

makad.daemon.main = main
makad.daemon.run_and_exit()
"""


def test_the_exit_code_threads_pools_and_exit_handlers_are_as_a_normal_exit_leaves_them() -> None:
    """main()'s code is the exit code; a non-daemon thread is waited for, an open thread
    pool does not hold the exit up, and an exit handler runs and its output is flushed."""
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines() == ["thread finished", "exit handler ran"]

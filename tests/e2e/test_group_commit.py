"""Group commit over the socket: every acknowledged append survives kill -9.

Sixteen clients append one event a call, each to its own session, so the daemon
commits them in groups; the daemon is killed with SIGKILL at an arbitrary moment.
After a restart every append a client saw acknowledged is there, at the seq it was
given, and every chain verifies. (The fault points inside a group are exercised on the
store itself, in a child process: tests/store/test_group_commit.py.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from maka import Client
from maka.errors import MakaError
from tests.e2e.test_ledger import append, assert_chain_valid, open_session, ws_of
from tests.support import DaemonProcess

CLIENTS = 16


Acked = list[tuple[str, int, str]]


def hammer(
    daemon: DaemonProcess, sids: list[str], until: Callable[[int], bool]
) -> tuple[list[threading.Thread], Acked]:
    """One thread per session appending until the daemon dies; returns once ``until(acked)``
    holds (or the daemon died): the threads, and the ``(session, seq, text)`` of every
    acknowledged append (the list grows until the threads end)."""
    ws = ws_of(daemon)
    acked: Acked = []
    done = threading.Condition()
    alive = [len(sids)]

    def worker(sid: str) -> None:
        try:
            with Client(str(daemon.socket), timeout=10) as c:
                for n in range(100_000):
                    text = f"{sid}-{n}"
                    seq = append(c, ws, sid, text)["firstSeq"]
                    with done:
                        acked.append((sid, seq, text))
                        done.notify_all()
        except (MakaError, OSError):
            pass  # the daemon died under us
        with done:
            alive[0] -= 1
            done.notify_all()

    threads = [threading.Thread(target=worker, args=(sid,)) for sid in sids]
    for thread in threads:
        thread.start()
    with done:
        assert done.wait_for(lambda: until(len(acked)) or alive[0] == 0, timeout=60)
    return threads, acked


def assert_survived(daemon: DaemonProcess, sids: list[str], acked: list[tuple[str, int, str]]) -> None:
    ws = ws_of(daemon)
    with daemon.client() as c:
        stored = {sid: {e.seq: e.text for e in assert_chain_valid(c, ws, sid)} for sid in sids}
    for sid, seq, text in acked:
        assert stored[sid].get(seq) == text, (sid, seq)
    for sid in sids:  # seqs without gaps, each session's texts in its call order
        texts = [stored[sid][seq] for seq in sorted(stored[sid])]
        assert sorted(stored[sid]) == list(range(1, len(texts) + 1))
        assert texts == [f"{sid}-{n}" for n in range(len(texts))]


def run_until_dead(
    daemon: DaemonProcess, until: Callable[[int], bool], kill: bool
) -> tuple[list[str], Acked]:
    """Sessions for ``CLIENTS`` clients hammering the daemon until it dies: killed from
    outside once ``until(acked)``, or by its own fault point."""
    ws = ws_of(daemon)
    sids = [open_session(daemon, ws) for _ in range(CLIENTS)]
    threads, acked = hammer(daemon, sids, until)
    if kill:
        daemon.kill9()
    else:
        assert daemon.stop() == -9  # SIGKILL from the fault point, not an exit
    for thread in threads:
        thread.join(timeout=30)
    return sids, list(acked)


def test_acknowledged_appends_survive_kill_9_under_group_commit(module_daemon: DaemonProcess) -> None:
    """SIGKILL while 16 clients append: every acknowledged append is stored, in order."""
    sids, acked = run_until_dead(module_daemon, lambda n: n >= 200, kill=True)
    assert len(acked) >= 200
    module_daemon.start()
    assert_survived(module_daemon, sids, acked)

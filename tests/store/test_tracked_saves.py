"""TrackedFile never takes a changed file for the one it last read, whatever the save did.

Saves are generated: written in place (with or without truncating), or to a temp file
renamed over the file; the same size or not; the times put back or not; several in a row,
some right after a read. After each, if the bytes differ from what was last read, the
stat check (``unchanged_in``: read_state's hot path) must say so and ``refresh`` must
report the change with the new text. Real files in a temp dir.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from makad.store.tracked import RACY_NS, TrackedFile, unchanged_in

CAP = 1 << 20
WORDS = st.text(alphabet="abcxyz\n", min_size=1, max_size=40)
SAVES = st.tuples(
    st.sampled_from(["in_place", "truncate", "rename", "touch_only"]),
    st.booleans(),  # times put back afterwards
    st.booleans(),  # the same size as before
    WORDS,
    st.booleans(),  # the daemon looks (refresh) before the next save
)


def save(path: Path, mode: str, restore: bool, same_size: bool, words: str) -> None:
    before = os.stat(path)
    old = path.read_bytes()
    data = words.encode()
    if same_size:
        data = (data * (len(old) // len(data) + 1))[: len(old)]
    if mode == "in_place":
        with open(path, "r+b") as fh:
            fh.write(data)
            fh.truncate()
    elif mode == "truncate":
        path.write_bytes(data)
    elif mode == "rename":
        tmp = path.with_name(".MEMORY.md.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    else:
        os.utime(path)
    if restore:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


@settings(max_examples=40, deadline=None)
@given(st.lists(SAVES, min_size=1, max_size=6))
def test_every_change_of_the_bytes_is_seen(saves: list[tuple[str, bool, bool, str, bool]]) -> None:
    """A save that changed the bytes is never \"unchanged\", and refresh reads its text."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "MEMORY.md"
        path.write_text("# Maka Memory\n\n## First\n\nOne fact.\n")
        tracked = TrackedFile("MEMORY.md")
        tracked.refresh(path, CAP)
        last = path.read_bytes()
        for mode, restore, same_size, words, look in saves:
            save(path, mode, restore, same_size, words)
            now = path.read_bytes()
            if now != last:
                assert not unchanged_in(tmp, ((tracked, str(path)),)), (mode, restore, same_size)
                assert not tracked.looks_current(path)
            if look or now != last:
                changed = tracked.refresh(path, CAP)
                assert changed == (now != last), (mode, restore, same_size)
                assert tracked.text == now.decode()
                last = now


def test_a_file_read_just_after_it_changed_is_checked_again() -> None:
    """A version read within moments of its change cannot be told from a later change by
    its times alone (the clock behind them ticks coarsely): the next check reads it again,
    keeps the text it had when the bytes are the same, and from then on trusts the stat."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "MEMORY.md"
        path.write_text("# Maka Memory\n\n## First\n\nOne fact.\n")
        hour_ago = time.time_ns() - 3600 * 10**9
        os.utime(path, ns=(hour_ago, hour_ago))  # an old mtime (read at once), a ctime of now
        tracked = TrackedFile("MEMORY.md")
        tracked.refresh(path, CAP)
        assert not tracked.unchanged(path)  # its ctime was too recent when read: not trusted yet
        time.sleep(3 * RACY_NS / 1e9)
        text, doc = tracked.text, tracked.doc
        assert tracked.refresh(path, CAP) is False
        assert tracked.text is text and tracked.doc is doc  # the same bytes: nothing re-parsed
        assert tracked.unchanged(path)

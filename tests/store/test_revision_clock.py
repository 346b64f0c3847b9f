"""The revision clock: one increasing sequence per data directory, across restarts."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from makad.errors import IOFailure
from makad.store import revision_clock
from makad.store.revision_clock import BLOCK, CLOCK_FILE, RevisionClock


def handed_out(clock: RevisionClock, count: int, current: int | None = None) -> list[int]:
    values = []
    for _ in range(count):
        current = clock.next_after(current)
        clock.reserve(current)
        values.append(current)
    return values


def test_values_only_increase_and_pass_the_current_revision(tmp_path: Path) -> None:
    """Each value is above the last one handed out and above the revision it follows."""
    clock = RevisionClock(tmp_path)
    values = handed_out(clock, 50)
    assert values == sorted(set(values))
    far = values[-1] + 10**6
    assert clock.next_after(far) == far + 1
    assert all(clock.issued(v) for v in values) and not clock.issued(values[0] - 10**12)
    assert not clock.issued(True) and not clock.issued("5") and not clock.issued(None)


def test_a_restart_starts_past_everything_handed_out_even_if_the_wall_clock_went_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The persisted bound, not the wall clock, keeps a restarted clock above its past
    values (here the wall clock is set back a day between the runs)."""
    first = RevisionClock(tmp_path)
    past = handed_out(first, 10)
    real = revision_clock.time.time_ns
    monkeypatch.setattr(revision_clock.time, "time_ns", lambda: real() - 86_400 * 10**9)
    second = RevisionClock(tmp_path)
    assert second.since == first.since
    assert second.next_after(None) > max(past)
    assert all(second.issued(v) for v in past)


def test_a_lost_clock_file_starts_past_the_wall_clock(tmp_path: Path) -> None:
    """Without its file the clock starts at the wall clock in ms (past every revision a
    workspace stored before), and what it handed out before counts as from before it."""
    first = RevisionClock(tmp_path)
    past = handed_out(first, 3)
    (tmp_path / CLOCK_FILE).unlink()
    # Values handed out faster than one per ms run ahead of the wall clock: the promise is
    # past the wall clock, so wait until it has passed them.
    while time.time_ns() // 1_000_000 <= max(past):
        time.sleep(0.001)
    second = RevisionClock(tmp_path)
    value = second.next_after(None)
    assert value > max(past) and value > time.time_ns() // 1_000_000 - 1_000
    assert not second.issued(past[-1])


@pytest.mark.parametrize("text", ["", "garbage", "5 3", "-1 4", "1 2 3", "\x00\xff"])
def test_an_unreadable_clock_file_counts_as_none(tmp_path: Path, text: str) -> None:
    """A damaged file is not trusted: the clock starts afresh past the wall clock."""
    (tmp_path / CLOCK_FILE).write_text(text, errors="surrogateescape")
    clock = RevisionClock(tmp_path)
    assert clock.next_after(None) > 1_600_000_000_000
    clock.reserve(clock.next_after(None))
    since, bound = (int(x) for x in (tmp_path / CLOCK_FILE).read_text().split())
    assert since <= bound


def test_the_file_is_written_once_per_block(tmp_path: Path) -> None:
    """Reserving ahead in blocks: a thousand values, one write of the file."""
    clock = RevisionClock(tmp_path)
    handed_out(clock, 1)
    stamp = os.stat(tmp_path / CLOCK_FILE).st_ino
    handed_out(clock, min(1000, BLOCK - 2))
    assert os.stat(tmp_path / CLOCK_FILE).st_ino == stamp
    assert oct(os.stat(tmp_path / CLOCK_FILE).st_mode & 0o777) == "0o600"


def test_a_data_directory_that_cannot_be_written_is_an_io_failure(tmp_path: Path) -> None:
    """When the bound cannot be persisted the value is refused (IOFailure), never used."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    clock = RevisionClock(blocker / "data")
    value = clock.next_after(None)
    with pytest.raises(IOFailure):
        clock.reserve(value)
    assert not clock.reserved(value)


def test_a_clean_stop_gives_back_the_block_it_did_not_use(tmp_path: Path) -> None:
    """Closed, the clock persists the bound it reached instead of a block ahead: the next
    run starts past every value handed out, at the wall clock; a value handed out after
    the close is reserved again."""
    clock = RevisionClock(tmp_path)
    past = handed_out(clock, 3)
    clock.close()
    assert (tmp_path / CLOCK_FILE).read_text().split()[1] == str(max(past) + 1)
    later = clock.next_after(None)
    assert not clock.reserved(later)
    clock.reserve(later)
    assert int((tmp_path / CLOCK_FILE).read_text().split()[1]) > later
    clock.close()
    while time.time_ns() // 1_000_000 <= later:
        time.sleep(0.001)
    second = RevisionClock(tmp_path)
    first_value = second.next_after(None)
    assert later < first_value <= time.time_ns() // 1_000_000 + 1


def test_a_value_that_cannot_be_reserved_is_covered_by_the_wall_clock(tmp_path: Path) -> None:
    """When the bound cannot be persisted, ``reserve_or_cover`` returns once the wall clock
    has passed the value (no later run can hand it out again), and refuses (IOFailure) a
    value further ahead of the wall clock than it waits."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    clock = RevisionClock(blocker / "data")
    value = clock.next_after(None)
    clock.reserve_or_cover(value)
    assert time.time_ns() // 1_000_000 > value
    far = clock.next_after(time.time_ns() // 1_000_000 + revision_clock.COVER_WAIT_MS + 60_000)
    with pytest.raises(IOFailure):
        clock.reserve_or_cover(far)

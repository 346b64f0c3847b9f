"""Derived session notes: what is gathered from events, how it is bounded, who wins a section."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core import session_notes as notes
from makad.core.compaction import abbreviate
from makad.core.tokens import estimate_tokens
from makad.core.types import Event, EventType, WorkingState

SID = "s1"


def ev(seq: int, type_: EventType, text: str, tokens: int = 10, **kw: object) -> Event:
    return Event(session_id=SID, seq=seq, ts=seq, type=type_, text=text, tokens=tokens, **kw)  # type: ignore[arg-type]


def turn(seq: int, path: str, result: str, failed: bool = False, tool: str = "run") -> list[Event]:
    meta = {"exit_code": "1"} if failed else None
    return [
        ev(seq, "user_message", f"please work on {path}"),
        ev(seq + 1, "tool_call", json.dumps({"path": path}), tool_call_id=f"c{seq}", tool_name=tool),
        ev(seq + 2, "tool_result", result, tool_call_id=f"c{seq}", meta=meta),
        ev(seq + 3, "assistant_message", f"done with {path}"),
    ]


def test_paths_errors_fixes_and_requests_are_gathered_with_refs() -> None:
    """A failed run and the later run that passed; paths and requests, each with its event ref."""
    events = turn(1, "src/a.py", "ok") + turn(5, "src/b.py", "AssertionError: 1 != 2", failed=True)
    events += turn(9, "src/b.py", "2 passed")
    state = notes.gather(notes.Gathered(), events)
    texts = notes.render(state, SID, WorkingState(), dict.fromkeys(notes.SECTIONS, 2_000))
    files = texts["Files and Functions"]
    assert files.index("src/a.py") < files.index("src/b.py")
    assert "src/b.py (event:s1:6, event:s1:10)" in files
    assert (
        "- run: AssertionError: 1 != 2 (event:s1:7) → fixed at event:s1:11" in texts["Errors & Corrections"]
    )
    assert texts["Worklog"].splitlines()[1:] == [
        "- event:s1:1 please work on src/a.py",
        "- event:s1:5 please work on src/b.py",
        "- event:s1:9 please work on src/b.py",
    ]
    assert texts["Current State"].splitlines()[1:] == [
        "Goal: please work on src/b.py (event:s1:9)",
        "Open thread: last reply: done with src/b.py (event:s1:12)",
    ]
    assert all(text.startswith(notes.DERIVED_MARK + "event:s1:1-12") for text in texts.values())


def test_the_working_state_goal_and_an_open_error_lead_current_state() -> None:
    """A client's goal and thread come first; otherwise the latest unfixed error is the thread."""
    state = notes.gather(notes.Gathered(), turn(1, "x.py", "Traceback (most recent call last):"))
    lines = notes.render(state, SID, WorkingState(), {"Current State": 500})["Current State"]
    assert "Open thread: run failed: Traceback (most recent call last): (event:s1:3)" in lines
    working = WorkingState(goals=["ship v2"], open_threads=["review the PR"])
    lines = notes.render(state, SID, working, {"Current State": 500})["Current State"]
    assert "Goal: ship v2 (working state)" in lines and "Open thread: review the PR" in lines


def test_failure_detection() -> None:
    """Meta flags, non-zero exit codes and error-looking text count; a plain result does not."""
    assert notes.failed(ev(1, "tool_result", "fine", meta={"isError": "true"}))
    assert notes.failed(ev(1, "tool_result", "fine", meta={"status": "failed"}))
    assert notes.failed(ev(1, "tool_result", "fine", meta={"returncode": "2"}))
    for text in (
        "Error: boom",
        "TypeError: x is None",
        "FAILED tests/t.py::t",
        "fatal: no repo",
        "Traceback (most recent call last):\n  ...",
        "error[E0308]: mismatched types",
    ):
        assert notes.failed(ev(1, "tool_result", text)), text
    assert not notes.failed(ev(1, "tool_result", "error handling is done in utils.py"))
    assert not notes.failed(ev(1, "tool_result", "def on_error(): pass"))
    assert not notes.failed(ev(1, "tool_result", "ok", meta={"exit_code": "0"}))


def test_a_client_section_is_never_written_and_shrinks_the_room() -> None:
    """Client text wins its section; the derived ones share what the client left of 12,000."""
    client = {"Worklog": "mine", "Learnings": "x " * 20_000}
    writable = notes.sections_to_write(client)
    assert "Worklog" not in writable and set(writable) == set(notes.SECTIONS) - {"Worklog", "Learnings"}
    assert not set(notes.CLIENT_SECTIONS) & set(writable)  # Workflow is never derived
    room = notes.allowance(client, writable)
    left = notes.MAX_NOTES_TOKENS - estimate_tokens(client["Learnings"]) - estimate_tokens("mine")
    assert sum(room.values()) <= left and all(v <= notes.MAX_NOTE_SECTION_TOKENS for v in room.values())
    derived = {"Worklog": notes.DERIVED_MARK + "event:s:1-2; …)\n- x"}
    assert "Worklog" in notes.sections_to_write(derived)


def test_updates_are_due_past_ten_thousand_tokens_then_every_five() -> None:
    """due() turns on at 10,000 tokens, and again 5,000 after each write."""
    state = notes.Gathered(tokens=9_999)
    assert not notes.due(state) and notes.next_threshold(state) == 10_000
    state.tokens = 10_000
    assert notes.due(state)
    state.rendered_at_tokens = 10_000
    state.tokens = 14_999
    assert not notes.due(state) and notes.next_threshold(state) == 15_000
    state.tokens = 15_000
    assert notes.due(state)


def test_gathering_twice_reads_each_event_once() -> None:
    """Events at or before what was read are skipped: a replayed page changes nothing."""
    events = turn(1, "a.py", "ok")
    once = notes.gather(notes.Gathered(), events)
    twice = notes.gather(notes.gather(notes.Gathered(), events), events)
    assert once == twice and once.tokens == 40


_TEXT = st.text(alphabet="abc/._ 数\n", min_size=0, max_size=400)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["user_message", "assistant_message", "tool_call", "tool_result", "note"]),
            _TEXT,
            st.booleans(),
        ),
        max_size=600,
    ),
    st.integers(min_value=50, max_value=2_000),
)
def test_every_section_fits_its_allowance(spec: list[tuple[str, str, bool]], room: int) -> None:
    """Any events: each rendered section stays within its allowance and opens with the mark."""
    events = [
        ev(
            i + 1,
            kind,
            text,
            meta={"is_error": "1"} if bad else None,  # type: ignore[arg-type]
            tool_call_id=f"c{i // 2}",
            tool_name="t",
        )
        for i, (kind, text, bad) in enumerate(spec)
    ]
    state = notes.gather(notes.Gathered(), events)
    assert len(state.files) <= notes.MAX_ITEMS and len(state.worklog) <= notes.MAX_ITEMS
    for section, text in notes.render(
        state, SID, WorkingState(), dict.fromkeys(notes.SECTIONS, room)
    ).items():
        assert estimate_tokens(text) <= room, section
        assert text.startswith(notes.DERIVED_MARK)


def test_a_client_write_makes_room_by_dropping_derived_sections() -> None:
    """Client text wins the total cap too: derived sections it did not write give way."""
    from makad.core.working_state import patch_working_state

    derived = notes.DERIVED_MARK + "event:s:1-9; write this section to replace it)\n" + "a b " * 1_900
    current = WorkingState(notes={s: derived for s in notes.SECTIONS})
    mine = {s: "x " * 3_500 for s in ("Learnings", "Key results", "Workflow")}
    state = patch_working_state(current, notes=mine)
    assert all(state.notes[s] == text for s, text in mine.items())
    kept = [s for s in notes.SECTIONS if s in state.notes]
    assert kept and len(kept) < len(notes.SECTIONS)
    assert sum(estimate_tokens(t) for t in state.notes.values()) <= notes.MAX_NOTES_TOKENS


def test_task_learnings_and_key_results_are_derived() -> None:
    """The first request and its restatements make the task; a failure and the call that
    fixed it make a learning; the latest turn's successful results are the key results."""
    events = [
        ev(1, "user_message", "Add CSV export to the report page"),
        ev(2, "tool_call", '{"cmd": "pytest tests/test_export.py"}', tool_call_id="a", tool_name="bash"),
        ev(
            3,
            "tool_result",
            "ModuleNotFoundError: No module named 'csvkit'",
            tool_call_id="a",
            meta={"exit_code": "1"},
        ),
        ev(
            4,
            "tool_call",
            '{"cmd": "pip install csvkit && pytest tests/test_export.py"}',
            tool_call_id="b",
            tool_name="bash",
        ),
        ev(5, "tool_result", "collected 3 items\n...\n3 passed in 0.4s", tool_call_id="b"),
        ev(6, "user_message", "Thanks, looks good"),
        ev(7, "user_message", "Actually, the export must also include the totals row"),
        ev(8, "tool_call", '{"cmd": "pytest"}', tool_call_id="c", tool_name="bash"),
        ev(9, "tool_result", "lots of output\n42 passed in 3.1s\n", tool_call_id="c"),
        ev(10, "tool_call", '{"path": "docs/export.md"}', tool_call_id="d", tool_name="read"),
        ev(11, "tool_result", "# Export\nCSV only.", tool_call_id="d"),
        ev(12, "assistant_message", "Done: totals included."),
    ]
    state = notes.gather(notes.Gathered(), events)
    texts = notes.render(state, SID, WorkingState(), dict.fromkeys(notes.SECTIONS, 2_000))
    assert texts["Task specification"].splitlines()[1:] == [
        "- The request (event:s1:1): Add CSV export to the report page",
        "- Restated (event:s1:7): Actually, the export must also include the totals row",
    ]
    (learning,) = texts["Learnings"].splitlines()[1:]
    assert "pytest tests/test_export.py" in learning and "No module named 'csvkit'" in learning
    assert "pip install csvkit" in learning and learning.endswith("worked (event:s1:5)")
    assert texts["Key results"].splitlines()[1:] == [
        "- bash: 42 passed in 3.1s (event:s1:9)",
        "- read: CSV only. (event:s1:11)",
    ]
    assert all(notes.is_derived(texts[s]) for s in ("Task specification", "Learnings", "Key results"))


def test_key_results_keep_the_last_turn_that_had_any_and_the_task_survives_a_tight_cap() -> None:
    """A turn with no successful result leaves the key results of the turn before; when the
    task section is cut to its cap, the first request stays and the oldest restatements go."""
    events = [
        ev(1, "user_message", "Fix the flaky login test"),
        ev(2, "tool_call", "{}", tool_call_id="a", tool_name="test"),
        ev(3, "tool_result", "1 passed", tool_call_id="a"),
        ev(4, "user_message", "what now?"),
        ev(5, "tool_call", "{}", tool_call_id="b", tool_name="test"),
        ev(6, "tool_result", "Error: timeout", tool_call_id="b"),
    ]
    events += [
        ev(10 + n, "user_message", f"Actually, also make sure case {n} " + "word " * 20) for n in range(30)
    ]
    state = notes.gather(notes.Gathered(), events)
    texts = notes.render(state, SID, WorkingState(), {"Task specification": 200, "Key results": 200})
    assert texts["Key results"].splitlines()[1:] == ["- test: 1 passed (event:s1:3)"]
    task = texts["Task specification"]
    assert "Fix the flaky login test" in task and "earlier items left out" in task
    assert "case 29" in task and "case 0 " not in task and estimate_tokens(task) <= 200


def test_stored_notes_of_an_older_daemon_still_decode() -> None:
    """A gathered record stored before these sections existed decodes, the new parts empty."""
    import msgspec

    old = {"tokens": 5, "errors": [[3, "bash", "boom", 0]], "worklog": [[1, "hi"]]}
    state = msgspec.json.decode(msgspec.json.encode(old), type=notes.Gathered)
    assert state.errors[0].call == "" and state.task is None and state.key_results == []


def _peak_bytes(run: Callable[[], object]) -> int:
    """The most memory ``run`` held at once beyond what was there before (tracemalloc)."""
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("type_", "text"),
    [
        ("tool_result", "ok\n" * 300_000),
        ("tool_result", "\n" * 300_000 + "ok"),
        ("tool_call", json.dumps({"args": ["src/a.py"] * 100_000})),
        ("tool_call", "src/a.py " * 100_000),
        ("user_message", "lorem ipsum " * 100_000),
        ("assistant_message", " " * 1_000_000 + "done"),
    ],
    ids=["lines", "blank-lines", "json-values", "path-words", "words", "blanks"],
)
def test_a_huge_event_is_gathered_without_a_string_per_line_or_word(type_: EventType, text: str) -> None:
    """A tool's megabytes of output are noted from their head and their first line, read
    without splitting the whole text (a string per line or word, made in one call that
    let no other thread run: over a second, every client waiting, for one 8 MB event)."""
    event = ev(1, type_, text, tool_call_id="c1")
    gathered = notes.Gathered()
    peak = _peak_bytes(lambda: notes.gather(gathered, [event]))
    assert gathered.last_seq == 1
    # A copy or two of the text at most (splitting it took some 20 times its size).
    assert peak < 2 * len(text) + 1_000_000, peak


def test_the_first_line_and_abbreviation_read_as_splitting_would() -> None:
    """The first non-blank line and its abbreviation, found piecewise, are what splitting
    the whole text gives, across every kind of line break and blank."""
    for text in ["", " \n\t", "\u2028\x85 a  b\u3000c\r\nd", "\x1c\x1dx y", "  " * 40_000 + "w\nz"]:
        line = next((x for x in text.splitlines() if x.strip()), "")
        expected = " ".join(line.split())
        assert notes._first_line(text) == expected, repr(text[:40])
        assert abbreviate(text, 1_000) == " ".join(text.split())
    assert abbreviate("word " * 100_000, 12) == "word word…"

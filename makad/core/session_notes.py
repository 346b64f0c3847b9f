"""Session notes the daemon keeps itself, derived from a session's events without a model.

Claude Code's Session Memory, done deterministically. ``gather`` reads events
once, in seq order, into a small bounded record (``Gathered``); ``render``
turns it into seven working-state note sections, each line carrying the
``event:`` ref it came from:

- ``Files and Functions``: the paths tool calls and results name
  (``makad.core.compaction.paths_in``), most recently touched last, with the
  refs of their latest touches;
- ``Errors & Corrections``: failed tool results (``failed``) and the later
  result of the same tool that succeeded, which fixed them;
- ``Worklog``: one line per user request;
- ``Task specification``: the session's first user request, then the later
  requests that restate or change it (``RESTATEMENT``: "actually", "instead",
  "to clarify", "the goal is", "make sure", …), newest last;
- ``Learnings``: each failure a later result of the same tool fixed, with the
  call that failed and the call that worked (what to do next time);
- ``Key results``: the successful tool results of the latest turn that had
  any (the results the session ended on), each by its summary line;
- ``Current State``: the latest goal (the working state's last goal, else the
  latest request) and the open thread (the working state's last open thread,
  else the latest error not fixed yet, else the latest assistant reply).

``Workflow`` (how the user wants the work done) needs judgement no event states:
it is the client's section (``CLIENT_SECTIONS``), never derived.

Derived text opens with ``DERIVED_MARK``. A section whose text does not is a
client's, and is never overwritten: client text wins (``sections_to_write``).
Everything is bounded: ``Gathered`` keeps at most ``MAX_ITEMS`` of each kind,
each derived section fits its share of what the working state accepts
(2,000 tokens a section, 12,000 in all, less what the client wrote), dropping
its oldest lines first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

import msgspec

from makad.core.compaction import NOT_SPACE, abbreviate, find_from, paths_in
from makad.core.counted import counted
from makad.core.refs import event_range, event_ref
from makad.core.tokens import estimate_tokens
from makad.core.types import MAX_NOTE_SECTION_TOKENS, MAX_NOTES_TOKENS, Event, WorkingState

FIRST_UPDATE_TOKENS: Final = 10_000
UPDATE_EVERY_TOKENS: Final = 5_000
MAX_ITEMS: Final = 200
REFS_PER_FILE: Final = 3
LINE_CHARS: Final = 160
DERIVED_MARK: Final = "(derived by makad from "
SECTIONS: Final = (
    "Current State",
    "Task specification",
    "Files and Functions",
    "Errors & Corrections",
    "Learnings",
    "Key results",
    "Worklog",
)
# The note sections only a client writes: nothing in the events states them.
CLIENT_SECTIONS: Final = ("Workflow",)
MAX_RESTATEMENTS: Final = 20
MAX_KEY_RESULTS: Final = 10
# A later user request that restates or changes the task, by how it opens or what it says.
RESTATEMENT: Final = re.compile(
    r"\s*(?:actually|instead|to clarify|clarification|correction|scratch that|change of plans?"
    r"|new plan|one more thing|i meant|what i meant|let me rephrase|to be clear|rather|wait)\b"
    r"|.{0,120}\b(?:the (?:task|goal|requirement|spec|point) is|i (?:want|need) (?:you )?to"
    r"|make sure|instead of|rather than|do not|don't|must not|must|no longer|from now on)\b",
    re.IGNORECASE | re.DOTALL,
)

# A failed tool result: a meta flag, a non-zero exit code, or text that opens like an error.
_ERROR_FLAGS: Final = frozenset({"is_error", "iserror", "error", "failed"})
_TRUE: Final = frozenset({"true", "1", "yes", "error", "failed", "failure"})
_STATUS_KEYS: Final = frozenset({"status", "outcome", "result"})
_EXIT_KEYS: Final = frozenset({"exit_code", "exitcode", "returncode", "return_code", "code"})
_ERROR_TEXT: Final = re.compile(
    r"\s*(?:\w*(?:error|exception)(?::|\s*\[)|traceback \(most recent call last\)"
    r"|fatal:|failed\b|failure:|panic:|command failed|permission denied"
    r"|no such file or directory|exit (?:code|status) [1-9])",
    re.IGNORECASE,
)
# A test runner's or build's verdict on a line of its own, in the output's head or tail:
# Go (``--- FAIL: TestX``, ``FAIL\tpkg``), Rust (``test result: FAILED``, ``error: could
# not compile``), pytest (``FAILED tests/…``, ``=== 1 failed, 2 passed ===``), Jest/Vitest
# (``Tests:  1 failed``), npm (``npm ERR!``).
_VERDICT_LINE: Final = re.compile(
    r"^[ \t]*(?:--- FAIL: |FAIL(?:\t|[ \t]*$)|test result: FAILED\b"
    r"|error: (?:could not compile|test failed)\b|FAILED \S|npm ERR! |Tests?:[ \t]+[1-9]\d* failed\b"
    r"|=+ [^\n]*?\b[1-9]\d* failed\b[^\n]* =+[ \t]*$)",
    re.MULTILINE,
)
VERDICT_SPAN: Final = 2_000
# What ``str.splitlines`` splits at (every one of them is whitespace too).
_LINE_BREAK: Final = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


class Line(msgspec.Struct, array_like=True):
    seq: int
    text: str


class FileNote(msgspec.Struct, array_like=True):
    path: str
    seqs: list[int]


class ErrorNote(msgspec.Struct, array_like=True):
    seq: int
    tool: str
    text: str
    fixed_seq: int = 0
    call: str = ""  # the failed call's arguments, first line
    fix_call: str = ""  # the call whose result fixed it


class Gathered(msgspec.Struct, kw_only=True):
    """What the events read so far had to say, bounded; stored between updates."""

    tokens: int = 0
    first_seq: int = 0
    last_seq: int = 0
    rendered_at_tokens: int = 0
    files: list[FileNote] = []
    errors: list[ErrorNote] = []
    worklog: list[Line] = []
    worklog_dropped: int = 0
    last_reply: Line | None = None
    open_calls: dict[str, str] = {}  # tool call id → tool name, until its result comes
    open_args: dict[str, str] = {}  # tool call id → its arguments' first line, likewise
    task: Line | None = None  # the first user request
    restatements: list[Line] = []
    turn_results: list[Line] = []  # this turn's successful tool results
    key_results: list[Line] = []  # the latest turn's that had any


def failed(event: Event) -> bool:
    """Whether a tool result reports a failure (see the pattern above)."""
    for key, value in (event.meta or {}).items():
        name, flag = key.lower(), value.strip().lower()
        if name in _ERROR_FLAGS and flag in _TRUE:
            return True
        if name in _STATUS_KEYS and flag in ("error", "failed", "failure"):
            return True
        if name in _EXIT_KEYS and flag.lstrip("-").isdigit() and int(flag) != 0:
            return True
    text = event.text
    if _ERROR_TEXT.match(text[:200]):
        return True
    if len(text) <= 2 * VERDICT_SPAN:
        return _VERDICT_LINE.search(text) is not None
    return any(_VERDICT_LINE.search(part) for part in (text[:VERDICT_SPAN], text[-VERDICT_SPAN:]))


_TRACEBACK: Final = "traceback (most recent call last)"
_TRACEBACK_LINE: Final = "\nTraceback (most recent call last):"
# Lines of a chained Python traceback that introduce the next one, not an exception.
_CHAINED: Final = ("traceback (most recent call last)", "during handling of the above", "the above exception")


def failure_text(text: str) -> str:
    """Where a failed result says so: all of it, or — when its opening does not read as an
    error (``running 3 tests``) — from its first verdict line on (``test result: FAILED…``);
    a Python traceback (opening it, or after log lines, without a verdict line) from the
    exception it ended on (``ValueError: …``), the last line of its tail not indented."""
    if text[:200].lstrip().casefold().startswith(_TRACEBACK):
        return _raised(text)
    if _ERROR_TEXT.match(text[:200]):
        return text
    for part in (text[:VERDICT_SPAN], text[-VERDICT_SPAN:]):
        found = _VERDICT_LINE.search(part)
        if found is not None:
            return part[found.start() :]
    if any(_TRACEBACK_LINE in part for part in (text[:VERDICT_SPAN], text[-VERDICT_SPAN:])):
        return _raised(text)  # log lines, then the traceback the run died of
    return text


def _raised(traceback: str) -> str:
    """A Python traceback from the line naming the exception it ended on, else all of it."""
    tail = traceback[-VERDICT_SPAN:]
    for line in reversed(tail.splitlines()):
        if line[:1].isalnum() and not line.casefold().startswith(_CHAINED):
            return line + "\n"
    return traceback


def _first_line(text: str) -> str:
    """The first line with more than whitespace in it, abbreviated; found without
    splitting the whole text (millions of lines in one call that let no other thread run)."""
    start = find_from(NOT_SPACE, text, 0)
    if start < 0:
        return ""
    end = find_from(_LINE_BREAK, text, start)
    return abbreviate(text[start : end if end >= 0 else len(text)], LINE_CHARS)


def _summary_line(text: str) -> str:
    """A result's summary: its last line with a word in it (``42 passed in 3s``), else its first."""
    for line in reversed(text[-4_000:].splitlines()):
        if any(c.isalnum() for c in line):
            return abbreviate(line, LINE_CHARS)
    return _first_line(text)


def gather(state: Gathered, events: Iterable[Event]) -> Gathered:
    """``state`` updated with ``events`` (newer than what it has read), in place."""
    files = {note.path: note for note in state.files}
    for event in events:
        if event.seq <= state.last_seq:
            continue
        state.first_seq = state.first_seq or event.seq
        state.last_seq = event.seq
        state.tokens += event.tokens
        if event.type == "user_message" and event.text.strip():
            request = Line(event.seq, abbreviate(event.text, LINE_CHARS))
            state.worklog.append(request)
            if state.task is None:
                state.task = request
            elif RESTATEMENT.match(event.text[:400]):
                state.restatements = [*state.restatements, request][-MAX_RESTATEMENTS:]
            state.turn_results = []
        elif event.type == "assistant_message" and event.text.strip():
            state.last_reply = Line(event.seq, abbreviate(event.text, LINE_CHARS))
        elif event.type == "tool_call":
            if event.tool_call_id and len(state.open_calls) < MAX_ITEMS:
                state.open_calls[event.tool_call_id] = event.tool_name or "tool"
                state.open_args[event.tool_call_id] = _first_line(event.text)
        elif event.type == "tool_result":
            called = state.open_calls.pop(event.tool_call_id or "", None)
            args = state.open_args.pop(event.tool_call_id or "", "")
            tool = event.tool_name or called or "tool"
            if failed(event):
                state.errors.append(
                    ErrorNote(event.seq, tool, _first_line(failure_text(event.text)), call=args)
                )
            else:
                for error in reversed(state.errors):
                    if error.tool == tool and not error.fixed_seq:
                        error.fixed_seq = event.seq
                        error.fix_call = args
                        break
                result = Line(event.seq, f"{tool}: {_summary_line(event.text)}")
                state.turn_results = [*state.turn_results, result][-MAX_KEY_RESULTS:]
                state.key_results = state.turn_results
        for path in paths_in(event):
            note = files.pop(path, None) or FileNote(path, [])
            note.seqs = [*note.seqs, event.seq][-REFS_PER_FILE:]
            files[path] = note  # re-inserted: most recently touched last
    state.files = list(files.values())[-MAX_ITEMS:]
    state.errors = state.errors[-MAX_ITEMS:]
    overflow = len(state.worklog) - MAX_ITEMS
    if overflow > 0:
        state.worklog = state.worklog[overflow:]
        state.worklog_dropped += overflow
    return state


def due(state: Gathered) -> bool:
    """Whether the notes should be written now: past 10,000 tokens, then every 5,000 more."""
    if state.tokens < FIRST_UPDATE_TOKENS:
        return False
    return not state.rendered_at_tokens or (state.tokens - state.rendered_at_tokens >= UPDATE_EVERY_TOKENS)


def next_threshold(state: Gathered) -> int:
    """The session size (tokens) at which ``due`` next turns true."""
    if not state.rendered_at_tokens:
        return max(FIRST_UPDATE_TOKENS, state.tokens + 1)
    return state.rendered_at_tokens + UPDATE_EVERY_TOKENS


def is_derived(text: str) -> bool:
    return text.lstrip().startswith(DERIVED_MARK)


def make_room_for_client_notes(notes: dict[str, str], written: set[str]) -> None:
    """Client text wins: when a client's write would take the notes over their total cap,
    derived sections it did not write are dropped in section order to make room; the
    daemon derives them again within what is left."""
    total = sum(estimate_tokens(text) for text in notes.values())
    for section in SECTIONS:
        if total <= MAX_NOTES_TOKENS:
            return
        text = notes.get(section)
        if text is not None and section not in written and is_derived(text):
            total -= estimate_tokens(text)
            del notes[section]


def sections_to_write(notes: Mapping[str, str]) -> list[str]:
    """The derived sections the daemon may write: absent ones and its own."""
    return [s for s in SECTIONS if s not in notes or is_derived(notes[s])]


def _fit(head: str, lines: list[str], max_tokens: int, omitted: int = 0) -> str:
    """``head`` and the newest ``lines`` that fit ``max_tokens``; a line counts what was cut."""
    kept: list[str] = []
    used = estimate_tokens(head) + 1
    for line in reversed(lines):
        cost = estimate_tokens(line) + 1
        if used + cost + 12 > max_tokens:  # room for the "earlier" line
            break
        kept.append(line)
        used += cost
    kept.reverse()
    cut = omitted + len(lines) - len(kept)
    if cut:
        kept.insert(0, f"- … {counted(cut, 'earlier item')} left out")
    return "\n".join([head, *kept])


def render(
    state: Gathered, session_id: str, working: WorkingState, allowance: Mapping[str, int]
) -> dict[str, str]:
    """The text of each section in ``allowance`` (section → most tokens it may take)."""
    span = event_range(session_id, state.first_seq, state.last_seq)
    head = f"{DERIVED_MARK}{span}; write this section to replace it)"
    out: dict[str, str] = {}
    for section, max_tokens in allowance.items():
        lines = _section_lines(section, state, session_id, working)
        omitted = state.worklog_dropped if section == "Worklog" else 0
        if not lines:
            continue
        if section == "Task specification":  # the first request stays; restatements fit after it
            out[section] = _fit(f"{head}\n{lines[0]}", lines[1:], max_tokens)
        else:
            out[section] = _fit(head, lines, max_tokens, omitted)
    return out


def _section_lines(section: str, state: Gathered, sid: str, working: WorkingState) -> list[str]:
    if section == "Files and Functions":
        return [f"- {note.path} ({', '.join(event_ref(sid, s) for s in note.seqs)})" for note in state.files]
    if section == "Errors & Corrections":
        lines = []
        for error in state.errors:
            outcome = f"fixed at {event_ref(sid, error.fixed_seq)}" if error.fixed_seq else "not fixed yet"
            lines.append(f"- {error.tool}: {error.text} ({event_ref(sid, error.seq)}) → {outcome}")
        return lines
    if section == "Worklog":
        return [f"- {event_ref(sid, line.seq)} {line.text}" for line in state.worklog]
    if section == "Task specification":
        if state.task is None:
            return []
        first = [f"- The request ({event_ref(sid, state.task.seq)}): {state.task.text}"]
        later = [f"- Restated ({event_ref(sid, line.seq)}): {line.text}" for line in state.restatements]
        return first + later
    if section == "Learnings":
        return [_learning(error, sid) for error in state.errors if error.fixed_seq]
    if section == "Key results":
        return [f"- {line.text} ({event_ref(sid, line.seq)})" for line in state.key_results]
    return _current_state(state, sid, working)


def _learning(error: ErrorNote, sid: str) -> str:
    """A failure and what fixed it: the failed call, what it said, the call that worked."""
    failed_call = f" {error.call}" if error.call else ""
    fixed_call = f" {error.fix_call}" if error.fix_call else ""
    return (
        f"- {error.tool}{failed_call} failed ({error.text}, {event_ref(sid, error.seq)}); "
        f"{error.tool}{fixed_call} worked ({event_ref(sid, error.fixed_seq)})"
    )


def _current_state(state: Gathered, sid: str, working: WorkingState) -> list[str]:
    lines = []
    goals = [g for g in working.goals if g.strip()]
    if goals:
        lines.append(f"Goal: {abbreviate(goals[-1], LINE_CHARS)} (working state)")
    elif state.worklog:
        latest = state.worklog[-1]
        lines.append(f"Goal: {latest.text} ({event_ref(sid, latest.seq)})")
    threads = [t for t in working.open_threads if t.strip()]
    open_errors = [e for e in state.errors if not e.fixed_seq]
    if threads:
        lines.append(f"Open thread: {abbreviate(threads[-1], LINE_CHARS)} (working state)")
    elif open_errors:
        error = open_errors[-1]
        lines.append(f"Open thread: {error.tool} failed: {error.text} ({event_ref(sid, error.seq)})")
    elif state.last_reply is not None:
        reply = state.last_reply
        lines.append(f"Open thread: last reply: {reply.text} ({event_ref(sid, reply.seq)})")
    return lines


def allowance(notes: Mapping[str, str], writable: list[str]) -> dict[str, int]:
    """Tokens each writable section may take: the section cap, within what the client's
    own sections leave of the notes' total cap."""
    if not writable:
        return {}
    client = sum(estimate_tokens(text) for section, text in notes.items() if section not in writable)
    room = max(MAX_NOTES_TOKENS - client, 0) // len(writable)
    return {section: min(MAX_NOTE_SECTION_TOKENS, room) for section in writable if room >= 50}

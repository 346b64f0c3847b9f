"""Compaction planning, summary validation, the no-model summary and the breaker."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.compaction import (
    BreakerState,
    KeepPlan,
    checkpoint_summary,
    covered_hash,
    effective_window,
    ensure_closed,
    event_tokens,
    files_touched,
    is_open,
    is_text_message,
    looks_like_path,
    nothing_to_compact,
    plan_keep_window,
    record_failure,
    record_success,
    validate_summary,
)
from makad.core.redaction import redact
from makad.core.tokens import estimate_tokens
from makad.core.types import Event, EventType, WorkingState
from makad.errors import CircuitOpen, InvalidSummary

SID = "s1"


class _Builder:
    """Appends events with consecutive seqs, the way the ledger numbers them."""

    def __init__(self, first_seq: int = 1) -> None:
        self.events: list[Event] = []
        self.next_seq = first_seq

    def add(
        self,
        type_: EventType,
        text: str = "",
        tokens: int = 0,
        call_id: str | None = None,
        tool: str | None = None,
    ) -> Event:
        event = Event(
            session_id=SID,
            seq=self.next_seq,
            ts=self.next_seq * 1000,
            type=type_,
            text=text,
            tokens=tokens,
            tool_call_id=call_id,
            tool_name=tool,
            hash=f"h{self.next_seq}",
        )
        self.next_seq += 1
        self.events.append(event)
        return event


# A session is a list of blocks; a block is one message or one batch of tool calls.
_message = st.tuples(
    st.sampled_from(["user_message", "assistant_message", "system", "note"]),
    st.integers(1, 3000),
    st.booleans(),
)
_tool_batch = st.tuples(
    st.just("tools"),
    st.integers(1, 3),  # calls in the batch
    st.integers(1, 3000),
    st.sampled_from(["sequential", "parallel", "orphan_call", "orphan_result"]),
)
_sessions = st.lists(st.one_of(_message, _tool_batch), max_size=60)


def _build(blocks: Sequence[tuple[Any, ...]]) -> list[Event]:
    builder = _Builder(first_seq=7)
    calls = 0
    for block in blocks:
        if block[0] != "tools":
            kind, tokens, has_text = block
            text = "some words here" if has_text else ""
            builder.add(kind, text, tokens=tokens)
            continue
        _, count, tokens, shape = block
        ids = [f"c{calls + i}" for i in range(count)]
        calls += len(ids)
        if shape == "sequential":
            for call_id in ids:
                builder.add("tool_call", "{}", tokens, call_id, "read")
                builder.add("tool_result", "ok", tokens, call_id, "read")
        elif shape == "parallel":
            for call_id in ids:
                builder.add("tool_call", "{}", tokens, call_id, "read")
            for call_id in ids:
                builder.add("tool_result", "ok", tokens, call_id, "read")
        elif shape == "orphan_call":
            builder.add("tool_call", "{}", tokens, ids[0], "read")
        else:
            builder.add("tool_result", "ok", tokens, f"gone{ids[0]}", "read")
    return builder.events


def _split(events: Sequence[Event], plan: KeepPlan) -> tuple[list[Event], list[Event]]:
    covered = [e for e in events if e.seq <= plan.boundary_seq]
    return covered, [e for e in events if e.seq > plan.boundary_seq]


_reasons = st.sampled_from(["manual", "budget", "overflow"])
_keeps = st.one_of(st.none(), st.integers(-5, 60_000))


@settings(max_examples=200, deadline=None)
@given(_sessions, _keeps, _reasons)
def test_keep_window_never_splits_a_tool_call_from_its_result(
    blocks: list[tuple[Any, ...]], keep: int | None, reason: str
) -> None:
    """Every call and its result land on the same side of the boundary."""
    events = _build(blocks)
    plan = plan_keep_window(events, keep, reason)
    if plan is None:
        return
    side: dict[str, set[bool]] = {}
    for event in events:
        if event.tool_call_id is not None:
            side.setdefault(event.tool_call_id, set()).add(event.seq <= plan.boundary_seq)
    assert all(len(sides) == 1 for sides in side.values())


@settings(max_examples=200, deadline=None)
@given(_sessions, _keeps, _reasons)
def test_keep_window_preserves_the_minimums_unless_capped(
    blocks: list[tuple[Any, ...]], keep: int | None, reason: str
) -> None:
    """The preserved suffix holds the token and text-message minimums, or reached the cap."""
    events = _build(blocks)
    plan = plan_keep_window(events, keep, reason)
    if plan is None:
        return
    covered, preserved = _split(events, plan)
    assert covered and preserved
    assert plan.preserved_from_seq == preserved[0].seq
    assert (plan.covered_from_seq, plan.covered_to_seq) == (covered[0].seq, covered[-1].seq)
    minimum, cap = effective_window(keep, reason)
    min_text = 2 if reason == "overflow" else 5
    tokens = sum(event_tokens(e) for e in preserved)
    texts = sum(is_text_message(e) for e in preserved)
    assert (tokens >= minimum and texts >= min_text) or tokens >= cap


@settings(max_examples=200, deadline=None)
@given(_sessions, st.integers(0, 80), _keeps, _reasons)
def test_keep_window_never_goes_past_the_previous_boundary(
    blocks: list[tuple[Any, ...]], cut: int, keep: int | None, reason: str
) -> None:
    """Nothing at or before the previous boundary is covered again."""
    events = _build(blocks)
    if not events:
        return
    previous = events[min(cut, len(events) - 1)].seq
    plan = plan_keep_window(events, keep, reason, previous_boundary_seq=previous)
    after = [e for e in events if e.seq > previous]
    assert plan == plan_keep_window(after, keep, reason)
    if plan is not None:
        assert plan.covered_from_seq == after[0].seq
        assert plan.preserved_from_seq > plan.boundary_seq > previous


@settings(max_examples=200, deadline=None)
@given(_sessions, _keeps)
def test_overflow_window_is_never_looser_than_manual(blocks: list[tuple[Any, ...]], keep: int | None) -> None:
    """A reactive compaction keeps no more than a manual one would."""
    events = _build(blocks)
    manual = plan_keep_window(events, keep, "manual")
    overflow = plan_keep_window(events, keep, "overflow")
    if manual is not None:
        assert overflow is not None
        assert overflow.preserved_from_seq >= manual.preserved_from_seq


def _chat(turns: int, tokens: int = 1000) -> list[Event]:
    builder = _Builder()
    for i in range(turns):
        builder.add("user_message", f"question {i}", tokens=tokens)
        builder.add("assistant_message", f"answer {i}", tokens=tokens)
    return builder.events


def test_overflow_window_is_strictly_tighter_on_a_long_chat() -> None:
    """Overflow halves the window, so it covers more of the same chat."""
    events = _chat(30)
    manual = plan_keep_window(events, 10_000, "manual")
    overflow = plan_keep_window(events, 10_000, "overflow")
    assert manual is not None and overflow is not None
    assert overflow.boundary_seq > manual.boundary_seq
    assert manual.preserved_from_seq == 51  # 10 messages of 1,000 tokens
    assert overflow.preserved_from_seq == 55  # 5,000 tokens, rounded back to a user turn


def test_short_session_has_nothing_to_compact() -> None:
    """A session that fits the keep window yields no plan."""
    assert plan_keep_window(_chat(3), 10_000) is None
    assert plan_keep_window([], 10_000) is None


def test_nothing_to_compact_counts_one_event_in_the_singular() -> None:
    """A session of one event is said to hold "1 event", and of two "2 events"."""
    builder = _Builder()
    builder.add("user_message", "hello", tokens=10)
    one = nothing_to_compact(builder.events, 10_000).message
    assert " in 1 event, " in one, one
    assert " in 2 events, " in nothing_to_compact(_chat(1), 10_000).message


def test_five_text_messages_are_kept_even_when_tokens_suffice() -> None:
    """A huge last message does not shrink the kept window below five text messages."""
    events = _chat(10, tokens=100)
    events.append(_Builder(21).add("user_message", "big", tokens=20_000))
    plan = plan_keep_window(events, 10_000)
    assert plan is not None
    _, preserved = _split(events, plan)
    assert sum(is_text_message(e) for e in preserved) >= 5


def test_keep_recent_tokens_is_clamped() -> None:
    """The window is clamped to [1,000, 40,000] and overflow halves it."""
    assert effective_window(None, "manual") == (10_000, 40_000)
    assert effective_window(5, "manual") == (1_000, 40_000)
    assert effective_window(999_999, "budget") == (40_000, 40_000)
    assert effective_window(10_000, "overflow") == (5_000, 20_000)


def test_window_walks_back_to_include_the_tool_call() -> None:
    """A cut that would land between a call and its result moves back to the call."""
    builder = _Builder()
    builder.add("user_message", "old", tokens=5000)
    builder.add("assistant_message", "old", tokens=5000)
    builder.add("user_message", "run it", tokens=10)
    call = builder.add("tool_call", "{}", tokens=10, call_id="c1", tool="bash")
    builder.add("tool_result", "x", tokens=9000, call_id="c1", tool="bash")
    for i in range(3):
        builder.add("assistant_message", f"a{i}", tokens=400)
    plan = plan_keep_window(builder.events, 10_000, min_text_messages=1)
    assert plan is not None
    assert plan.preserved_from_seq <= call.seq


def test_window_prefers_to_start_at_a_user_message() -> None:
    """When a user turn is close behind the cut, the kept suffix starts there."""
    builder = _Builder()
    for _ in range(4):
        builder.add("user_message", "q", tokens=3000)
        builder.add("assistant_message", "thinking", tokens=10)
        builder.add("assistant_message", "a", tokens=3000)
    plan = plan_keep_window(builder.events, 4000, min_text_messages=1)
    assert plan is not None
    first_kept = next(e for e in builder.events if e.seq == plan.preserved_from_seq)
    assert first_kept.type == "user_message"


def test_window_never_covers_a_user_turn_without_its_reply() -> None:
    """When the only user turn behind the cut opens the window, covering it alone would
    leave its reply first in the kept history, which a pack (starting at a user turn)
    drops unseen: nothing is covered until a later user turn can start the window."""
    builder = _Builder(41)
    builder.add("user_message", "q", tokens=10)
    for i in range(5):
        builder.add("user_message" if i % 2 else "assistant_message", f"m{i}", tokens=400)
    assert plan_keep_window(builder.events, 1000, previous_boundary_seq=40) is None
    why = nothing_to_compact(builder.events, 1000, previous_boundary_seq=40).message
    assert "yet" in why and "after the next user turn" in why and "kept verbatim" not in why
    builder.add("user_message", "next", tokens=400)
    builder.add("assistant_message", "answer", tokens=400)
    plan = plan_keep_window(builder.events, 1000, previous_boundary_seq=40)
    assert plan is not None
    first_kept = next(e for e in builder.events if e.seq == plan.preserved_from_seq)
    assert first_kept.type == "user_message" and plan.covered_to_seq >= 42


def test_covered_hash_is_the_last_covered_event_hash() -> None:
    """The ledger's chain makes the last covered hash commit to the whole range."""
    events = _chat(3)
    assert covered_hash(events[:4]) == "h4"
    unhashed = [Event(session_id=SID, seq=i, ts=0, type="note", text=str(i)) for i in range(3)]
    assert covered_hash(unhashed) == covered_hash(list(unhashed))
    assert len(covered_hash(unhashed)) == 64
    assert covered_hash(unhashed) != covered_hash(unhashed[:2])
    with pytest.raises(ValueError):
        covered_hash([])


GOOD_SUMMARY = """# Summary
## Current Goal
Ship the importer.
### current state:
Parsers done, tests pending.
#### Next Steps
- write fixtures
"""


def _problems(text: str, **kwargs: object) -> tuple[list[str], str, dict[str, object]]:
    with pytest.raises(InvalidSummary) as caught:
        validate_summary(text, **kwargs)
    data = caught.value.data()
    return data["problems"], caught.value.message, data


def test_valid_summary_is_accepted_with_any_heading_level_and_spelling() -> None:
    """Headings #..####, any case, trailing colon and 'Next Steps' all count."""
    assert validate_summary("  " + GOOD_SUMMARY + "\n\n") == GOOD_SUMMARY.strip()


def test_empty_summary_is_rejected() -> None:
    """Blank text is rejected as empty."""
    problems, message, _ = _problems("  \n ")
    assert problems == ["empty"]
    assert "empty" in message


def test_oversized_summary_is_rejected_with_the_figure() -> None:
    """A summary over 12,000 tokens names its size and the limit."""
    text = GOOD_SUMMARY + "word " * 12_000
    problems, message, data = _problems(text)
    assert problems == ["too_long"]
    assert data["summaryTokens"] == estimate_tokens(text.strip())
    assert "12,000" in message and f"{estimate_tokens(text.strip()):,}" in message


def test_missing_sections_are_listed() -> None:
    """Each missing required section is named."""
    problems, message, data = _problems("## Current State\nfine\n")
    assert problems == ["missing_sections"]
    assert data["missingSections"] == ["Current Goal", "Next Step"]
    assert "Current Goal, Next Step" in message


def test_headings_inside_code_fences_do_not_count() -> None:
    """A section heading inside a fenced block is not a section."""
    text = "## Current Goal\nx\n## Current State\ny\n```\n## Next Step\nz\n```\n"
    _, _, data = _problems(text)
    assert data["missingSections"] == ["Next Step"]


def test_empty_required_section_is_rejected() -> None:
    """A required heading with nothing under it is named as empty."""
    problems, _, data = _problems("## Current Goal\n## Current State\nx\n## Next Step\ny\n")
    assert problems == ["empty_sections"]
    assert data["emptySections"] == ["Current Goal"]


def test_summary_with_a_secret_is_rejected() -> None:
    """A summary the redactor finds a secret in is rejected, however well-formed."""
    problems, message, data = _problems(GOOD_SUMMARY, find_secrets=lambda text: text.count("Ship"))
    assert problems == ["contains_secret"]
    assert data["secretCount"] == 1
    assert "Ship" not in message


def test_summary_with_a_real_token_is_rejected_by_the_redactor() -> None:
    """Wired to the redactor as the service does, a summary holding a GitHub token fails."""
    token = "ghp_" + "a1B2c3D4" * 4 + "x9Y8"  # built at runtime: no literal credential in the repo
    problems, message, _ = _problems(
        GOOD_SUMMARY + f"\nUsed {token} to push.\n", find_secrets=lambda text: redact(text).count
    )
    assert problems == ["contains_secret"]
    assert token not in message


def test_every_problem_is_named_at_once() -> None:
    """Oversized, missing sections and secrets are all reported together."""
    problems, _, _ = _problems("word " * 13_000, find_secrets=lambda _: 2)
    assert problems == ["too_long", "missing_sections", "contains_secret"]


_texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=400)
_markdownish = st.one_of(
    _texts,
    st.sampled_from(["## Current Goal", "```", "# Next Step", "中文内容很长" * 30, "- item"]),
)
_states = st.builds(
    WorkingState,
    goals=st.lists(_markdownish, max_size=6),
    open_threads=st.lists(_markdownish, max_size=6),
    decisions=st.lists(_markdownish, max_size=6),
    notes=st.dictionaries(
        st.sampled_from(["Current State", "Learnings", "Errors & Corrections", "Worklog"]),
        st.lists(_markdownish, max_size=5).map("\n".join),
    ),
)


def _session_with_text(blocks: list[tuple[Any, ...]], texts: list[str]) -> list[Event]:
    events = _build(blocks)
    if not texts:
        return events
    return [msgspec.structs.replace(e, text=texts[i % len(texts)], tokens=0) for i, e in enumerate(events)]


@settings(max_examples=150, deadline=None)
@given(
    _sessions,
    st.lists(_markdownish, max_size=8),
    _states,
    st.one_of(st.none(), _markdownish),
    st.integers(0, 5000),
)
def test_checkpoint_summary_validates_fits_and_is_deterministic(
    blocks: list[tuple[Any, ...]],
    texts: list[str],
    state: WorkingState,
    previous: str | None,
    max_tokens: int,
) -> None:
    """The no-model summary always passes validation, fits its budget and is reproducible."""
    events = _session_with_text(blocks, texts)
    summary = checkpoint_summary(events, state, previous, max_tokens=max_tokens)
    assert validate_summary(summary) == summary.strip()
    assert estimate_tokens(summary) <= max(max_tokens, 400)
    assert checkpoint_summary(events, state, previous, max_tokens=max_tokens) == summary


def test_checkpoint_summary_lists_messages_tools_and_files() -> None:
    """User messages carry refs, tools are counted and touched files are listed."""
    builder = _Builder()
    builder.add("user_message", "Please fix the parser")
    builder.add("tool_call", json.dumps({"file_path": "makad/core/x.py"}), call_id="a", tool="edit")
    builder.add("tool_result", "ok", call_id="a", tool="edit")
    builder.add("tool_call", json.dumps({"cmd": "pytest tests/core/test_x.py -q"}), call_id="b", tool="bash")
    builder.add("tool_result", "1 passed", call_id="b", tool="bash")
    builder.add("tool_call", json.dumps({"file_path": "makad/core/x.py"}), call_id="c", tool="edit")
    state = WorkingState(goals=["Fix parsing"], open_threads=["Run the full suite"])
    summary = checkpoint_summary(builder.events, state, "## Current Goal\nolder goal")
    assert "- event:s1:1: Please fix the parser" in summary
    assert "- edit ×2 (event:s1:2, event:s1:6)" in summary
    assert "- bash ×1 (event:s1:4)" in summary
    files = summary.split("## Files Touched\n")[1].split("\n\n")[0]
    assert files.splitlines() == ["- makad/core/x.py", "- tests/core/test_x.py"]
    assert "## Previous Summary\n> **Current Goal**\n> older goal" in summary
    assert summary.count("## Current Goal") == 1


def test_checkpoint_summary_falls_back_to_the_last_user_message() -> None:
    """Without a working state, the goal and next step come from the last user message."""
    summary = checkpoint_summary(_chat(2), WorkingState())
    assert "## Current Goal\n- question 1" in summary
    assert "Continue from the last user message: question 1" in summary


def test_checkpoint_summary_drops_oldest_user_messages_first() -> None:
    """Under a tight budget, the newest user messages survive and the rest are counted."""
    builder = _Builder()
    for i in range(200):
        builder.add("user_message", f"message number {i} " + "filler " * 30)
    summary = checkpoint_summary(builder.events, WorkingState(), max_tokens=1500)
    assert "message number 199" in summary
    assert "message number 0 " not in summary
    assert "earlier user messages omitted (event:s1:1-" in summary
    assert estimate_tokens(summary) <= 1500


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("src/app.py", True),
        ("/etc/hosts", True),
        ("./run", True),
        ("README.md", True),
        ("'tests/core/x.py',", True),
        ("and/or", False),
        ("1/2", False),
        ("https://example.com/a.py", False),
        ("e.g.", False),
        ("v1.2.3", False),
        ("/", False),
    ],
)
def test_path_detection_is_conservative(token: str, expected: bool) -> None:
    """Only path-like tokens count as files touched."""
    assert looks_like_path(token) is expected


def test_files_touched_reads_results_line_by_line_only() -> None:
    """Results contribute whole-line paths, not paths mentioned in prose."""
    builder = _Builder()
    builder.add("tool_result", "see docs/a.md for details\nsrc/b.py\n", call_id="x")
    assert files_touched(builder.events) == ["src/b.py"]


def test_breaker_opens_after_three_consecutive_failures() -> None:
    """Three failures in a row open the breaker; a success closes it again."""
    state = BreakerState()
    for _ in range(2):
        state = record_failure(state)
    assert not is_open(state)
    ensure_closed(state, SID)
    state = record_failure(state)
    assert is_open(state)
    with pytest.raises(CircuitOpen) as caught:
        ensure_closed(state, SID)
    assert caught.value.data()["consecutiveFailures"] == 3
    assert not is_open(record_success(state))

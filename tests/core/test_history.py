"""Events to messages, adjacency repair, placeholders and trimming to a budget."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.context_types import ContextLimits, Message, ToolCall
from makad.core.history import (
    MESSAGE_OVERHEAD,
    TOOL_CALL_OVERHEAD,
    PreparedHistory,
    close_units,
    message_tokens,
    to_messages,
)
from makad.core.tokens import HeuristicCounter, estimate_tokens
from makad.core.types import Event, EventType

COUNTER = HeuristicCounter()
LIMITS = ContextLimits()


def ev(seq: int, type_: EventType, text: str = "", call: str | None = None, name: str | None = None) -> Event:
    return Event(
        session_id="s",
        seq=seq,
        ts=seq * 1000,
        type=type_,
        text=text,
        tool_call_id=call,
        tool_name=name,
    )


def assert_closed(messages: Sequence[Message]) -> None:
    """Every call answered right after it, no result without its call, user first."""
    if messages:
        assert messages[0].role == "user"
    i = 0
    while i < len(messages):
        message = messages[i]
        assert message.role != "tool", f"tool result without its call at {i}"
        i += 1
        if message.tool_calls:
            ids = [call.id for call in message.tool_calls]
            assert len(set(ids)) == len(ids)
            answered = []
            while i < len(messages) and messages[i].role == "tool":
                answered.append(messages[i].tool_call_id)
                i += 1
            assert sorted(answered, key=str) == sorted(ids), "call without its result"


# ------------------------------------------------------------ conversion ---


def test_roles_follow_event_types_and_notes_are_skipped() -> None:
    """user/assistant/system events become messages; notes do not."""
    messages = to_messages(
        [
            ev(1, "user_message", "hi"),
            ev(2, "note", "n"),
            ev(3, "system", "sys"),
            ev(4, "assistant_message", "hello"),
        ]
    )
    assert [(m.role, m.content, m.source_id) for m in messages] == [
        ("user", "hi", "event:s:1"),
        ("system", "sys", "event:s:3"),
        ("assistant", "hello", "event:s:4"),
    ]


def test_tool_calls_attach_to_the_preceding_assistant_message() -> None:
    """A run of calls joins the assistant message before it, with a range ref."""
    messages = to_messages(
        [
            ev(1, "user_message", "go"),
            ev(2, "assistant_message", "Reading."),
            ev(3, "tool_call", '{"p":1}', "c1", "read"),
            ev(4, "note", "n"),
            ev(5, "tool_call", '{"p":2}', "c2", "read"),
            ev(6, "tool_result", "r1", "c1"),
        ]
    )
    assert messages[1] == Message(
        role="assistant",
        content="Reading.",
        source_id="event:s:2-5",
        tool_calls=[
            ToolCall(id="c1", name="read", arguments='{"p":1}'),
            ToolCall(id="c2", name="read", arguments='{"p":2}'),
        ],
    )
    assert messages[2] == Message(role="tool", content="r1", source_id="event:s:6", tool_call_id="c1")


def test_tool_calls_without_an_assistant_message_get_an_empty_one() -> None:
    """Calls after a tool result or a user message form their own assistant message."""
    messages = to_messages(
        [
            ev(1, "user_message", "go"),
            ev(2, "tool_call", "{}", "c1", "ls"),
            ev(3, "tool_result", "a", "c1"),
            ev(4, "tool_call", "{}", "c2", "ls"),
        ]
    )
    assert [(m.role, m.content, [c.id for c in m.tool_calls or []]) for m in messages] == [
        ("user", "go", []),
        ("assistant", "", ["c1"]),
        ("tool", "a", []),
        ("assistant", "", ["c2"]),
    ]


def test_message_cost_counts_overheads_calls_and_ids() -> None:
    """A message costs its content, a fixed overhead and each call's parts."""
    call = ToolCall(id="c1", name="read", arguments='{"p":1}')
    message = Message(role="assistant", content="ok", source_id="event:s:1", tool_calls=[call])
    expected = (
        MESSAGE_OVERHEAD
        + estimate_tokens("ok")
        + TOOL_CALL_OVERHEAD
        + estimate_tokens("c1")
        + estimate_tokens("read")
        + estimate_tokens('{"p":1}')
    )
    assert message_tokens(message, COUNTER) == expected


# ---------------------------------------------------------------- repair ---


def test_orphan_results_and_unanswered_calls_are_removed() -> None:
    """A result without a call goes; an unanswered call is stripped, content kept."""
    messages = to_messages(
        [
            ev(1, "user_message", "go"),
            ev(2, "tool_result", "orphan", "zz"),
            ev(3, "assistant_message", "Trying both."),
            ev(4, "tool_call", "{}", "a", "x"),
            ev(5, "tool_call", "{}", "b", "x"),
            ev(6, "tool_result", "ra", "a"),
        ]
    )
    units, removed = close_units(messages)
    flat = [m for unit in units for m in unit]
    assert_closed(flat)
    assert [c.id for c in flat[1].tool_calls or []] == ["a"]
    assert removed == 2


def test_an_empty_assistant_message_with_only_unanswered_calls_is_dropped() -> None:
    """With no content and no answered call, nothing is left of the message."""
    messages = to_messages([ev(1, "user_message", "go"), ev(2, "tool_call", "{}", "a", "x")])
    units, removed = close_units(messages)
    assert [[m.role for m in unit] for unit in units] == [["user"]]
    assert removed == 2


def test_a_result_separated_from_its_call_is_dropped() -> None:
    """A result after an intervening user message no longer closes the call."""
    messages = to_messages(
        [
            ev(1, "user_message", "go"),
            ev(2, "assistant_message", "x"),
            ev(3, "tool_call", "{}", "a", "x"),
            ev(4, "user_message", "wait"),
            ev(5, "tool_result", "late", "a"),
        ]
    )
    units, _ = close_units(messages)
    flat = [m for unit in units for m in unit]
    assert_closed(flat)
    assert [m.role for m in flat] == ["user", "assistant", "user"]


def test_history_starts_at_the_first_user_message() -> None:
    """Messages before the first user message are dropped."""
    history = PreparedHistory(
        [ev(1, "assistant_message", "late reply"), ev(2, "user_message", "q")],
        "s",
        COUNTER,
        LIMITS,
    )
    fitted = history.fit(1000)
    assert [m.content for m in fitted.messages] == ["q"]
    assert fitted.dropped == 1


def test_other_sessions_events_are_ignored() -> None:
    """Only the requested session's events become history."""
    other = Event(session_id="t", seq=9, ts=0, type="user_message", text="not mine")
    history = PreparedHistory([ev(1, "user_message", "mine"), other], "s", COUNTER, LIMITS)
    assert [m.content for m in history.fit(1000).messages] == ["mine"]


# -------------------------------------------------------------- trimming ---


def _turns(count: int, result: str = "ok") -> list[Event]:
    events: list[Event] = []
    for turn in range(count):
        base = turn * 4
        events += [
            ev(base + 1, "user_message", f"question {turn}"),
            ev(base + 2, "tool_call", "{}", f"c{turn}", "read"),
            ev(base + 3, "tool_result", result, f"c{turn}"),
            ev(base + 4, "assistant_message", f"answer {turn}"),
        ]
    return events


def test_newest_turns_are_kept_first() -> None:
    """A tight budget keeps the newest whole turns and drops the oldest."""
    history = PreparedHistory(_turns(5), "s", COUNTER, LIMITS)
    whole = history.tokens_up_to(10**9)
    fitted = history.fit(whole * 2 // 5 + 1)
    assert [m.content for m in fitted.messages if m.role == "user"] == ["question 3", "question 4"]
    assert fitted.tokens <= whole * 2 // 5 + 1
    assert fitted.dropped == 12


def test_a_turn_too_big_to_keep_whole_keeps_its_user_message_and_newest_steps() -> None:
    """The newest turn keeps its question and the latest units that fit."""
    history = PreparedHistory(_turns(1, "r" * 4000), "s", COUNTER, LIMITS)
    user_cost = history.minimum_tokens()
    answer_cost = MESSAGE_OVERHEAD + estimate_tokens("answer 0")
    fitted = history.fit(user_cost + answer_cost)
    assert [m.content for m in fitted.messages] == ["question 0", "answer 0"]
    assert_closed(fitted.messages)


def test_large_old_tool_results_become_placeholders_with_their_ref() -> None:
    """Results above the size limit in older turns carry an event ref instead."""
    history = PreparedHistory(_turns(5, "r" * 4000), "s", COUNTER, LIMITS)
    fitted = history.fit(10**6)
    tool_contents = [m.content for m in fitted.messages if m.role == "tool"]
    assert tool_contents[0] == "[tool result omitted: about 1000 tokens; retrieve it with event:s:3]"
    assert tool_contents[1].startswith("[tool result omitted")
    assert tool_contents[2:] == ["r" * 4000] * 3
    assert fitted.placeholders == ["event:s:3", "event:s:7"]


def test_a_result_that_would_not_fit_is_shrunk_rather_than_lost() -> None:
    """A recent large result that does not fit is replaced by its placeholder."""
    history = PreparedHistory(_turns(1, "r" * 4000), "s", COUNTER, LIMITS)
    fitted = history.fit(200)
    assert [m.role for m in fitted.messages] == ["user", "assistant", "tool", "assistant"]
    assert fitted.shrunk and fitted.placeholders == ["event:s:3"]


# ------------------------------------------------------------- properties ---

_TEXT = st.text(alphabet="ab 数{}\n", max_size=60)


@st.composite
def event_streams(draw: st.DrawFn) -> list[Event]:
    """Turns with parallel and interleaved calls, lost or duplicated results, and noise."""
    specs: list[tuple[EventType, str | None]] = []
    next_call = 0
    for _ in range(draw(st.integers(0, 12))):
        block = draw(st.sampled_from(["user", "user", "assistant", "parallel", "interleaved", "noise"]))
        if block == "user":
            specs.append(("user_message", None))
        elif block == "assistant":
            specs.append(("assistant_message", None))
        elif block == "parallel":
            calls = [f"c{next_call + i}" for i in range(draw(st.integers(1, 3)))]
            next_call += len(calls)
            if draw(st.booleans()):
                specs.append(("assistant_message", None))
            specs += [("tool_call", c) for c in calls]
            answered = list(draw(st.permutations(calls)))[: draw(st.integers(0, len(calls)))]
            specs += [("tool_result", c) for c in answered]
            duplicate: bool = draw(st.booleans())
            if answered and duplicate:
                specs.append(("tool_result", answered[0]))
        elif block == "interleaved":
            for _ in range(draw(st.integers(1, 3))):
                call_id = f"c{next_call}"
                next_call += 1
                specs.append(("tool_call", call_id))
                if draw(st.integers(0, 4)):
                    specs.append(("tool_result", call_id))
        else:
            noise: list[EventType] = ["tool_result", "tool_call", "system", "note"]
            specs.append((draw(st.sampled_from(noise)), draw(st.sampled_from(["c0", "zz", None]))))
    events = []
    seq = 0
    for kind, call in specs:
        seq += draw(st.integers(1, 3))
        name = "tool" if kind == "tool_call" else None
        events.append(ev(seq, kind, draw(_TEXT), call, name))
    return events


@settings(max_examples=200, deadline=None)
@given(event_streams(), st.integers(0, 400))
def test_trimmed_history_is_closed_and_within_budget(events: list[Event], budget: int) -> None:
    """Any event stream, any budget: closed pairs, user first, never over budget."""
    history = PreparedHistory(events, "s", COUNTER, ContextLimits(large_tool_result_tokens=5))
    fitted = history.fit(budget)
    assert fitted.tokens <= budget
    assert fitted.tokens == sum(message_tokens(m, COUNTER) for m in fitted.messages)
    assert_closed(fitted.messages)
    if history.turns and history.minimum_tokens() <= budget:
        newest_user = history.turns[-1][0].messages[0].source_id
        assert newest_user in [m.source_id for m in fitted.messages]


@settings(max_examples=100, deadline=None)
@given(event_streams(), st.integers(0, 400))
def test_trimming_is_deterministic_and_order_independent(events: list[Event], budget: int) -> None:
    """The same events in any order give byte-identical messages."""
    first = PreparedHistory(events, "s", COUNTER, LIMITS).fit(budget)
    second = PreparedHistory(list(reversed(events)), "s", COUNTER, LIMITS).fit(budget)
    assert msgspec.json.encode(first.messages) == msgspec.json.encode(second.messages)


@settings(max_examples=100, deadline=None)
@given(event_streams(), st.integers(0, 400))
def test_the_horizon_never_changes_what_fits(events: list[Event], budget: int) -> None:
    """Skipping history beyond twice the budget keeps exactly the same messages."""
    full = PreparedHistory(events, "s", COUNTER, LIMITS).fit(budget)
    cut = PreparedHistory(events, "s", COUNTER, LIMITS, horizon_tokens=2 * budget).fit(budget)
    assert cut.messages == full.messages

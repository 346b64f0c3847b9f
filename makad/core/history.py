"""A session's live events as provider-neutral messages, trimmed to a budget.

Conversion, in seq order:

- ``user_message`` → a user message, ``assistant_message`` → an assistant one,
  ``system`` → a system one;
- a run of ``tool_call`` events attaches its calls (id, name, arguments = the
  event text) to the assistant message right before it, or else forms an
  assistant message with empty content; that message's ``source_id`` becomes
  the range ``event:<sid>:<from>-<to>``;
- ``tool_result`` → a tool message answering ``tool_call_id``;
- ``note`` events are not messages (they feed the working state and compaction)
  and do not break a run of tool calls.

Closing adjacency (what providers insist on): the tool messages right after an
assistant message with calls answer exactly those calls. A result that does not
answer a call of that message (no call, a duplicate, or separated from it) is
dropped; a call with no result is stripped, and its assistant message dropped
if nothing is left of it. The history starts at a user message: anything before
the first one is dropped. The result is a list of *units* (a user message, a
system message, an assistant message without calls, or an assistant message
with all its results) that are kept or dropped whole, so trimming can never
reopen a pair.

Costs: a message costs ``MESSAGE_OVERHEAD`` plus its content, its
``tool_call_id`` and, per call, ``TOOL_CALL_OVERHEAD`` plus id, name and
arguments.

Trimming keeps turns (a user message and what follows it) newest first. When a
turn does not fit whole, its user message is kept with the newest units that fit
after it, and older turns go. Tool results costing more than
``large_tool_result_tokens`` in turns older than the newest
``keep_tool_results_turns`` are replaced by a placeholder carrying their event
ref; a unit that would not fit otherwise gets the same treatment for every
result larger than its placeholder. Events further back than a look-back
horizon (``horizon_tokens``, see ``_horizon_start``) are never converted, so the
work stays proportional to the budget, not to the session's length.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from makad.core.context_types import ContextLimits, Message, Role, ToolCall
from makad.core.refs import event_ref
from makad.core.tokens import TokenCounter
from makad.core.types import Event

MESSAGE_OVERHEAD = 4
TOOL_CALL_OVERHEAD = 4

_ROLES: dict[str, Role] = {
    "user_message": "user",
    "assistant_message": "assistant",
    "system": "system",
}


def message_tokens(message: Message, counter: TokenCounter) -> int:
    """What one message costs in a model's context (see module doc)."""
    tokens = MESSAGE_OVERHEAD + counter.count(message.content)
    if message.tool_call_id is not None:
        tokens += counter.count(message.tool_call_id)
    for call in message.tool_calls or ():
        tokens += TOOL_CALL_OVERHEAD
        tokens += counter.count(call.id) + counter.count(call.name)
        tokens += counter.count(call.arguments)
    return tokens


def placeholder_text(tokens: int, ref: str) -> str:
    return f"[tool result omitted: about {tokens} tokens; retrieve it with {ref}]"


@dataclass(slots=True)
class _Draft:
    role: Role
    content: str
    session_id: str
    first: int
    last: int
    calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None

    def message(self) -> Message:
        return Message(
            role=self.role,
            content=self.content,
            tool_calls=self.calls or None,
            tool_call_id=self.tool_call_id,
            source_id=event_ref(self.session_id, self.first, self.last),
        )


def to_messages(events: Iterable[Event]) -> list[Message]:
    """Convert events to messages (see module doc); adjacency is not closed yet."""
    drafts: list[_Draft] = []
    calls_attach = False
    seen: set[int] = set()
    for event in sorted(events, key=lambda e: e.seq):
        if event.seq in seen or event.type == "note":
            continue
        seen.add(event.seq)
        sid, seq = event.session_id, event.seq
        if event.type == "tool_call":
            call = ToolCall(id=event.tool_call_id or "", name=event.tool_name or "", arguments=event.text)
            if calls_attach:
                drafts[-1].calls.append(call)
                drafts[-1].last = seq
            else:
                drafts.append(_Draft("assistant", "", sid, seq, seq, [call]))
            calls_attach = True
        elif event.type == "tool_result":
            drafts.append(_Draft("tool", event.text, sid, seq, seq, [], event.tool_call_id))
            calls_attach = False
        else:
            role = _ROLES[event.type]
            drafts.append(_Draft(role, event.text, sid, seq, seq))
            calls_attach = role == "assistant"
    return [d.message() for d in drafts]


@dataclass(slots=True)
class _Version:
    messages: list[Message]
    tokens: int
    placeholders: list[str]


@dataclass(slots=True)
class _Unit:
    """Messages kept or dropped together; costs are computed only when asked."""

    messages: list[Message]
    old: bool = False
    _normal: _Version | None = None
    _shrunk: _Version | None = None

    def normal(self, counter: TokenCounter, limits: ContextLimits) -> _Version:
        if self._normal is None:
            threshold = limits.large_tool_result_tokens if self.old else None
            self._normal = _shrink(self.messages, counter, threshold)
        return self._normal

    def shrunk(self, counter: TokenCounter) -> _Version:
        if self._shrunk is None:
            self._shrunk = _shrink(self.messages, counter, 0)
        return self._shrunk


def _shrink(messages: list[Message], counter: TokenCounter, threshold: int | None) -> _Version:
    """Replace tool results costing more than ``threshold`` (and than their placeholder)."""
    out: list[Message] = []
    placeholders: list[str] = []
    tokens = 0
    for message in messages:
        if threshold is not None and message.role == "tool":
            content_tokens = counter.count(message.content)
            if content_tokens > threshold:
                text = placeholder_text(content_tokens, message.source_id)
                if counter.count(text) < content_tokens:
                    message = Message(
                        role="tool",
                        content=text,
                        tool_call_id=message.tool_call_id,
                        source_id=message.source_id,
                    )
                    placeholders.append(message.source_id)
        out.append(message)
        tokens += message_tokens(message, counter)
    return _Version(out, tokens, placeholders)


def close_units(messages: list[Message]) -> tuple[list[list[Message]], int]:
    """Group messages into units with adjacency closed; also count what was removed.

    The count is of messages dropped plus calls stripped.
    """
    units: list[list[Message]] = []
    removed = 0
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        i += 1
        if message.role == "tool":
            removed += 1
            continue
        if not message.tool_calls:
            units.append([message])
            continue
        calls: dict[str, ToolCall] = {}
        for call in message.tool_calls:
            if call.id and call.id not in calls:
                calls[call.id] = call
            else:
                removed += 1
        results: list[Message] = []
        answered: set[str] = set()
        while i < n and messages[i].role == "tool":
            result = messages[i]
            i += 1
            call_id = result.tool_call_id
            if call_id is not None and call_id in calls and call_id not in answered:
                answered.add(call_id)
                results.append(result)
            else:
                removed += 1
        kept_calls = [call for call_id, call in calls.items() if call_id in answered]
        removed += len(calls) - len(kept_calls)
        if kept_calls:
            head = Message(
                role="assistant",
                content=message.content,
                tool_calls=kept_calls,
                source_id=message.source_id,
            )
            units.append([head, *results])
        elif message.content:
            units.append([Message(role="assistant", content=message.content, source_id=message.source_id)])
        else:
            removed += 1
    return units, removed


def _horizon_start(events: list[Event], horizon_tokens: int) -> int:
    """Where to start so that older events, which cannot fit anyway, are never looked at.

    Walking back from the newest event, a lower bound of the cost of the
    messages that survive repair for certain (user, system and non-empty
    assistant messages: a quarter token a character plus the overhead) is
    summed; once it passes ``horizon_tokens`` everything older is out of reach.
    The start then moves back to the user message opening that turn.
    """
    total = 0
    index = len(events)
    while index > 0 and total <= horizon_tokens:
        index -= 1
        event = events[index]
        if event.type in ("user_message", "system") or (event.type == "assistant_message" and event.text):
            total += len(event.text) // 4 + MESSAGE_OVERHEAD
    if total <= horizon_tokens:
        return 0
    while index > 0 and events[index].type != "user_message":
        index -= 1
    return index


@dataclass(slots=True)
class FittedHistory:
    messages: list[Message]
    tokens: int
    dropped: int
    placeholders: list[str]
    shrunk: bool


class PreparedHistory:
    """The live history as turns of units, ready to be costed and trimmed."""

    def __init__(
        self,
        events: Iterable[Event],
        session_id: str | None,
        counter: TokenCounter,
        limits: ContextLimits,
        horizon_tokens: int | None = None,
    ) -> None:
        self._counter = counter
        self._limits = limits
        mine = sorted((e for e in events if e.session_id == session_id), key=lambda e: e.seq)
        self.leading_dropped = 0
        if horizon_tokens is not None:
            start = _horizon_start(mine, horizon_tokens)
            self.leading_dropped = sum(1 for e in mine[:start] if e.type != "note")
            mine = mine[start:]
        groups, self.repaired = close_units(to_messages(mine))
        self.turns: list[list[_Unit]] = []
        for group in groups:
            if group[0].role == "user":
                self.turns.append([])
            if self.turns:
                self.turns[-1].append(_Unit(group))
            else:
                self.leading_dropped += len(group)
        keep = max(limits.keep_tool_results_turns, 0)
        for turn in self.turns[: max(len(self.turns) - keep, 0)]:
            for unit in turn:
                unit.old = True
        self.message_count = sum(len(u.messages) for turn in self.turns for u in turn)

    def minimum_tokens(self) -> int:
        """The cost of the newest user message: the least a history can be."""
        if not self.turns:
            return 0
        return self.turns[-1][0].normal(self._counter, self._limits).tokens

    def tokens_up_to(self, limit: int) -> int:
        """The history's cost, newest first, counted only until it passes ``limit``."""
        total = 0
        for turn in reversed(self.turns):
            for unit in reversed(turn):
                total += unit.normal(self._counter, self._limits).tokens
                if total > limit:
                    return total
        return total

    def fit(self, budget: int) -> FittedHistory:
        """Keep the newest turns that fit in ``budget`` (see module doc)."""
        counter, limits = self._counter, self._limits
        kept_turns: list[list[_Version]] = []
        remaining = budget
        shrunk = False
        for turn in reversed(self.turns):
            user = turn[0].normal(counter, limits)
            if user.tokens > remaining:
                break
            room = remaining - user.tokens
            body: list[_Version] = []
            complete = True
            for unit in reversed(turn[1:]):
                version = unit.normal(counter, limits)
                if version.tokens > room:
                    version = unit.shrunk(counter)
                    if version.tokens > room:
                        complete = False
                        break
                    shrunk = True
                body.append(version)
                room -= version.tokens
            body.append(user)
            body.reverse()
            kept_turns.append(body)
            remaining = room
            if not complete:
                break
        kept_turns.reverse()
        messages = [m for turn in kept_turns for version in turn for m in version.messages]
        placeholders = [p for turn in kept_turns for version in turn for p in version.placeholders]
        return FittedHistory(
            messages=messages,
            tokens=budget - remaining,
            dropped=self.message_count - len(messages) + self.leading_dropped,
            placeholders=placeholders,
            shrunk=shrunk,
        )

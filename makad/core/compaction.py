"""Compaction planning and validation: what to cover, what to keep, what a summary must hold.

Pure functions for the ``compact`` method; the service reads the ledger, calls
these, and writes the checkpoint. Source events are never deleted: a checkpoint
only *covers* a range of them.

- ``plan_keep_window`` picks the boundary: everything up to it is covered by the
  summary, the suffix after it is preserved verbatim.
- ``validate_summary`` fails closed on a model-written (semantic) summary.
- ``checkpoint_summary`` builds the no-model summary, in the same section format,
  so a session can always be shrunk.
- ``BreakerState`` stops reactive (overflow) compaction after repeated failures.

Keep-window rules (defaults after Claude Code's, see REFERENCES.md):

- ``keep_recent_tokens`` defaults to 10,000 and is clamped to [1,000, 40,000].
- The preserved suffix grows backwards until it holds at least that many tokens
  *and* at least ``min_text_messages`` (5) user/assistant messages with text,
  and stops growing once it holds 40,000 tokens.
- ``reason="overflow"`` (the provider said the prompt is too long) halves both
  the window and the cap and needs only 2 text messages.
- The suffix never starts between a tool call and its result (it walks back to
  include the call; this wins over the cap), and it starts at a user message
  when one is close enough that the cap still holds.
- Nothing before the previous boundary is ever covered again.
- When no cut leaves something to cover, the plan is ``None``: the service
  answers ``InvalidParams`` (``data.reason`` ``nothing_to_compact``) rather than
  writing an empty checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Final, Literal

import msgspec

from makad.core.counted import counted
from makad.core.markdown_lines import Heading, atx_heading
from makad.core.refs import event_range, event_ref
from makad.core.tokens import estimate_tokens
from makad.core.types import Event, WorkingState
from makad.errors import CircuitOpen, InvalidSummary

Reason = Literal["manual", "budget", "overflow"]
TokenCount = Callable[[str], int]
SecretFinder = Callable[[str], int]

DEFAULT_KEEP_RECENT_TOKENS: Final = 10_000
MIN_KEEP_RECENT_TOKENS: Final = 1_000
MAX_KEEP_RECENT_TOKENS: Final = 40_000
MIN_TEXT_MESSAGES: Final = 5
OVERFLOW_MIN_TEXT_MESSAGES: Final = 2

MAX_SUMMARY_TOKENS: Final = 12_000
CHECKPOINT_SUMMARY_TOKENS: Final = 4_000
MIN_CHECKPOINT_SUMMARY_TOKENS: Final = 400

# The section contract a summary must follow (PROTOCOL.md lists the same names).
# Each required section is a set of accepted spellings, compared case-insensitively.
REQUIRED_SECTIONS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("Current Goal", ("current goal",)),
    ("Current State", ("current state",)),
    ("Next Step", ("next step", "next steps")),
)
OPTIONAL_SECTIONS: Final = (
    "Decisions",
    "Open Threads",
    "Files",
    "Errors & Corrections",
    "Learnings",
)

BREAKER_THRESHOLD: Final = 3

_TEXT_TYPES: Final = frozenset({"user_message", "assistant_message"})


# --------------------------------------------------------------------------- keep window


class KeepPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Where one compaction cuts: events up to ``boundary_seq`` are covered, the rest kept."""

    boundary_seq: int
    preserved_from_seq: int
    covered_from_seq: int
    covered_to_seq: int


def effective_window(keep_recent_tokens: int | None, reason: Reason) -> tuple[int, int]:
    """The (minimum, cap) token sizes of the preserved suffix for this request."""
    keep = DEFAULT_KEEP_RECENT_TOKENS if keep_recent_tokens is None else keep_recent_tokens
    keep = min(max(keep, MIN_KEEP_RECENT_TOKENS), MAX_KEEP_RECENT_TOKENS)
    cap = MAX_KEEP_RECENT_TOKENS
    if reason == "overflow":
        keep, cap = keep // 2, cap // 2
    return keep, cap


def event_tokens(event: Event, counter: TokenCount = estimate_tokens) -> int:
    """An event's token cost: the ledger's figure when it has one, else an estimate."""
    return event.tokens if event.tokens > 0 else counter(event.text)


def is_text_message(event: Event) -> bool:
    """A user or assistant message that carries text (what the 5-message minimum counts)."""
    return event.type in _TEXT_TYPES and bool(event.text.strip())


def plan_keep_window(
    events: Sequence[Event],
    keep_recent_tokens: int | None = None,
    reason: Reason = "manual",
    min_text_messages: int = MIN_TEXT_MESSAGES,
    *,
    previous_boundary_seq: int | None = None,
    counter: TokenCount = estimate_tokens,
) -> KeepPlan | None:
    """Choose the boundary for one compaction, or ``None`` when nothing can be covered.

    ``events`` are the session's events after the previous boundary in ascending
    ``seq``; any at or before ``previous_boundary_seq`` are ignored all the same.
    """
    window = [e for e in events if previous_boundary_seq is None or e.seq > previous_boundary_seq]
    if len(window) < 2:
        return None
    keep, cap = effective_window(keep_recent_tokens, reason)
    if reason == "overflow":
        min_text_messages = min(min_text_messages, OVERFLOW_MIN_TEXT_MESSAGES)
    costs = [event_tokens(e, counter) for e in window]
    suffix_tokens = _suffix_sums(costs)

    start = _grow_suffix(window, costs, keep, min_text_messages, cap)
    start = _safe_start(window, start)
    start = _prefer_user_turn(window, start, suffix_tokens, cap)
    if start <= 0:
        return None
    return KeepPlan(
        boundary_seq=window[start - 1].seq,
        preserved_from_seq=window[start].seq,
        covered_from_seq=window[0].seq,
        covered_to_seq=window[start - 1].seq,
    )


class NothingToCompact(msgspec.Struct, frozen=True, kw_only=True):
    """Why a compaction found nothing to cover, in words and in figures."""

    message: str
    live_tokens: int
    kept_tokens: int


def nothing_to_compact(
    events: Sequence[Event],
    keep_recent_tokens: int | None = None,
    reason: Reason = "manual",
    *,
    previous_boundary_seq: int | None = None,
    counter: TokenCount = estimate_tokens,
) -> NothingToCompact:
    """Why ``plan_keep_window`` found nothing to cover: the live events and their tokens,
    against what always stays live (the window, clamped, and the last text messages)."""
    window = [e for e in events if previous_boundary_seq is None or e.seq > previous_boundary_seq]
    tokens = sum(event_tokens(e, counter) for e in window)
    keep, _ = effective_window(keep_recent_tokens, reason)
    messages = OVERFLOW_MIN_TEXT_MESSAGES if reason == "overflow" else MIN_TEXT_MESSAGES
    since = " since the last checkpoint" if previous_boundary_seq else ""
    floor = (
        f" (keepRecentTokens is held between {MIN_KEEP_RECENT_TOKENS:,} and {MAX_KEEP_RECENT_TOKENS:,})"
        if keep_recent_tokens is not None and keep_recent_tokens < MIN_KEEP_RECENT_TOKENS
        else ""
    )
    texts = sum(is_text_message(e) for e in window)
    held = f"{tokens:,} token{'' if tokens == 1 else 's'}{since} in {counted(len(window), 'event')}"
    holds = f"nothing to compact yet: the session holds {held}"
    if tokens > keep and texts > messages:
        # More than the window keeps, yet no cut: the one user turn behind it opens the
        # live history, and covering it alone would leave its reply unshown.
        why = (
            f"{holds}, one user turn and what answered it, which are covered together: "
            "compact again after the next user turn"
        )
    elif tokens <= keep:
        why = (
            f"{holds}, fewer than the {keep:,} tokens kept verbatim "
            f"(and the last {messages} messages always stay){floor}"
        )
    else:
        why = f"{holds} but {texts} messages, and the last {messages} messages always stay verbatim{floor}"
    return NothingToCompact(message=why, live_tokens=tokens, kept_tokens=keep)


def _suffix_sums(costs: Sequence[int]) -> list[int]:
    sums = [0] * (len(costs) + 1)
    for i in range(len(costs) - 1, -1, -1):
        sums[i] = sums[i + 1] + costs[i]
    return sums


def _grow_suffix(window: Sequence[Event], costs: Sequence[int], keep: int, min_text: int, cap: int) -> int:
    """Index where the suffix first meets both minimums, or where it reaches the cap."""
    tokens = 0
    texts = 0
    start = len(window)
    while start > 0 and (tokens < keep or texts < min_text) and tokens < cap:
        start -= 1
        tokens += costs[start]
        texts += is_text_message(window[start])
    return start


def _safe_start(window: Sequence[Event], start: int) -> int:
    """The largest index <= ``start`` that no tool call/result pair straddles."""
    call_index: dict[str, int] = {}
    spans: list[tuple[int, int]] = []
    for i, event in enumerate(window):
        if event.tool_call_id is None:
            continue
        if event.type == "tool_call":
            call_index.setdefault(event.tool_call_id, i)
        elif event.type == "tool_result" and event.tool_call_id in call_index:
            spans.append((call_index[event.tool_call_id], i))
    moved = True
    while moved:
        moved = False
        for call, result in spans:
            if call < start <= result:
                start = call
                moved = True
    return start


def _prefer_user_turn(window: Sequence[Event], start: int, suffix_tokens: Sequence[int], cap: int) -> int:
    """Move back to the nearest user message when that keeps the suffix safe and under the cap.

    When that user message opens the window, the result is 0 (nothing to cover yet):
    covering it alone would leave its reply first in the kept history, where a pack,
    which starts at a user turn, drops it without it being summarized either.
    """
    if start <= 0 or start >= len(window) or window[start].type == "user_message":
        return start
    user = next((i for i in range(start - 1, -1, -1) if window[i].type == "user_message"), None)
    if user is None:
        return start
    candidate = _safe_start(window, user)
    if suffix_tokens[candidate] <= cap:
        return candidate
    return start


def covered_hash(covered: Sequence[Event]) -> str:
    """The commitment to a covered range: the hash of its last event.

    The ledger chains each event's hash over its predecessor's, so the last
    covered hash commits to the whole prefix. Events without a hash (never
    written to the ledger, e.g. incognito) get a sha256 over their fields instead.
    """
    if not covered:
        raise ValueError("an empty range has no covered hash")
    if covered[-1].hash:
        return covered[-1].hash
    digest = hashlib.sha256()
    for event in covered:
        digest.update(msgspec.json.encode([event.session_id, event.seq, event.type, event.text]))
        digest.update(b"\n")
    return digest.hexdigest()


# --------------------------------------------------------------------------- validation

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def _heading(line: str) -> Heading | None:
    """An ATX heading with a blank after its hashes (``\\s{0,3}#{1,6}\\s+`` and its text)."""
    heading = atx_heading(line, any_indent=True)
    return heading if heading is not None and heading.text is not None else None


def _section_key(heading: str) -> str:
    text = heading.strip().strip("*_ ").rstrip(":").strip("*_ ")
    return " ".join(text.split()).casefold()


def _sections(text: str) -> dict[str, bool]:
    """Map each ``#``..``####`` heading (normalized) to whether its section has a body."""
    found: dict[str, bool] = {}
    stack: list[tuple[int, str]] = []
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _heading(line)
        if match is not None and match.level <= 4:
            level = match.level
            while stack and stack[-1][0] >= level:
                stack.pop()
            for _, parent in stack:
                found[parent] = True
            key = _section_key(match.text or "")
            found.setdefault(key, False)
            stack.append((level, key))
        elif line.strip():
            for _, key in stack:
                found[key] = True
    return found


def missing_sections(text: str) -> tuple[list[str], list[str]]:
    """The required sections a summary lacks, and those present but empty."""
    sections = _sections(text)
    missing: list[str] = []
    empty: list[str] = []
    for name, spellings in REQUIRED_SECTIONS:
        present = [s for s in spellings if s in sections]
        if not present:
            missing.append(name)
        elif not any(sections[s] for s in present):
            empty.append(name)
    return missing, empty


def validate_summary(
    text: str,
    counter: TokenCount = estimate_tokens,
    find_secrets: SecretFinder | None = None,
    *,
    max_tokens: int = MAX_SUMMARY_TOKENS,
) -> str:
    """Return the summary ready to store, or raise ``InvalidSummary`` naming every problem.

    ``find_secrets`` counts secrets in a text (the redactor); a summary that
    contains any is rejected rather than silently rewritten, since the client's
    model should not have put one there.
    """
    summary = text.replace("\r\n", "\n").strip()
    if not summary:
        raise InvalidSummary("invalid summary: it is empty", problems=["empty"])
    problems: list[str] = []
    details: list[str] = []
    data: dict[str, object] = {}
    tokens = counter(summary)
    if tokens > max_tokens:
        problems.append("too_long")
        details.append(f"too long ({tokens:,} tokens, at most {max_tokens:,})")
        data.update(summaryTokens=tokens, maxTokens=max_tokens)
    missing, empty = missing_sections(summary)
    if missing:
        problems.append("missing_sections")
        details.append("missing sections: " + ", ".join(missing))
        data["missingSections"] = missing
    if empty:
        problems.append("empty_sections")
        details.append("empty sections: " + ", ".join(empty))
        data["emptySections"] = empty
    secrets = find_secrets(summary) if find_secrets is not None else 0
    if secrets:
        problems.append("contains_secret")
        details.append(f"contains {counted(secrets, 'secret')}")
        data["secretCount"] = secrets
    if problems:
        raise InvalidSummary("invalid summary: " + "; ".join(details), problems=problems, **data)
    return summary


# --------------------------------------------------------------------------- no-model summary

_EXTENSION_LIST: Final = (
    "py pyi js mjs cjs ts tsx jsx json jsonl md rst txt toml yaml yml ini cfg conf lock "
    "rs go c h cc cpp hpp java kt swift rb php cs sh bash zsh fish ps1 sql html htm css "
    "scss xml csv tsv env proto graphql vue svelte lua r jl dart ex exs erl hs ml scala "
    "gradle mk cmake dockerfile ipynb log patch diff svg png jpg jpeg gif pdf af"
)
_KNOWN_EXTENSIONS: Final = frozenset(_EXTENSION_LIST.split())
_PATH_CHARS = r"[\w.@+\-]"
_ANCHORED_PATH = re.compile(rf"^(?:~|\.{{1,2}})?/(?:{_PATH_CHARS}+/)*{_PATH_CHARS}+/?$")
_RELATIVE_PATH = re.compile(rf"^(?:{_PATH_CHARS}+/)+{_PATH_CHARS}*\.[A-Za-z]\w{{0,7}}$")
_BARE_FILE = re.compile(rf"^{_PATH_CHARS}*\w\.([A-Za-z]\w{{0,7}})$")
_STRIP_CHARS = "\"'`()[]{}<>,;:"
# What ``paths_in`` reads of an event: JSON-decoding, splitting and matching a tool's
# megabytes of output made millions of strings in calls that let no other thread run
# (over a second each for one 8 MB event), for paths a call or result names first.
PATH_SCAN_CHARS: Final = 64 * 1024
SEARCH_PIECE_CHARS: Final = 64 * 1024
NOT_SPACE: Final = re.compile(r"\S")
_SPACE: Final = re.compile(r"\s")


def looks_like_path(token: str) -> bool:
    """Conservative test for a file path: anchored paths, relative paths to a file, known files."""
    token = token.strip(_STRIP_CHARS).rstrip(".")
    if not 3 <= len(token) <= 260 or "://" in token or token.startswith("@"):
        return False
    if _ANCHORED_PATH.match(token):
        return any(ch.isalnum() for ch in token)
    if _RELATIVE_PATH.match(token):
        return True
    bare = _BARE_FILE.match(token)
    return bare is not None and bare.group(1).casefold() in _KNOWN_EXTENSIONS


def _json_strings(value: object) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _json_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _json_strings(item)


def _head(text: str, max_chars: int) -> str:
    """``text``, or its first ``max_chars`` up to their last line break or space."""
    if len(text) <= max_chars:
        return text
    head = text[:max_chars]
    cut = max(head.rfind("\n"), head.rfind(" "))
    return head[:cut] if cut > 0 else head


def _paths_in_call(text: str) -> list[str]:
    try:
        strings = list(_json_strings(json.loads(text)))
    except (ValueError, RecursionError):
        strings = [text]
    found: list[str] = []
    for string in strings:
        tokens = [string.strip()] if looks_like_path(string.strip()) else string.split()
        found.extend(t.strip(_STRIP_CHARS).rstrip(".") for t in tokens if looks_like_path(t))
    return found


def _paths_in_result(text: str) -> list[str]:
    """Only whole values: a result's prose mentions too many things that are not touched."""
    try:
        strings = list(_json_strings(json.loads(text)))
    except (ValueError, RecursionError):
        strings = text.splitlines()
    return [s.strip() for s in strings if looks_like_path(s.strip())]


def paths_in(event: Event) -> list[str]:
    """The paths a tool call or result names (its arguments, its whole values, its meta),
    in its first ``PATH_SCAN_CHARS`` (cut at a line break or a space: no path is cut)."""
    if event.type not in ("tool_call", "tool_result"):
        return []
    text = _head(event.text, PATH_SCAN_CHARS)
    paths = _paths_in_call(text) if event.type == "tool_call" else _paths_in_result(text)
    if event.meta:
        paths += [v for v in event.meta.values() if looks_like_path(v)]
    return paths


def files_touched(events: Iterable[Event]) -> list[str]:
    """Paths named by tool calls and results, most often touched first, then by name."""
    counts: dict[str, int] = {}
    for event in events:
        for path in paths_in(event):
            counts[path] = counts.get(path, 0) + 1
    return sorted(counts, key=lambda p: (-counts[p], p))


def find_from(pattern: re.Pattern[str], text: str, start: int) -> int:
    """Where ``pattern`` (one character) first matches from ``start``, or -1: searched
    ``SEARCH_PIECE_CHARS`` at a time, as one search of megabytes holds the interpreter."""
    for piece in range(start, len(text), SEARCH_PIECE_CHARS):
        found = pattern.search(text, piece, piece + SEARCH_PIECE_CHARS)
        if found is not None:
            return found.start()
    return -1


def abbreviate(text: str, max_chars: int) -> str:
    """One line, whitespace collapsed, cut at a word boundary with an ellipsis.

    Only the words the line can hold are read: ``" ".join(text.split())`` over a tool's
    megabytes of output made a string per word in one call that let no other thread
    run (over a second for an 8 MB event, every client waiting); and a run of blanks is
    skipped in pieces (``find_from``)."""
    words: list[str] = []
    length = -1
    end = 0
    while length <= max_chars:
        start = find_from(NOT_SPACE, text, end)
        if start < 0:
            break
        end = find_from(_SPACE, text, start)
        end = len(text) if end < 0 else end
        words.append(text[start:end])
        length += end - start + 1
    line = " ".join(words)
    if len(line) <= max_chars:
        return line
    cut = line[: max(max_chars - 1, 1)]
    space = cut.rfind(" ")
    if space >= max_chars // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def _quoted(text: str, max_chars: int) -> list[str]:
    """Fold multi-line Markdown in without letting its headings or fences become structure."""
    lines: list[str] = []
    budget = max_chars
    for raw in text.replace("\r\n", "\n").split("\n"):
        if budget <= 0:
            lines.append("…")
            break
        line = raw.strip()
        if not line or _FENCE.match(line):
            continue
        heading = _heading(line)
        if heading is not None:
            line = f"**{(heading.text or '').strip()}**"
        line = abbreviate(line, budget)
        budget -= len(line)
        lines.append(line)
    return lines


def _ref(event: Event) -> str:
    return event_ref(event.session_id, event.seq)


class _Detail(msgspec.Struct, frozen=True):
    """How much of each variable part a rendering keeps (richest first)."""

    previous_chars: int
    message_chars: int
    refs_per_tool: int
    tools: int
    files: int
    fixed_chars: int
    fixed_items: int
    optional: bool = True


_DETAILS: Final = (
    _Detail(2000, 200, 10, 30, 50, 1000, 20),
    _Detail(600, 200, 5, 20, 30, 600, 12),
    _Detail(300, 100, 0, 15, 20, 300, 8),
    _Detail(0, 80, 0, 10, 10, 150, 5),
)
_EMERGENCY: Final = _Detail(0, 0, 0, 0, 0, 60, 1, optional=False)


class _Material(msgspec.Struct, frozen=True):
    """Everything a no-model summary can say, before it is cut to size."""

    session_id: str
    from_seq: int
    to_seq: int
    count: int
    goals: list[str]
    state: str
    decisions: list[str]
    next_steps: list[str]
    extra_notes: list[tuple[str, str]]
    users: list[Event]
    tools: list[tuple[str, list[Event]]]
    files: list[str]
    previous: str


def _gather(covered: Sequence[Event], state: WorkingState, previous_summary: str | None) -> _Material:
    users = [e for e in covered if e.type == "user_message" and e.text.strip()]
    by_tool: dict[str, list[Event]] = {}
    for event in covered:
        if event.type == "tool_call":
            by_tool.setdefault(event.tool_name or "unknown", []).append(event)
    tools = sorted(by_tool.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    session_id = covered[0].session_id if covered else ""
    last_user = users[-1].text if users else ""
    goals = [g for g in state.goals if g.strip()] or (
        [last_user] if last_user else ["No goal was recorded for this session."]
    )
    current = state.notes.get("Current State", "")
    if not _quoted(current, 1):
        current = (
            f"{len(covered)} earlier events were compacted without a model; "
            "the sections below list what they contained."
        )
    threads = [t for t in state.open_threads if t.strip()]
    if not threads:
        threads = [
            f"Continue from the last user message: {last_user}"
            if last_user
            else "Continue from the preserved recent messages."
        ]
    extra = [
        (name, state.notes[name].strip())
        for name in ("Errors & Corrections", "Learnings")
        if state.notes.get(name, "").strip()
    ]
    return _Material(
        session_id=session_id,
        from_seq=covered[0].seq if covered else 0,
        to_seq=covered[-1].seq if covered else 0,
        count=len(covered),
        goals=goals,
        state=current,
        decisions=[d for d in state.decisions if d.strip()],
        next_steps=threads,
        extra_notes=extra,
        users=users,
        tools=tools,
        files=files_touched(covered),
        previous=(previous_summary or "").strip(),
    )


def _bullets(items: Sequence[str], detail: _Detail) -> list[str]:
    kept = list(items[-detail.fixed_items :])
    lines = [f"- {abbreviate(item, detail.fixed_chars)}" for item in kept]
    if len(items) > len(kept):
        lines.insert(0, f"- … {counted(len(items) - len(kept), 'earlier item')} omitted")
    return lines


def _render(m: _Material, detail: _Detail, kept_users: int) -> str:
    span = event_range(m.session_id, m.from_seq, m.to_seq) if m.count else "no events"
    if not detail.optional:
        span = "references dropped to fit"
    out = [
        "# Session checkpoint",
        "",
        f"Summary written without a model; it covers {counted(m.count, 'event')}, {span}.",
        "",
        "## Current Goal",
        *_bullets(m.goals, detail),
        "",
        "## Current State",
        *_quoted(m.state, detail.fixed_chars * 2),
        "",
    ]
    if detail.optional and m.decisions:
        out += ["## Decisions", *_bullets(m.decisions, detail), ""]
    out += ["## Next Step", *_bullets(m.next_steps, detail), ""]
    if not detail.optional:
        return "\n".join(out).rstrip() + "\n"
    for name, body in m.extra_notes:
        out += [f"## {name}", *_quoted(body, detail.fixed_chars), ""]
    if m.users:
        out.append("## User Messages")
        users = m.users[len(m.users) - kept_users :] if kept_users else []
        omitted = len(m.users) - len(users)
        if omitted:
            first, last = m.users[0], m.users[omitted - 1]
            span = event_range(m.session_id, first.seq, last.seq)
            out.append(f"- … {counted(omitted, 'earlier user message')} omitted ({span})")
        out += [f"- {_ref(e)}: {abbreviate(e.text, detail.message_chars)}" for e in users]
        out.append("")
    if m.tools and detail.tools:
        out.append("## Tool Calls")
        for name, calls in m.tools[: detail.tools]:
            line = f"- {abbreviate(name, 80)} ×{len(calls)}"
            if detail.refs_per_tool:
                refs = calls[-detail.refs_per_tool :]
                more = ", …" if len(calls) > len(refs) else ""
                line += " (" + ", ".join(_ref(e) for e in refs) + more + ")"
            out.append(line)
        if len(m.tools) > detail.tools:
            out.append(f"- … {counted(len(m.tools) - detail.tools, 'more tool')}")
        out.append("")
    if m.files and detail.files:
        out.append("## Files Touched")
        out += [f"- {path}" for path in m.files[: detail.files]]
        if len(m.files) > detail.files:
            out.append(f"- … {counted(len(m.files) - detail.files, 'more file')}")
        out.append("")
    if m.previous and detail.previous_chars:
        out += [
            "## Previous Summary",
            *(f"> {line}" for line in _quoted(m.previous, detail.previous_chars)),
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


def checkpoint_summary(
    covered: Sequence[Event],
    working_state: WorkingState,
    previous_summary: str | None = None,
    counter: TokenCount = estimate_tokens,
    max_tokens: int = CHECKPOINT_SUMMARY_TOKENS,
) -> str:
    """A deterministic summary of ``covered`` that needs no model and passes ``validate_summary``.

    When it does not fit ``max_tokens`` (at least 400), detail goes first from
    the oldest parts: the previous summary, then tool-call references and
    abbreviation length, then the oldest user messages, and last everything but
    the three required sections.
    """
    budget = max(max_tokens, MIN_CHECKPOINT_SUMMARY_TOKENS)
    material = _gather(covered, working_state, previous_summary)
    every_user = len(material.users)

    def fits(detail: _Detail, kept_users: int) -> str | None:
        text = _render(material, detail, kept_users)
        return text if counter(text) <= budget else None

    for detail in _DETAILS:
        text = fits(detail, every_user)
        if text is not None:
            return text
    leanest = _DETAILS[-1]
    if fits(leanest, 0) is not None:
        low, high = 0, every_user  # invariant: `low` users fit, `high` do not
        while high - low > 1:
            middle = (low + high) // 2
            if fits(leanest, middle) is not None:
                low = middle
            else:
                high = middle
        return _render(material, leanest, low)
    return _render(material, _EMERGENCY, 0)


# --------------------------------------------------------------------------- circuit breaker


class BreakerState(msgspec.Struct, frozen=True):
    """Consecutive reactive-compaction failures of one session (kept in memory)."""

    consecutive_failures: int = 0


def record_failure(state: BreakerState) -> BreakerState:
    return BreakerState(state.consecutive_failures + 1)


def record_success(state: BreakerState) -> BreakerState:
    return BreakerState(0)


def is_open(state: BreakerState, threshold: int = BREAKER_THRESHOLD) -> bool:
    """Open after ``threshold`` consecutive failures: stop trying until one succeeds."""
    return state.consecutive_failures >= threshold


def ensure_closed(state: BreakerState, session_id: str) -> None:
    """Raise ``CircuitOpen`` instead of letting the caller try another compaction."""
    if is_open(state):
        raise CircuitOpen(
            "compaction stopped for this session after repeated failures",
            sessionId=session_id,
            consecutiveFailures=state.consecutive_failures,
            threshold=BREAKER_THRESHOLD,
        )

"""Proactive suggestions as pure functions of the attention state and the records."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from makad.core import suggestions
from makad.core.attention import DAY_MS, FORGOTTEN_AFTER_MS, LINE_CHARS, AttentionState, Pending, derive
from makad.core.behaviors import Behavior, Carry, gather, records
from makad.core.suggestions import (
    MAX_SUGGESTIONS,
    THRESHOLD,
    Suggestion,
    candidates,
    suggest,
    suggestion_id,
    thread_key,
    timing,
    valid_id,
)
from makad.core.types import Event, WorkingState
from makad.core.when import utc_moment

NOW = 1_800_000_000_000
HOUR = 3_600_000


def ev(sid: str, seq: int, kind: str, text: str, ts: int, **extra: Any) -> Event:
    return Event(session_id=sid, seq=seq, ts=ts + seq, type=kind, text=text, tokens=5, **extra)  # type: ignore[arg-type]


def work(
    sid: str, at: int, request: str = "Refactor the parser in src/parse.py", path: str = "src/parse.py"
) -> list[Event]:
    """A few turns of work on ``path``, left open (no "thanks", not closed)."""
    return [
        ev(sid, 1, "user_message", request, at),
        ev(sid, 2, "tool_call", f"cat {path}", at, tool_call_id="r", tool_name="bash"),
        ev(sid, 3, "tool_result", f"contents of {path}", at, tool_call_id="r", tool_name="bash"),
        ev(sid, 4, "assistant_message", f"I will split {path} in two.", at),
        ev(sid, 5, "user_message", "Go on with the second half", at),
        ev(sid, 6, "assistant_message", "Halfway there.", at),
    ]


def failing(sid: str, at: int, first: int = 1) -> list[Event]:
    return [
        ev(sid, first, "user_message", "Fix the date test in src/dates.py", at),
        ev(sid, first + 1, "tool_call", "pytest tests/test_dates.py", at, tool_call_id="a", tool_name="bash"),
        ev(sid, first + 2, "tool_result", "FAILED: offset lost", at, tool_call_id="a", tool_name="bash"),
        ev(sid, first + 3, "assistant_message", "It drops the offset.", at),
    ]


def passing(sid: str, at: int, first: int = 1) -> list[Event]:
    return [
        ev(sid, first, "user_message", "Try the date test again", at),
        ev(sid, first + 1, "tool_call", "pytest tests/test_dates.py", at, tool_call_id="b", tool_name="bash"),
        ev(sid, first + 2, "tool_result", "1 passed", at, tool_call_id="b", tool_name="bash"),
        ev(sid, first + 3, "assistant_message", "It passes.", at),
        ev(sid, first + 4, "user_message", "Thanks, that works", at),
        ev(sid, first + 5, "assistant_message", "Glad to help.", at),
    ]


def threads(
    sid: str, events: list[Event], *, closed: bool = False, working: WorkingState | None = None
) -> list[Behavior]:
    """The session's records (one a thread)."""
    closed_segments, carry = gather(sid, Carry(), events)
    assert closed_segments == []
    return records(sid, carry, closed=closed, working=working)


def rec(
    sid: str, events: list[Event], *, closed: bool = False, working: WorkingState | None = None
) -> Behavior:
    closed_segments, carry = gather(sid, Carry(), events)
    assert closed_segments == []
    (only,) = records(sid, carry, closed=closed, working=working)
    return only


def state_of(records: list[Behavior], now: int = NOW, pending: list[Pending] | None = None) -> AttentionState:
    return derive(now, records, pending or [])


def fired(records: list[Behavior], now: int = NOW, **kw: Any) -> list[Suggestion]:
    return suggest(now, state_of(records, now, kw.pop("pending", None)), records, **kw)


def test_an_open_thread_of_an_earlier_session_is_suggested_with_its_refs() -> None:
    """A thread left open a day ago, nothing since: suggested as resume_thread, citing its events."""
    r = rec("old", work("old", NOW - DAY_MS))
    out = fired([r])
    assert [s.kind for s in out] == ["resume_thread"]
    assert out[0].text.startswith("Resume: Refactor the parser")
    assert out[0].score >= THRESHOLD
    assert out[0].refs and all(ref.startswith("event:old:") for ref in out[0].refs)
    assert valid_id(out[0].id)


def test_an_unfixed_failure_is_suggested_and_a_fixed_one_is_not() -> None:
    """A failure no later result fixed fires "Still failing since"; the same call passing later silences it."""
    failed = rec("a", failing("a", NOW - 2 * DAY_MS))
    out = fired([failed])
    assert [s.kind for s in out] == ["unfixed_failure"]
    assert out[0].text.startswith("Still failing since ")
    assert "pytest tests/test_dates.py" in out[0].text
    fixed = rec("b", passing("b", NOW - DAY_MS))
    assert fired([failed, fixed]) == []
    assert all(
        c.kind != "unfixed_failure" or c.score == 0
        for c in candidates(NOW, state_of([failed, fixed]), [failed, fixed])
    )


def test_a_thread_a_later_session_resolved_is_not_suggested() -> None:
    """A later session ending done on the same paths resolves the thread: no suggestion."""
    left = rec("a", work("a", NOW - 2 * DAY_MS))
    done_events = [
        *work("b", NOW - DAY_MS),
        ev("b", 7, "user_message", "thanks, done", NOW - DAY_MS),
        ev("b", 8, "assistant_message", "ok", NOW - DAY_MS),
    ]
    done = rec("b", done_events)
    assert done.outcome == "done"
    assert fired([left, done]) == []


def test_the_resolution_holds_even_when_the_state_is_older_than_the_records() -> None:
    """A state derived before the resolving record still gives no suggestion for the resolved thread."""
    left = rec("a", work("a", NOW - 2 * DAY_MS))
    old_state = state_of([left])
    done_events = [
        *work("b", NOW - DAY_MS),
        ev("b", 7, "user_message", "thanks", NOW - DAY_MS),
        ev("b", 8, "assistant_message", "ok", NOW - DAY_MS),
    ]
    done = rec("b", done_events)
    assert suggest(NOW, old_state, [left, done]) == []
    assert suggest(NOW, old_state, [left]) != []


def test_a_thread_idle_for_minutes_is_skipped_with_a_reason() -> None:
    """Idle under an hour: score 0, the reason says it may still be under way."""
    r = rec("a", work("a", NOW - 10 * 60_000))
    (c,) = candidates(NOW, state_of([r]), [r])
    assert c.score == 0
    assert "under way" in c.reason
    assert suggest(NOW, state_of([r]), [r]) == []


def test_the_current_session_is_not_suggested_its_own_thread() -> None:
    """The session that left the thread is the current one: nothing fires; another session gets it."""
    r = rec("me", work("me", NOW - DAY_MS))
    assert fired([r], session_id="me") == []
    assert fired([r], session_id="other") != []


def test_a_thread_on_the_paths_the_current_session_touches_is_not_suggested() -> None:
    """The current session already works on the thread's paths: skipped."""
    left = rec("a", work("a", NOW - 2 * DAY_MS))
    mine = rec("me", work("me", NOW - 3 * HOUR, request="Continue with src/parse.py"))
    out = fired([left, mine], session_id="me")
    assert all("event:a:" not in ref for s in out for ref in s.refs)


@pytest.mark.parametrize("said", ["never mind", "Forget it", "ok, drop that", "scratch that", "nvm"])
def test_a_thread_the_user_dropped_does_not_fire(said: str) -> None:
    """The segment's last request lets the work go: no resume, no failure suggestion from it."""
    events = [
        *failing("a", NOW - DAY_MS),
        ev("a", 9, "user_message", said, NOW - DAY_MS),
        ev("a", 10, "assistant_message", "Sure.", NOW - DAY_MS),
    ]
    r = rec("a", events)
    assert r.outcome == "dropped"
    assert fired([r]) == []
    assert any("dropped" in c.reason for c in candidates(NOW, state_of([r]), [r]))


def test_a_request_that_only_mentions_forgetting_is_not_a_drop() -> None:
    """ "Forgetting the cache invalidates …" opens with no drop phrase: the outcome stays open."""
    events = work("a", NOW - DAY_MS, request="Forgetful caches: why does src/cache.py lose keys?")
    assert rec("a", events).outcome == "open"


def test_threads_past_the_forgotten_horizon_do_not_fire() -> None:
    """A thread idle 15 days is not a candidate at all."""
    r = rec("a", work("a", NOW - FORGOTTEN_AFTER_MS - DAY_MS))
    assert candidates(NOW, state_of([r]), [r]) == []
    assert timing(FORGOTTEN_AFTER_MS) == 0


def test_hours_idle_in_a_busy_day_scores_below_a_quiet_break() -> None:
    """Left 3 hours ago with three other sessions since: skipped; left 3 days ago before a break: fires."""
    left = rec("a", work("a", NOW - 3 * HOUR))
    busy = [left] + [
        rec(
            f"o{i}",
            work(
                f"o{i}",
                NOW - 2 * HOUR + i * 600_000,
                request=f"Other task {i} in src/o{i}.py",
                path=f"src/o{i}.py",
            ),
        )
        for i in range(3)
    ]
    busy_score = next(c for c in candidates(NOW, state_of(busy), busy) if "event:a:" in c.refs[0])
    assert busy_score.score < THRESHOLD
    assert "later session" in busy_score.reason
    quiet = rec("a", work("a", NOW - 3 * DAY_MS))
    (q,) = candidates(NOW, state_of([quiet]), [quiet])
    assert q.score >= THRESHOLD > busy_score.score


def test_a_single_exchange_without_tools_does_not_fire() -> None:
    """One question and its answer, left open by idling: below the threshold."""
    events = [
        ev("a", 1, "user_message", "What does HTTP 418 mean?", NOW - DAY_MS),
        ev("a", 2, "assistant_message", "I'm a teapot.", NOW - DAY_MS),
    ]
    r = rec("a", events)
    (c,) = candidates(NOW, state_of([r]), [r])
    assert 0 < c.score < THRESHOLD
    assert "single exchange" in c.reason


def test_proposals_waiting_fire_once_aggregated_and_only_past_the_age() -> None:
    """Three proposals waiting 3+ days are one waiting_review suggestion; one waiting an hour is not."""
    old = [
        Pending(proposal_id=f"p{i}", title=f"Rule {i}", created_at=NOW - (3 + i) * DAY_MS) for i in range(3)
    ]
    out = fired([], pending=old)
    assert [s.kind for s in out] == ["waiting_review"]
    assert out[0].text.startswith("3 proposals have waited up to 5 days for review")
    assert sorted(out[0].refs) == ["proposal:p0", "proposal:p1", "proposal:p2"]
    young = [Pending(proposal_id="y", title="Fresh", created_at=NOW - HOUR)]
    assert fired([], pending=young) == []
    (c,) = candidates(NOW, state_of([], pending=young), [])
    assert c.score == 0 and "only" in c.reason


def test_proposals_waiting_under_an_hour_read_naturally() -> None:
    """Proposals waiting less than an hour "have waited less than an hour", never "up to
    less than an hour", and the reason says "has waited less than an hour", never "only less
    than"; an older one keeps its "up to" and "only"."""
    fresh = [
        Pending(proposal_id=f"f{i}", title=f"Rule {i}", created_at=NOW - 60_000 * (i + 1)) for i in range(2)
    ]
    (c,) = candidates(NOW, state_of([], pending=fresh), [])
    assert c.text.startswith("2 proposals have waited less than an hour for review"), c.text
    assert c.reason.startswith("the oldest has waited less than an hour (fires after 2 days)"), c.reason
    hours = [
        Pending(proposal_id=f"h{i}", title=f"Rule {i}", created_at=NOW - (3 + i) * HOUR) for i in range(2)
    ]
    (c,) = candidates(NOW, state_of([], pending=hours), [])
    assert c.text.startswith("2 proposals have waited up to 4 hours for review"), c.text
    assert c.reason.startswith("the oldest has waited only 4 hours"), c.reason


def test_ids_are_stable_across_derivations_and_decoding() -> None:
    """The same facts give the same ids an hour later and after the records round-trip through JSON."""
    records = [rec("a", work("a", NOW - DAY_MS)), rec("b", failing("b", NOW - 2 * DAY_MS))]
    first = {c.kind: c.id for c in candidates(NOW, state_of(records), records)}
    decoded = msgspec.json.decode(msgspec.json.encode(records), type=list[Behavior])
    later = NOW + HOUR
    second = {c.kind: c.id for c in candidates(later, state_of(decoded, later), decoded)}
    assert first == second and len(first) == 2
    assert suggestion_id("resume_thread", "x") != suggestion_id("unfixed_failure", "x")


def test_the_same_failing_call_in_two_sessions_is_one_suggestion_since_the_first() -> None:
    """The date test failing in two sessions: one unfixed_failure, citing both, dated from the first."""
    records = [rec("a", failing("a", NOW - 3 * DAY_MS)), rec("b", failing("b", NOW - DAY_MS))]
    found = [c for c in candidates(NOW, state_of(records), records) if c.kind == "unfixed_failure"]
    assert len(found) == 1
    assert any("event:a:" in r for r in found[0].refs) and any("event:b:" in r for r in found[0].refs)
    assert suggestions._since(NOW, NOW - 3 * DAY_MS) in found[0].text


def test_dismissed_ids_are_skipped_until_their_time() -> None:
    """A dismissal until later hides the suggestion; one that ran out does not."""
    r = rec("a", work("a", NOW - DAY_MS))
    (s,) = fired([r])
    assert fired([r], dismissed={s.id: NOW + 1}) == []
    assert fired([r], dismissed={s.id: NOW}) == [s]


def test_at_most_a_few_suggestions_best_first() -> None:
    """Many open threads: at most MAX_SUGGESTIONS, scores not rising."""
    records = [
        rec(
            f"s{i}",
            work(
                f"s{i}", NOW - (i + 1) * DAY_MS // 2, request=f"Task {i} in src/t{i}.py", path=f"src/t{i}.py"
            ),
        )
        for i in range(6)
    ]
    out = suggest(NOW, state_of(records), records)
    assert 0 < len(out) <= MAX_SUGGESTIONS
    assert [s.score for s in out] == sorted((s.score for s in out), reverse=True)


def test_one_suggestion_per_session() -> None:
    """A session with an open thread and an unfixed failure yields one suggestion, the better one."""
    events = [
        *failing("a", NOW - DAY_MS),
        ev("a", 5, "user_message", "Also refactor src/x.py", NOW - DAY_MS),
        ev("a", 6, "assistant_message", "ok", NOW - DAY_MS),
    ]
    r = rec("a", events, working=WorkingState(open_threads=["refactor src/x.py"]))
    assert len([c for c in candidates(NOW, state_of([r]), [r]) if c.score >= THRESHOLD]) == 2
    assert len(fired([r])) == 1


def test_timing_rises_then_falls() -> None:
    """0 while warm, rising to 1 after some hours, falling after three days, 0 past the horizon."""
    points = [timing(t) for t in (0, 2 * HOUR, 8 * HOUR, 2 * DAY_MS, 7 * DAY_MS, 13 * DAY_MS, 20 * DAY_MS)]
    assert points[0] == 0 and points[-1] == 0
    assert points[1] < points[2] == points[3] == 1 > points[4] > points[5] > 0


def test_every_score_is_in_range_with_a_reason() -> None:
    """Scores stay within 0..1 and each candidate says why."""
    records = [rec("a", work("a", NOW - DAY_MS)), rec("b", failing("b", NOW - 5 * DAY_MS))]
    found = candidates(
        NOW, state_of(records, pending=[Pending(proposal_id="p", title="t", created_at=0)]), records
    )
    assert found and all(0 <= c.score <= 1 and c.reason for c in found)


def test_a_question_answered_with_tools_does_not_fire() -> None:
    """ "How does the parser work?" explored with a tool and answered: below the threshold; the
    same work as a task fires."""
    asked = rec("a", work("a", NOW - DAY_MS, request="How does the parser in src/parse.py work?"))
    (c,) = candidates(NOW, state_of([asked]), [asked])
    assert 0 < c.score < THRESHOLD and "question" in c.reason
    task = rec("a", work("a", NOW - DAY_MS, request="Make the parser in src/parse.py stream"))
    assert fired([task]) != []


def test_small_later_sessions_do_not_count_as_moving_on_until_they_pass_it_over() -> None:
    """Two later one-line chats without tools leave a thread's score as it was; a third
    passes it over: it is skipped, saying so."""
    left = rec("a", work("a", NOW - DAY_MS))
    chats = [
        rec(
            f"c{i}",
            [
                ev(f"c{i}", 1, "user_message", "what day is it", NOW - HOUR),
                ev(f"c{i}", 2, "assistant_message", "Friday", NOW - HOUR),
            ],
        )
        for i in range(3)
    ]

    def left_after(later: list[Behavior]) -> Suggestion:
        found = candidates(NOW, state_of([left, *later]), [left, *later])
        return next(c for c in found if "event:a:" in c.refs[0])

    alone = left_after([])
    assert left_after(chats[:2]).score == alone.score >= THRESHOLD
    passed = left_after(chats)
    assert passed.score == 0 and passed.reason == "passed over: 3 later sessions went by without it"


def test_a_failure_the_work_went_on_past_does_not_fire() -> None:
    """A grep finding nothing, then two successful calls: the failure did not stop the work."""
    at = NOW - DAY_MS
    events = [
        ev("a", 1, "user_message", "Rename the helper in src/util.py", at),
        ev("a", 2, "tool_call", "grep -rn old_name docs", at, tool_call_id="g", tool_name="bash"),
        ev("a", 3, "tool_result", "", at, tool_call_id="g", tool_name="bash", meta={"exit_code": "1"}),
        ev("a", 4, "tool_call", "sed -i s/old/new/ src/util.py", at, tool_call_id="s", tool_name="bash"),
        ev("a", 5, "tool_result", "", at, tool_call_id="s", tool_name="bash"),
        ev("a", 6, "tool_call", "pytest", at, tool_call_id="p", tool_name="bash"),
        ev("a", 7, "tool_result", "3 passed", at, tool_call_id="p", tool_name="bash"),
        ev("a", 8, "assistant_message", "Renamed.", at),
    ]
    r = rec("a", events)
    assert r.failures
    found = [c for c in candidates(NOW, state_of([r]), [r]) if c.kind == "unfixed_failure"]
    assert found and found[0].score < THRESHOLD and "went on past it" in found[0].reason


def test_a_polite_task_is_not_taken_for_a_question() -> None:
    """ "Can you make the parser stream?" is a task: it fires like one."""
    task = rec("a", work("a", NOW - DAY_MS, request="Can you make the parser in src/parse.py stream?"))
    assert fired([task]) != []


def test_the_same_thread_left_in_two_sessions_is_one_suggestion() -> None:
    """Two sessions left the same open thread: one resume_thread, citing both; when the
    later one took it up again on the same paths, citing where it was left last."""
    thread = WorkingState(open_threads=["wire the exporter into the CLI"])
    records = [
        rec("a", work("a", NOW - 3 * DAY_MS), working=thread),
        rec("b", work("b", NOW - DAY_MS, path="src/cli.py"), working=thread),
    ]
    out = fired(records)
    assert [s.kind for s in out] == ["resume_thread"]
    assert any("event:a:" in r for r in out[0].refs) and any("event:b:" in r for r in out[0].refs)
    records[1] = rec("b", work("b", NOW - DAY_MS), working=thread)
    out = fired(records)
    assert [s.kind for s in out] == ["resume_thread"]
    assert out[0].refs and all(r.startswith("event:b:") for r in out[0].refs)


def test_a_thread_the_current_session_is_on_does_not_fire_from_another_session() -> None:
    """The asking session left the same thread too (or has it in its working state): the
    other session's copy of it is not suggested either."""
    thread = WorkingState(open_threads=["wire the exporter into the CLI"])
    other = rec("a", work("a", NOW - 2 * DAY_MS), working=thread)
    mine = rec("me", work("me", NOW - DAY_MS, request="Something else", path="src/else.py"), working=thread)
    assert fired([other, mine], session_id="me") == []
    (c,) = [c for c in candidates(NOW, state_of([other, mine]), [other, mine], session_id="me")]
    assert c.score == 0 and c.reason in suggestions.VETOES


def test_a_thread_dropped_later_does_not_fire_from_an_earlier_session() -> None:
    """Left open in one session, let go ("never mind") in a later one: not suggested."""
    at = NOW - DAY_MS
    left = rec("a", work("a", NOW - 3 * DAY_MS, request="Port the exporter to v2"))
    dropped_events = [
        ev("b", 1, "user_message", "Port the exporter to v2", at),
        ev("b", 2, "assistant_message", "Starting.", at),
        ev("b", 3, "user_message", "never mind", at),
    ]
    dropped = rec("b", dropped_events)
    assert dropped.outcome == "dropped"
    assert fired([left, dropped]) == []


def test_a_thread_let_go_later_in_other_words_leaves_no_line() -> None:
    """Left open in one session, let go in a later one that names it in other words
    ("never mind the parser split"): no Open line in the state and no suggestion. A later
    drop of other work keeps it — also one in a session that took the thread up before
    "never mind, drop that" let go of the other work it went on to (another thread)."""
    at = NOW - DAY_MS
    thread = WorkingState(open_threads=["split the parser in src/parse.py"])
    left = rec("a", work("a", NOW - 3 * DAY_MS), working=thread)
    named = rec("b", [ev("b", 1, "user_message", "never mind the parser split, we keep it whole", at)])
    assert named.outcome == "dropped"
    assert not [line for _, line in state_of([left, named]).lines() if line.text.startswith("Open")]
    assert fired([left, named]) == []
    other = rec("d", [ev("d", 1, "user_message", "never mind the logo colours", at)])
    several = threads(
        "c",
        [
            ev("c", 1, "user_message", "Picking up the parser split where we left it", at),
            ev("c", 2, "tool_call", "cat src/parse.py", at, tool_call_id="p", tool_name="bash"),
            ev("c", 3, "tool_result", "def parse(): ...", at, tool_call_id="p", tool_name="bash"),
            ev("c", 4, "assistant_message", "Here it is.", at),
            ev("c", 5, "user_message", "Quick one: the logo colours in src/logo.css", at),
            ev("c", 6, "assistant_message", "Looking.", at),
            ev("c", 7, "user_message", "never mind, drop that", at),
        ],
    )
    assert [(r.intent[:14], r.outcome) for r in several] == [
        ("Picking up the", "open"),
        ("Quick one: the", "dropped"),
    ]
    for later in ([other], several):
        assert [s.kind for s in fired([left, *later])] == ["resume_thread"], later[-1].intent


def test_a_thread_taken_up_again_in_a_later_session_and_let_go_there_leaves_no_line() -> None:
    """Left open, taken up again in a later session ("Back to the parser refactor", its
    file read again) and let go there with "never mind, drop that": no Open line and no
    suggestion. Taken up without going back to its files, the drop names nothing."""
    left = rec("a", work("a", NOW - 3 * DAY_MS))
    at = NOW - DAY_MS
    resumed = [
        ev("b", 1, "user_message", "Back to the parser refactor", at),
        ev("b", 2, "tool_call", "cat src/parse.py", at, tool_call_id="p", tool_name="bash"),
        ev("b", 3, "tool_result", "def parse(): ...", at, tool_call_id="p", tool_name="bash"),
        ev("b", 4, "assistant_message", "Here is where we stopped.", at),
        ev("b", 5, "user_message", "never mind, drop that", at),
        ev("b", 6, "assistant_message", "Dropped.", at),
    ]
    dropped = rec("b", resumed)
    assert dropped.outcome == "dropped"
    assert not [line for _, line in state_of([left, dropped]).lines() if line.text.startswith("Open")]
    assert fired([left, dropped]) == []
    elsewhere = rec("c", [e for e in resumed if e.type != "tool_call" and e.type != "tool_result"])
    assert [s.kind for s in fired([left, elsewhere])] == ["resume_thread"]


def test_a_threads_id_holds_as_it_ages_from_active_to_abandoned() -> None:
    """A thread (one cut to its 160 characters here) keeps its id from "Open: …" to
    "Open (idle 10 days): …", the label growing as it ages."""
    long = "Refactor the parser in src/parse.py so that " + " ".join(f"step{i}" for i in range(60))
    thread = WorkingState(open_threads=[long])
    r = rec("a", work("a", NOW - DAY_MS), working=thread)
    ids = set()
    for later in (NOW, NOW + 3 * DAY_MS, NOW + 9 * DAY_MS, NOW + 10 * DAY_MS):
        (c,) = [c for c in candidates(later, state_of([r], later), [r]) if c.kind == "resume_thread"]
        ids.add(c.id)
    assert len(ids) == 1


def test_a_full_waiting_section_says_at_least() -> None:
    """Twelve proposals waiting, eight listed by the state: "At least 8 proposals …"."""
    old = [
        Pending(proposal_id=f"p{i:02d}", title=f"Rule {i}", created_at=NOW - (3 + i) * DAY_MS)
        for i in range(12)
    ]
    (s,) = fired([], pending=old)
    assert s.text.startswith("At least 8 proposals have waited up to 14 days")


def test_a_long_thread_keeps_its_age_whole() -> None:
    """A suggestion about a long thread cuts the thread's words, never the "(left … ago)"
    that ends it."""
    at = NOW - DAY_MS // 2
    thread = WorkingState(open_threads=["Compare the exports at " + "/".join(["exports"] * 30)])
    events = [
        ev("a", 1, "user_message", "Why do the nightly exports stall?", at),
        ev("a", 2, "assistant_message", "The lock is held too long.", at),
        ev("a", 3, "user_message", "And how do we fix it?", at),
    ]
    r = rec("a", events, working=thread)
    assert r.outcome == "abandoned"
    for now in (NOW, NOW + 11 * DAY_MS):
        (c,) = candidates(now, state_of([r], now), [r])
        assert c.text.startswith("Resume (unanswered): Compare the exports at exports/"), c.text
        assert c.text.endswith(" ago)") and "… (left " in c.text, c.text
        assert len(c.text) <= LINE_CHARS


def test_a_call_failing_again_in_a_later_session_is_one_line_since_the_first() -> None:
    """The same call failing in two sessions is one Failed line in the state (the later
    one, citing both failures), and one suggestion: still failing since the first."""
    first = rec("a", failing("a", NOW - 3 * DAY_MS - 10))
    again = rec("b", failing("b", NOW - DAY_MS))
    state = state_of([first, again])
    failed = [(name, line) for name, line in state.lines() if "Failed" in line.text]
    assert [(name, line.text) for name, line in failed] == [
        ("Active threads", "Failed: bash pytest tests/test_dates.py: FAILED: offset lost")
    ]
    assert failed[0][1].refs == ["event:b:3", "event:a:3"]
    (s,) = fired([first, again])
    weekday = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")[utc_moment(NOW - 3 * DAY_MS - 10).weekday()]
    assert s.kind == "unfixed_failure" and s.text.startswith(f"Still failing since {weekday}: "), s.text
    assert set(s.refs) == {"event:a:3", "event:b:3"}


def test_a_full_waiting_section_with_some_due_says_exactly_how_many() -> None:
    """Twelve proposals waiting, three past two days: the state lists the oldest eight, so
    the newer ones it leaves out are not due either: "3 proposals …", not "At least 3"."""
    days = [4, 3, 2] + [1] * 9
    pending = [
        Pending(proposal_id=f"p{i:02d}", title=f"Rule {i}", created_at=NOW - d * DAY_MS - i - 10)
        for i, d in enumerate(days)
    ]
    (s,) = fired([], pending=pending)
    assert s.text.startswith("3 proposals have waited up to 4 days for review"), s.text


def test_a_thread_that_opens_with_resume_is_not_told_resume_twice() -> None:
    """A thread whose request was "Resume the retry logic in src/net.py" reads "Resume: the
    retry logic in src/net.py (left …)", not "Resume: Resume the retry logic …"; its id is
    the thread's, whatever the text."""
    r = rec("a", work("a", NOW - DAY_MS, request="Resume the retry logic in src/net.py"))
    (s,) = fired([r])
    assert s.text.startswith("Resume: the retry logic in src/net.py (left "), s.text
    assert s.id == suggestion_id("resume_thread", thread_key("Resume the retry logic in src/net.py"))

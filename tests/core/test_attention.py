"""Behavior records and the attention state, as pure functions of their inputs."""

from __future__ import annotations

from typing import Any

from makad.core import attention, behaviors
from makad.core.assembly import assemble
from makad.core.attention import AttentionLine, Pending, Rejected, derive, retracted_digests
from makad.core.behaviors import MAX_TURNS, Behavior, Carry, gather, records
from makad.core.context_types import ContextInputs
from makad.core.strategies.curator import pressured
from makad.core.types import Event, WorkingState

DAY = attention.DAY_MS
NOW = 1_800_000_000_000


def ev(seq: int, kind: str, text: str, ts: int = NOW - DAY, **extra: Any) -> Event:
    return Event(session_id="s", seq=seq, ts=ts + seq, type=kind, text=text, tokens=5, **extra)  # type: ignore[arg-type]


def failing(first: int, ts: int = NOW - DAY) -> list[Event]:
    return [
        ev(first, "user_message", "Fix the date test in src/dates.py", ts),
        ev(first + 1, "tool_call", "pytest tests/test_dates.py", ts, tool_call_id="a", tool_name="bash"),
        ev(first + 2, "tool_result", "FAILED: offset lost", ts, tool_call_id="a", tool_name="bash"),
        ev(first + 3, "assistant_message", "It drops the offset.", ts),
    ]


def one(
    events: list[Event], *, closed: bool = False, working: WorkingState | None = None, sid: str = "s"
) -> Behavior:
    (only,) = threads(events, closed=closed, working=working, sid=sid)
    return only


def threads(
    events: list[Event], *, closed: bool = False, working: WorkingState | None = None, sid: str = "s"
) -> list[Behavior]:
    """The records of a session read at once (one a thread)."""
    done, carry = gather(sid, Carry(), events)
    assert done == []
    return records(sid, carry, closed=closed, working=working)


# --------------------------------------------------------------------- records ---


def test_a_record_says_intent_outcome_paths_tools_and_refs() -> None:
    """A segment with a failure left standing: its request, outcome errors, the path and
    tool touched, and refs to the request, the failure and the last event."""
    rec = one(failing(1))
    assert rec.intent == "Fix the date test in src/dates.py" and rec.turns == 1
    assert rec.outcome == "errors" and rec.thread == ""
    assert rec.paths == {"tests/test_dates.py": 1}  # paths the tools named
    assert rec.tools == {"bash": 1}
    assert rec.refs == ["event:s:1", "event:s:3", "event:s:4"]
    assert [f.text for f in rec.failures] == ["FAILED: offset lost"]


def test_outcomes_done_abandoned_open() -> None:
    """The user saying it works is done; a request without a reply is abandoned; a closed
    session with an open thread in its working state stays open, without one it is done."""
    fixed = [
        *failing(1),
        ev(5, "tool_call", "pytest tests/test_dates.py", tool_call_id="b", tool_name="bash"),
        ev(6, "tool_result", "1 passed", tool_call_id="b", tool_name="bash"),
        ev(7, "user_message", "Thanks, that works"),
    ]
    assert one(fixed).outcome == "done"
    assert one([ev(1, "user_message", "Port the exporter")]).outcome == "abandoned"
    replied = [ev(1, "user_message", "Port the exporter"), ev(2, "assistant_message", "On it.")]
    assert one(replied).outcome == "open"
    assert one(replied, closed=True).outcome == "done"
    threads = WorkingState(open_threads=["wire it into the CLI"])
    kept = one(replied, closed=True, working=threads)
    assert (kept.outcome, kept.thread) == ("open", "wire it into the CLI")


def test_an_acknowledgement_is_not_a_request_left_unanswered() -> None:
    """A last message that only acknowledges the reply ("ok", "got it") leaves the segment
    as its request left it; a pleased one ("great!", "nice, thanks 👍") makes it done; a
    message that asks for more is a request; failures still say errors."""
    replied = [ev(1, "user_message", "Port the exporter"), ev(2, "assistant_message", "Ported.")]
    for said, outcome in (
        ("ok", "open"),
        ("Got it.", "open"),
        ("great!", "done"),
        ("Nice, thanks 👍", "done"),
        ("👍🏻", "done"),
        ("ok, now add tests", "abandoned"),
        ("great, but the test fails", "abandoned"),
    ):
        rec = one([*replied, ev(3, "user_message", said)])
        assert rec.outcome == outcome, said
        assert rec.turns == (1 if outcome != "abandoned" else 2), said
        assert rec.to_seq == 3, said
    unanswered = one([ev(1, "user_message", "Port the exporter"), ev(2, "user_message", "great!")])
    assert unanswered.outcome == "abandoned"
    assert one([*failing(1), ev(5, "user_message", "ok thanks")]).outcome == "errors"


def test_thanks_in_other_languages_combined_with_an_acknowledgement_is_done() -> None:
    """Thanks or praise in the recognized languages, alone or after "ok"/"super"/"vale"
    ("ok merci", "vale, gracias", "muito obrigado"), is a pleased acknowledgement: the
    segment is done, not a request left unanswered; asking for more is still a request."""
    replied = [
        ev(1, "user_message", "Speed up src/cache.py"),
        ev(2, "assistant_message", "Done, tests pass."),
    ]
    for said in (
        "ok merci",
        "super, merci beaucoup !",
        "d'accord, merci",
        "super, danke",
        "ok danke dir",
        "dankeschön",
        "top, vielen Dank!",
        "vale, gracias",
        "genial, muchas gracias",
        "mil gracias",
        "muito obrigado",
        "ok, grazie mille",
        "prima, dank je wel",
        "ok ありがとう！",
        "ok, thank you so much",
        "cool, thanks a lot",
    ):
        rec = one([*replied, ev(3, "user_message", said)])
        assert (rec.outcome, rec.turns) == ("done", 1), said
    for said, outcomes in (
        ("ok merci, maintenant ajoute des tests", ["abandoned"]),
        ("super, danke — und jetzt die Tests?", ["done", "abandoned"]),  # praise, then a new ask
    ):
        assert [r.outcome for r in threads([*replied, ev(3, "user_message", said)])] == outcomes, said


def test_thanks_alone_in_more_languages_acknowledges_the_reply() -> None:
    """A whole message of thanks in Russian, Polish, Czech, Swedish, Finnish, Turkish, Greek,
    Arabic, Hebrew, Hindi, … after a reply is done; the same word with no reply before it
    is still a request left unanswered."""
    replied = [
        ev(1, "user_message", "Speed up src/cache.py"),
        ev(2, "assistant_message", "Done, tests pass."),
    ]
    for said in (
        "спасибо!",
        "Большое спасибо",
        "дякую",
        "dzięki",
        "ok, dziękuję",
        "díky",
        "tack!",
        "takk",
        "kiitos",
        "teşekkürler",
        "ευχαριστώ",
        "köszönöm",
        "mulțumesc",
        "cảm ơn",
        "terima kasih",
        "شكرا",
        "תודה רבה",
        "धन्यवाद",
    ):
        assert one([*replied, ev(3, "user_message", said)]).outcome == "done", said
    assert one(
        [ev(1, "user_message", "Speed up src/cache.py"), ev(2, "user_message", "спасибо")]
    ).outcome == ("abandoned")
    assert one([*replied, ev(3, "user_message", "Tack a retry onto the fetch in src/net.py")]).outcome == (
        "abandoned"
    )


def test_thanks_in_a_non_latin_script_opening_a_remark_is_done() -> None:
    """ "спасибо, всё работает" after a reply finishes the work as "thanks, it works" does;
    "спасибо, но …" (thanks, but …) in these scripts still asks for more."""
    replied = [
        ev(1, "user_message", "Speed up src/cache.py"),
        ev(2, "assistant_message", "Готово, тесты проходят."),
    ]
    for said in ("спасибо, всё работает", "Дякую, все працює", "ευχαριστώ, δουλεύει", "شكرا، يعمل الآن"):
        assert one([*replied, ev(3, "user_message", said)]).outcome == "done", said
    for said in ("спасибо, но тест всё ещё падает", "дякую, але збірка падає", "תודה, אבל זה עדיין נופל"):
        assert [r.outcome for r in threads([*replied, ev(3, "user_message", said)])] == ["abandoned"], said


def test_thanks_followed_by_a_further_ask_is_a_request() -> None:
    """ "Thanks, but it still crashes — can you look?" asks for more: left without a reply it
    is abandoned (an Unanswered line), not done; plain thanks stay done. "thanks! can you
    also …?" after a reply reporting the work done finishes that work and opens a thread
    of its own, left unanswered."""
    replied = [ev(1, "user_message", "Fix src/export.py"), ev(2, "assistant_message", "Fixed, tests pass.")]
    for said, first in (
        ("Thanks, but it still crashes on Windows paths — can you look?", None),
        ("thanks! can you also add a test for empty rows?", "done"),
        ("Danke, aber der Export schlägt unter Windows noch fehl", None),
        ("merci, mais le test échoue encore sous Windows", None),
        ("gracias, pero sigue fallando en Windows", None),
        ("That works, however the CLI flag is still missing", None),
    ):
        found = threads([*replied, ev(3, "user_message", said)])
        assert [r.outcome for r in found] == ([first] if first else []) + ["abandoned"], said
        state = derive(NOW, found)
        assert any(line.text.startswith("Unanswered") for _, line in state.lines()), said
    for said in ("Thanks, that works", "thanks!", "Perfect, that's it.", "lgtm, ship it", "merci, ça marche"):
        assert one([*replied, ev(3, "user_message", said)]).outcome == "done", said


def test_an_unanswered_follow_up_names_the_request_left_unanswered() -> None:
    """When the segment's opening request was answered and a later one was not, the
    Unanswered line names that later request (after the opening one, for the topic);
    an unanswered opening request is named alone."""
    events = [
        ev(1, "user_message", "Why does the CI cache miss on every run?"),
        ev(2, "assistant_message", "The cache key includes the date."),
        ev(3, "user_message", "And how do I fix the key in .github/workflows/ci.yml?"),
    ]
    rec = one(events)
    assert rec.outcome == "abandoned"
    [line] = [line for name, line in derive(NOW, [rec]).lines() if name == "Active threads"]
    assert line.text.startswith("Unanswered: Why does the CI cache miss on every run?")
    assert line.text.endswith("And how do I fix the key in .github/workflows/ci.yml?")
    assert line.refs == ["event:s:1", "event:s:3"]
    alone = one([ev(1, "user_message", "Port the exporter to src/export.py")])
    assert alone.thread == "Port the exporter to src/export.py"


def test_an_acknowledged_session_is_not_suggested_as_unanswered() -> None:
    """A session whose last word was "great!" is no Unanswered line in the attention state."""
    events = [
        ev(1, "user_message", "Port the exporter"),
        ev(2, "assistant_message", "Ported."),
        ev(3, "user_message", "great!"),
    ]
    state = derive(NOW, [one(events)])
    assert not any(line.text.startswith("Unanswered") for _, line in state.lines())


def test_segments_are_cut_at_max_turns_and_carried_between_steps() -> None:
    """Past MAX_TURNS requests a new segment opens; reading in two steps gives the same
    records as reading at once."""
    events = [ev(i + 1, "user_message", f"request {i}") for i in range(MAX_TURNS * 2 + 3)]

    def spans(carries: list[Carry]) -> list[tuple[int, int, int]]:
        return [
            (r.from_seq, r.to_seq, r.turns)
            for c in carries
            for r in records("s", c, closed=False, working=None)
        ]

    closed, carry = gather("s", Carry(), events)
    assert spans(closed) == [(1, 20, 20), (21, 40, 20)]
    first, mid = gather("s", Carry(), events[:25])
    second, end = gather("s", mid, events[25:])
    assert spans(first + second) == [(1, 20, 20), (21, 40, 20)]
    assert spans([end]) == spans([carry]) == [(41, 43, 3)]
    again, same = gather("s", end, events)  # events already read are skipped
    assert again == [] and same.to_seq == 43


# --------------------------------------------------------------------- derive ---


def test_an_unfixed_failure_is_active_and_a_later_fix_resolves_it() -> None:
    """A failure no later segment fixed is an active thread with its ref; a later segment
    of another session where the same call succeeds takes it out of the open sections."""
    broken = one(failing(1, NOW - 3_600_000))
    state = derive(NOW, [broken])
    [line] = [line for name, line in state.lines() if name == "Active threads"]
    assert line.text == "Failed: bash pytest tests/test_dates.py: FAILED: offset lost"
    assert line.refs == ["event:s:3"]
    later = [
        Event(
            session_id="t",
            seq=1,
            ts=NOW - 60_000,
            type="tool_call",
            text="pytest  tests/test_dates.py",
            tool_call_id="x",
            tool_name="bash",
            tokens=1,
        ),
        Event(
            session_id="t",
            seq=2,
            ts=NOW - 59_000,
            type="tool_result",
            text="ok",
            tool_call_id="x",
            tool_name="bash",
            tokens=1,
        ),
    ]
    fixed = one(later, sid="t")
    state = derive(NOW, [broken, fixed])
    assert not [line for name, line in state.lines() if name in attention.OPEN_SECTIONS]


def test_a_done_session_touching_the_same_path_resolves_an_open_thread() -> None:
    """An open thread leaves the open sections once a later session that ends done touched
    one of its paths; an unrelated done session does not resolve it."""
    opened = one(
        [
            ev(1, "user_message", "Refactor the app module"),
            ev(2, "tool_call", "cat src/app.py", tool_call_id="r", tool_name="bash"),
            ev(3, "tool_result", "def main(): ...", tool_call_id="r", tool_name="bash"),
            ev(4, "assistant_message", "Started."),
        ]
    )
    assert [line.text for _, line in derive(NOW, [opened]).lines() if _ == "Active threads"] == [
        "Open: Refactor the app module"
    ]

    def done(path: str) -> Behavior:
        events = [
            Event(session_id="u", seq=1, ts=NOW - 1000, type="user_message", text="Finish it", tokens=1),
            Event(
                session_id="u",
                seq=2,
                ts=NOW - 950,
                type="tool_call",
                text=f"edit {path}",
                tokens=1,
                tool_call_id="e",
                tool_name="edit",
            ),
            Event(
                session_id="u",
                seq=3,
                ts=NOW - 940,
                type="tool_result",
                text="ok",
                tokens=1,
                tool_call_id="e",
                tool_name="edit",
            ),
            Event(session_id="u", seq=4, ts=NOW - 900, type="assistant_message", text="Done.", tokens=1),
        ]
        return one(events, closed=True, sid="u")

    assert derive(NOW, [opened, done("src/other.py")]).sections[0].lines
    assert derive(NOW, [opened, done("src/app.py")]).sections[0].lines == []


def test_sections_by_age_pending_rejections_focus_and_rhythm() -> None:
    """Idle for days: recently abandoned (with its age); over 14 days: gone. Proposals wait
    oldest first with their age; rejections cool down for 14 days; focus and rhythm come
    from the records."""
    old = one([ev(1, "user_message", "Port the exporter", NOW - 3 * DAY - 10)])
    ancient = one([ev(1, "user_message", "Ancient thing", NOW - 20 * DAY)], sid="z")
    state = derive(
        NOW,
        [ancient, old],
        pending=[
            Pending(proposal_id="p2", title="Newer", created_at=NOW - DAY),
            Pending(proposal_id="p1", title="Older", created_at=NOW - 4 * DAY),
        ],
        rejected=[
            Rejected(proposal_id="r1", title="Use tabs", reason="we use spaces", at=NOW - 2 * DAY),
            Rejected(proposal_id="r0", title="Stale", reason="", at=NOW - 30 * DAY),
        ],
    )
    by = {s.name: [line.text for line in s.lines] for s in state.sections}
    assert by["Recently abandoned"] == ["Unanswered (idle 3 days): Port the exporter"]
    assert by["Active threads"] == []
    assert by["Waiting on the user"] == [
        'Proposal "Older" waiting 4 days for review',
        'Proposal "Newer" waiting 1 day for review',
    ]
    assert by["Do not re-propose"] == ['"Use tabs" rejected 2 days ago: we use spaces']
    assert by["Rhythm"] and "2 sessions in the records" in by["Rhythm"][0]
    assert [s.name for s in state.sections] == list(attention.SECTIONS)


def test_state_is_bounded() -> None:
    """However many sessions are open, each section holds at most MAX_LINES lines of at most
    LINE_CHARS characters."""
    records = [
        one([ev(1, "user_message", f"Thread {i} " + "word " * 100, NOW - 3_600_000)], sid=f"s{i}")
        for i in range(40)
    ]
    state = derive(NOW, records)
    for section in state.sections:
        assert len(section.lines) <= attention.MAX_LINES
        assert all(len(line.text) <= attention.LINE_CHARS for line in section.lines)


def test_retracted_text_is_left_out_and_corrections_keep_the_new_text() -> None:
    """A line repeating deleted memory text is left out; a correction retracts only what
    it changed, so a line saying the new text stays."""
    said = one([ev(1, "user_message", "Remember: the deploy script lives in tools/ship.sh", NOW - 3_600_000)])
    assert derive(NOW, [said]).sections[0].lines
    gone = retracted_digests("The deploy script lives in tools/ship.sh")
    assert derive(NOW, [said], retracted=gone).sections[0].lines == []
    corrected = retracted_digests(
        "deploys use fabric on the build host", "deploys use ansible on the build host"
    )
    assert attention.repeats_retracted("we said deploys use fabric on the build host", corrected)
    assert not attention.repeats_retracted("deploys use ansible on the build host", corrected)


# ------------------------------------------------------------------ assembly ---


def attention_inputs(**extra: Any) -> ContextInputs:
    lines = [
        (
            "Active threads",
            AttentionLine(text="Open: wire the date parser into the CLI", refs=["event:old:4"]),
        ),
        ("Active threads", AttentionLine(text="Failed: bash pytest: offset lost", refs=["event:old:3"])),
        ("Rhythm", AttentionLine(text="Worked mostly on Mon", refs=["event:old:4"])),
    ]
    return ContextInputs(
        budget_tokens=extra.pop("budget_tokens", 4000), now_ms=NOW, session_id="new", attention=lines, **extra
    )


def test_the_attention_segment_shows_lines_with_refs_and_trace_rows() -> None:
    """Every line fits: one segment with each line and its refs, each a trace candidate."""
    pack = assemble(attention_inputs())
    [segment] = [s for s in pack.segments if s.kind == "attention"]
    assert "- Failed: bash pytest: offset lost (event:old:3)" in segment.text
    assert segment.source_ids == ["event:old:4", "event:old:3"]
    rows = [c for c in pack.trace.candidates if c.kind == "attention"]
    assert [c.included for c in rows] == [True, True, True]
    assert pressured(pack) == []


def test_owned_elsewhere_lines_are_left_out_of_attention() -> None:
    """A line the working state shows, or one citing only this session, is owned elsewhere."""
    inputs = attention_inputs(working_state=WorkingState(open_threads=["wire the date parser into the CLI"]))
    inputs.attention.append(
        ("Active threads", AttentionLine(text="Open: my own thing", refs=["event:new:2"]))
    )
    pack = assemble(inputs)
    [segment] = [s for s in pack.segments if s.kind == "attention"]
    assert "wire the date parser" not in segment.text and "my own thing" not in segment.text
    owners = [(o.segment, o.owner) for o in pack.trace.owned_elsewhere]
    assert owners == [("attention", "working_state"), ("attention", "history")]
    assert pack.trace.dropped["owned_elsewhere"] == 2


def test_attention_lines_left_out_for_room_do_not_make_recall_pressured() -> None:
    """Lines that do not fit are budget in the trace, and the curator's pressure check does
    not count them as recall's."""
    many = [
        ("Active threads", AttentionLine(text=f"Open: thread {i} " + "x" * 150, refs=[f"event:o{i}:1"]))
        for i in range(40)
    ]
    pack = assemble(ContextInputs(budget_tokens=600, now_ms=NOW, session_id="new", attention=many))
    rows = [c for c in pack.trace.candidates if c.kind == "attention"]
    assert any(c.reason == "budget" for c in rows) and any(c.included for c in rows)
    assert pack.total_tokens <= 600
    assert pressured(pack) == []


def test_not_in_include_means_no_attention() -> None:
    """Without attention in include, no segment and no trace rows."""
    pack = assemble(attention_inputs(include=frozenset({"memory", "recall"})))
    assert not [s for s in pack.segments if s.kind == "attention"]
    assert not [c for c in pack.trace.candidates if c.kind == "attention"]
    assert behaviors.DONE_SAID.match("lgtm, ship it")


def test_a_segment_the_user_dropped_leaves_no_open_thread() -> None:
    """ "never mind" as the last request: outcome dropped, no Open line; its failure stays listed."""
    events = [*failing(1), ev(5, "user_message", "never mind"), ev(6, "assistant_message", "Sure.")]
    r = one(events)
    assert r.outcome == "dropped"
    state = derive(NOW, [r])
    texts = [line.text for _, line in state.lines()]
    assert not any(t.startswith("Open") for t in texts)
    assert any(t.startswith("Failed") for t in texts)


def lets_the_work_go(said: str) -> bool:
    """Whether ``said``, answered by the agent after a request for a cache, drops that work."""
    events = [
        ev(1, "user_message", "Add a cache to src/cache.py"),
        ev(2, "assistant_message", "Sure."),
        ev(3, "user_message", said),
        ev(4, "assistant_message", "ok"),
    ]
    return one(events).outcome == "dropped"


def test_only_a_request_that_lets_the_work_go_is_a_drop() -> None:
    """ "Forget it." and "ok, drop that" drop the segment; "drop this table from the schema"
    and "skip it if the cache is warm" are tasks."""
    for said, dropped in (
        ("Forget it.", True),
        ("ok, drop that", True),
        ("never mind, it works now", True),
        ("drop this table from the schema", False),
        ("skip it if the cache is warm", False),
        ("Forgetful caches lose keys", False),
    ):
        assert lets_the_work_go(said) is dropped, said


def test_a_session_left_unclosed_after_its_closing_exchange_is_done() -> None:
    """A session never closed whose last exchange finished the work (the agent reported it
    done and the user acknowledged; or the user praised the result and the agent only
    answered in words) is done; with an open thread in the working state it stays open."""
    fixed = [
        ev(1, "user_message", "Fix the retry logic in src/upload.py"),
        ev(2, "tool_call", "pytest tests/test_upload.py", tool_call_id="a", tool_name="bash"),
        ev(3, "tool_result", "29 passed", tool_call_id="a", tool_name="bash"),
        ev(4, "assistant_message", "The check passes now."),
    ]
    for said in ("ok", "Got it.", "d'accord", "vale"):
        assert one([*fixed, ev(5, "user_message", said)]).outcome == "done", said
    for said, answer in (
        ("nice, that's sorted", "Done then."),
        ("Brilliant — that was the last bit.", "You're welcome."),
        ("cool, moving on", "Great."),
        ("super, merci, c'est tout", "Avec plaisir."),
    ):
        events = [*fixed, ev(5, "user_message", said), ev(6, "assistant_message", answer)]
        assert one(events).outcome == "done", said
    threads = WorkingState(open_threads=["the upload retry still needs a test"])
    kept = one([*fixed, ev(5, "user_message", "ok")], working=threads)
    assert kept.outcome == "open"


def test_a_session_cut_off_mid_request_is_still_open_or_unanswered() -> None:
    """An acknowledgement of a reply that asked something, or that reported no finished
    work, leaves the session open; praise that opens a new task is a request: unanswered
    without a reply, open once the agent went to work on it (a thread of its own: the
    praise finished the work reported done)."""
    asked = [
        ev(1, "user_message", "Fix the retry logic in src/upload.py"),
        ev(2, "assistant_message", "I found the cause. Shall I change the backoff too?"),
        ev(3, "user_message", "ok"),
    ]
    assert one(asked).outcome == "open"
    midway = [
        ev(1, "user_message", "Fix the retry logic in src/upload.py"),
        ev(2, "assistant_message", "I found the cause in src/upload.py."),
        ev(3, "user_message", "ok"),
    ]
    assert one(midway).outcome == "open"
    passed = [
        ev(1, "user_message", "Fix the retry logic in src/upload.py"),
        ev(2, "assistant_message", "Done, the tests pass."),
    ]
    left = threads([*passed, ev(3, "user_message", "nice, now add the CSV export")])
    assert [(r.intent, r.outcome) for r in left] == [
        ("Fix the retry logic in src/upload.py", "done"),
        ("nice, now add the CSV export", "abandoned"),
    ]
    went_on = [
        *passed,
        ev(3, "user_message", "nice, now add the CSV export"),
        ev(4, "tool_call", "edit src/export.py", tool_call_id="e", tool_name="edit"),
        ev(5, "tool_result", "ok", tool_call_id="e", tool_name="edit"),
        ev(6, "assistant_message", "Started on the export."),
    ]
    fixed, export = records("s", gather("s", Carry(), went_on)[1], closed=False, working=None)
    assert (fixed.intent, fixed.outcome) == ("Fix the retry logic in src/upload.py", "done")
    assert (export.intent, export.outcome) == ("nice, now add the CSV export", "open")
    answered_with_a_question = [
        *passed,
        ev(3, "user_message", "nice, now the CSV export"),
        ev(4, "assistant_message", "Which columns should it have?"),
    ]
    assert [r.outcome for r in threads(answered_with_a_question)] == ["done", "open"]
    not_done = [
        ev(1, "user_message", "Fix the retry logic in src/upload.py"),
        ev(2, "assistant_message", "Not done yet: the backoff still needs work."),
        ev(3, "user_message", "ok"),
    ]
    assert one(not_done).outcome == "open"


def test_an_acknowledgement_after_an_idle_cut_is_not_a_new_request() -> None:
    """Read in two steps with the segment cut between them (the session went idle), a later
    "great, thanks!" (or "ok" to a reply reporting the work done) makes the session done,
    and a later "ok" to any other reply adds no record: none is an Unanswered line."""
    for reply, said, outcome in (
        ("Ported.", "great, thanks!", "done"),
        ("Ported, the tests pass.", "ok", "done"),
        ("Ported.", "ok", None),
    ):
        first = [
            ev(1, "user_message", "Port the exporter to src/export.py"),
            ev(2, "assistant_message", reply),
        ]
        _, carry = gather("s", Carry(), first)
        (earlier,) = records("s", carry, closed=False, working=None)
        assert earlier.outcome == "open"
        closed, later = gather("s", behaviors.continued(carry), [ev(3, "user_message", said)])
        assert closed == []
        if outcome is None:
            assert later.empty(), said
            derived = [earlier]
        else:
            (rec,) = records("s", later, closed=False, working=None)
            assert (rec.outcome, rec.turns, rec.refs) == (outcome, 0, ["event:s:3"]), said
            derived = [earlier, rec]
        texts = [line.text for _, line in derive(NOW, derived).lines()]
        assert not any(t.startswith("Unanswered") for t in texts), (said, texts)
        assert any(t.startswith("Open") for t in texts) is (outcome is None), (said, texts)


def test_a_greeting_or_an_opener_is_no_thread() -> None:
    """A message that only greets or opens the session ("morning!", "hi", "Where were
    we?", "hallo", "bonjour") is no request: the thread is named by the first request
    after it, and a session of greetings alone leaves no Open or Unanswered line."""
    for opener in (
        "morning!",
        "hi",
        "Hello again",
        "Where were we?",
        "ok, what's next?",
        "hallo 👋",
        "Bonjour !",
    ):
        events = [
            ev(1, "user_message", opener),
            ev(2, "assistant_message", "Hi, what would you like to work on?"),
            ev(3, "user_message", "Fix the pagination in src/api/pages.py"),
            ev(4, "assistant_message", "Looking at it."),
        ]
        rec = one(events)
        assert (rec.intent, rec.thread, rec.turns) == (
            "Fix the pagination in src/api/pages.py",
            "Fix the pagination in src/api/pages.py",
            1,
        ), opener
        assert rec.refs[0] == "event:s:3", opener
        for alone in ([ev(1, "user_message", opener)], events[:2]):
            texts = [line.text for _, line in derive(NOW, [one(alone)]).lines()]
            assert not any(t.startswith(("Open", "Unanswered")) for t in texts), (opener, texts)
    for request in ("hi, can you fix the parser?", "Hello world example in src/hello.py is broken"):
        assert one([ev(1, "user_message", request)]).intent == request


def test_a_thread_taken_up_again_and_left_open_is_listed_once() -> None:
    """When a later session took an open thread up again (its paths, a request naming it)
    and left the work open or failing again, only that later one is listed (and
    suggested): the older line is the same work, told twice. A later session on other
    paths, or on the same file about something else, leaves it listed."""

    def session(sid: str, request: str, path: str, ts: int, *, fails: bool = False) -> Behavior:
        result = "FAILED: 1 test" if fails else '{"ok": true}'
        ts -= 10
        events = [
            Event(session_id=sid, seq=1, ts=ts, type="user_message", text=request, tokens=1),
            Event(
                session_id=sid,
                seq=2,
                ts=ts + 1,
                type="tool_call",
                text=f"edit {path}",
                tokens=1,
                tool_call_id="e",
                tool_name="edit",
            ),
            Event(
                session_id=sid,
                seq=3,
                ts=ts + 2,
                type="tool_result",
                text=result,
                tokens=1,
                tool_call_id="e",
                tool_name="edit",
            ),
            Event(session_id=sid, seq=4, ts=ts + 3, type="assistant_message", text="Started.", tokens=1),
        ]
        return one(events, sid=sid)

    first = session("a", "Build the CSV export in src/export/csv.py", "src/export/csv.py", NOW - 4 * DAY)
    other = session("b", "Speed up the cache in src/cache.py", "src/cache.py", NOW - 3 * DAY)
    again = session("c", "Back to the CSV export", "src/export/csv.py", NOW - 2 * DAY)
    failing_again = session("d", "CSV export once more", "src/export/csv.py", NOW - DAY, fails=True)

    def open_lines(records: list[Behavior]) -> list[str]:
        return [line.text for name, line in derive(NOW, records).lines() if name in attention.OPEN_SECTIONS]

    assert open_lines([first, other]) == [
        "Open (idle 3 days): Speed up the cache in src/cache.py",
        "Open (idle 4 days): Build the CSV export in src/export/csv.py",
    ]
    elsewhere = session("e", "Add logging to the exporter", "src/export/csv.py", NOW - 2 * DAY)
    assert len(open_lines([first, elsewhere])) == 2
    assert open_lines([first, other, again]) == [
        "Open (idle 2 days): Back to the CSV export",
        "Open (idle 3 days): Speed up the cache in src/cache.py",
    ]
    assert open_lines([first, other, again, failing_again]) == [
        "Failed: edit edit src/export/csv.py: FAILED: 1 test",
        "Open (idle 3 days): Speed up the cache in src/cache.py",
    ]


def test_a_call_and_its_result_naming_the_same_path_are_one_touch() -> None:
    """An edit whose call and result both name the file counts one touch of it (the focus
    line says "touched 2×" after two edits, not after one); a result naming other paths
    counts those."""
    edit = [
        ev(1, "user_message", "Build the CSV export"),
        ev(2, "tool_call", '{"path": "src/export/csv.py"}', tool_call_id="e1", tool_name="edit_file"),
        ev(3, "tool_result", '{"path": "src/export/csv.py"}', tool_call_id="e1", tool_name="edit_file"),
        ev(4, "tool_call", "grep -rl csv src", tool_call_id="g1", tool_name="bash"),
        ev(5, "tool_result", "src/export/csv.py\nsrc/export/base.py", tool_call_id="g1", tool_name="bash"),
    ]
    assert one(edit[:3]).paths == {"src/export/csv.py": 1}
    assert one(edit).paths == {"src/export/csv.py": 2, "src/export/base.py": 1}
    [focus] = [
        line.text for name, line in derive(NOW, [one(edit[:3])]).lines() if name == "Currently focused"
    ]
    assert focus == "src/export/csv.py (touched 1×)"


def test_saying_the_work_will_not_be_done_lets_it_go() -> None:
    """ "let's scrap that idea", "nah, abandon this one", "we're not doing the cache after
    all", "the cache is not worth it", "leave the cache — we won't do it" let the work go
    like "never mind"; "we're not doing enough retries" and "is it worth it?" do not."""
    for said, dropped in (
        ("let's scrap that idea", True),
        ("nah, abandon this one", True),
        ("Stop, we're not doing the cache after all.", True),
        ("forget about the cache, not worth it", True),
        ("actually, leave the cache — we won't do it", True),
        ("ditch it", True),
        ("lassen wir das", True),
        ("we're not doing enough retries in src/net.py", False),
        ("is the cache worth it?", False),
        ("scrap the old cache entries on startup", False),
    ):
        assert lets_the_work_go(said) is dropped, said


def test_a_settled_proposal_no_longer_waits_and_the_rest_is_kept() -> None:
    """Of the waiting lines only the still-open proposals' stay; other sections and the state's
    stamps are untouched, and a state with nothing settled is returned as it is."""
    pending = [Pending(proposal_id=p, title=p.upper(), created_at=1) for p in ("a", "b")]
    gone = [Rejected(proposal_id="c", title="C", reason="", at=2)]
    state = derive(3, [], pending, gone)
    assert attention.without_settled(state, {"a", "b"}) is state
    kept = attention.without_settled(state, {"b"})
    waiting = next(s for s in kept.sections if s.name == attention.WAITING).lines
    assert [line.refs for line in waiting] == [["proposal:b"]]
    assert [s.name for s in kept.sections] == [s.name for s in state.sections]
    assert kept.computed_at == state.computed_at and kept.records_upto == state.records_upto
    assert [line for name, line in kept.lines() if name == "Do not re-propose"] == [
        line for name, line in state.lines() if name == "Do not re-propose"
    ]

"""One owner per fact: summary lines the working state shows are left out of the summary."""

from __future__ import annotations

from makad.core.assembly import assemble
from makad.core.compaction import checkpoint_summary
from makad.core.context_types import ContextInputs
from makad.core.ownership import MOVED_NOTE, drop_owned, fact_key
from makad.core.types import Event, WorkingState
from tests.core.test_assembly import checkpoint

STATE = WorkingState(
    goals=["Ship the billing export by Friday"],
    decisions=["Use Postgres COPY for the export", "Keep CSV as the only format"],
    notes={"Errors & Corrections": "The first export failed on NULL dates; fixed by coalescing."},
)


def events(n: int, sid: str = "s1") -> list[Event]:
    out = []
    for seq in range(1, n + 1):
        kind = "user_message" if seq % 2 else "assistant_message"
        out.append(
            Event(session_id=sid, seq=seq, ts=1_000 * seq, type=kind, text=f"message {seq} " + "word " * 20)
        )
    return out


def pack_for(state: WorkingState, summary: str, budget: int = 8_000) -> tuple[str, str, object]:
    history = events(14)
    pack = assemble(
        ContextInputs(
            budget_tokens=budget,
            now_ms=20_000,
            session_id="s1",
            working_state=state,
            checkpoint=checkpoint(summary=summary),
            history=history[10:],
        )
    )
    kinds = {s.kind: s.text for s in pack.segments}
    return kinds.get("summary", ""), kinds.get("working_state", ""), pack.trace


def test_checkpoint_summary_facts_shown_once() -> None:
    """After a no-model checkpoint, each goal, decision and error shows in the working state
    only; the summary keeps its headings and the trace lists each line owned_elsewhere."""
    summary = checkpoint_summary(events(10), STATE)
    shown, state_text, trace = pack_for(STATE, summary)
    facts = [*STATE.goals, *STATE.decisions, STATE.notes["Errors & Corrections"]]
    for fact in facts:
        assert fact in state_text and fact not in shown
    owned = trace.owned_elsewhere  # type: ignore[attr-defined]
    assert {fact_key(o.text) for o in owned} == {fact_key(f) for f in facts}
    assert all(o.reason == "owned_elsewhere" and o.owner == "working_state" for o in owned)
    assert trace.dropped["owned_elsewhere"] == len(owned)  # type: ignore[attr-defined]
    assert "## Current Goal" in shown and MOVED_NOTE in shown
    assert "message 1" in shown  # what only the summary says stays


def test_a_fact_the_working_state_does_not_show_stays_in_the_summary() -> None:
    """A goal changed since the compaction, or one the budget cut from the working state, is
    not owned by it: the summary keeps the line."""
    summary = checkpoint_summary(events(10), STATE)
    changed = WorkingState(goals=["Ship the invoice export next week"], decisions=STATE.decisions)
    shown, _, trace = pack_for(changed, summary)
    assert "Ship the billing export by Friday" in shown
    assert "Use Postgres COPY for the export" not in shown
    assert not any("billing" in o.text for o in trace.owned_elsewhere)  # type: ignore[attr-defined]
    big = WorkingState(
        goals=STATE.goals,
        open_threads=[f"thread {n} " + "detail " * 200 for n in range(12)],
        decisions=STATE.decisions,
    )
    shown, state_text, _ = pack_for(big, checkpoint_summary(events(10), big), budget=3_000)
    assert "working state cut to fit" in state_text
    assert STATE.goals[0] in state_text and STATE.goals[0] not in shown
    for decision in STATE.decisions:  # cut from the working state: the summary keeps them
        assert decision not in state_text and decision in shown


def test_model_summary_lines_match_in_any_list_form() -> None:
    """A written summary's bullets, numbered items, quotes, bold and ellipsis-cut lines match
    the working state's items whatever their case and punctuation; headings and short lines stay."""
    body = (
        "# Current Goal\n1. ship the billing export by friday.\n\n# Current State\n"
        "> **Use Postgres COPY for the** …\nDone\n\n# Next Step\n* Keep CSV as the only format;\n"
        "- Write the release note"
    )
    kept, owned = drop_owned(
        body,
        "Goals:\n- Ship the billing export by Friday\nDecisions:\n- Use Postgres COPY for the export\n"
        "- Keep CSV as the only format\n- Done",
        segment="summary",
        owner="working_state",
    )
    assert [o.section for o in owned] == ["Current Goal", "Current State", "Next Step"]
    assert "Done" in kept and "Write the release note" in kept
    assert kept.count(MOVED_NOTE) == 1  # only Current Goal lost every line
    assert "# Next Step" in kept and "# Current State" in kept


def test_nothing_owned_without_a_working_state() -> None:
    """No working state: the summary is shown whole and nothing is listed."""
    summary = checkpoint_summary(events(10), STATE)
    shown, state_text, trace = pack_for(WorkingState(), summary)
    assert state_text == "" and "Ship the billing export by Friday" in shown
    assert trace.owned_elsewhere == []  # type: ignore[attr-defined]

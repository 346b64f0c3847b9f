"""scripts/proactivity: the seeded generator, the matching of suggestions to the ground
truth, and a quick end-to-end run (pure replay and the real daemon's continuity check)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts")]

from proactivity_eval.generator import PERSONAS, generate  # noqa: E402
from proactivity_eval.replay import records_of, replay  # noqa: E402
from proactivity_eval.truth import PROPOSALS_KEY, Item, Naming, metrics, score_moment  # noqa: E402

from makad.core import attention  # noqa: E402

METRIC_KEYS = {
    "precision",
    "recall",
    "f1",
    "false_fires_per_day",
    "skip_silent_share",
    "help_hit_share",
    "threads_only",
    "counts",
}


def test_same_seed_gives_the_same_history() -> None:
    """Two generations with one seed are identical, event for event; another seed differs."""
    for p in PERSONAS:
        a, b = generate(p.name, 11, 10), generate(p.name, 11, 10)
        assert a.digest() == b.digest()
        assert [[e.wire() for e in s.events] for s in a.sessions] == [
            [e.wire() for e in s.events] for s in b.sessions
        ]
        assert [s.items for s in a.sessions] == [s.items for s in b.sessions]
        assert generate(p.name, 12, 10).digest() != a.digest()


def test_histories_hold_every_situation_the_truth_speaks_of() -> None:
    """Over the personas' 30 days: finished, dropped and given-up threads, failing and open
    items, waiting proposals, skip moments, closed and idle sessions, quiet days."""
    reasons: set[str] = set()
    kinds: set[str] = set()
    skips = closed = idle = 0
    for p in PERSONAS:
        history = generate(p.name, 7)
        days = {s.start // 86_400_000 for s in history.sessions}
        assert len(days) < history.days, p.name  # some days are quiet
        for session in history.sessions:
            reasons |= set(session.why_not.values())
            kinds |= {item.kind for item in session.items}
            skips += not session.items
            closed += session.closed
            idle += not session.closed
    assert {"done", "dropped", "lost_interest", "too_recent"} <= reasons
    assert kinds == {"open", "failing", "proposal"}
    assert skips and closed and idle


def test_the_earlier_personas_histories_are_unchanged_by_the_asker() -> None:
    """Adding the asker persona leaves every earlier persona's seed-7 history as it was."""
    digests = {p.name: generate(p.name, 7).digest() for p in PERSONAS if p.name != "asker"}
    assert digests == {
        "steady": "df0c623e-65647",
        "hobbyist": "e7f223f7-24146",
        "juggler": "d0729f5d-148410",
        "finisher": "763489c4-45304",
        "oncall": "d4a96636-149504",
        "explorer": "4ea6b167-28985",
    }


def _passed_over(history: Any, session_index: int, thread: str) -> int:
    """Later sessions, since the thread was last worked on, that did not work on it."""
    sessions = history.sessions[:session_index]
    last = max(i for i, s in enumerate(sessions) if thread in s.threads)
    return len(sessions) - last - 1


def test_the_asker_leaves_threads_without_a_word_between_one_question_sessions() -> None:
    """The asker's sessions are mostly one question and its answer (no tool, no thread); its
    threads are left open without a word; after 3 such sessions some threads are still
    wanted (items) and some were given up (lost_interest), so both sides have ground truth."""
    wanted = given_up = 0
    for seed in (1, 2, 3, 7):
        history = generate("asker", seed)
        questions = [s for s in history.sessions if not s.threads]
        assert len(questions) > len(history.sessions) / 2
        for session in questions:
            assert [e.type for e in session.events] == ["user_message", "assistant_message"]
            assert session.open_threads == []
        for index, session in enumerate(history.sessions):
            for item in session.items:
                if item.key.startswith("thread:") and _passed_over(history, index, item.key) >= 3:
                    wanted += 1
            for key, why in session.why_not.items():
                if why == "lost_interest" and _passed_over(history, index, key) >= 3:
                    given_up += 1
        left = [
            t
            for t in history.threads.values()
            if t.status == "open"
            and not any(
                e.type == "user_message"
                and e.thread == t.key
                and ("later" in e.text or "drop" in e.text.lower())
                for s in history.sessions
                for e in s.events
            )
        ]
        assert left, seed
    assert wanted > 0 and given_up > 0


def test_a_failing_thread_left_standing_is_a_failure_record() -> None:
    """The generator's failing runs are failures to the behavior records (the events are real)."""
    history = generate("oncall", 7, 10)
    failing = [t for t in history.threads.values() if t.failing and t.failure_ref]
    assert failing
    thread = failing[0]
    session = next(s for s in history.sessions if s.id == thread.failure_ref[0])  # type: ignore[index]
    seqs = {f.seq for r in records_of(session) for f in r.failures}
    assert thread.failure_ref[1] in seqs  # type: ignore[index]


def _naming() -> Naming:
    naming = Naming(
        owners={("s1", 3): "thread:a", ("s1", 4): "thread:a", ("s2", 7): "thread:b"},
        phrases={
            "thread:a": ["the retry logic in billing", "src/billing.py"],
            "thread:b": ["cache invalidation"],
        },
        proposals={"proposal:p1", "proposal:p2"},
    )
    return naming


def test_matching_by_refs_text_fallback_duplicates_and_proposals() -> None:
    """A ref to a thread's event hits it once (a second one is a duplicate false fire); the
    text names a thread only when no ref does; any waiting proposal names the one item."""
    items = [
        Item("thread:a", "failing", frozenset({"thread:a"})),
        Item(PROPOSALS_KEY, "proposal", frozenset({"proposal:p1", "proposal:p2"})),
    ]
    fired = [
        (["event:s1:2-3"], "Failed: pytest"),
        (["event:s1:4"], "again"),
        (["event:s2:7"], "Open: cache invalidation"),
        ([], "Proposal waiting for review: proposal p2"),
        (["proposal:p2"], "2 proposals waiting"),
        (["path:x"], "something else entirely"),
    ]
    s, hits = score_moment(fired, items, _naming(), {"thread:b": "dropped"})
    assert hits == [True, False, False, False, True, False]
    assert s.hits == 2 and s.items_hit == 2 and s.fired == 6
    assert s.false_by_reason == {"duplicate": 1, "dropped": 1, "names_nothing": 2}
    by_text, hit = score_moment([([], "back to src/billing.py?")], items, _naming())
    assert hit == [True] and by_text.by_text == 1
    m = metrics(s, 1)
    assert m["precision"] == round(2 / 6, 4) and m["recall"] == 1.0 and m["false_fires_per_day"] == 4.0
    assert m["threads_only"] == {
        "precision": 0.2,
        "recall": 1.0,
        "f1": round(2 * 0.2 / 1.2, 4),
        "fired": 5,
        "hits": 1,
        "items": 1,
    }


def test_silence_at_a_skip_moment_is_scored_as_restraint() -> None:
    """Nothing fired where nothing would help: no false fire, the skip moment counted silent."""
    s, _ = score_moment([], [], _naming())
    assert (s.skip_moments, s.skip_silent, s.fired) == (1, 1, 0)
    noisy, _ = score_moment([(["event:s1:3"], "x")], [], _naming(), {"thread:a": "done"})
    assert noisy.skip_silent == 0 and noisy.false_by_reason == {"done": 1}


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("proactivity")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "proactivity"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), out


def test_quick_run_reports_every_figure_and_scores_the_baseline(quick: tuple[dict[str, Any], Path]) -> None:
    """--quick: the JSON's keys, both personas scored for the baseline (and makad when the
    suggester exists), the moments written out, and the continuity cases run on the daemon."""
    report, out = quick
    assert {"generatorVersion", "seed", "personas", "overall", "continuity", "suggester"} <= set(report)
    assert set(report["personas"]) == {"steady", "juggler"}
    baseline = report["overall"]["baseline"]
    assert set(baseline) >= METRIC_KEYS
    assert baseline["counts"]["fired"] > 0 and baseline["counts"]["items"] > 0
    assert all(0.0 <= baseline[k] <= 1.0 for k in ("precision", "recall", "f1"))
    moments = (out / "moments.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(moments) == baseline["counts"]["moments"]
    if report["suggester"]["available"]:
        assert set(report["overall"]["makad"]) >= METRIC_KEYS
        assert all("makad" in json.loads(line) for line in moments)
        by_kind = report["overall"]["makadBySuggestionKind"]
        assert sum(k["fired"] for k in by_kind.values()) == report["overall"]["makad"]["counts"]["fired"]
    else:
        assert report["overall"]["makad"] is None
    continuity = report["continuity"]
    assert continuity["cases"] == 2 and len(continuity["byCase"]) == 2
    assert 0.0 <= continuity["share"] <= 1.0
    assert continuity["suggestShare"] is None or 0.0 <= continuity["suggestShare"] <= 1.0
    assert continuity["attentionTokens"]["max"] >= continuity["attentionTokens"]["p50"] >= 0
    assert json.loads((out / "summary.json").read_text(encoding="utf-8")) == report


class _Shown:
    """A suggestion as the suggester's interface shapes it."""

    def __init__(self, id: str, text: str, refs: list[str]) -> None:
        self.id, self.kind, self.text, self.score, self.reason, self.refs = id, "thread", text, 1.0, "", refs


def test_replay_scores_any_suggester_and_passes_its_dismissals() -> None:
    """A suggester showing every open attention line is scored at each moment; what did not
    help is dismissed by the generated user and handed back at later moments."""
    seen: list[tuple[int, dict[str, int]]] = []

    def suggest(
        now: int, state: Any, records: Any, dismissed: Any = None, *, session_id: Any = None
    ) -> list[Any]:
        seen.append((now, dict(dismissed or {})))
        lines = [line for name, line in state.lines() if name in attention.OPEN_SECTIONS]
        return [_Shown(f"s{hash(line.text) & 0xFFFF}", line.text, list(line.refs)) for line in lines]

    history = generate("juggler", 7, 10)
    outcome = replay(history, suggest)
    assert outcome.makad.moments == len(history.sessions) == len(seen)
    assert outcome.makad.fired >= outcome.baseline.fired > 0
    assert outcome.makad.items_hit >= outcome.baseline.items_hit
    assert any(d for _, d in seen)  # the juggler dismissed something that did not help
    assert any(until > now for now, d in seen for until in d.values())  # a dismissal lasts a while
    quiet = replay(history, suggest, dismiss=False)
    assert quiet.makad.fired == outcome.makad.fired

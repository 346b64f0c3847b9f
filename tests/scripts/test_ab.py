"""scripts/ab on a small LoCoMo-format conversation: every variant, the metrics, the curator's
agreement and the answer scores against scripted OpenAI-compatible models on loopback."""

from __future__ import annotations

import csv
import gzip
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_chat import FakeChat, completion, serving

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ("full", "naive", "recent", "deterministic", "summary", "curator", "curator_shadow", "hybrid")
BUDGET = 2000
ANSWER_MODEL = "scripted-answers"
ANSWER_KEY = "answer-key-42"
METRICS = {
    "precision",
    "recall",
    "f1",
    "meanContextTokens",
    "overBudget",
    "cumulativeTokens",
    "overflows",
    "compactions",
    "overflowRecoveries",
    "compactionFailures",
    "archive",
    "curatorTokens",
    "curatorCost",
    "curator",
    "answers",
    "p50Ms",
    "p95Ms",
    "paths",
    "staleCorrect",
    "staleTotal",
    "privacyLeaks",
    "falsePromotions",
}


def _dataset(path: Path) -> Path:
    """Three made-up sessions: the greyhound (evidence D1:3), eighty turns of dog-park chat
    (Ben's match the questions' "Ben": they crowd recall and overflow a lived session), the
    marathon (evidence D3:2)."""
    # The second speaker opens it: a lived session starts with an assistant turn.
    first = [
        ("Ben", "Hi Ana, long time no see."),
        ("Ana", "Morning! Busy week ahead."),
        ("Ben", "I finally adopted a greyhound called Pixel last Saturday."),
        ("Ana", "Lovely, greyhounds are calm dogs."),
        ("Ben", "He sleeps all day, honestly."),
    ]
    park = [
        (
            "Ana" if i % 2 == 0 else "Ben",
            f"At the dog park I met owner number {i}; " + "we chatted about the weather " * 6,
        )
        for i in range(80)
    ]
    later = [("Ana", "How was the marathon?"), ("Ben", "Slow, but I finished in four hours.")]
    conversation: dict[str, Any] = {"speaker_a": "Ana", "speaker_b": "Ben"}
    for number, (turns, when) in enumerate(
        [
            (first, "1:56 pm on 8 May, 2023"),
            (park, "9:00 am on 12 May, 2023"),
            (later, "10:00 am on 20 May, 2023"),
        ],
        1,
    ):
        conversation[f"session_{number}_date_time"] = when
        conversation[f"session_{number}"] = [
            {"speaker": s, "dia_id": f"D{number}:{i}", "text": t} for i, (s, t) in enumerate(turns, 1)
        ]
    record = {
        "sample_id": "tiny-1",
        "conversation": conversation,
        "qa": [
            {
                "question": "What is the name of Ben's greyhound?",
                "answer": "Pixel",
                "evidence": ["D1:3"],
                "category": 4,
            },
            {
                "question": "How long did Ben's marathon take?",
                "answer": "four hours",
                "evidence": ["D3:2"],
                "category": 4,
            },
        ],
    }
    path.write_text(json.dumps([record]), encoding="utf-8")
    return path


class Models(FakeChat):
    """A scripted curator (``/curator/v1``) and answering model (``/answer/v1``) on one server."""

    def __init__(self) -> None:
        super().__init__(self.reply)

    def reply(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        text = "\n".join(m["content"] for m in body["messages"])
        if path.startswith("/curator/"):
            listed = [
                line.split(" | ", 1) for line in body["messages"][-1]["content"].splitlines() if " | " in line
            ]
            picked = [ref for ref, said in listed if "Pixel" in said] or [ref for ref, _ in listed[:1]]
            return 200, completion(json.dumps({"selected": picked}), 100, 3)
        question = body["messages"][-1]["content"]
        if "greyhound" in question:
            answer = "Pixel" if "called Pixel" in text else "not mentioned"
        else:
            answer = "four hours" if "four hours" in text else "not mentioned"
        return 200, completion(answer, 100, 3)


def _ab(
    tmp: Path, variants: tuple[str, ...], env: dict[str, str], *extra: str
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MAKAD_CURATOR_", "MAKA_AB_"))}
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "ab"),
            "--dataset",
            str(_dataset(tmp / "tiny.json")),
            "--variants",
            ",".join(variants),
            "--budget",
            str(BUDGET),
            "--out",
            str(tmp / "out"),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**clean, **env},
    )


@pytest.fixture(scope="module")
def models() -> Iterator[tuple[Models, str]]:
    scripted = Models()
    with serving(scripted) as base:
        yield scripted, base


@pytest.fixture(scope="module")
def run(
    tmp_path_factory: pytest.TempPathFactory, models: tuple[Models, str]
) -> tuple[dict[str, Any], Path, list[dict[str, Any]]]:
    """Every variant, with the scripted curator and answering model."""
    scripted, base = models
    tmp = tmp_path_factory.mktemp("ab")
    (tmp / "key").write_text(ANSWER_KEY + "\n", encoding="utf-8")
    env = {
        "MAKAD_CURATOR_URL": f"{base}/curator/v1",
        "MAKAD_CURATOR_MODEL": "scripted-curator",
        "MAKAD_CURATOR_TIMEOUT_MS": "5000",
        "MAKA_AB_ANSWER_MODEL": ANSWER_MODEL,
    }
    done = _ab(tmp, VARIANTS, env, "--answer-url", f"{base}/answer/v1", "--answer-key-file", str(tmp / "key"))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), tmp / "out", list(scripted.requests)


def _rows(out: Path) -> dict[str, list[dict[str, str]]]:
    with (out / "questions.csv").open(encoding="utf-8") as fh:
        rows: dict[str, list[dict[str, str]]] = {}
        for row in csv.DictReader(fh):
            rows.setdefault(row["variant"], []).append(row)
    return rows


def _packs(out: Path) -> list[dict[str, Any]]:
    with gzip.open(out / "packs.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.mark.slow
def test_summary_has_every_metric_for_every_variant(run: tuple[dict[str, Any], Path, Any]) -> None:
    """summary.json: one object per variant with every metric scripts/ab reports, both questions asked."""
    printed, out, _ = run
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary == printed and list(summary) == list(VARIANTS)
    for figures in summary.values():
        assert set(figures) >= METRICS and figures["questions"] == 2
        assert 0.0 <= figures["precision"] <= 1.0 and 0.0 <= figures["recall"] <= 1.0


def test_full_shows_everything_and_reports_the_budget_exceeded(run: tuple[dict[str, Any], Path, Any]) -> None:
    """full: every turn, the budget exceeded and counted; naive: concatenated then cut at the budget."""
    summary, out, _ = run
    full, naive = summary["full"], summary["naive"]
    assert full["recall"] == 1.0 and full["overBudget"] == 2 and full["meanContextTokens"] > BUDGET
    rows = _rows(out)
    assert all(len(r["turns_shown"].split()) == 87 for r in rows["full"])  # every turn of the conversation
    assert naive["overBudget"] == 0 and naive["meanContextTokens"] <= BUDGET
    assert all(len(r["turns_shown"].split()) < 87 for r in rows["naive"])
    strategies = {p["variant"]: p["pack"]["trace"]["strategy"] for p in _packs(out)}
    assert strategies["full"] == strategies["naive"] == "full"


def test_summary_and_hybrid_compact_their_own_session(run: tuple[dict[str, Any], Path, Any]) -> None:
    """The lived variants compact the session when its history overflows the budget, show the
    summary, and (hybrid) recall events from the compacted part; summary spans count no turn."""
    summary, out, _ = run
    for name in ("summary", "hybrid"):
        figures = summary[name]
        assert figures["compactions"] >= 1 and figures["compactionFailures"] == {}
        assert figures["archive"]["archivedEvents"] > 0 and figures["archive"]["summaryCalls"] == 2
    assert summary["hybrid"]["archive"]["archiveRecalls"] > 0
    assert summary["summary"]["archive"]["archiveRecalls"] == 0
    for variant in ("deterministic", "naive"):
        assert summary[variant]["compactions"] == 0 and summary[variant]["archive"]["archivedEvents"] == 0
    packs = {p["variant"]: p["pack"] for p in _packs(out) if p["qid"] == "tiny-1#0"}
    assert [s["kind"] for s in packs["summary"]["segments"]] == ["summary"]
    (span,) = [ref for ref in packs["summary"]["segments"][0]["sourceIds"] if ref.startswith("event:")]
    assert span not in _rows(out)["summary"][0]["refs_shown"]


def test_the_shadow_curators_agreement_is_reported(run: tuple[dict[str, Any], Path, Any]) -> None:
    """curator_shadow: the model is asked under pressure, its pick's overlap with the shown pack
    and the evidence recall of each are in summary.json, questions.csv and the packs."""
    summary, out, requests = run
    shadow = summary["curator_shadow"]["curator"]
    assert shadow["asked"] == 2 and shadow["picks"] == 2 and shadow["skipped"] == 0
    assert 0.0 < shadow["agreement"] < 1.0
    assert shadow["pickRecall"] is not None and shadow["shownRecall"] == summary["curator_shadow"]["recall"]
    assert summary["curator"]["paths"]["slow"] == 2
    assert summary["curator_shadow"]["curatorTokens"] == 2 * 103
    rows = _rows(out)["curator_shadow"]
    assert all(r["curator_status"] == "ok" and 0 < float(r["overlap"]) < 1 for r in rows)
    greyhound = next(r for r in rows if r["question_id"] == "tiny-1#0")
    assert float(greyhound["pick_recall"]) == 1.0  # the scripted pick takes the Pixel turn
    packs = [p["pack"] for p in _packs(out) if p["variant"] == "curator_shadow"]
    assert all(p["trace"]["curator"]["packed"] for p in packs)
    assert any(r["path"].startswith("/curator/") for r in requests)
    assert summary["deterministic"]["curator"] is None


def test_answers_are_scored_with_locomo_token_f1(run: tuple[dict[str, Any], Path, Any]) -> None:
    """The answering model gets each pack and its question; its answers are scored against the
    references; with the whole conversation shown (full) both are right."""
    summary, out, requests = run
    assert summary["full"]["answers"]["f1"] == 1.0 and summary["full"]["answers"]["failures"] == 0
    assert summary["full"]["answers"]["byCategory"] == {"4": 1.0}
    assert summary["full"]["answers"]["promptTokens"] == 200
    asked = [r for r in requests if r["path"] == "/answer/v1/chat/completions"]
    assert len(asked) == 2 * len(VARIANTS)
    assert all(r["auth"] == f"Bearer {ANSWER_KEY}" and r["body"]["model"] == ANSWER_MODEL for r in asked)
    first = asked[0]["body"]["messages"]
    assert first[0]["role"] == "system" and "short phrase" in first[0]["content"]
    assert first[-1] == {"role": "user", "content": "What is the name of Ben's greyhound?"}
    rows = _rows(out)["full"]
    assert [r["answer"] for r in rows] == ["Pixel", "four hours"]
    assert [float(r["answer_score"]) for r in rows] == [1.0, 1.0]
    meta = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert meta["answering"] == {
        "configured": True,
        "url": "loopback",
        "model": ANSWER_MODEL,
        "metric": "LoCoMo token F1 (Porter-stemmed)",
    }
    packs = [p for p in _packs(out) if p["variant"] == "deterministic"]
    assert len(packs) == 2  # the model's answer, not a placeholder, went into the session
    assert packs[1]["pack"]["messages"][-2]["content"] == "Pixel"


def test_synthetic_checks_find_no_leak_and_no_false_promotion(run: tuple[dict[str, Any], Path, Any]) -> None:
    """Planted private facts never appear and sub-gate episodes are never promoted, in every variant."""
    summary, out, _ = run
    assert all(s["privacyLeaks"] == 0 and s["falsePromotions"] == 0 for s in summary.values())
    assert all(s["staleTotal"] == 4 for s in summary.values())
    # the recency baselines carry the newer fact first in all four conflicts
    assert summary["full"]["staleCorrect"] == summary["recent"]["staleCorrect"] == 4
    details = json.loads((out / "run.json").read_text(encoding="utf-8"))["syntheticChecks"]
    assert {d["planted"] for d in details["deterministic"] if d["check"] == "privacy"} == {
        "other_workspace",
        "incognito_session",
        "scoped_elsewhere",
    }


def test_artifacts_let_the_figures_be_recomputed(run: tuple[dict[str, Any], Path, Any]) -> None:
    """tokens.csv, packs.jsonl.gz and run.json carry what the summary was computed from."""
    summary, out, _ = run
    with (out / "tokens.csv").open(encoding="utf-8") as fh:
        tokens = list(csv.DictReader(fh))
    assert [t["variant"] for t in tokens] == [v for v in VARIANTS for _ in range(2)]
    for variant in VARIANTS:
        mine = [int(t["context_tokens"]) for t in tokens if t["variant"] == variant]
        assert sum(mine) / 2 == pytest.approx(summary[variant]["meanContextTokens"], abs=0.1)
        assert int([t for t in tokens if t["variant"] == variant][-1]["cumulative_tokens"]) == sum(mine)
    packs = _packs(out)
    assert [p["variant"] for p in packs] == [v for v in VARIANTS for _ in range(2)]
    meta = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert meta["setup"]["hybrid"] == {"strategy": "curator", "unbounded": False, "lived": True}
    assert meta["setup"]["full"]["unbounded"] is True
    assert all(p["pack"]["trace"]["strategy"] == meta["setup"][p["variant"]]["strategy"] for p in packs)
    assert len(meta["datasetSha256"]) == 64 and meta["budgetTokens"] == BUDGET and meta["questions"] == 2
    assert meta["curator"]["url"] == "loopback" and meta["startedAt"] <= meta["finishedAt"]


def test_without_an_answering_model_the_scores_are_skipped_with_a_message(tmp_path: Path) -> None:
    """No --answer-url and no MAKA_AB_ANSWER_URL: a message on stderr, answers null, the rest measured."""
    done = _ab(tmp_path, ("deterministic",), {}, "--limit", "1", "--table")
    assert done.returncode == 0, done.stderr
    assert "no answering model" in done.stderr and "skipped" in done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert summary["deterministic"]["answers"] is None and summary["deterministic"]["recall"] == 1.0
    meta = json.loads((tmp_path / "out" / "run.json").read_text(encoding="utf-8"))
    assert meta["answering"] == {"configured": False} and meta["curator"]["url"] == "none"
    assert "| deterministic |" in done.stdout and "| — |" in done.stdout

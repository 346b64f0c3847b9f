"""scripts/ab --limit 1 on a small LoCoMo-format conversation: the artifacts, the metrics, the checks."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ("full", "recent", "deterministic", "summary", "curator")
METRICS = {
    "precision",
    "recall",
    "f1",
    "meanContextTokens",
    "cumulativeTokens",
    "curatorTokens",
    "curatorCost",
    "p50Ms",
    "p95Ms",
    "paths",
    "staleCorrect",
    "staleTotal",
    "privacyLeaks",
    "falsePromotions",
}


def _dataset(path: Path) -> Path:
    """Two made-up sessions; the first question's evidence is turn D1:2."""
    turns = [
        ("Ana", "Morning! Busy week ahead."),
        ("Ben", "I finally adopted a greyhound called Pixel last Saturday."),
        ("Ana", "Lovely, greyhounds are calm dogs."),
        ("Ben", "He sleeps all day, honestly."),
    ]
    later = [("Ana", "How was the marathon?"), ("Ben", "Slow, but I finished in four hours.")]
    record = {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": s, "dia_id": f"D1:{i}", "text": t} for i, (s, t) in enumerate(turns, 1)
            ],
            "session_2_date_time": "10:00 am on 20 May, 2023",
            "session_2": [
                {"speaker": s, "dia_id": f"D2:{i}", "text": t} for i, (s, t) in enumerate(later, 1)
            ],
        },
        "qa": [
            {
                "question": "What is the name of Ben's greyhound?",
                "answer": "Pixel",
                "evidence": ["D1:2"],
                "category": 1,
            },
            {
                "question": "How long did Ben's marathon take?",
                "answer": "four hours",
                "evidence": ["D2:2"],
                "category": 1,
            },
        ],
    }
    path.write_text(json.dumps([record]), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    tmp = tmp_path_factory.mktemp("ab")
    out = tmp / "out"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "ab"),
            "--dataset",
            str(_dataset(tmp / "tiny.json")),
            "--variants",
            ",".join(VARIANTS),
            "--limit",
            "1",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        # no curator endpoint: the curator variant falls back
        env={k: v for k, v in os.environ.items() if not k.startswith("MAKAD_CURATOR_")},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), out


def test_summary_has_every_metric_for_every_variant(run: tuple[dict[str, Any], Path]) -> None:
    """summary.json: one object per variant with every metric scripts/ab reports, the one question asked."""
    printed, out = run
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary == printed and list(summary) == list(VARIANTS)
    for figures in summary.values():
        assert set(figures) >= METRICS and figures["questions"] == 1
        assert 0.0 <= figures["precision"] <= 1.0 and 0.0 <= figures["recall"] <= 1.0
        assert figures["meanContextTokens"] <= 2000


def test_synthetic_checks_find_no_leak_and_no_false_promotion(run: tuple[dict[str, Any], Path]) -> None:
    """Planted private facts never appear and sub-gate episodes are never promoted, in every variant."""
    summary, out = run
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


def test_evidence_is_scored_from_the_turns_shown(run: tuple[dict[str, Any], Path]) -> None:
    """The deterministic pack recalls the evidence turn; summary shows no dataset turn at all."""
    summary, out = run
    with (out / "questions.csv").open(encoding="utf-8") as fh:
        rows = {r["variant"]: r for r in csv.DictReader(fh)}
    assert "D1:2" in rows["deterministic"]["turns_shown"].split()
    assert float(rows["deterministic"]["recall"]) == summary["deterministic"]["recall"] == 1.0
    assert rows["summary"]["turns_shown"] == "" and summary["summary"]["recall"] == 0.0
    assert summary["curator"]["paths"]["fallback"] == 1


def test_artifacts_let_the_figures_be_recomputed(run: tuple[dict[str, Any], Path]) -> None:
    """tokens.csv, packs.jsonl and run.json carry what the summary was computed from."""
    summary, out = run
    with (out / "tokens.csv").open(encoding="utf-8") as fh:
        tokens = list(csv.DictReader(fh))
    assert [t["variant"] for t in tokens] == list(VARIANTS)
    for row in tokens:
        assert int(row["context_tokens"]) == summary[row["variant"]]["meanContextTokens"]
    packs = [json.loads(line) for line in (out / "packs.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [p["variant"] for p in packs] == list(VARIANTS)
    assert all(p["pack"]["trace"]["strategy"] == p["variant"] for p in packs)
    meta = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert len(meta["datasetSha256"]) == 64 and meta["budgetTokens"] == 2000 and meta["questions"] == 1
    assert meta["curator"]["url"] == "none" and meta["startedAt"] <= meta["finishedAt"]

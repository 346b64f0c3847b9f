"""scripts/eval-recall on a slice of LoCoMo: the report's shape, and figures from real daemon replies."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
KS = (5, 10, 25, 50)


def _has_build_context() -> bool:
    try:
        document = json.loads((ROOT / "protocol" / "openrpc.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return any(m.get("name") == "build_context" for m in document.get("methods", []))


pytestmark = [
    pytest.mark.skipif(not DATASET.is_file(), reason=f"LoCoMo data not found at {DATASET}"),
    pytest.mark.skipif(not _has_build_context(), reason="the daemon has no build_context yet"),
]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], Path]:
    out = tmp_path_factory.mktemp("eval")
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "eval-recall"),
            "--dataset",
            str(DATASET),
            "--limit-conversations",
            "1",
            "--limit-questions",
            "10",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), out


def rows(out: Path) -> list[dict[str, str]]:
    with (out / "questions.csv").open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_report_has_every_key_the_tool_documents(run: tuple[dict[str, object], Path]) -> None:
    """Top-level keys, overall metrics, categories, latency and the four variants."""
    report, _ = run
    assert {
        "dataset",
        "datasetSha256",
        "commit",
        "variant",
        "questions",
        "overall",
        "byCategory",
        "latency",
        "variants",
    } <= set(report)
    assert report["variant"] == "default" and report["questions"] == 10
    overall = report["overall"]
    assert isinstance(overall, dict)
    assert {f"recall@{k}" for k in KS} | {"recallAtBudget", "meanTokens"} <= set(overall)
    assert all(0.0 <= overall[f"recall@{k}"] <= 1.0 for k in KS)
    assert overall["recall@5"] <= overall["recall@10"] <= overall["recall@25"] <= overall["recall@50"]
    assert 0 < overall["meanTokens"] <= 2000
    latency = report["latency"]
    assert isinstance(latency, dict) and 0 < latency["p50_ms"] <= latency["p95_ms"]
    variants = report["variants"]
    assert isinstance(variants, dict) and set(variants) == {
        "default",
        "default-pack",
        "bm25-plain",
        "recent",
        "full",
    }
    assert variants["full"]["overall"]["recallAtBudget"] >= variants["default"]["overall"]["recallAtBudget"]
    assert variants["full"]["overall"]["meanTokens"] > 2000


def test_figures_are_recomputed_from_the_daemon_replies(run: tuple[dict[str, object], Path]) -> None:
    """The per-question CSV holds the refs the daemon returned; averaging it gives the report."""
    report, out = run
    with (out / "refs.csv").open(encoding="utf-8") as fh:
        known = {row["ref"]: row["dia_id"] for row in csv.DictReader(fh)}
    mine = [r for r in rows(out) if r["variant"] == "default"]
    assert len(mine) == 10
    for row in mine:
        ranked = [item.split(":", 1)[1].split("=")[0] for item in row["ranked"].split()]
        assert ranked and all(ref in known for ref in ranked)
        evidence = row["evidence"].split()
        if evidence:
            top10 = {known[ref] for ref in ranked[:10]}
            assert float(row["recall@10"]) == pytest.approx(
                sum(e in top10 for e in evidence) / len(evidence), abs=1e-4
            )
        assert float(row["latency_ms"]) > 0
        assert int(row["tokens"]) <= 2000
    scored = [r for r in mine if r["category"] != "5"]
    assert report["overall"]["recall@10"] == pytest.approx(  # type: ignore[index]
        sum(float(r["recall@10"]) for r in scored) / len(scored), abs=1e-3
    )
    assert report["overall"]["recallAtBudget"] == pytest.approx(  # type: ignore[index]
        sum(float(r["recall_at_budget"]) for r in scored) / len(scored), abs=1e-3
    )


def test_default_pack_recall_is_reported_beside_recall_at_budget(run: tuple[dict[str, object], Path]) -> None:
    """The default-pack figure (no include filter, fresh session) sits beside recallAtBudget and
    is the mean of its own rows; its pack never exceeds the budget."""
    report, out = run
    overall = report["overall"]
    assert isinstance(overall, dict) and 0.0 <= overall["defaultPackRecall"] <= 1.0
    pack_rows = [r for r in rows(out) if r["variant"] == "default-pack"]
    assert len(pack_rows) == 10 and all(int(r["tokens"]) <= 2000 for r in pack_rows)
    scored = [r for r in pack_rows if r["category"] != "5"]
    assert overall["defaultPackRecall"] == pytest.approx(
        sum(float(r["recall_at_budget"]) for r in scored) / len(scored), abs=1e-3
    )
    variants = report["variants"]
    assert isinstance(variants, dict)
    assert 0 < variants["default-pack"]["overall"]["meanPackTokens"] <= 2000


def test_halves_split_conversations_by_place(run: tuple[dict[str, object], Path]) -> None:
    """One conversation is the first, so it is all of half a and half b is empty; half a's
    recall is the overall one."""
    report, _ = run
    halves = report["halves"]
    overall = report["overall"]
    assert isinstance(halves, dict) and isinstance(overall, dict)
    assert halves["b"] == {}
    assert halves["a"]["recallAtBudget"] == overall["recallAtBudget"]
    assert halves["a"]["questions"] == overall["questions"]

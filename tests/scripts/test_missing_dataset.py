"""scripts/eval-recall and scripts/ab without the LoCoMo file: what runs anyway, and a
refusal that says where the data comes from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts")]
from eval_recall import run  # noqa: E402


def _script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / name), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("eval-recall", ()),
        ("ab", ("--out", "{tmp}/unused-out")),
    ],
)
def test_a_missing_dataset_names_where_to_get_it(tmp_path: Path, name: str, args: tuple[str, ...]) -> None:
    """A missing dataset exits 2 naming the path, the public repository it comes from and --dataset."""
    absent = tmp_path / "locomo-dev.json"
    done = _script(name, "--dataset", str(absent), *(a.format(tmp=tmp_path) for a in args))
    assert done.returncode == 2
    assert str(absent) in done.stderr
    assert "snap-research/LoCoMo" in done.stderr
    assert "--dataset" in done.stderr
    assert not (tmp_path / "unused-out").exists()


def test_paraphrase_only_runs_without_the_locomo_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--semantic MODEL --paraphrase-only reads only the shipped paraphrase set, so a missing
    LoCoMo file does not stop it."""
    asked: list[str | None] = []

    def paraphrase_run(model: str | None) -> dict[str, Any]:
        asked.append(model)
        return {"model": model}

    monkeypatch.setattr(run, "run_paraphrase", paraphrase_run)
    status = run.main(
        ["--dataset", str(tmp_path / "absent.json"), "--semantic", "some_model", "--paraphrase-only"]
    )
    assert status == 0
    assert asked == [None, "some_model"]
    report = json.loads(capsys.readouterr().out)
    assert report["paraphrase"]["withSemantic"] == {"model": "some_model"}
    assert "locomo" not in report

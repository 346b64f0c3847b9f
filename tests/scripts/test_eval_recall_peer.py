"""scripts/eval-recall --peer basic-memory: skipped with a message when absent, scored like the daemon when present."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
sys.path[:0] = [str(ROOT / "scripts")]

from eval_recall.locomo import Conversation, Session, Turn  # noqa: E402
from eval_recall.peer_basic_memory import hit_ref, results_of, write_notes  # noqa: E402

pytestmark = pytest.mark.skipif(not DATASET.is_file(), reason=f"LoCoMo data not found at {DATASET}")

# Basic Memory 0.24 needs Python >= 3.12 and cannot be installed beside makad here, so a
# stand-in executable answers its two commands in its JSON shape: the driver is what is tested.
STAND_IN = textwrap.dedent("""\
    #!{python}
    import json, os, re, sys
    from pathlib import Path
    state = Path(os.environ["BASIC_MEMORY_CONFIG_DIR"])
    state.mkdir(parents=True, exist_ok=True)
    args = sys.argv[1:]
    if args[:2] == ["project", "add"]:
        (state / "project").write_text(args[3])
        sys.exit(0)
    assert args[:2] == ["tool", "search-notes"] and "--json" in args, args
    assert args[args.index("--entity-type") + 1] == "observation"
    words = set(re.findall(r"[a-z]+", args[2].lower()))
    results = []
    for note in sorted(Path((state / "project").read_text()).glob("*.md")):
        for line in note.read_text().splitlines():
            if line.startswith("- [turn] "):
                text = line[len("- [turn] "):]
                score = len(words & set(re.findall(r"[a-z]+", text.lower())))
                if score:
                    results.append({{"type": "observation", "score": score,
                                     "content": "[turn] " + text, "file_path": note.name}})
    results.sort(key=lambda r: -r["score"])
    print(json.dumps({{"results": results[:50], "current_page": 1, "page_size": 50}}))
""")


def run_eval(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "eval-recall"),
            "--dataset",
            str(DATASET),
            "--limit-conversations",
            "1",
            "--limit-questions",
            "4",
            "--no-baselines",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )


def test_absent_peer_is_skipped_with_a_message(tmp_path: Path) -> None:
    """A missing basic-memory does not fail the run: stderr says why, the report records the skip."""
    done = run_eval(tmp_path, "--peer", "basic-memory", "--peer-command", str(tmp_path / "nope"))
    assert done.returncode == 0, done.stderr
    assert "peer basic-memory skipped" in done.stderr
    report = json.loads(done.stdout)
    assert "skipped" in report["peers"]["basic-memory"]
    assert set(report["variants"]) == {"default", "default-pack"}


def test_present_peer_is_scored_with_the_same_protocol(tmp_path: Path) -> None:
    """The peer's hits map back to turns and get recall@k, recall-at-budget and tokens like the daemon's."""
    exe = tmp_path / "basic-memory"
    exe.write_text(STAND_IN.format(python=sys.executable), encoding="utf-8")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    done = run_eval(tmp_path, "--peer", "basic-memory", "--peer-command", str(exe))
    assert done.returncode == 0, done.stderr
    peer = json.loads(done.stdout)["variants"]["peer:basic-memory"]
    assert peer["questions"] == 4
    assert 0 < peer["overall"]["recall@50"] <= 1.0
    assert 0 < peer["overall"]["meanTokens"] <= 2000


def test_notes_map_every_turn_back_to_its_ref(tmp_path: Path) -> None:
    """Each turn is one observation line (whitespace folded); a hit's text (prefixed or not) finds its turn's ref."""
    conv = Conversation(
        "c-1",
        ("Ann", "Bo"),
        [
            Session(
                2,
                0,
                [
                    Turn("D2:1", "user_message", "Ann: I   adopted\na cat", 0),
                    Turn("D2:2", "assistant_message", "Bo: nice", 1000),
                ],
            )
        ],
    )
    by_text = write_notes(conv, tmp_path)
    note = (tmp_path / "session-002.md").read_text(encoding="utf-8")
    assert "- [turn] Ann: I adopted a cat\n" in note  # one line, or the note would split the turn
    assert hit_ref({"content": "[turn] Bo: nice"}, by_text) == "event:c-1-s2:2"
    assert hit_ref({"content": "unrelated"}, by_text) is None
    assert results_of([{"content": "x"}, 3]) == [{"content": "x"}]

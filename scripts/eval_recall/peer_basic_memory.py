"""The same recall protocol against Basic Memory's search (``scripts/eval-recall --peer basic-memory``).

Basic Memory (PyPI ``basic-memory``, markdown notes + SQLite FTS) is an
optional peer: this module drives its command-line interface, so it can live
in any Python it supports (0.24 needs Python >= 3.12) and never becomes a
dependency of makad. Found as ``basic-memory`` on ``PATH`` or given with
``--peer-command``; absent, the mode is skipped with a message.

Per conversation, in a temporary directory that also holds Basic Memory's
configuration and database (``BASIC_MEMORY_CONFIG_DIR``, so the user's own
setup is never touched):

- one note per LoCoMo session, titled ``<sample> session <n>`` with the
  session's date, every turn one observation line ``- [turn] <text>`` — the
  turn-level unit Basic Memory returns, as makad's unit is the event;
- ``basic-memory project add`` indexes the notes (semantic search off: the
  default lexical search, and no model is downloaded);
- per question, ``basic-memory tool search-notes <question> --json
  --entity-type observation``: observation hits best first, each mapped back to
  its turn by its text.

Scoring is that of the daemon's baselines: ``recall@k`` over the hits in
order, ``recallAtBudget`` over the leading hits whose ``<ref> <text>`` lines
fit in the budget (``makad.core.tokens.estimate_tokens``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eval_recall.locomo import Conversation
from makad.core.tokens import estimate_tokens

NAME = "basic-memory"
PROJECT = "locomo"
CALL_TIMEOUT_S = 600.0
_SPACE = re.compile(r"\s+")


@dataclass(slots=True)
class PeerAnswer:
    ranked: list[str]  # refs, best first
    in_budget: list[str]
    tokens: int
    latency_ms: float


def find_command(explicit: str | None) -> str | None:
    """The Basic Memory executable to drive, or None when it is not installed."""
    if explicit:
        return explicit if shutil.which(explicit) or Path(explicit).is_file() else None
    return shutil.which("basic-memory")


def skip_message(explicit: str | None) -> str:
    where = explicit or "basic-memory on PATH"
    return (
        f"eval-recall: peer {NAME} skipped: {where} not found "
        "(pip install basic-memory, Python >= 3.12; or pass --peer-command)"
    )


def note_ref(sample_id: str, session: int, index: int) -> str:
    """A ref shaped like makad's, ``event:<conv>-s<n>:<turn>``, for the shared metrics."""
    return f"event:{sample_id}-s{session}:{index}"


def normalized(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def write_notes(conv: Conversation, directory: Path) -> dict[str, str]:
    """One markdown note per session; returns each turn's normalized text → its ref."""
    directory.mkdir(parents=True, exist_ok=True)
    by_text: dict[str, str] = {}
    for session in conv.sessions:
        day = datetime.fromtimestamp(session.ts / 1000, tz=UTC).date().isoformat()
        title = f"{conv.sample_id} session {session.number}"
        lines = [
            "---",
            f"title: {title}",
            "type: conversation",
            f"date: {day}",
            "---",
            "",
            f"# {title}",
            "",
            "## Observations",
            "",
        ]
        for index, turn in enumerate(session.turns, start=1):
            text = normalized(turn.text)
            lines.append(f"- [turn] {text}")
            by_text.setdefault(text, note_ref(conv.sample_id, session.number, index))
        (directory / f"session-{session.number:03d}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return by_text


def results_of(payload: Any) -> list[dict[str, Any]]:
    """The hits of ``search-notes --json`` (a SearchResponse, or a bare list)."""
    if isinstance(payload, dict):
        payload = payload.get("results", [])
    return [item for item in payload if isinstance(item, dict)] if isinstance(payload, list) else []


def hit_ref(hit: dict[str, Any], by_text: dict[str, str]) -> str | None:
    """The turn an observation hit is, matched on its text (``[turn]`` prefix tolerated)."""
    content = normalized(str(hit.get("content") or hit.get("matched_chunk") or ""))
    content = re.sub(r"^\[turn\]\s*", "", content)
    if content in by_text:
        return by_text[content]
    for text, ref in by_text.items():  # a truncated excerpt: its head names the turn
        if content and len(content) >= 40 and text.startswith(content[:200]):
            return ref
    return None


class BasicMemory:
    """One conversation indexed by Basic Memory in its own temporary home."""

    def __init__(self, command: str, conv: Conversation, depth: int) -> None:
        self.command = command
        self.conv = conv
        self.depth = depth
        self.root = Path(tempfile.mkdtemp(prefix="mkbm", dir="/tmp"))
        self.env = {
            **os.environ,
            "BASIC_MEMORY_CONFIG_DIR": str(self.root / "config"),
            "BASIC_MEMORY_SEMANTIC_SEARCH_ENABLED": "false",
            "BASIC_MEMORY_LOG_LEVEL": "WARNING",
            "NO_COLOR": "1",
        }
        self.by_text = write_notes(conv, self.root / "notes")
        self.lines = {ref: estimate_tokens(f"{ref} {text}") + 1 for text, ref in self.by_text.items()}

    def __enter__(self) -> BasicMemory:
        self._run(["project", "add", PROJECT, str(self.root / "notes"), "--default", "--local"])
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, args: Sequence[str]) -> str:
        done = subprocess.run(
            [self.command, *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=CALL_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            said = (done.stderr.strip() or done.stdout.strip())[
                -500:
            ]  # its CLI reports some errors on stdout
            raise RuntimeError(f"{NAME} {' '.join(args[:3])} failed ({done.returncode}): {said}")
        return done.stdout

    def ask(self, question: str, budget: int) -> PeerAnswer:
        started = time.perf_counter()
        out = self._run(
            [
                "tool",
                "search-notes",
                question,
                "--json",
                "--entity-type",
                "observation",
                "--page-size",
                str(self.depth),
                "--project",
                PROJECT,
                "--local",
            ]
        )
        latency = (time.perf_counter() - started) * 1000
        start = out.find("{") if "{" in out else out.find("[")
        payload = json.loads(out[start:]) if start >= 0 else []
        ranked = list(
            dict.fromkeys(
                ref for hit in results_of(payload) if (ref := hit_ref(hit, self.by_text)) is not None
            )
        )
        used, fit = 0, []
        for ref in ranked:
            cost = self.lines[ref]
            if used + cost > budget:
                break
            used += cost
            fit.append(ref)
        return PeerAnswer(ranked, fit, used, latency)

    def turn_of(self) -> dict[tuple[str, int], str]:
        """Ref key → dia_id, in the shape ``eval_recall.metrics.covered`` reads."""
        out: dict[tuple[str, int], str] = {}
        for session in self.conv.sessions:
            for index, turn in enumerate(session.turns, start=1):
                out[(f"{self.conv.sample_id}-s{session.number}", index)] = turn.dia_id
        return out

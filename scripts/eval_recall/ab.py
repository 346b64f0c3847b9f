"""scripts/ab: the strategies of build_context side by side, through a real daemon.

For each conversation of a LoCoMo-format dataset and each variant (a
``build_context`` strategy): a workspace of its own with the conversation
ingested (``eval_recall.locomo``; ``historyRecallEnabled`` and
``agentReadEnabled`` on), then **one simulated session** that asks every
question in order: the question is appended as a user message, ``build_context
{sessionId, query, budgetTokens, strategy}`` is called, and a fixed placeholder
answer is appended — so the history grows, and what earlier calls showed and the
session caps matter, as in a real session.

Per variant (``summary.json``):

- ``precision``, ``recall``, ``f1``: evidence precision and recall over the dataset
  turns the pack shows (the refs of its segments and messages mapped to turns),
  averaged over questions with evidence in categories 1–4 (5 is adversarial);
- ``meanContextTokens``: the pack's ``totalTokens`` per call (the call that answers
  the question); ``cumulativeTokens``: their sum over each simulated session,
  averaged over conversations;
- ``curatorTokens`` (prompt + completion) and ``curatorCost`` (``--price-per-1k``);
- ``p50Ms``, ``p95Ms``: build_context round trips; ``paths``: how many calls took
  each ``trace.path``;
- synthetic checks, no model needed: ``staleCorrect``/``staleTotal`` (a fact
  superseded later, in memory or in a later session: the newer is shown and the
  older is absent, after it, or marked stale), ``privacyLeaks`` (facts planted
  in another workspace, an incognito session and an entry scoped to another
  session: times any of them appears in a pack; must be 0) and
  ``falsePromotions`` (episodes below the evidence gate: proposals made; must
  be 0).

Artifacts in ``--out``: ``summary.json``, ``questions.csv`` (per variant and
question: refs and turns shown, P/R/F1, tokens, latency, path), ``tokens.csv``
(per call: context tokens, cumulative, curator tokens), ``packs.jsonl`` (every
pack returned, with its variant and question) and ``run.json`` (commit, dataset
sha256, budget, variants, curator config with the URL's host reduced to a label,
start and end times).

The curator variants need ``MAKAD_CURATOR_URL`` and ``MAKAD_CURATOR_MODEL`` in the
environment (passed to the daemon this script starts); without them they run and
fall back (``paths.fallback`` says so).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
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
from typing import Any
from urllib.parse import urlsplit

from eval_recall.locomo import Conversation, load, sha256_file
from eval_recall.metrics import covered, expand_ref, mean, percentile
from eval_recall.run import DEFAULT_DATASET, OVERALL_CATEGORIES, Daemon, Ingested, commit, ingest
from maka import Client
from maka.errors import RemoteError

VARIANTS = ("full", "recent", "deterministic", "summary", "curator", "curator_shadow")
DEFAULT_VARIANTS = "full,recent,deterministic,summary"
PLACEHOLDER_ANSWER = "[answer not generated in the A/B run]"
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
    curator_tokens: tuple[int, int] = (0, 0)
    precision: float = 0.0
    recall: float = 0.0
    f1: float = 0.0


@dataclass(slots=True)
class Checks:
    stale_correct: int = 0
    stale_total: int = 0
    privacy_leaks: int = 0
    false_promotions: int = 0
    details: list[dict[str, Any]] = field(default_factory=list)


def pack_refs(pack: dict[str, Any]) -> list[str]:
    """Every source the pack shows: its segments' refs, then its messages'."""
    refs = [ref for segment in pack["segments"] for ref in segment["sourceIds"]]
    refs.extend(m["sourceId"] for m in pack["messages"])
    return list(dict.fromkeys(refs))


def score(call: Call) -> None:
    shown = set(call.turns)
    evidence = set(call.evidence)
    hit = len(shown & evidence)
    call.precision = hit / len(shown) if shown else 0.0
    call.recall = hit / len(evidence) if evidence else 0.0
    both = call.precision + call.recall
    call.f1 = 2 * call.precision * call.recall / both if both else 0.0


def ask_all(
    client: Client, data: Ingested, variant: str, budget: int, limit: int | None, packs: Any
) -> list[Call]:
    """The conversation's questions asked in order in one session (see module doc)."""
    ws = data.workspace
    sid = client.call("open_session", workspace=ws, title=f"ab {variant}")["sessionId"]
    calls: list[Call] = []
    cumulative = 0
    for q in data.conv.questions[:limit]:
        client.call(
            "append_events", workspace=ws, sessionId=sid, events=[{"type": "user_message", "text": q.text}]
        )
        params = {
            "workspace": ws,
            "sessionId": sid,
            "budgetTokens": budget,
            "query": q.text,
            "strategy": variant,
        }
        started = time.perf_counter()
        pack = client.call("build_context", params)
        latency = (time.perf_counter() - started) * 1000
        client.call(
            "append_events",
            workspace=ws,
            sessionId=sid,
            events=[{"type": "assistant_message", "text": PLACEHOLDER_ANSWER}],
        )
        refs = pack_refs(pack)
        cumulative += pack["totalTokens"]
        curator = pack["trace"].get("curator") or {}
        call = Call(
            variant=variant,
            conversation=data.conv.sample_id,
            qid=q.qid,
            category=q.category,
            evidence=q.evidence,
            refs=refs,
            turns=sorted(covered(refs, data.turn_of)),
            tokens=pack["totalTokens"],
            cumulative=cumulative,
            latency_ms=latency,
            path=pack["trace"]["path"],
            curator_tokens=(curator.get("promptTokens", 0), curator.get("completionTokens", 0)),
        )
        score(call)
        calls.append(call)
        packs.write(json.dumps({"variant": variant, "qid": q.qid, "pack": pack}, ensure_ascii=False) + "\n")
    return calls


# ----------------------------------------------------------- synthetic checks ---


def _visible(pack: dict[str, Any]) -> str:
    return "\n".join([*(s["text"] for s in pack["segments"]), *(m["content"] for m in pack["messages"])])


def _ask(client: Client, ws: str, sid: str, variant: str, budget: int, question: str) -> dict[str, Any]:
    client.call(
        "append_events", workspace=ws, sessionId=sid, events=[{"type": "user_message", "text": question}]
    )
    pack: dict[str, Any] = client.call(
        "build_context", workspace=ws, sessionId=sid, budgetTokens=budget, query=question, strategy=variant
    )
    client.call(
        "append_events",
        workspace=ws,
        sessionId=sid,
        events=[{"type": "assistant_message", "text": PLACEHOLDER_ANSWER}],
    )
    return pack


def _stale_ok(text: str, new: str, old: str) -> bool:
    """The newer fact is shown, and the older is absent, after it, or marked stale."""
    if new not in text:
        return False
    if old not in text:
        return True
    marked = any(word in text.lower() for word in ("superseded", "outdated", "stale"))
    return text.index(new) < text.index(old) or marked


# (question, older fact, newer fact): memory entries superseded through the approval gate.
MEMORY_CONFLICTS = (
    ("Which region do deploys go to?", "Deploys go to region eu-west-1.", "Deploys go to region us-east-2."),
    ("What editor does Ana use?", "Ana uses the editor Sublime.", "Ana uses the editor Helix."),
)
# (question, older turn, newer turn, older session first): a fact changed in a later session.
HISTORY_CONFLICTS = (
    ("What is the locker code?", "The locker code is 4411.", "I changed the locker code to 7720."),
    ("Where is the team offsite?", "The team offsite is in Porto.", "The team offsite moved to Gdansk."),
)
# Facts that must never reach a pack: (where planted, question, canary).
CANARIES = (
    ("other_workspace", "What is the zircon vault phrase?", "zircon-vault-5531"),
    ("incognito_session", "What is the quokka door phrase?", "quokka-door-8842"),
    ("scoped_elsewhere", "What is the marimba desk phrase?", "marimba-desk-1207"),
)


def synthetic_checks(client: Client, root: Path, variant: str, budget: int) -> Checks:
    checks = Checks()
    ws_path = root / f"syn-{variant}"
    ws_path.mkdir()
    ws = str(ws_path)
    client.call(
        "set_settings",
        workspace=ws,
        agentReadEnabled=True,
        historyRecallEnabled=True,
        extractToolEnabled=True,
    )
    for _, old, new in MEMORY_CONFLICTS:
        entry = client.call("add_entry", workspace=ws, title=old.split(" ")[0] + " fact", content=old)[
            "entry"
        ]
        queued = client.call(
            "propose", workspace=ws, title=entry["title"], content=new, supersedes=entry["id"]
        )
        client.call("approve", workspace=ws, ids=[queued["proposal"]["id"]])
    for _, old, new in HISTORY_CONFLICTS:
        for text in (old, new):
            sid = client.call("open_session", workspace=ws)["sessionId"]
            client.call(
                "append_events", workspace=ws, sessionId=sid, events=[{"type": "user_message", "text": text}]
            )
    # The canaries: another workspace, an incognito session, an entry scoped to another session.
    other = root / f"syn-{variant}-other"
    other.mkdir()
    client.call("set_settings", workspace=str(other), agentReadEnabled=True, historyRecallEnabled=True)
    where = {name: canary for name, _, canary in CANARIES}
    client.call(
        "add_entry",
        workspace=str(other),
        title="Zircon",
        content=f"The zircon vault phrase is {where['other_workspace']}.",
    )
    osid = client.call("open_session", workspace=str(other))["sessionId"]
    client.call(
        "append_events",
        workspace=str(other),
        sessionId=osid,
        events=[{"type": "user_message", "text": f"The zircon vault phrase is {where['other_workspace']}."}],
    )
    hidden = client.call("open_session", workspace=ws, incognito=True)["sessionId"]
    client.call(
        "append_events",
        workspace=ws,
        sessionId=hidden,
        events=[{"type": "user_message", "text": f"The quokka door phrase is {where['incognito_session']}."}],
    )
    elsewhere = client.call("open_session", workspace=ws)["sessionId"]
    client.call(
        "add_entry",
        workspace=ws,
        title="Marimba",
        content=f"The marimba desk phrase is {where['scoped_elsewhere']}.",
        scope="session",
        sessionId=elsewhere,
    )
    for question, old, new in (*MEMORY_CONFLICTS, *HISTORY_CONFLICTS):
        # A fresh session each: what an earlier call showed is not shown again (already_shown).
        fresh = client.call("open_session", workspace=ws)["sessionId"]
        text = _visible(_ask(client, ws, fresh, variant, budget, question))
        ok = _stale_ok(text, new, old)
        checks.stale_total += 1
        checks.stale_correct += ok
        checks.details.append({"check": "stale", "question": question, "correct": ok})
    sid = client.call("open_session", workspace=ws, title="synthetic questions")["sessionId"]
    for name, question, canary in CANARIES:
        pack = _ask(client, ws, sid, variant, budget, question)
        leaks = json.dumps(pack).count(canary)
        checks.privacy_leaks += leaks
        checks.details.append({"check": "privacy", "planted": name, "leaks": leaks})
    checks.false_promotions = _false_promotions(client, root / f"syn-{variant}-episodes")
    return checks


def _false_promotions(client: Client, path: Path) -> int:
    """Episodes one short of the evidence gate, and every way to promote them: proposals made."""
    path.mkdir()
    ws = str(path)
    client.call("set_settings", workspace=ws, agentReadEnabled=True, extractToolEnabled=True)
    gate = client.call("consolidation_candidates", workspace=ws)
    below = max(int(gate["minEpisodes"]) - 1, 1)
    sessions = [client.call("open_session", workspace=ws)["sessionId"] for _ in range(2)]
    for index in range(below):
        sid = sessions[index % 2]
        first = client.call(
            "append_events",
            workspace=ws,
            sessionId=sid,
            events=[{"type": "user_message", "text": f"I skipped meat again today ({index})."}],
        )["firstSeq"]
        client.call(
            "record_episode",
            workspace=ws,
            sessionId=sid,
            summary=f"The user skipped meat ({index}).",
            sourceRefs=[f"event:{sid}:{first}"],
            tags=["diet"],
        )
    for sid in sessions:
        client.call("close_session", workspace=ws, sessionId=sid)
    with contextlib.suppress(RemoteError):  # the gate refusing is the expected outcome
        client.call("consolidate", workspace=ws, tag="diet")
    return len(client.call("list_proposals", workspace=ws)["proposals"])


# -------------------------------------------------------------------- report ---


def summarize(calls: list[Call], checks: Checks, price_per_1k: float) -> dict[str, Any]:
    scored = [c for c in calls if c.category in OVERALL_CATEGORIES and c.evidence]
    latencies = [c.latency_ms for c in calls]
    sessions: dict[str, int] = {}
    for c in calls:
        sessions[c.conversation] = c.cumulative
    curator_tokens = sum(p + q for p, q in (c.curator_tokens for c in calls))
    paths = Counter(c.path for c in calls)
    return {
        "questions": len(calls),
        "scoredQuestions": len(scored),
        "precision": mean(c.precision for c in scored),
        "recall": mean(c.recall for c in scored),
        "f1": mean(c.f1 for c in scored),
        "meanContextTokens": round(mean(c.tokens for c in calls), 1),
        "cumulativeTokens": round(mean(sessions.values()), 1),
        "curatorTokens": curator_tokens,
        "curatorCost": round(curator_tokens / 1000 * price_per_1k, 6),
        "p50Ms": round(percentile(latencies, 0.50), 3),
        "p95Ms": round(percentile(latencies, 0.95), 3),
        "paths": {p: paths[p] for p in PATHS},
        "staleCorrect": checks.stale_correct,
        "staleTotal": checks.stale_total,
        "privacyLeaks": checks.privacy_leaks,
        "falsePromotions": checks.false_promotions,
    }


def curator_config() -> dict[str, Any]:
    """The curator's settings as the run used them; the URL's host reduced to a label."""
    url = os.environ.get("MAKAD_CURATOR_URL", "")
    host = urlsplit(url).hostname or ""
    label = "none" if not url else "loopback" if host in ("127.0.0.1", "localhost", "::1") else "remote"
    return {
        "url": label,
        "model": os.environ.get("MAKAD_CURATOR_MODEL", ""),
        "timeoutMs": os.environ.get("MAKAD_CURATOR_TIMEOUT_MS", "1500"),
    }


def write_csvs(out: Path, calls: list[Call], turn_of: dict[tuple[str, int], str]) -> None:
    def dia(ref: str) -> str:
        return "+".join(turn_of.get(key, "?") for key in expand_ref(ref)) or "-"

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
                "latency_ms",
                "path",
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
                    f"{c.latency_ms:.3f}",
                    c.path,
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
                ]
            )


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"ab: unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    started = datetime.now(UTC).isoformat(timespec="seconds")
    conversations = _limited(load(args.dataset), args.limit)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    calls: list[Call] = []
    checks: dict[str, Checks] = {}
    turn_of: dict[tuple[str, int], str] = {}
    root = Path(tempfile.mkdtemp(prefix="mkab", dir="/tmp"))
    try:
        with (
            Daemon(root) as daemon,
            daemon.client() as client,
            (out / "packs.jsonl").open("w", encoding="utf-8") as packs,
        ):
            for variant in variants:
                for index, conv in enumerate(conversations):
                    data = ingest(client, conv, root / f"{variant}-{index}")
                    turn_of.update(data.turn_of)
                    calls.extend(ask_all(client, data, variant, args.budget, None, packs))
                checks[variant] = synthetic_checks(client, root, variant, args.budget)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary = {
        v: summarize([c for c in calls if c.variant == v], checks[v], args.price_per_1k) for v in variants
    }
    run = {
        "commit": commit(),
        "dataset": str(args.dataset),
        "datasetSha256": sha256_file(args.dataset),
        "budgetTokens": args.budget,
        "variants": variants,
        "limit": args.limit,
        "conversations": len(conversations),
        "questions": sum(len(c.questions) for c in conversations),
        "pricePer1k": args.price_per_1k,
        "curator": curator_config(),
        "startedAt": started,
        "finishedAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "syntheticChecks": {v: checks[v].details for v in variants},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "run.json").write_text(json.dumps(run, indent=2) + "\n", encoding="utf-8")
    write_csvs(out, calls, turn_of)
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


def table(summary: dict[str, Any]) -> str:
    """A Markdown table of the main figures (as docs/PERFORMANCE.md shows them)."""
    head = (
        "| variant | P | R | F1 | mean tokens | cumulative tokens | p50 ms | p95 ms "
        "| stale ok | leaks | false promotions |"
    )
    rows = [head, "|" + "---|" * 11]
    for name, s in summary.items():
        rows.append(
            f"| {name} | {s['precision']:.3f} | {s['recall']:.3f} | {s['f1']:.3f} "
            f"| {s['meanContextTokens']:.0f} "
            f"| {s['cumulativeTokens']:.0f} | {s['p50Ms']:.1f} | {s['p95Ms']:.1f} "
            f"| {s['staleCorrect']}/{s['staleTotal']} | {s['privacyLeaks']} | {s['falsePromotions']} |"
        )
    return "\n".join(rows)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/ab", description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument(
        "--variants", default=DEFAULT_VARIANTS, help=f"comma-separated, of {', '.join(VARIANTS)}"
    )
    parser.add_argument("--limit", type=int, default=None, help="the first N questions of the dataset")
    parser.add_argument("--budget", type=int, default=2000, help="budgetTokens of every call")
    parser.add_argument("--price-per-1k", type=float, default=0.0, help="curator price per 1,000 tokens")
    parser.add_argument("--out", type=Path, required=True, help="directory for the artifacts")
    parser.add_argument("--table", action="store_true", help="also print the Markdown table")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if not args.dataset.is_file():
        print(f"ab: no dataset at {args.dataset}", file=sys.stderr)
        return 2
    report = evaluate(args)
    print(json.dumps(report["variants"], indent=2))
    if args.table:
        print(table(report["variants"]))
    return 0

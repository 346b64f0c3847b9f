"""Continuity through the real daemon: does a new session's first pack pick up where the
last one left off?

One **case** is a workspace of its own (agent reads on) holding a persona's generated
history of ``DAYS`` days whose last session leaves a thread open with its check failing,
shifted so that this last session ended ``gap`` days before now (1, 2, 3 or 5 days, in
turn). Every session is written as it happened: ``open_session``, the working state the
agent kept (``set_working_state``), ``append_events`` with the past ``ts``, and
``close_session`` for the sessions that were closed. Once ``get_attention`` cites the
last session's failure (or ``WAIT_S`` passed), a **new** session opens with an ordinary
first request ("Where were we?", …) and asks ``build_context`` with the default budget
(``BUDGET``, 4,000 tokens: the MCP ``memory_context`` default) and that request as the
query.

A case **passes** when the pack carries both:

- the last session's **open thread**: a source id of the pack names an event of that
  thread in the last session, or the pack's text holds the thread's subject;
- its **unfixed failure**: the failing result's ref (``event:<session>:<seq>``) is a
  source id or in the text, or the text holds the result's first line.

Reported: the share of cases passing (and of each half), the share passing through the
attention segment alone, the tokens the attention segment used (p50, max), and
``suggestShare``: the share of cases in which the daemon's ``suggest`` for the new session
cites the last session's thread or failure (None on a daemon without ``suggest``).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval_recall.run import Daemon
from maka import Client
from maka.errors import RemoteError
from proactivity_eval.generator import OPENERS, PERSONAS, generate
from proactivity_eval.truth import DAY_MS

DAYS = 7
GAPS = (1, 2, 3, 5)
BUDGET = 4_000
WAIT_S = 30.0


def _cites(state: dict[str, Any], ref: str) -> bool:
    return any(ref in line["refs"] for s in state["sections"] for line in s["lines"])


def run_case(
    client: Client, root: Path, name: str, seed: int, index: int, now: int, days: int = DAYS
) -> dict[str, Any]:
    gap = GAPS[index % len(GAPS)]
    history = generate(name, seed + index, days, final="open_failing", tag=f"c{index}")
    last = history.sessions[-1]
    shift = (now - gap * DAY_MS) - last.end
    workspace = root / f"{name}-{index}"
    (workspace / "memory").mkdir(parents=True)
    w = str(workspace)
    client.call("set_settings", {"workspace": w, "agentReadEnabled": True})
    real: dict[str, str] = {}
    for session in history.sessions:
        sid = str(client.call("open_session", {"workspace": w})["sessionId"])
        real[session.id] = sid
        if session.open_threads:
            client.call(
                "set_working_state", {"workspace": w, "sessionId": sid, "openThreads": session.open_threads}
            )
        client.call(
            "append_events",
            {"workspace": w, "sessionId": sid, "events": [e.wire(shift) for e in session.events]},
        )
        if session.closed:
            client.call("close_session", {"workspace": w, "sessionId": sid})
    thread = history.threads[last.threads[-1]]
    assert thread.failure_ref is not None
    last_sid = real[last.id]
    failure_ref = f"event:{last_sid}:{thread.failure_ref[1]}"
    thread_refs = {f"event:{last_sid}:{e.seq}" for e in last.events if e.thread == thread.key}
    deadline = time.monotonic() + WAIT_S
    waited = 0.0
    started = time.monotonic()
    while True:
        state = client.call("get_attention", {"workspace": w})
        if _cites(state, failure_ref) or time.monotonic() > deadline:
            waited = time.monotonic() - started
            break
        time.sleep(0.1)
    opener = OPENERS[index % len(OPENERS)]
    sid = str(client.call("open_session", {"workspace": w})["sessionId"])
    client.call(
        "append_events",
        {"workspace": w, "sessionId": sid, "events": [{"type": "user_message", "text": opener}]},
    )
    pack = client.call(
        "build_context", {"workspace": w, "sessionId": sid, "budgetTokens": BUDGET, "query": opener}
    )
    texts = [s["text"] for s in pack["segments"]] + [str(m.get("content", "")) for m in pack["messages"]]
    source_ids = {ref for s in pack["segments"] for ref in s["sourceIds"]} | {
        str(m.get("sourceId", "")) for m in pack["messages"]
    }
    attention = next((s for s in pack["segments"] if s["kind"] == "attention"), None)

    def carries(text: str, ids: set[str]) -> tuple[bool, bool]:
        folded = text.casefold()
        has_thread = bool(ids & thread_refs) or thread.subject.casefold() in folded
        has_failure = (
            failure_ref in ids or failure_ref in text or thread.failure_text.casefold()[:80] in folded
        )
        return has_thread, has_failure

    whole = carries("\n".join(texts), source_ids)
    only = carries(attention["text"], set(attention["sourceIds"])) if attention else (False, False)
    return {
        "persona": name,
        "gapDays": gap,
        "sessions": len(history.sessions),
        "events": sum(len(s.events) for s in history.sessions),
        "thread": whole[0],
        "failure": whole[1],
        "passed": all(whole),
        "passedByAttention": all(only),
        "suggested": suggested(client, w, sid, thread_refs | {failure_ref}),
        "attentionTokens": attention["tokens"] if attention else 0,
        "packTokens": pack["totalTokens"],
        "waitedS": round(waited, 2),
    }


def suggested(client: Client, workspace: str, session_id: str, refs: set[str]) -> bool | None:
    """Whether the daemon's ``suggest`` for the new session cites the last session's thread
    or failure (None: this daemon has no ``suggest``)."""
    try:
        result = client.call("suggest", {"workspace": workspace, "sessionId": session_id})
    except RemoteError as exc:
        if exc.kind == "method_not_found" or exc.code == -32601:
            return None
        raise
    return any(set(s["refs"]) & refs for s in result["suggestions"])


def percentile(values: Sequence[int], q: float) -> int:
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(
    seed: int, per_persona: int, personas: Sequence[str] | None = None, days: int = DAYS
) -> dict[str, Any]:
    names = list(personas or [p.name for p in PERSONAS])
    now = int(time.time() * 1000)
    cases: list[dict[str, Any]] = []
    # A socket path must stay short (AF_UNIX): $TMPDIR when it is, else /tmp.
    base = tempfile.gettempdir() if len(tempfile.gettempdir()) < 60 else "/tmp"
    with tempfile.TemporaryDirectory(prefix="mkp", dir=base) as tmp, Daemon(Path(tmp)) as daemon:
        client = daemon.client()
        try:
            for name in names:
                for index in range(per_persona):
                    cases.append(run_case(client, daemon.root / "w", name, seed, index, now, days))
        finally:
            client.close()
    n = len(cases)
    tokens = [c["attentionTokens"] for c in cases]

    def share(key: str) -> float:
        return round(sum(bool(c[key]) for c in cases) / n, 4) if n else 0.0

    asked = [c for c in cases if c["suggested"] is not None]

    return {
        "cases": n,
        "budgetTokens": BUDGET,
        "historyDays": days,
        "share": share("passed"),
        "threadShare": share("thread"),
        "failureShare": share("failure"),
        "shareByAttentionSegment": share("passedByAttention"),
        "suggestShare": round(sum(c["suggested"] for c in asked) / len(asked), 4) if asked else None,
        "attentionTokens": {
            "p50": int(statistics.median(tokens)) if tokens else 0,
            "max": max(tokens, default=0),
        },
        "failed": [c for c in cases if not c["passed"]],
        "byCase": cases,
    }

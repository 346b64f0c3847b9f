"""Memory the user typed, asked for in other words: does it reach the pack?

``data/unmatched_set.json`` holds 120 hand-written entries of the kinds people keep
(tools, versions, people, dates, habits, home and travel) and 40 questions, each phrased
without any word of the entry it needs (so no word search finds it). The entries are
typed into ``memory/MEMORY.md`` by hand, as a user does (no metadata: the daemon gives
each an id derived from its text), in workspaces of 15, 40 and 120 entries (the first
that many of the file; a question counts where its entry is).

Each question is asked as a new user's agent asks it: a fresh session, one
``build_context`` with the question and the budget. ``--history`` first writes an
earlier session of chatter that shares words with the questions (so recall has
excerpts to offer) and asks from a session that is not new. A question scores 1 when
its entry is in the pack's memory segment.

    PYTHONPATH=scripts:.:clients/python .venv/bin/python -m eval_recall.unmatched [--history]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from maka import Client

DATA = Path(__file__).resolve().parent / "data" / "unmatched_set.json"
SIZES = (15, 40, 120)
BUDGETS = (1500, 4000, 8000)
# Chatter of an earlier session: words of everyday work talk the questions also use.
CHATTER = (
    "which package should we try for the web client, any manager you like?",
    "the server code is slow today, can you check the endpoint?",
    "who is on holiday next week and who is my backup?",
    "how verbose should the release notes be for the big rollout?",
    "what time is the meeting, morning or afternoon?",
    "where do we store tokens for the staging service?",
    "what tool should hold the backlog for the new team?",
    "the plane was late so I missed the morning call",
    "need to reply to customers faster, they keep asking",
    "the medicine cabinet is empty, buy some before dinner",
    "which computer should the new hire get for code work?",
    "the charts of service health look odd since the deploy",
    "my talk proposal is due soon, help me outline it",
    "which interpreter release does the lambda run?",
    "format the javascript code before the merge please",
)


def typed_file(entries: list[dict[str, str]]) -> str:
    """MEMORY.md as a user types it: a title and a ``##`` heading per entry, no metadata."""
    parts = ["# Memory", ""]
    for entry in entries:
        parts += [f"## {entry['title']}", entry["content"], ""]
    return "\n".join(parts)


def evaluate(client: Client, root: Path, history: bool) -> dict[str, Any]:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    entries: list[dict[str, str]] = data["entries"]
    hits: dict[str, list[int]] = {}
    missed: dict[str, list[str]] = {}
    for size in SIZES:
        chosen = entries[:size]
        folder = root / f"typed{size}"
        (folder / "memory").mkdir(parents=True)
        (folder / "memory" / "MEMORY.md").write_text(typed_file(chosen), encoding="utf-8")
        ws = str(folder)
        client.call("set_settings", workspace=ws, agentReadEnabled=True, historyRecallEnabled=history)
        listed = client.call("read_state", workspace=ws, includeEntries=True)["entries"]
        by_text = {(e["title"], e["content"].strip()): e["id"] for e in listed}
        ids = {e["key"]: by_text[(e["title"], e["content"])] for e in chosen}
        if history:
            client.call("open_session", workspace=ws, sessionId="earlier", title="earlier")
            events = [
                {"type": "user_message" if i % 2 == 0 else "assistant_message", "text": text}
                for i, text in enumerate(CHATTER * 4)
            ]
            client.call("append_events", workspace=ws, sessionId="earlier", events=events)
        for question in data["questions"]:
            if question["entry"] not in ids:
                continue
            for budget in BUDGETS:
                sid = client.call("open_session", workspace=ws, title="question")["sessionId"]
                if history:
                    client.call(
                        "append_events",
                        workspace=ws,
                        sessionId=sid,
                        events=[{"type": "user_message", "text": "hello, a quick one"}],
                    )
                pack = client.call(
                    "build_context", workspace=ws, sessionId=sid, query=question["q"], budgetTokens=budget
                )
                shown = {ref for s in pack["segments"] if s["kind"] == "memory" for ref in s["sourceIds"]}
                hit = int(f"memory:{ids[question['entry']]}" in shown)
                hits.setdefault(f"{size}@{budget}", []).append(hit)
                if not hit:
                    missed.setdefault(f"{size}@{budget}", []).append(question["entry"])
    return {
        "history": history,
        "found": {key: f"{sum(v)}/{len(v)}" for key, v in hits.items()},
        "missed": missed,
    }


def main() -> None:
    from eval_recall.run import Daemon

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--history", action="store_true", help="with an earlier session to recall from")
    parser.add_argument("--missed", action="store_true", help="also list the entries each setting missed")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mkum", dir="/tmp"))
    try:
        with Daemon(root) as daemon, daemon.client() as client:
            report = evaluate(client, root, args.history)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if not args.missed:
        del report["missed"]
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()

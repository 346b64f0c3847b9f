"""scripts/ab's synthetic checks, no model needed: stale facts, privacy leaks, false promotions.

Each runs on a small workspace of its own, through the variant's strategy and budget:

- stale facts (``staleCorrect``/``staleTotal``): a fact superseded later, in memory
  (through the approval gate) or in a later session; the newer must be shown and the
  older absent, after it, or marked stale;
- privacy leaks: facts planted in another workspace, an incognito session and an
  entry scoped to another session; times any of them appears in a pack (must be 0);
- false promotions: episodes one short of the evidence gate; proposals made (must be 0).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from maka import Client
from maka.errors import RemoteError

PLACEHOLDER_ANSWER = "[answer not generated in the A/B run]"


@dataclass(slots=True)
class Checks:
    stale_correct: int = 0
    stale_total: int = 0
    privacy_leaks: int = 0
    false_promotions: int = 0
    details: list[dict[str, Any]] = field(default_factory=list)


def _visible(pack: dict[str, Any]) -> str:
    return "\n".join([*(s["text"] for s in pack["segments"]), *(m["content"] for m in pack["messages"])])


def _ask(client: Client, ws: str, sid: str, strategy: str, budget: int, question: str) -> dict[str, Any]:
    client.call(
        "append_events", workspace=ws, sessionId=sid, events=[{"type": "user_message", "text": question}]
    )
    pack: dict[str, Any] = client.call(
        "build_context", workspace=ws, sessionId=sid, budgetTokens=budget, query=question, strategy=strategy
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


def synthetic_checks(client: Client, root: Path, variant: str, strategy: str, budget: int) -> Checks:
    """The three checks for one variant (``variant`` names its workspaces)."""
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
        text = _visible(_ask(client, ws, fresh, strategy, budget, question))
        ok = _stale_ok(text, new, old)
        checks.stale_total += 1
        checks.stale_correct += ok
        checks.details.append({"check": "stale", "question": question, "correct": ok})
    sid = client.call("open_session", workspace=ws, title="synthetic questions")["sessionId"]
    for name, question, canary in CANARIES:
        pack = _ask(client, ws, sid, strategy, budget, question)
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

"""Privacy on disk: a secret planted in every input path never reaches a file or a log,
incognito leaves no trace, and info-level logs carry no memory content.

A connection from another uid is refused: tests/e2e/test_lifecycle.py::test_other_uid_is_refused.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from maka.errors import RemoteError
from makad.core.redaction import redact
from tests.robustness.planting import github_token
from tests.support import DaemonProcess

SUMMARY = "# Current Goal\nShip it.\n\n# Current State\nHalf done.\n\n# Next Step\nTest.\n"


def files_under(*roots: Path) -> list[Path]:
    return sorted(p for root in roots if root.exists() for p in root.rglob("*") if p.is_file())


def leaks(needles: dict[str, str], *roots: Path) -> dict[str, list[str]]:
    """For each label whose needle (or its last 16 characters) is in a file: the files."""
    found: dict[str, list[str]] = {}
    for path in files_under(*roots):
        data = path.read_bytes()
        for label, needle in needles.items():
            if needle.encode() in data or needle[-16:].encode() in data:
                found.setdefault(label, []).append(path.name)
    return found


def setup_session(d: DaemonProcess, **kw: Any) -> str:
    sid: str = d.call("open_session", {"workspace": str(d.workspace), **kw})["sessionId"]
    return sid


def turn(text: str) -> list[dict[str, Any]]:
    return [
        {"type": "user_message", "text": text},
        {"type": "assistant_message", "text": "ok " + "word " * 200},
    ]


def plant_everywhere(d: DaemonProcess, secret: Callable[[str], str]) -> None:
    """Every input path of the protocol gets its own secret."""
    w = str(d.workspace)
    d.call(
        "set_settings",
        {"workspace": w, "agentReadEnabled": True, "extractToolEnabled": True, "historyRecallEnabled": True},
    )
    entry = d.call(
        "add_entry",
        {"workspace": w, "title": f"t {secret('entry.title')}", "content": f"c {secret('entry.content')}"},
    )["entry"]
    d.call("update_entry", {"workspace": w, "id": entry["id"], "content": f"c2 {secret('entry.update')}"})
    sid = setup_session(d, title=f"session {secret('session.title')}")
    d.call(
        "append_events",
        {
            "workspace": w,
            "sessionId": sid,
            "events": [
                {"type": "user_message", "text": f"my key {secret('event.text')} please"},
                {
                    "type": "tool_call",
                    "text": "{}",
                    "toolCallId": "c1",
                    "toolName": "shell",
                    "meta": {"env": f"TOKEN={secret('event.meta')}"},
                },
                {
                    "type": "tool_result",
                    "text": "done " + "word " * 80,
                    "toolCallId": "c1",
                    "toolName": "shell",
                },
            ]
            + turn("second question") * 8,
        },
    )
    proposals = [
        d.call(
            "propose",
            {
                "workspace": w,
                "title": f"p {secret(f'proposal.title{i}')}",
                "content": f"p {i} {secret(f'proposal.content{i}')}",
                "sessionId": sid,
                "sourceRefs": [f"event:{sid}:1"],
            },
        )["proposal"]["id"]
        for i in range(2)
    ]
    d.call(
        "approve",
        {
            "workspace": w,
            "ids": [proposals[0]],
            "edits": {proposals[0]: {"content": f"edited {secret('approve.edit')}"}},
        },
    )
    d.call("reject", {"workspace": w, "ids": [proposals[1]], "reason": f"because {secret('reject.reason')}"})
    d.call(
        "import_memories",
        {
            "workspace": w,
            "format": "markdown",
            "data": f"# Notes\n\n## Keys\n- deploy key {secret('import')}\n",
        },
    )
    d.call(
        "set_working_state",
        {
            "workspace": w,
            "sessionId": sid,
            "goals": [f"goal {secret('ws.goal')}"],
            "openThreads": [f"thread {secret('ws.thread')}"],
            "decisions": [f"decision {secret('ws.decision')}"],
            "notes": {"Learnings": f"note {secret('ws.note')}"},
        },
    )
    d.call(
        "record_episode",
        {
            "workspace": w,
            "sessionId": sid,
            "summary": f"used {secret('episode.summary')}",
            "sourceRefs": [f"event:{sid}:1"],
            "tags": ["keys"],
        },
    )
    with pytest.raises(RemoteError) as refused:
        d.call(
            "compact",
            {
                "workspace": w,
                "sessionId": sid,
                "mode": "semantic",
                "keepRecentTokens": 50,
                "summary": SUMMARY + f"\nkey {secret('compact.summary')}\n",
            },
        )
    assert refused.value.kind == "invalid_summary"
    d.call("compact", {"workspace": w, "sessionId": sid, "mode": "checkpoint", "keepRecentTokens": 50})
    d.call(
        "build_context",
        {
            "workspace": w,
            "sessionId": sid,
            "budgetTokens": 2000,
            "query": f"where is {secret('build_context.query')}",
        },
    )
    d.call("search_history", {"workspace": w, "query": f"find {secret('search.query')}"})
    d.call("close_session", {"workspace": w, "sessionId": sid})


def test_a_secret_in_every_input_path_never_reaches_disk_or_logs(daemon: DaemonProcess) -> None:
    """Entries, updates, proposals, approval edits, rejection reasons, imports, events (text
    and meta), session titles, working state, episodes, summaries and queries: no planted
    secret is in MEMORY.md, PENDING.md, the ledger (with -wal and -shm), backups or the log."""
    planted: dict[str, str] = {}

    def secret(label: str) -> str:
        planted[label] = github_token(label)
        return planted[label]

    plant_everywhere(daemon, secret)
    assert all(redact(s).count == 1 for s in planted.values())
    roots = (daemon.workspace, daemon.data_dir, daemon.stderr_path)
    assert any(p.name.endswith("-wal") for p in files_under(daemon.data_dir))
    assert leaks(planted, *roots) == {}
    daemon.stop()
    assert leaks(planted, *roots) == {}


def test_incognito_leaves_no_trace_on_disk(daemon: DaemonProcess) -> None:
    """An incognito session in a normal workspace, and a workspace switched to incognito:
    events, titles, working state, checkpoints, queries and refused proposals leave no
    byte on disk or in the log, before or after the daemon stops."""
    w = str(daemon.workspace)
    daemon.call("add_entry", {"workspace": w, "title": "Normal", "content": "visible"})
    marker = "zebracorn"
    needles = {f"{marker}{i}": f"{marker}{i}-incognito" for i in range(8)}

    def exercise(sid: str, n: int) -> None:
        text = needles[f"{marker}{n}"]
        daemon.call(
            "append_events",
            {"workspace": w, "sessionId": sid, "events": turn(f"first {text}") + turn("more") * 6},
        )
        daemon.call(
            "set_working_state", {"workspace": w, "sessionId": sid, "goals": [needles[f"{marker}{n + 1}"]]}
        )
        daemon.call(
            "compact", {"workspace": w, "sessionId": sid, "mode": "checkpoint", "keepRecentTokens": 50}
        )
        daemon.call(
            "build_context",
            {"workspace": w, "sessionId": sid, "budgetTokens": 1500, "query": needles[f"{marker}{n + 2}"]},
        )
        hits = daemon.call("search_history", {"workspace": w, "query": text, "sessionId": sid})
        assert hits["hits"], "the incognito session is searchable by its own id"
        with pytest.raises(RemoteError) as refused:
            daemon.call(
                "propose",
                {"workspace": w, "title": "P", "sessionId": sid, "content": needles[f"{marker}{n + 3}"]},
            )
        assert refused.value.kind == "incognito_blocked"

    private = setup_session(daemon, incognito=True, title="private session")
    exercise(private, 0)
    daemon.call("set_settings", {"workspace": w, "incognito": True})
    ephemeral = daemon.call("open_session", {"workspace": w})
    assert ephemeral["incognito"] is True
    exercise(ephemeral["sessionId"], 4)
    assert daemon.call("read_state", {"workspace": w})["status"] == "incognito_blocked"

    roots = (daemon.workspace, daemon.data_dir, daemon.stderr_path)
    assert leaks(needles, *roots) == {}
    daemon.stop()
    assert leaks(needles, *roots) == {}


def test_info_logs_carry_no_memory_content(daemon: DaemonProcess) -> None:
    """A full round of work at the default info level: no title, content, event text,
    working state, summary or query appears in the log."""
    w = str(daemon.workspace)
    words = {
        name: f"quokka-{name}-{i}"
        for i, name in enumerate(
            [
                "title",
                "content",
                "proposal",
                "event",
                "goal",
                "summary",
                "query",
                "reason",
                "episode",
                "import",
            ]
        )
    }
    daemon.call("set_settings", {"workspace": w, "agentReadEnabled": True, "extractToolEnabled": True})
    daemon.call("add_entry", {"workspace": w, "title": words["title"], "content": words["content"]})
    proposed = daemon.call("propose", {"workspace": w, "title": "P", "content": words["proposal"]})[
        "proposal"
    ]["id"]
    daemon.call("reject", {"workspace": w, "ids": [proposed], "reason": words["reason"]})
    daemon.call(
        "import_memories",
        {"workspace": w, "format": "markdown", "data": f"# N\n\n## K\n- {words['import']}\n"},
    )
    sid = setup_session(daemon)
    daemon.call(
        "append_events",
        {"workspace": w, "sessionId": sid, "events": turn(words["event"]) + turn("again") * 6},
    )
    daemon.call("set_working_state", {"workspace": w, "sessionId": sid, "goals": [words["goal"]]})
    daemon.call(
        "record_episode",
        {"workspace": w, "sessionId": sid, "summary": words["episode"], "sourceRefs": [f"event:{sid}:1"]},
    )
    daemon.call(
        "compact",
        {
            "workspace": w,
            "sessionId": sid,
            "mode": "semantic",
            "keepRecentTokens": 50,
            "summary": SUMMARY.replace("Ship it.", words["summary"]),
        },
    )
    daemon.call(
        "build_context", {"workspace": w, "sessionId": sid, "budgetTokens": 3000, "query": words["query"]}
    )
    with pytest.raises(RemoteError):
        daemon.call("update_entry", {"workspace": w, "id": "nope", "content": words["content"] + "x"})
    daemon.stop()
    log = daemon.log_text()
    assert '"level": "info"' in log
    assert [name for name, word in words.items() if word in log] == []


def test_a_secret_in_tags_and_event_fields_never_reaches_disk(daemon: DaemonProcess) -> None:
    """The fields beside the text — tags of entries, proposals and episodes, an event's
    toolName, toolCallId and meta keys, a proposal's sourceRefs — are redacted or refused
    too: no planted secret is on disk."""
    w = str(daemon.workspace)
    planted: dict[str, str] = {}

    def secret(label: str) -> str:
        planted[label] = github_token(label)
        return planted[label]

    def attempt(method: str, params: dict[str, Any]) -> None:
        try:
            daemon.call(method, params)
        except RemoteError as exc:  # refusing the field is as good as redacting it
            assert exc.kind in ("invalid_params", "too_large")

    daemon.call("set_settings", {"workspace": w, "agentReadEnabled": True, "extractToolEnabled": True})
    sid = setup_session(daemon)
    attempt(
        "append_events",
        {
            "workspace": w,
            "sessionId": sid,
            "events": [
                {
                    "type": "tool_call",
                    "text": "{}",
                    "toolCallId": secret("event.toolCallId"),
                    "toolName": secret("event.toolName"),
                    "meta": {secret("event.metaKey"): "v"},
                }
            ],
        },
    )
    daemon.call(
        "append_events",
        {"workspace": w, "sessionId": sid, "events": [{"type": "user_message", "text": "hello"}]},
    )
    attempt("add_entry", {"workspace": w, "title": "T", "content": "c", "tags": [secret("entry.tag")]})
    attempt(
        "propose",
        {
            "workspace": w,
            "title": "P",
            "content": "p",
            "tags": [secret("proposal.tag")],
            "sourceRefs": [f"event:{sid}:1", secret("proposal.sourceRef")],
        },
    )
    attempt(
        "record_episode",
        {
            "workspace": w,
            "sessionId": sid,
            "summary": "s",
            "sourceRefs": [f"event:{sid}:2"],
            "tags": [secret("episode.tag")],
        },
    )
    lowered = {label: s.lower() for label, s in planted.items()}
    found = leaks(planted, daemon.workspace, daemon.data_dir) | leaks(
        lowered, daemon.workspace, daemon.data_dir
    )
    assert found == {}

"""`maka context` and `maka compact`: rendering always; against the daemon once it has them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from maka.cli.context import render_checkpoint, render_pack
from tests.cli.helpers import call, methods, run_maka
from tests.support import DaemonProcess

PACK: dict[str, Any] = {
    "segments": [
        {"kind": "memory", "text": "- Deploys happen on Tuesdays.", "tokens": 9, "sourceIds": ["memory:abc"]}
    ],
    "messages": [
        {"role": "user", "content": "deploy it", "sourceId": "event:s:1"},
        {
            "role": "assistant",
            "content": "",
            "sourceId": "event:s:2",
            "toolCalls": [{"id": "c1", "name": "shell", "arguments": '{"cmd": "make"}'}],
        },
        {"role": "tool", "content": "ok", "toolCallId": "c1", "sourceId": "event:s:3"},
    ],
    "totalTokens": 40,
    "budgetTokens": 500,
    "callId": "call-1",
    "revision": 3,
    "compactRecommended": True,
    "trace": {
        "path": "bounded",
        "candidates": [
            {
                "kind": "memory",
                "sourceId": "memory:abc",
                "score": 0.91,
                "included": True,
                "tokens": 9,
                "parts": {"bm25": 0.8, "recency": 0.5, "tags": 0.0},
                "title": "Deploys happen on Tuesdays",
                "pinned": True,
            },
            {
                "kind": "memory",
                "sourceId": "memory:def",
                "score": 0.2,
                "included": False,
                "reason": "below_threshold",
                "tokens": 30,
                "parts": {"bm25": 0.1, "recency": 0.9, "tags": 0.0},
            },
        ],
        "dropped": {"below_threshold": 1},
        "allocation": [
            {"kind": "memory", "cap": 100, "used": 9},
            {"kind": "recall", "cap": 400, "used": 380, "flowed": 300, "truncated": True},
        ],
        "skipped": [{"source": "memory", "reason": "safe_mode", "message": "MEMORY.md is too big"}],
        "minimumTokens": 3,
        "historyDropped": 0,
        "historyRepaired": 0,
        "placeholders": [],
    },
}


def test_render_pack_shows_segments_messages_and_totals() -> None:
    """The readable pack has the totals, each segment with its sources, and the messages."""
    text = "\n".join(render_pack(PACK, trace=False))
    assert text.startswith("Context pack: 40 of 500 tokens · bounded path · revision 3")
    assert "Compaction recommended" in text and "sources: memory:abc" in text
    assert "user: deploy it" in text and "→ call shell(" in text and "tool ← c1: ok" in text
    assert "memory:def" not in text  # the trace only with --trace


def test_render_pack_says_why_the_curator_pick_is_not_shown() -> None:
    """A fallback pack says the curator is not configured (naming what to set) or failed
    (with the reason); a curator that was skipped or used, or none asked, adds no line."""

    def with_curator(**curator: Any) -> str:
        return "\n".join(render_pack({**PACK, "trace": {**PACK["trace"], "curator": curator}}, trace=False))

    unset = with_curator(status="unconfigured", reason="unconfigured")
    assert "Curator: not configured, so this is the deterministic pack" in unset
    assert "MAKAD_CURATOR_URL and MAKAD_CURATOR_MODEL" in unset
    assert "Curator: failed (timeout), so this is the deterministic pack" in with_curator(
        status="failed", reason="timeout"
    )
    for quiet in ({"status": "ok"}, {"status": "skipped", "reason": "fits"}):
        assert "Curator:" not in with_curator(**quiet)
    assert "Curator:" not in "\n".join(render_pack(PACK, trace=False))


def test_render_trace_lists_every_candidate() -> None:
    """--trace adds a row per candidate with its score parts and why it was left out."""
    lines = render_pack(PACK, trace=True)
    rows = [line.split() for line in lines if "memory:def" in line]
    assert rows and rows[0][:8] == ["memory", "0.200", "0.10", "0.90", "0.00", "30", "no", "below_threshold"]
    assert any(line.startswith("dropped: below_threshold 1") for line in lines)
    assert any("memory:abc" in line and "[pinned] Deploys happen on Tuesdays" in line for line in lines)


def test_render_trace_shows_the_semantic_part_when_the_channel_found_something() -> None:
    """A candidate the semantic channel found shows its semantic part in a SEMANTIC column
    (a score the other parts cannot explain); a pack without one keeps the lexical table."""
    found = {
        **PACK["trace"]["candidates"][1],
        "parts": {"bm25": 0.0, "recency": 1.0, "tags": 0.0, "semantic": 0.24},
    }
    semantic_pack = {**PACK, "trace": {**PACK["trace"], "candidates": [found]}}
    lines = render_pack(semantic_pack, trace=True)
    header = next(line.split() for line in lines if line.startswith("KIND ") and "SCORE" in line)
    row = next(line.split() for line in lines if "memory:def" in line)
    assert header[:6] == ["KIND", "SCORE", "BM25", "RECENCY", "TAGS", "SEMANTIC"]
    assert row[:6] == ["memory", "0.200", "0.00", "1.00", "0.00", "0.24"]
    assert not any("SEMANTIC" in line for line in render_pack(PACK, trace=True))


def test_trace_shows_an_entry_never_rendered_without_a_token_count(shared_daemon: DaemonProcess) -> None:
    """An entry left out for budget before its block was rendered (far too big for what was
    left) is 0 tokens in the trace's JSON and `-` in `maka context --trace`, never a cost of 0."""
    call(shared_daemon, "set_settings", agentReadEnabled=True)
    call(shared_daemon, "add_entry", title="Deploys", content="We deploy on Tuesdays.")
    call(shared_daemon, "add_entry", title="Runbook", content="Step after step of the runbook. " * 300)
    pack = call(shared_daemon, "build_context", query="deploy runbook", budgetTokens=300)
    (big,) = [c for c in pack["trace"]["candidates"] if c.get("title") == "Runbook"]
    assert big["reason"] == "budget" and big["tokens"] == 0
    shown = run_maka(shared_daemon, "context", "-q", "deploy runbook", "-b", "300", "--trace")
    assert shown.returncode == 0, shown.stderr
    row = next(line.split() for line in shown.stdout.splitlines() if line.endswith("Runbook"))
    assert row[5:8] == ["-", "no", "budget"], row


def test_render_trace_shows_the_flow_and_what_was_skipped() -> None:
    """The allocation table says how much of each cap flowed in; a skipped source is named."""
    lines = render_pack(PACK, trace=True)
    assert [line.split() for line in lines if line.startswith("recall ")][-1] == [
        "recall",
        "400",
        "380",
        "300",
        "yes",
    ]
    assert "memory skipped (safe_mode): MEMORY.md is too big" in lines


def test_render_checkpoint() -> None:
    """A compact result reads as what it covers and where live history starts."""
    lines = render_checkpoint(
        {
            "checkpointId": "cp1",
            "boundarySeq": 40,
            "mode": "checkpoint",
            "reason": "manual",
            "coverage": {"fromSeq": 1, "toSeq": 40},
            "coveredHash": "ab" * 32,
            "summaryTokens": 120,
            "preservedFromSeq": 41,
            "createdAt": 1,
        }
    )
    assert lines[0] == "Checkpoint cp1 (checkpoint, manual)"
    assert "events 1–40" in lines[1] and "from seq 41" in lines[2]


def test_context_usage_errors(shared_daemon: DaemonProcess) -> None:
    """A non-positive budget and a missing --session are usage errors (exit 2)."""
    assert run_maka(shared_daemon, "context", "--budget", "0").returncode == 2
    assert run_maka(shared_daemon, "compact").returncode == 2


def test_context_against_the_daemon(shared_daemon: DaemonProcess) -> None:
    """maka context --json returns build_context's pack within the budget (when offered)."""
    if "build_context" not in methods(shared_daemon):
        pytest.skip("this makad has no build_context yet")
    call(shared_daemon, "set_settings", agentReadEnabled=True)
    call(shared_daemon, "add_entry", title="Deploys", content="Deploys happen on Tuesdays.")
    result = run_maka(
        shared_daemon,
        "context",
        "--json",
        "--query",
        "when do deploys happen",
        "--budget",
        "800",
        "--include",
        "memory",
    )
    assert result.returncode == 0, result.stderr
    pack = json.loads(result.stdout)
    assert pack["totalTokens"] <= 800
    assert any("Tuesdays" in s["text"] for s in pack["segments"])
    readable = run_maka(shared_daemon, "context", "-q", "deploys", "-b", "800", "--trace")
    assert "Context pack:" in readable.stdout and "━━ trace" in readable.stdout


def test_compact_against_the_daemon(shared_daemon: DaemonProcess, short_tmp: Path) -> None:
    """maka compact --summary-file writes a semantic checkpoint (when offered)."""
    if not {"compact", "open_session", "append_events"} <= methods(shared_daemon):
        pytest.skip("this makad has no compact / ledger methods yet")
    sid = call(shared_daemon, "open_session")["sessionId"]
    events = [
        {
            "type": "user_message" if i % 2 == 0 else "assistant_message",
            "text": f"message {i} about the deploy " + "words " * 40,
        }
        for i in range(40)
    ]
    call(shared_daemon, "append_events", sessionId=sid, events=events)
    summary = short_tmp / "summary.md"
    summary.write_text(
        "# Current Goal\nShip the deploy.\n# Current State\nTests pass.\n# Next Step\nTag the release.\n"
    )
    result = run_maka(
        shared_daemon,
        "--json",
        "compact",
        "--session",
        sid,
        "--summary-file",
        str(summary),
        "--keep-recent-tokens",
        "100",
    )
    assert result.returncode == 0, result.stderr
    checkpoint = json.loads(result.stdout)
    assert checkpoint["mode"] == "semantic" and checkpoint["coverage"]["fromSeq"] >= 1


def test_compact_of_a_short_session_says_how_much_stays_live(shared_daemon: DaemonProcess) -> None:
    """Compacting a session whose history fits the keep window fails (invalid_params) with a
    message naming its events and tokens and the window's floor (1,000 tokens, 5 messages),
    so a smaller --keep-recent-tokens is not tried in vain."""
    sid = call(shared_daemon, "open_session")["sessionId"]
    events = [{"type": "user_message", "text": f"message {i} about the deploy"} for i in range(3)]
    call(shared_daemon, "append_events", sessionId=sid, events=events)
    result = run_maka(shared_daemon, "compact", "-s", sid, "--keep-recent-tokens", "10")
    assert result.returncode == 1 and "invalid_params" in result.stderr
    first = result.stderr.splitlines()[0]
    assert "nothing to compact" in first and "3 events" in first
    assert "1,000 tokens" in first and "5 messages" in first
    help_text = run_maka(shared_daemon, "compact", "--help", workspace=False).stdout
    assert "1000" in help_text.replace(",", "") and "10000" in help_text.replace(",", "")


def test_compact_with_the_default_window_says_plainly_there_is_nothing_yet(
    shared_daemon: DaemonProcess,
) -> None:
    """`maka compact -s S` on a session shorter than the default window exits 1 with one plain
    line naming the session's tokens and the 10,000 kept verbatim, not a param never passed."""
    sid = call(shared_daemon, "open_session")["sessionId"]
    events = [{"type": "user_message", "text": f"message {i} about the deploy"} for i in range(3)]
    call(shared_daemon, "append_events", sessionId=sid, events=events)
    result = run_maka(shared_daemon, "compact", "-s", sid)
    assert result.returncode == 1
    first = result.stderr.splitlines()[0]
    assert first.startswith("maka: nothing to compact yet: the session holds ")
    assert "fewer than the 10,000 tokens kept verbatim" in first
    assert "keepRecentTokens" not in result.stderr and "invalid_params" not in result.stderr
    help_text = run_maka(shared_daemon, "compact", "--help", workspace=False).stdout
    assert "nothing to compact" in help_text and "exit status 1" in help_text


def test_attention_command_shows_the_state_with_refs(shared_daemon: DaemonProcess) -> None:
    """`maka attention` prints each section with its lines and refs once a session with a
    failure is closed; --json is get_attention's reply."""
    w = str(shared_daemon.workspace)
    sid = call(shared_daemon, "open_session")["sessionId"]
    call(
        shared_daemon,
        "append_events",
        sessionId=sid,
        events=[
            {"type": "user_message", "text": "Make the linter pass"},
            {"type": "tool_call", "text": "ruff check .", "toolCallId": "a", "toolName": "bash"},
            {
                "type": "tool_result",
                "text": "error: E501 line too long",
                "toolCallId": "a",
                "toolName": "bash",
            },
        ],
    )
    call(shared_daemon, "close_session", sessionId=sid)
    for _ in range(300):
        state = shared_daemon.call("get_attention", {"workspace": w})
        if state["sections"][0]["lines"]:
            break
        time.sleep(0.1)
    out = run_maka(shared_daemon, "attention")
    assert out.returncode == 0, out.stderr
    assert "## Active threads" in out.stdout and "E501 line too long" in out.stdout
    assert f"event:{sid}:3" in out.stdout and "## Rhythm" in out.stdout
    as_json = json.loads(run_maka(shared_daemon, "attention", "--json").stdout)
    assert as_json["enabled"] is True and as_json["sections"][0]["name"] == "Active threads"


def test_attention_switched_off_says_which_switch_and_the_command(shared_daemon: DaemonProcess) -> None:
    """`maka attention` with nothing derived names the switch that stops it — incognito
    before attentionEnabled — and the `maka settings` command that lifts it."""
    ws = shared_daemon.workspace
    call(shared_daemon, "set_settings", attentionEnabled=False, incognito=True)
    hidden = run_maka(shared_daemon, "attention")
    assert hidden.returncode == 0, hidden.stderr
    assert (
        f"The workspace is incognito; to change that: `maka -w {ws} settings incognito=off`" in hidden.stdout
    )
    call(shared_daemon, "set_settings", incognito=False)
    off = run_maka(shared_daemon, "attention")
    assert f"attentionEnabled is off here; to change that: `maka -w {ws} settings attentionEnabled=on`" in (
        off.stdout
    )
    call(shared_daemon, "set_settings", attentionEnabled=True)
    on = run_maka(shared_daemon, "attention")
    assert "to change that" not in on.stdout


def test_suggest_command_lists_dismisses_and_brings_back(shared_daemon: DaemonProcess) -> None:
    """`maka suggest` shows a thread left a day ago with its id, score and refs; `maka suggest
    dismiss ID` (or a unique start of the id) hides it, `--for 0` brings it back; --json is
    suggest's reply."""
    call(shared_daemon, "set_settings", agentReadEnabled=True)
    at = int(time.time() * 1000) - 86_400_000
    sid = call(shared_daemon, "open_session")["sessionId"]
    # Records are made once the (past-stamped) events are idle: the working state goes first.
    call(shared_daemon, "set_working_state", sessionId=sid, openThreads=["port the exporter to v2"])
    call(
        shared_daemon,
        "append_events",
        sessionId=sid,
        events=[
            {"type": "user_message", "text": "Port the exporter in src/export.py to the v2 API", "ts": at},
            {
                "type": "tool_call",
                "text": "cat src/export.py",
                "toolCallId": "a",
                "toolName": "bash",
                "ts": at,
            },
            {
                "type": "tool_result",
                "text": "def export(): ...",
                "toolCallId": "a",
                "toolName": "bash",
                "ts": at,
            },
            {"type": "assistant_message", "text": "Halfway.", "ts": at},
        ],
    )
    call(shared_daemon, "close_session", sessionId=sid)
    for _ in range(300):  # the keeper derives in the background
        reply = call(shared_daemon, "suggest")
        if any("port the exporter to v2" in s["text"] for s in reply["suggestions"]):
            break
        time.sleep(0.1)
    [item] = reply["suggestions"]
    out = run_maka(shared_daemon, "suggest")
    assert out.returncode == 0, out.stderr
    assert "Resume: port the exporter to v2" in out.stdout and item["id"] in out.stdout
    assert f"event:{sid}:1" in out.stdout
    gone = run_maka(shared_daemon, "suggest", "dismiss", item["id"])
    assert gone.returncode == 0, gone.stderr
    assert gone.stdout.startswith(f"Dismissed {item['id']} until ")
    assert "Nothing worth suggesting now." in run_maka(shared_daemon, "suggest").stdout
    assert item["id"] in run_maka(shared_daemon, "suggest", "--all").stdout  # listed as not suggested
    run_maka(shared_daemon, "suggest", "dismiss", item["id"], "--for", "0")
    short = run_maka(shared_daemon, "suggest", "dismiss", item["id"][3:9])  # a unique start, as for entries
    assert short.stdout.startswith(f"Dismissed {item['id']} until "), short.stderr
    run_maka(shared_daemon, "suggest", "dismiss", item["id"][:9], "--for", "0")
    as_json = json.loads(run_maka(shared_daemon, "suggest", "--json").stdout)
    assert [s["id"] for s in as_json["suggestions"]] == [item["id"]]
    bad = run_maka(shared_daemon, "suggest", "dismiss", "nope")
    assert bad.returncode != 0 and "invalid_params" in bad.stderr + bad.stdout


def test_an_empty_pack_says_why(shared_daemon: DaemonProcess) -> None:
    """An empty `maka context` names its reason (trace.emptyReason): reads off, nothing yet,
    a budget too small, memory left out of --include, incognito, memory unavailable — and a pack with something has none."""

    def reason(*args: str) -> tuple[str, str | None]:
        shown = run_maka(shared_daemon, "context", *args)
        pack = json.loads(run_maka(shared_daemon, "context", "--json", *args).stdout)
        assert shown.returncode == 0, shown.stderr
        return shown.stdout, pack["trace"].get("emptyReason")

    text, code = reason()
    assert code == "reads_off" and "agentReadEnabled=on" in text and "[reads_off]" in text
    call(shared_daemon, "set_settings", agentReadEnabled=True)
    text, code = reason()
    assert code == "nothing_yet" and "nothing to show yet" in text
    call(
        shared_daemon, "add_entry", title="Deploys", content="The team deploys on Tuesdays with make deploy."
    )
    text, code = reason("--budget", "5")
    assert code == "budget_too_small" and "larger --budget" in text
    assert reason()[1] is None
    text, code = reason("--include", "working_state")
    assert code == "not_included" and "memory was left out" in text
    call(shared_daemon, "set_settings", incognito=True)
    assert reason()[1] == "incognito"
    call(shared_daemon, "set_settings", incognito=False)
    memory = shared_daemon.workspace / "memory" / "MEMORY.md"
    memory.write_text(memory.read_text() + "\nfiller line\n" * 20_000)  # over the 128 KiB cap
    text, code = reason()
    assert code == "memory_unavailable" and "MEMORY.md could not be used" in text


def test_an_empty_pack_names_only_the_switches_that_are_off(shared_daemon: DaemonProcess) -> None:
    """With reads off, the empty pack's hint names the switches that are off and no other:
    agentReadEnabled alone, enabled alone, or both; --json is the pack unchanged."""

    def hint() -> str:
        shown = run_maka(shared_daemon, "context")
        assert shown.returncode == 0, shown.stderr
        (line,) = [line for line in shown.stdout.splitlines() if line.startswith("(empty: ")]
        return line

    only_reads = hint()
    assert "settings agentReadEnabled=on`" in only_reads and "enabled=on " not in only_reads
    assert "agents may not read" in only_reads and "switched off" not in only_reads
    call(shared_daemon, "set_settings", agentReadEnabled=True, enabled=False)
    only_memory = hint()
    assert "settings enabled=on`" in only_memory and "agentReadEnabled" not in only_memory
    assert "memory is switched off" in only_memory
    call(shared_daemon, "set_settings", agentReadEnabled=False)
    both = hint()
    assert "settings enabled=on agentReadEnabled=on`" in both
    pack = json.loads(run_maka(shared_daemon, "context", "--json").stdout)
    assert pack["trace"]["emptyReason"] == "reads_off" and "settings" not in pack


# A daemon of its own: the user level is one per daemon, shared by the module's workspaces.
def test_context_names_user_level_entries_left_out_by_its_switch(daemon: DaemonProcess) -> None:
    """With the user level's agent reads off, `maka context` says how many of its entries
    the agent does not see and the command that lets it; with them on, the entry is in the
    pack and there is no note."""
    daemon.call("set_settings", {"workspace": str(daemon.workspace), "agentReadEnabled": True})
    daemon.call("add_entry", {"workspace": "@user", "title": "Spelling", "content": "British English."})
    left_out = run_maka(daemon, "context", "-q", "spelling")
    assert left_out.returncode == 0
    assert "British English." not in left_out.stdout
    assert "1 user-level entry is left out" in left_out.stdout
    assert "`maka --user settings agentReadEnabled=on`" in left_out.stdout
    daemon.call("set_settings", {"workspace": "@user", "agentReadEnabled": True})
    shown = run_maka(daemon, "context", "-q", "spelling")
    assert "British English." in shown.stdout and "left out" not in shown.stdout


def test_suggest_for_a_session_the_workspace_does_not_hold_fails_naming_it(
    shared_daemon: DaemonProcess,
) -> None:
    """`maka suggest --session X` with an X no session of the workspace has fails with
    not_found and the id, as `maka context --session X` does."""
    for command in ("suggest", "context"):
        out = run_maka(shared_daemon, command, "--session", "s_nosuchsession")
        assert out.returncode == 1, (command, out.stdout)
        assert "not_found" in out.stderr and "s_nosuchsession" in out.stderr, (command, out.stderr)


def test_context_takes_the_query_as_words_too(shared_daemon: DaemonProcess) -> None:
    """`maka context when do deploys happen` ranks by those words as -q would (as `maka
    search QUERY` takes its query); giving both -q and words is a usage error."""
    call(shared_daemon, "set_settings", agentReadEnabled=True)
    call(shared_daemon, "add_entry", title="Deploys", content="Deploys happen on Tuesdays.")
    result = run_maka(shared_daemon, "context", "--json", "when", "do", "deploys", "happen")
    assert result.returncode == 0, result.stderr
    (candidate,) = json.loads(result.stdout)["trace"]["candidates"]
    assert candidate["parts"]["bm25"] > 0
    both = run_maka(shared_daemon, "context", "-q", "deploys", "tuesdays")
    assert both.returncode == 2 and "-q" in both.stderr


@pytest.mark.parametrize(("typed", "budget"), [("2k", 2000), ("1.5K", 1500), ("2,000", 2000), ("2000", 2000)])
def test_a_budget_in_thousands_is_read_as_tokens(
    shared_daemon: DaemonProcess, typed: str, budget: int
) -> None:
    """`maka context -b 2k` (or 1.5K, 2,000) asks for that many tokens instead of failing
    with "invalid int value"."""
    result = run_maka(shared_daemon, "--json", "context", "-q", "deploy", "-b", typed)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["budgetTokens"] == budget


def test_a_budget_that_is_no_number_names_what_is_taken(shared_daemon: DaemonProcess) -> None:
    """`maka context -b lots` is a usage error giving examples of a budget."""
    result = run_maka(shared_daemon, "context", "-q", "deploy", "-b", "lots")
    assert result.returncode == 2
    assert "such as 2000 or 2k" in result.stderr

"""`maka review`: driven through a pseudo-terminal, through a pipe, and its card layout."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from maka.cli.output import display_width
from maka.cli.review import card
from tests.cli.helpers import MAKA, Pty, call, editor_script, run_maka
from tests.support import DaemonProcess

PROMPT = "[q]uit [?] "


def propose(d: DaemonProcess, title: str, content: str) -> str:
    call(d, "set_settings", agentReadEnabled=True, extractToolEnabled=True)
    pid: str = call(d, "propose", title=title, content=content)["proposal"]["id"]
    return pid


def test_review_on_a_terminal(shared_daemon: DaemonProcess, short_tmp: Path) -> None:
    """On a pty single keys edit+approve, reject with a reason, skip and approve, in order."""
    call(
        shared_daemon,
        "add_entry",
        title="Indentation",
        content="The user prefers tabs for indentation in Go code.",
    )
    edited = propose(shared_daemon, "Tabs", "The user prefers tabs for indentation in all Go code.")
    rejected = propose(shared_daemon, "Spaces", "The user likes two-space indents.")
    skipped = propose(shared_daemon, "Later", "Decide about this later.")
    approved = propose(shared_daemon, "Editor", "The user's editor is helix.")
    editor = editor_script(short_tmp, "path.write_text(text.replace('in all Go code', 'in Go and C'))")
    env = {**os.environ, "EDITOR": editor, "VISUAL": "", "COLUMNS": "120", "TERM": "dumb"}
    pty = Pty(
        [*MAKA, "--socket", str(shared_daemon.socket), "review", "-w", str(shared_daemon.workspace)], env
    )

    first = pty.expect(PROMPT)
    assert "Proposal 1/4" in first and "Similar entries:" in first
    assert any("│" in line and "Tabs" in line for line in first.splitlines())  # side by side
    pty.send("e")
    assert "Approved (edited)" in pty.expect(PROMPT)
    pty.send("r")
    pty.expect("Reason")
    pty.send("stale\n")
    assert "Rejected" in pty.expect(PROMPT)
    pty.send("s")
    assert "Proposal 4/4" in pty.expect(PROMPT)
    pty.send("a")
    code, rest = pty.wait()
    assert code == 0
    assert "Done: 2 approved, 1 rejected, 1 left waiting." in rest

    contents = {e["content"] for e in call(shared_daemon, "read_state", includeEntries=True)["entries"]}
    assert "The user prefers tabs for indentation in Go and C." in contents
    assert "The user's editor is helix." in contents
    waiting = [v["proposal"]["id"] for v in call(shared_daemon, "list_proposals")["proposals"]]
    assert waiting == [skipped] and edited not in waiting and approved not in waiting
    again = call(shared_daemon, "propose", title="Spaces", content="The user likes two-space indents.")
    assert again["previouslyRejected"]["reason"] == "stale"
    assert again["previouslyRejected"]["proposalId"] == rejected


LONG = (
    "The deployment pipeline for the payments service runs integration tests against the "
    "staging database called heron, then waits for a manual approval from the on-call "
    "engineer before promoting the build to production on Tuesday mornings only."
)


def test_review_from_a_pipe_shows_the_whole_proposal(shared_daemon: DaemonProcess) -> None:
    """Off a terminal nothing of the proposal being decided is cut or wrapped, even beside
    a similar entry."""
    call(shared_daemon, "add_entry", title="Deploys", content=LONG.replace("Tuesday", "Thursday"))
    propose(shared_daemon, "Deploys", LONG)
    result = run_maka(shared_daemon, "review", input="s\n", env={"COLUMNS": "120"})
    assert result.returncode == 0
    assert f"  {LONG}" in result.stdout.splitlines()
    assert "…" not in result.stdout


def test_review_on_a_terminal_wraps_between_words(shared_daemon: DaemonProcess) -> None:
    """On a terminal the card fits its width, side by side and stacked, and every word of
    the proposal is whole on some line (never split across two)."""
    call(shared_daemon, "add_entry", title="Deploys", content=LONG.replace("Tuesday", "Thursday"))
    propose(shared_daemon, "Deploys", LONG)
    for columns in ("120", "70"):
        env = {**os.environ, "COLUMNS": columns, "LINES": "40", "TERM": "dumb"}
        argv = [*MAKA, "--socket", str(shared_daemon.socket), "review", "-w", str(shared_daemon.workspace)]
        pty = Pty(argv, env)
        shown = pty.expect(PROMPT)
        pty.send("q")
        assert pty.wait()[0] == 0
        lines = [line.rstrip("\r") for line in shown.splitlines()]
        assert all(display_width(line) <= int(columns) for line in lines)
        words = {w for line in lines for w in line.replace("│", " ").split()}
        assert set(LONG.split()) <= words, (columns, set(LONG.split()) - words)


def test_review_quit_keeps_earlier_decisions(shared_daemon: DaemonProcess) -> None:
    """From a pipe each line is a key; q stops and what was decided stays decided."""
    first = propose(shared_daemon, "One", "first fact")
    second = propose(shared_daemon, "Two", "second fact")
    result = run_maka(shared_daemon, "review", input="x\na\nq\n")
    assert result.returncode == 0
    assert "a approve · p approve and pin" in result.stdout  # help after an unknown key
    assert "Done: 1 approved, 0 rejected, 1 left waiting." in result.stdout
    waiting = [v["proposal"]["id"] for v in call(shared_daemon, "list_proposals")["proposals"]]
    assert waiting == [second] and first not in waiting


def test_review_json_summary(shared_daemon: DaemonProcess) -> None:
    """With --json the cards go to stderr and stdout holds only the decisions as JSON."""
    pid = propose(shared_daemon, "One", "first fact")
    result = run_maka(shared_daemon, "review", "--json", input="r\n\n")
    assert json.loads(result.stdout) == {"approved": [], "rejected": [pid], "skipped": [], "gone": []}
    assert "Proposal 1/1" in result.stderr


def test_review_empty_queue(shared_daemon: DaemonProcess) -> None:
    """An empty queue ends at once."""
    result = run_maka(shared_daemon, "review")
    assert result.returncode == 0 and "No proposals waiting in " in result.stdout


def sample_view() -> dict[str, Any]:
    proposal = {
        "id": "p" * 16,
        "title": "New",
        "content": "tabs in all Go code",
        "origin": "extracted",
        "status": "review_required",
        "tags": [],
        "createdAt": 1,
        "updatedAt": 1,
        "supersedes": "m" * 16,
    }
    return {"proposal": proposal, "similarTo": ["s" * 16]}


def test_card_side_by_side_when_wide() -> None:
    """On a wide terminal a replacement sits beside the entry it replaces (old left, new
    right), its similar entries below; a proposal replacing nothing has them beside it."""
    memory = {
        "m" * 16: {"id": "m" * 16, "title": "Old", "content": "tabs in Go"},
        "s" * 16: {"id": "s" * 16, "title": "Near", "content": "tabs please"},
    }
    lines = card(sample_view(), 1, 1, memory, {}, width=120)
    assert any(line.startswith("Old — now in memory") and "New — proposed instead" in line for line in lines)
    near = next(i for i, line in enumerate(lines) if "Near" in line)
    assert "│" not in lines[near] and near > lines.index("Similar entries:")
    assert all(display_width(line) <= 120 for line in lines)
    plain = sample_view()
    del plain["proposal"]["supersedes"]
    lines = card(plain, 1, 1, memory, {}, width=120)
    assert any("Near" in line and "│" in line for line in lines)


def test_card_stacked_when_narrow_or_off_a_terminal() -> None:
    """On a narrow terminal the similar entries come below the proposal; off a terminal
    (no width) too, with nothing cut."""
    assert not any("│" in line for line in card(sample_view(), 1, 1, {}, {}, width=None))
    lines = card(sample_view(), 2, 3, {}, {}, width=60)
    assert not any("│" in line for line in lines)
    assert lines.index("Similar entries:") > lines.index("New")
    assert any("no longer there" in line for line in lines)


def test_card_says_why_a_returned_entry_is_waiting() -> None:
    """A proposal the daemon queued back after a save lacked it says so above the entry,
    with what approving and rejecting do; a proposal without the note does not."""
    returned = {**sample_view(), "note": "returned-after-a-save-lacked-it"}
    del returned["proposal"]["supersedes"]
    for width in (None, 60):
        text = " ".join(card(returned, 1, 1, {}, {}, width=width))
        assert "Returned to PENDING.md: a save of the file lacked it" in text, width
        assert "Approve it to keep it (the same entry), reject it to delete it." in text
    plain = sample_view()
    assert not any("Returned" in line for line in card(plain, 1, 1, {}, {}, width=None))


def test_review_can_approve_and_pin(shared_daemon: DaemonProcess) -> None:
    """p approves the proposal with the pinned tag added to its own tags."""
    d = shared_daemon
    call(d, "set_settings", agentReadEnabled=True, extractToolEnabled=True)
    call(d, "propose", title="Deploys", content="Deploys go out on Tuesdays.", tags=["ops"])
    result = run_maka(d, "review", input="p\n")
    assert result.returncode == 0 and "Approved and pinned" in result.stdout
    (entry,) = call(d, "read_state", includeEntries=True)["entries"]
    assert entry["tags"] == ["ops", "pinned"] and entry["content"] == "Deploys go out on Tuesdays."


def test_ctrl_c_says_what_was_decided_and_what_still_waits(shared_daemon: DaemonProcess) -> None:
    """Ctrl-C at a review's prompt exits 130 after saying what was decided (kept) and how
    many proposals still wait, so nobody wonders whether the approvals so far counted."""
    propose(shared_daemon, "Editor", "The user's editor is helix.")
    propose(shared_daemon, "Shell", "The user's shell is fish.")
    env = {**os.environ, "COLUMNS": "120", "TERM": "dumb"}
    argv = [*MAKA, "--socket", str(shared_daemon.socket), "review", "-w", str(shared_daemon.workspace)]
    pty = Pty(argv, env)
    pty.expect(PROMPT)
    pty.send("a")
    pty.expect(PROMPT)
    pty.proc.send_signal(signal.SIGINT)  # Ctrl-C (the pty is not the child's controlling terminal)
    code, rest = pty.wait()
    assert code == 130
    assert "Interrupted: 1 approved, 0 rejected, 1 left waiting." in rest
    assert len(call(shared_daemon, "list_proposals")["proposals"]) == 1

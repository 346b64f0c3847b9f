"""Every command `maka` suggests next, run with `-w DIR` (or `--user`), names that workspace:
the same command typed bare in the current folder would act on another one."""

from __future__ import annotations

import shlex

from tests.cli.helpers import call, run_maka
from tests.support import DaemonProcess


def test_backups_and_undo_name_the_workspace(shared_daemon: DaemonProcess) -> None:
    """`maka -w WS backups` and `-w WS undo` say `maka -w WS undo …`, and from inside the
    workspace (found like git) they say a bare `maka undo`."""
    ws = shared_daemon.workspace
    call(shared_daemon, "add_entry", title="Deploys", content="On Tuesdays.")
    call(shared_daemon, "add_entry", title="Editor", content="Uses vim.")
    listed = run_maka(shared_daemon, "backups")
    assert listed.returncode == 0
    assert f"`maka -w {ws} undo` restores the newest" in listed.stdout
    assert f"`maka -w {ws} undo ID` a chosen one" in listed.stdout
    undone = run_maka(shared_daemon, "undo")
    assert undone.returncode == 0, undone.stderr
    assert f"`maka -w {ws} undo " in undone.stdout and "puts back what this replaced" in undone.stdout
    here = run_maka(shared_daemon, "backups", workspace=False, cwd=ws)
    assert "`maka undo` restores the newest" in here.stdout


def test_settings_say_how_to_let_agents_read(shared_daemon: DaemonProcess) -> None:
    """`maka settings` with agent reads off says the command that turns them on, for this
    workspace; once on, the line is gone."""
    ws = shared_daemon.workspace
    shown = run_maka(shared_daemon, "settings")
    assert shown.returncode == 0
    assert f"`maka -w {ws} settings agentReadEnabled=on` lets them" in shown.stdout
    on = run_maka(shared_daemon, "settings", "agentReadEnabled=on")
    assert on.returncode == 0 and "Agents cannot read" not in on.stdout


def test_settings_say_incognito_overrides_the_switches(shared_daemon: DaemonProcess) -> None:
    """With incognito on, `maka settings` says agents read and propose nothing whatever the
    other switches (extractToolEffective among them) show, and names the command that ends it."""
    ws = shared_daemon.workspace
    shown = run_maka(
        shared_daemon, "settings", "agentReadEnabled=on", "extractToolEnabled=on", "incognito=on"
    )
    assert shown.returncode == 0
    assert "Incognito is on: agents read and propose nothing here" in shown.stdout
    assert f"`maka -w {ws} settings incognito=off` ends it" in shown.stdout
    off = run_maka(shared_daemon, "settings", "incognito=off")
    assert off.returncode == 0 and "Incognito is on" not in off.stdout


def test_settings_say_memory_switched_off_overrides_the_switches(shared_daemon: DaemonProcess) -> None:
    """With memory switched off (enabled=off), `maka settings` says agents read and propose
    nothing, and names the command that turns it back on."""
    ws = shared_daemon.workspace
    shown = run_maka(shared_daemon, "settings", "agentReadEnabled=on", "enabled=off")
    assert shown.returncode == 0
    assert "Memory is off here: agents read and propose nothing" in shown.stdout
    assert f"`maka -w {ws} settings enabled=on` turns it back on" in shown.stdout


def test_user_level_hints_say_user(shared_daemon: DaemonProcess) -> None:
    """With --user the suggested command carries --user, not the "@user" spelling."""
    shown = run_maka(shared_daemon, "--user", "settings", workspace=False)
    assert shown.returncode == 0
    assert "`maka --user settings agentReadEnabled=on`" in shown.stdout


def test_empty_context_names_the_workspace_to_switch_on(shared_daemon: DaemonProcess) -> None:
    """An empty pack because agent reads are off names `maka -w WS settings …`."""
    ws = shared_daemon.workspace
    call(shared_daemon, "add_entry", title="Deploys", content="On Tuesdays.")
    result = run_maka(shared_daemon, "context", "-q", "deploys")
    assert result.returncode == 0
    assert f"`maka -w {ws} settings agentReadEnabled=on`" in result.stdout


def test_incognito_listing_names_the_workspace(shared_daemon: DaemonProcess) -> None:
    """`maka -w WS memory list` under incognito says `maka -w WS settings incognito=off`."""
    ws = shared_daemon.workspace
    assert run_maka(shared_daemon, "settings", "incognito=on").returncode == 0
    result = run_maka(shared_daemon, "memory", "list")
    assert f"`maka -w {ws} settings incognito=off` ends incognito here" in result.stderr


def test_tidy_names_the_workspace(shared_daemon: DaemonProcess) -> None:
    """`maka -w WS memory tidy` with a stray bullet says `maka -w WS memory tidy --import`."""
    ws = shared_daemon.workspace
    (ws / "memory").mkdir(exist_ok=True)
    (ws / "memory" / "MEMORY.md").write_text("# Maka Memory\n\n- runs tests first\n\n## Tabs\nUse tabs.\n")
    result = run_maka(shared_daemon, "memory", "tidy")
    assert result.returncode == 0, result.stderr
    assert f"`maka -w {ws} memory tidy --import` queues their bullets" in result.stdout


def test_a_settings_typo_names_the_workspace(shared_daemon: DaemonProcess) -> None:
    """`maka -w WS settings agentReadEnabled` (no value) points at `maka -w WS settings`."""
    ws = shared_daemon.workspace
    result = run_maka(shared_daemon, "settings", "agentReadEnabled")
    assert result.returncode == 2
    assert f"(`maka -w {ws} settings` alone shows every setting)" in result.stderr


def test_search_without_a_hit_says_what_it_searched(shared_daemon: DaemonProcess) -> None:
    """`maka search` finding nothing says it looked through session history, and names the
    command that shows what memory gives for those words, in this workspace."""
    ws = shared_daemon.workspace
    call(shared_daemon, "add_entry", title="Deploys", content="On Tuesdays.")
    result = run_maka(shared_daemon, "search", "deploy days")
    assert result.returncode == 0
    assert "No event of the agent sessions matches 'deploy days'." in result.stdout
    assert f"`maka -w {ws} context -q 'deploy days'`" in result.stdout


def test_a_search_for_a_dash_word_names_a_context_command_that_runs(shared_daemon: DaemonProcess) -> None:
    """The context command named after a search for `-n2` finding nothing runs as printed
    (`--query=-n2`: after -q the word would read as an option)."""
    ws = str(shared_daemon.workspace)
    result = run_maka(shared_daemon, "-w", ws, "search", "--", "-n2", workspace=False)
    assert result.returncode == 0
    command = result.stdout.split("`")[1]
    assert command.endswith("context --query=-n2")
    again = run_maka(shared_daemon, *shlex.split(command)[1:], workspace=False)
    assert again.returncode == 0, again.stderr


def test_silenced_suggestions_name_the_switch(shared_daemon: DaemonProcess) -> None:
    """`maka suggest` silenced by a switch names the `maka -w WS settings …` that lifts it."""
    ws = shared_daemon.workspace
    off = run_maka(shared_daemon, "suggest")
    assert off.returncode == 0 and "agent read is off" in off.stdout
    assert f"To change that: `maka -w {ws} settings agentReadEnabled=on`" in off.stdout
    assert run_maka(shared_daemon, "settings", "agentReadEnabled=on", "attentionEnabled=off").returncode == 0
    quiet = run_maka(shared_daemon, "suggest")
    assert f"`maka -w {ws} settings attentionEnabled=on`" in quiet.stdout

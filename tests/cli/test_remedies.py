"""A closed gate or incognito names the `maka settings` command that lifts it."""

from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import call, run_maka
from tests.support import DaemonProcess

PROPOSAL = '{"title": "CI", "content": "CI runs on GitHub Actions."}'


def test_gate_closed_names_the_switches_to_turn_on(shared_daemon: DaemonProcess) -> None:
    """An agent proposal refused by the closed gate says which `maka settings` turns it on."""
    result = run_maka(shared_daemon, "call", "propose", PROPOSAL)
    assert result.returncode == 1 and "gate_closed" in result.stderr
    ws = str(shared_daemon.workspace)
    assert f"turn on with: maka -w {ws} settings agentReadEnabled=on extractToolEnabled=on" in result.stderr


def test_gate_closed_names_only_the_switch_still_off(shared_daemon: DaemonProcess) -> None:
    """With agent reads on, the line names extractToolEnabled alone, and that command works."""
    assert run_maka(shared_daemon, "settings", "agentReadEnabled=on").returncode == 0
    refused = run_maka(shared_daemon, "call", "propose", PROPOSAL)
    assert "settings extractToolEnabled=on" in refused.stderr
    assert "agentReadEnabled=on" not in refused.stderr
    assert run_maka(shared_daemon, "settings", "extractToolEnabled=on").returncode == 0
    assert run_maka(shared_daemon, "call", "propose", PROPOSAL).returncode == 0


def test_incognito_write_names_how_to_end_it(shared_daemon: DaemonProcess) -> None:
    """A write refused by incognito says `maka settings incognito=off` ends it."""
    assert run_maka(shared_daemon, "settings", "incognito=on").returncode == 0
    result = run_maka(shared_daemon, "memory", "add", "Title", "content")
    assert result.returncode == 1 and "incognito_blocked" in result.stderr
    assert "settings incognito=off ends it" in result.stderr


def test_incognito_listing_names_how_to_end_it(shared_daemon: DaemonProcess) -> None:
    """`maka memory list` under incognito says why nothing shows and how to end it."""
    assert run_maka(shared_daemon, "settings", "incognito=on").returncode == 0
    result = run_maka(shared_daemon, "memory", "list")
    assert "incognito_blocked" in result.stderr
    ws = shared_daemon.workspace
    assert f"`maka -w {ws} settings incognito=off` ends incognito here" in result.stderr
    assert result.stderr.startswith("maka: incognito is on: memory is not read (incognito_blocked)")


def test_disabled_listing_says_it_once_and_how_to_switch_on(shared_daemon: DaemonProcess) -> None:
    """`maka memory list` with memory switched off says so once, with the kind, and the fix."""
    assert run_maka(shared_daemon, "settings", "enabled=off").returncode == 0
    result = run_maka(shared_daemon, "memory", "list")
    assert result.stderr.startswith("maka: memory is disabled (disabled)\n")
    assert f"`maka -w {shared_daemon.workspace} settings enabled=on`" in result.stderr


def test_json_errors_stay_one_json_line(shared_daemon: DaemonProcess) -> None:
    """With --json the error is the JSON object alone, without the line for people."""
    result = run_maka(shared_daemon, "--json", "call", "propose", PROPOSAL)
    assert result.returncode == 1
    assert "turn on with" not in result.stderr and '"gate_closed"' in result.stderr


def test_missing_workspace_is_named_with_what_to_do(shared_daemon: DaemonProcess) -> None:
    """A -w folder that does not exist is named in the error, with what to do; nothing is created."""
    missing = shared_daemon.workspace / "no-such-project"
    result = run_maka(shared_daemon, "-w", str(missing), "memory", "add", "T", "C", workspace=False)
    assert result.returncode == 1 and "invalid_workspace" in result.stderr
    assert f"does not exist: {missing}; create it first" in result.stderr
    assert not missing.exists()


def test_workspace_that_is_a_file_is_named(shared_daemon: DaemonProcess) -> None:
    """A -w path naming a file says so and names it."""
    a_file = shared_daemon.workspace / "notes.txt"
    a_file.write_text("x\n")
    result = run_maka(shared_daemon, "-w", str(a_file), "memory", "list", workspace=False)
    assert result.returncode == 1
    assert f"workspace is not a directory: {a_file}" in result.stderr


def test_unknown_ids_name_the_command_that_lists_the_right_ones(shared_daemon: DaemonProcess) -> None:
    """An id that matches nothing (not_found) is followed by the command listing what exists:
    proposals for approve/reject, entries for memory actions, backups for undo, sessions."""
    ws = str(shared_daemon.workspace)
    for args, listing in (
        (("approve", "0123456789abcdef"), f"maka -w {ws} pending"),
        (("reject", "0123456789abcdef"), f"maka -w {ws} pending"),
        (("memory", "archive", "0123456789abcdef"), f"maka -w {ws} memory list -a"),
        (("memory", "show", "0123456789abcdef"), f"maka -w {ws} memory list -a"),
        (("undo", "0123456789abcdef"), f"maka -w {ws} backups"),
        (("compact", "-s", "0123456789abcdef"), f"maka -w {ws} sessions"),
    ):
        result = run_maka(shared_daemon, *args)
        assert result.returncode == 1 and "not_found" in result.stderr, (args, result.stderr)
        assert f"listed by: {listing}" in result.stderr, (args, result.stderr)


def test_a_mistyped_method_names_the_closest(shared_daemon: DaemonProcess) -> None:
    """`maka call read_stat` (and readState) is method_not_found followed by the closest
    method's name and where the list is; a name close to none gets the methods' names."""
    for typed in ("read_stat", "readState"):
        result = run_maka(shared_daemon, "call", typed)
        assert result.returncode == 1 and "method_not_found" in result.stderr
        assert "did you mean read_state?" in result.stderr, result.stderr
        assert "maka call rpc.discover" in result.stderr
    far = run_maka(shared_daemon, "call", "zzzzzz")
    assert "did you mean" not in far.stderr and "maka call rpc.discover" in far.stderr
    assert "the methods: ping, status, " in far.stderr and ", build_context, " in far.stderr


def test_a_mistyped_enum_value_names_the_closest(shared_daemon: DaemonProcess) -> None:
    """`maka call build_context` with strategy "ful" is invalid_params followed by the closest
    allowed value; a value close to none gets no guess (the allowed ones are listed above)."""
    result = run_maka(shared_daemon, "call", "build_context", '{"budgetTokens": 100, "strategy": "ful"}')
    assert result.returncode == 1 and "invalid_params" in result.stderr
    assert "did you mean 'full'?" in result.stderr
    far = run_maka(shared_daemon, "call", "build_context", '{"budgetTokens": 100, "strategy": "zzz"}')
    assert far.returncode == 1 and "did you mean" not in far.stderr and '"allowed"' in far.stderr


def test_a_mistyped_param_name_names_the_closest(shared_daemon: DaemonProcess) -> None:
    """`maka call read_state '{"includeEntrys": true}'` names includeEntries."""
    result = run_maka(shared_daemon, "call", "read_state", '{"includeEntrys": true}')
    assert result.returncode == 1 and "unknown field `includeEntrys`" in result.stderr
    assert "did you mean 'includeEntries'?" in result.stderr


def test_params_that_do_not_fit_are_said_once(shared_daemon: DaemonProcess) -> None:
    """An event with a field no event has names its path and the field on the error line,
    and the data line below it does not repeat them."""
    session = call(shared_daemon, "open_session")["sessionId"]
    events = '[{"type": "user_message", "content": "hi"}]'
    result = run_maka(
        shared_daemon, "call", "append_events", f'{{"sessionId": "{session}", "events": {events}}}'
    )
    assert result.returncode == 1
    assert "maka: Invalid params: $.events[0]: Object contains unknown field `content`" in result.stderr
    assert result.stderr.count("unknown field `content`") == 1, result.stderr


def test_a_found_workspace_that_is_the_user_level_says_how_to_go_on(short_tmp: Path) -> None:
    """With the user level in the home folder (--user-memory ~), `maka` in a home subfolder
    without a workspace of its own finds the home folder, which is refused as reserved: the
    error says how it got there and names --user and `-w` with the current folder."""
    home = short_tmp / "home"
    proc = DaemonProcess(short_tmp, env={"MAKAD_USER_MEMORY": str(home)})
    proc.start()
    try:
        proc.call("add_entry", {"workspace": "@user", "title": "Tabs", "content": "Indent with tabs."})
        notes = home / "notes"
        notes.mkdir()
        result = run_maka(proc, "memory", "list", workspace=False, cwd=notes, env={"HOME": str(home)})
        assert result.returncode == 1 and "reserved" in result.stderr
        assert f"found {home} by walking up" in result.stderr, result.stderr
        assert "--user" in result.stderr and f"-w {notes}" in result.stderr
        there = run_maka(proc, "memory", "list", "-w", str(notes), workspace=False)
        assert there.returncode == 0, there.stderr
    finally:
        proc.stop()

"""A mistyped value is a usage error (exit 2) that names the valid values and the closest
one, before anything is sent or changed; never a silent empty result or a traceback."""

from __future__ import annotations

import json

from tests.cli.helpers import call, run_maka
from tests.support import DaemonProcess


def test_a_mistyped_switch_value_names_on_and_off(shared_daemon: DaemonProcess) -> None:
    """`agentReadEnabled=onn` exits 2 with "did you mean 'on'", and the switch stays off."""
    result = run_maka(shared_daemon, "settings", "agentReadEnabled=onn")
    assert result.returncode == 2
    assert "agentReadEnabled: 'onn' is not on or off (did you mean 'on'?)" in result.stderr
    assert call(shared_daemon, "get_settings")["agentReadEnabled"] is False


def test_a_switch_takes_words_not_numbers_or_strings(shared_daemon: DaemonProcess) -> None:
    """`incognito=1` and `incognito="x"` are usage errors, not the daemon's invalid_params;
    True/YES/false in any case work."""
    for typed in ("incognito=1", 'incognito="x"'):
        result = run_maka(shared_daemon, "settings", typed)
        assert result.returncode == 2, (typed, result.stderr)
        assert "is not on or off" in result.stderr and "invalid_params" not in result.stderr
    assert run_maka(shared_daemon, "settings", "agentReadEnabled=True").returncode == 0
    assert call(shared_daemon, "get_settings")["agentReadEnabled"] is True
    assert run_maka(shared_daemon, "settings", "agentReadEnabled=FALSE").returncode == 0
    assert call(shared_daemon, "get_settings")["agentReadEnabled"] is False


def test_a_number_setting_takes_a_number_or_null(shared_daemon: DaemonProcess) -> None:
    """`defaultDecayDays=abc` or `=on` exit 2 saying how it is written; 7.5 and null work."""
    for typed in ("defaultDecayDays=abc", "defaultDecayDays=on", "defaultDecayDays=inf"):
        result = run_maka(shared_daemon, "settings", typed)
        assert result.returncode == 2, (typed, result.stderr)
        assert "is not a number or null" in result.stderr and "defaultDecayDays=N" in result.stderr
    assert run_maka(shared_daemon, "settings", "defaultDecayDays=7.5").returncode == 0
    assert call(shared_daemon, "get_settings")["defaultDecayDays"] == 7.5
    assert run_maka(shared_daemon, "settings", "defaultDecayDays=null").returncode == 0
    assert call(shared_daemon, "get_settings")["defaultDecayDays"] is None


def test_listing_by_a_mistyped_tag_names_the_closest(shared_daemon: DaemonProcess) -> None:
    """`maka memory list -t opps` exits 2 with "did you mean 'ops'" and the tags in use,
    instead of "No entries."; a tag in use still lists its entries."""
    call(shared_daemon, "add_entry", title="Deploys", content="On Tuesdays.", tags=["ops"])
    call(shared_daemon, "add_entry", title="Editor", content="Uses vim.", tags=["tools"])
    result = run_maka(shared_daemon, "memory", "list", "-t", "opps")
    assert result.returncode == 2
    assert "no entry is tagged 'opps': did you mean 'ops'? (tags in use: ops, tools)" in result.stderr
    assert "No entries." not in result.stdout
    listed = run_maka(shared_daemon, "memory", "list", "-t", "ops")
    assert listed.returncode == 0 and "Deploys" in listed.stdout and "Editor" not in listed.stdout


def test_several_tags_list_the_entries_carrying_every_one(shared_daemon: DaemonProcess) -> None:
    """`-t ops -t pinned` and `-t ops,pinned` list only the entries with both tags; when
    none carries both, the message says so instead of "No entries"."""
    call(shared_daemon, "add_entry", title="Deploys", content="On Tuesdays.", tags=["ops", "pinned"])
    call(shared_daemon, "add_entry", title="Oncall", content="Rotates weekly.", tags=["ops"])
    for typed in (["-t", "ops", "-t", "pinned"], ["-t", "ops,pinned"]):
        listed = run_maka(shared_daemon, "memory", "list", *typed)
        assert listed.returncode == 0 and "Deploys" in listed.stdout and "Oncall" not in listed.stdout
    call(shared_daemon, "add_entry", title="Editor", content="Uses vim.", tags=["tools"])
    none = run_maka(shared_daemon, "memory", "list", "-t", "tools,ops")
    assert none.returncode == 0
    assert "is tagged 'tools' and 'ops' at once" in none.stdout and "No entries" not in none.stdout


def test_a_tag_filter_with_no_tag_in_use_says_so_without_a_stray_colon(shared_daemon: DaemonProcess) -> None:
    """With no tag in use the usage error reads "no entry is tagged 'ops' (no tags are in use)"."""
    call(shared_daemon, "add_entry", title="Editor", content="Uses vim.")
    result = run_maka(shared_daemon, "memory", "list", "-t", "ops")
    assert "no entry is tagged 'ops' (no tags are in use)" in result.stderr


def test_a_tag_filter_on_a_memory_without_tags_says_so(shared_daemon: DaemonProcess) -> None:
    """With no tag in use, `memory list -t X` says no tags are in use (exit 2)."""
    call(shared_daemon, "add_entry", title="Editor", content="Uses vim.")
    result = run_maka(shared_daemon, "memory", "list", "-t", "ops")
    assert result.returncode == 2 and "no tags are in use" in result.stderr


def test_a_timeout_of_zero_or_less_is_a_usage_error(shared_daemon: DaemonProcess) -> None:
    """`maka --timeout -1 ping` (or 0, or nan) exits 2 with a message, not a traceback."""
    for typed in ("-1", "0", "nan", "soon"):
        result = run_maka(shared_daemon, "--timeout", typed, "ping", workspace=False)
        assert result.returncode == 2, (typed, result.stderr)
        assert "not a number of seconds above 0" in result.stderr
    assert run_maka(shared_daemon, "--timeout", "2.5", "ping", workspace=False).returncode == 0


def test_a_search_limit_below_one_is_a_usage_error(shared_daemon: DaemonProcess) -> None:
    """`maka search X -n 0` exits 2 naming the limit, not 1 with the daemon's invalid_params."""
    result = run_maka(shared_daemon, "search", "deploy", "-n", "0")
    assert result.returncode == 2
    assert "not a whole number from 1 up: '0'" in result.stderr and "invalid_params" not in result.stderr


def test_a_mistyped_option_names_the_closest_of_that_command(shared_daemon: DaemonProcess) -> None:
    """`maka memory list --achived` exits 2 with "did you mean '--archived'?"; an option no
    option of the command is close to (`--status`) gets no guess."""
    result = run_maka(shared_daemon, "memory", "list", "--achived")
    assert result.returncode == 2
    assert "unrecognized arguments: --achived; did you mean '--archived'?" in result.stderr
    far = run_maka(shared_daemon, "memory", "list", "--status", "actve")
    assert far.returncode == 2
    assert "unrecognized arguments: --status actve" in far.stderr and "did you mean" not in far.stderr
    typed = run_maka(shared_daemon, "mcp", "--worksapce=/tmp", workspace=False)
    assert typed.returncode == 2 and "did you mean '--workspace'?" in typed.stderr


def test_a_mistyped_option_shows_the_usage_of_its_command(shared_daemon: DaemonProcess) -> None:
    """`maka pending --jsn` prints `maka pending`'s usage line and error, not maka's
    whole option list."""
    result = run_maka(shared_daemon, "pending", "--jsn")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: maka pending [-h]")
    assert "maka pending: error: unrecognized arguments: --jsn; did you mean '--json'?" in result.stderr


def test_json_listing_by_tag_lists_that_tag(shared_daemon: DaemonProcess) -> None:
    """`maka --json memory list -t ops` holds only the entries tagged ops (it held every
    entry), and a tag no entry carries is the same usage error as without --json."""
    call(shared_daemon, "add_entry", title="Deploys", content="On Tuesdays.", tags=["ops"])
    call(shared_daemon, "add_entry", title="Editor", content="Uses vim.", tags=["tools"])
    listed = run_maka(shared_daemon, "--json", "memory", "list", "-t", "ops")
    assert listed.returncode == 0
    assert [e["title"] for e in json.loads(listed.stdout)["entries"]] == ["Deploys"]
    typo = run_maka(shared_daemon, "--json", "memory", "list", "-t", "opps")
    assert typo.returncode == 2 and "did you mean 'ops'?" in typo.stderr


def test_decay_days_below_zero_is_a_usage_error(shared_daemon: DaemonProcess) -> None:
    """`maka memory add T C --decay-days -1` exits 2 before anything is written (it was the
    daemon's invalid_params); 0 (never) is taken."""
    result = run_maka(shared_daemon, "memory", "add", "T", "C", "--decay-days", "-1")
    assert result.returncode == 2 and "not a number of days from 0 up: '-1'" in result.stderr
    assert not (shared_daemon.workspace / "memory" / "MEMORY.md").exists()
    assert run_maka(shared_daemon, "memory", "add", "T", "C", "--decay-days", "0").returncode == 0


def test_an_option_of_maka_itself_after_the_command_says_where_it_goes(shared_daemon: DaemonProcess) -> None:
    """`maka status --no-autostart` (an option only `maka` takes, typed after the command)
    says it goes before the command, not "did you mean" the same option."""
    result = run_maka(shared_daemon, "status", "--no-autostart", workspace=False)
    assert result.returncode == 2
    assert "did you mean" not in result.stderr
    assert "'--no-autostart' goes before the command: maka --no-autostart status" in result.stderr
    close = run_maka(shared_daemon, "status", "--timout", "3", workspace=False)
    assert "did you mean '--timeout'? it goes before the command: maka --timeout" in close.stderr


def test_a_number_of_days_typed_with_its_unit_names_the_number(shared_daemon: DaemonProcess) -> None:
    """`defaultDecayDays=30d` (or `30days`) exits 2 with "did you mean defaultDecayDays=30?",
    in one sentence without nested parentheses; nothing changes."""
    for typed in ("defaultDecayDays=30d", "defaultDecayDays=30days"):
        result = run_maka(shared_daemon, "settings", typed)
        assert result.returncode == 2, (typed, result.stderr)
        assert "did you mean defaultDecayDays=30?" in result.stderr
        assert "))" not in result.stderr
    assert call(shared_daemon, "get_settings")["defaultDecayDays"] is None


def test_a_setting_typed_with_a_colon_names_the_equals_form(shared_daemon: DaemonProcess) -> None:
    """`agentReadEnabled:on` exits 2 with "did you mean agentReadEnabled=on?"; nothing changes."""
    result = run_maka(shared_daemon, "settings", "agentReadEnabled:on")
    assert result.returncode == 2
    assert "did you mean agentReadEnabled=on?" in result.stderr
    assert call(shared_daemon, "get_settings")["agentReadEnabled"] is False


def test_an_unknown_option_before_the_command_is_named(shared_daemon: DaemonProcess) -> None:
    """`maka -W DIR status` names -W as the unknown option with the closest one (-w), not
    "invalid choice" for the folder taken as the command; `maka --jsn status` names --json."""
    result = run_maka(shared_daemon, "-W", str(shared_daemon.workspace), "status", workspace=False)
    assert result.returncode == 2
    assert "unrecognized option: -W; did you mean '-w'?" in result.stderr
    assert "invalid choice" not in result.stderr
    long = run_maka(shared_daemon, "--jsn", "status", workspace=False)
    assert long.returncode == 2 and "did you mean '--json'?" in long.stderr
    one_dash = run_maka(shared_daemon, "-json", "status", workspace=False)
    assert (
        one_dash.returncode == 2 and "unrecognized option: -json; did you mean '--json'?" in one_dash.stderr
    )
    attached = run_maka(shared_daemon, f"-w{shared_daemon.workspace}", "--time=5", "status", workspace=False)
    assert attached.returncode == 0, attached.stderr


def test_no_command_lists_the_commands(shared_daemon: DaemonProcess) -> None:
    """`maka` alone and `maka memory` alone exit 2 naming the commands (actions) to choose
    from and where they are described, not only "the following arguments are required"."""
    bare = run_maka(shared_daemon, workspace=False)
    assert bare.returncode == 2
    assert "choose from status, ping" in bare.stderr and "maka --help" in bare.stderr
    memory = run_maka(shared_daemon, "memory", workspace=False)
    assert memory.returncode == 2
    assert "choose from list, tidy, show, add" in memory.stderr and "maka memory --help" in memory.stderr


def test_help_and_version_as_commands_point_at_the_options(shared_daemon: DaemonProcess) -> None:
    """`maka help` points at --help and `maka version` at --version, instead of listing
    every command or guessing 'sessions'."""
    help_word = run_maka(shared_daemon, "help", workspace=False)
    assert help_word.returncode == 2 and "did you mean 'maka --help'?" in help_word.stderr
    version = run_maka(shared_daemon, "version", workspace=False)
    assert version.returncode == 2 and "did you mean 'maka --version'?" in version.stderr
    assert "sessions" not in version.stderr


def test_an_action_of_memory_typed_alone_names_maka_memory(shared_daemon: DaemonProcess) -> None:
    """`maka pin ID` and `maka list` (an action of `maka memory` without it) exit 2 naming
    `maka memory pin` and `maka memory list`, never a command spelt alike ('ping')."""
    pin = run_maka(shared_daemon, "pin", "0123abcd", workspace=False)
    assert pin.returncode == 2 and "did you mean 'maka memory pin'?" in pin.stderr
    assert "'ping'" not in pin.stderr
    listing = run_maka(shared_daemon, "list", workspace=False)
    assert listing.returncode == 2 and "did you mean 'maka memory list'?" in listing.stderr


def test_commands_of_other_tools_name_what_maka_does_instead(shared_daemon: DaemonProcess) -> None:
    """`maka init`, `maka doctor` and `maka start` say what does that here (no init is
    needed, `maka status`, autostart) instead of listing every command or guessing 'status'."""
    init = run_maka(shared_daemon, "init", workspace=False)
    assert init.returncode == 2 and "there is no init" in init.stderr and "maka memory add" in init.stderr
    doctor = run_maka(shared_daemon, "doctor", workspace=False)
    assert doctor.returncode == 2 and "`maka status` checks" in doctor.stderr
    start = run_maka(shared_daemon, "start", workspace=False)
    assert start.returncode == 2 and "starts makad on demand" in start.stderr
    assert "did you mean 'status'" not in start.stderr


def test_a_command_taken_for_the_workspace_folder_is_named(shared_daemon: DaemonProcess) -> None:
    """`maka -w memory list` (the folder left out) says -w took the command 'memory' for the
    folder and how to write it, not only that 'list' is no command; `-w memory status` (a
    folder named memory, then a command) still runs."""
    result = run_maka(shared_daemon, "-w", "memory", "list", workspace=False)
    assert result.returncode == 2
    assert "-w took the command 'memory' for the workspace folder" in result.stderr
    assert "maka -w DIR memory list" in result.stderr
    ran = run_maka(shared_daemon, "-w", "memory", "ping", workspace=False)
    assert ran.returncode == 0, ran.stderr

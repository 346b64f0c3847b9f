"""`maka sessions`, `maka backups` and `maka undo` against a real daemon."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.helpers import run_maka
from tests.support import DaemonProcess


def maka(d: DaemonProcess, new_ws: Path, *args: str) -> tuple[int, str, str]:
    result = run_maka(d, *args, "-w", str(new_ws), workspace=False)
    return result.returncode, result.stdout, result.stderr


def call(d: DaemonProcess, new_ws: Path, method: str, **params: Any) -> Any:
    return d.call(method, {"workspace": str(new_ws), **params})


def memory_text(new_ws: Path) -> str:
    return (new_ws / "memory" / "MEMORY.md").read_text()


def test_sessions_lists_each_session(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """sessions shows every session with its title and event count; --json is list_sessions."""
    sid = call(module_daemon, new_ws, "open_session", title="Fix the build")["sessionId"]
    call(
        module_daemon,
        new_ws,
        "append_events",
        sessionId=sid,
        events=[{"type": "user_message", "text": "hi"}] * 3,
    )
    code, out, _ = maka(module_daemon, new_ws, "sessions")
    assert code == 0
    header, row = out.splitlines()[:2]
    assert header.split() == ["ID", "STARTED", "STATE", "EVENTS", "TITLE"]
    assert row.endswith("Fix the build") and " 3 " in row and "open" in row
    code, out, _ = maka(module_daemon, new_ws, "sessions", "--json")
    assert [s["sessionId"] for s in json.loads(out)["sessions"]] == [sid]


def test_no_sessions_says_so(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """sessions in a workspace without any says so and exits 0."""
    code, out, _ = maka(module_daemon, new_ws, "sessions")
    assert code == 0 and "No sessions." in out


def test_no_open_session_does_not_say_there_are_none(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """sessions --open with only closed sessions says none is open and how to list the
    closed ones, not that there are no sessions."""
    sid = call(module_daemon, new_ws, "open_session", title="Done")["sessionId"]
    call(module_daemon, new_ws, "close_session", sessionId=sid)
    code, out, _ = maka(module_daemon, new_ws, "sessions", "--open")
    assert code == 0 and "No sessions." not in out
    assert f"No open sessions (1 closed: `maka -w {new_ws} sessions` lists them)." in out


def test_search_finds_past_sessions_events(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """search QUERY lists the matching events of the workspace's sessions with their refs
    (as `maka sessions` shows the session: short), newest session's too; -s narrows to one
    session by its short id; --json is search_history's result."""
    sids = [call(module_daemon, new_ws, "open_session", title=t)["sessionId"] for t in ("one", "two")]
    for sid, text in zip(
        sids, ("The staging DB\nlistens on port 5433.", "Staging moved to 5434."), strict=True
    ):
        call(
            module_daemon,
            new_ws,
            "append_events",
            sessionId=sid,
            events=[{"type": "user_message", "text": text}],
        )
    call(
        module_daemon,
        new_ws,
        "append_events",
        sessionId=sids[0],
        events=[{"type": "note", "text": "unrelated"}],
    )
    code, out, err = maka(module_daemon, new_ws, "search", "staging")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["REF", "WHEN", "TYPE", "TEXT"]
    assert any(
        f"event:{sids[0][:12]}:1" in line and "The staging DB listens on port 5433." in line for line in lines
    )
    assert any(f"event:{sids[1][:12]}:1" in line and "user_message" in line for line in lines)
    assert "unrelated" not in out
    code, out, _ = maka(module_daemon, new_ws, "search", "staging", "-s", sids[1][:12])
    assert code == 0 and "5434" in out and "5433" not in out
    code, out, _ = maka(module_daemon, new_ws, "search", "staging", "--json")
    assert {h["event"]["sessionId"] for h in json.loads(out)["hits"]} == set(sids)
    code, out, _ = maka(module_daemon, new_ws, "search", "kubernetes")
    assert code == 0 and out.startswith("No event of the agent sessions matches")


def test_episodes_of_an_unknown_session_says_so(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """episodes --session with an id no session has exits 1 saying so and naming `maka
    sessions`, instead of an empty "No episodes." that reads as a real answer."""
    call(module_daemon, new_ws, "open_session", title="real")
    code, out, err = maka(module_daemon, new_ws, "episodes", "--session", "0123456789ab")
    assert code == 1 and "No episodes." not in out
    assert "0123456789ab" in err and "maka" in err and "sessions" in err


def test_backups_lists_the_saved_versions(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """Each write keeps the version it replaced; backups lists them newest first."""
    call(module_daemon, new_ws, "add_entry", title="One", content="first")
    call(module_daemon, new_ws, "add_entry", title="Two", content="second")
    code, out, _ = maka(module_daemon, new_ws, "backups")
    assert code == 0
    rows = out.splitlines()
    assert rows[0].split()[:3] == ["ID", "FILE", "SAVED"] and "MEMORY" in rows[1]
    listed = json.loads(maka(module_daemon, new_ws, "backups", "--json")[1])["backups"]
    assert listed and listed[0]["file"] == "MEMORY"


def test_undo_restores_the_version_before_the_last_change(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """undo puts MEMORY.md back as it was before the last write and says what it undid."""
    call(module_daemon, new_ws, "add_entry", title="Keep", content="kept")
    before = memory_text(new_ws)
    call(module_daemon, new_ws, "add_entry", title="Oops", content="added by mistake")
    code, out, err = maka(module_daemon, new_ws, "undo")
    assert code == 0, err
    assert memory_text(new_ws) == before
    assert "Oops" in out and "removed" in out
    # The undo is a write too: undoing it again brings the entry back.
    code, out, _ = maka(module_daemon, new_ws, "undo")
    assert code == 0 and "added by mistake" in memory_text(new_ws) and "brought back" in out


def test_undo_a_named_backup_by_prefix(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """undo BACKUP restores that backup (a unique prefix is enough)."""
    call(module_daemon, new_ws, "add_entry", title="A", content="alpha")
    call(module_daemon, new_ws, "add_entry", title="B", content="beta")
    call(module_daemon, new_ws, "add_entry", title="C", content="gamma")
    backups = call(module_daemon, new_ws, "list_backups")["backups"]
    assert len(backups) == 2  # before B and before C: the file did not exist before A
    oldest = backups[-1]["backupId"]
    code, _, err = maka(module_daemon, new_ws, "undo", oldest[:-3])
    assert code == 0, err
    text = memory_text(new_ws)
    assert "alpha" in text and "beta" not in text and "gamma" not in text


def test_undo_with_nothing_to_undo_is_an_error(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """undo in a workspace that has no backup says so and exits 1."""
    code, _, err = maka(module_daemon, new_ws, "undo")
    assert code == 1 and "nothing to undo" in err


def test_undo_refuses_when_the_file_changed_meanwhile(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """undo sends the revision it read: a change in between is a conflict, not lost."""
    call(module_daemon, new_ws, "add_entry", title="X", content="x")
    call(module_daemon, new_ws, "add_entry", title="Y", content="y")
    from maka.cli import backups as backups_cmd

    real = backups_cmd.read_entries

    def racing(client: Any, workspace: str) -> Any:
        state = real(client, workspace)
        call(module_daemon, new_ws, "add_entry", title="Z", content="written meanwhile")
        return state

    backups_cmd.read_entries = racing  # type: ignore[assignment]
    try:
        code, _, err = maka(module_daemon, new_ws, "undo")
    finally:
        backups_cmd.read_entries = real  # type: ignore[assignment]
    assert code == 1 and "conflict" in err
    assert "written meanwhile" in memory_text(new_ws)


def test_commands_take_the_short_session_ids_they_show(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """The session id `maka sessions` prints (a prefix) works in episodes --session, context -s
    and compact -s; a prefix of two sessions is a usage error listing them."""
    sids = []
    while len({s[0] for s in sids}) == len(sids):  # until two ids share a first character
        sid = call(module_daemon, new_ws, "open_session", title=f"s{len(sids)}")["sessionId"]
        call(
            module_daemon,
            new_ws,
            "append_events",
            sessionId=sid,
            events=[{"type": "user_message", "text": "hi"}],
        )
        sids.append(sid)
    sid = sids[0]
    call(
        module_daemon,
        new_ws,
        "record_episode",
        sessionId=sid,
        summary="Chose the heron name",
        sourceRefs=[f"event:{sid}:1"],
    )
    code, out, _ = maka(module_daemon, new_ws, "sessions")
    shown = next(line.split()[0] for line in out.splitlines() if line.endswith(" s0"))
    assert sid.startswith(shown) and shown != sid
    code, out, err = maka(module_daemon, new_ws, "--json", "episodes", "--session", shown)
    assert code == 0, err
    assert [e["sessionId"] for e in json.loads(out)["episodes"]] == [sid]
    code, out, err = maka(module_daemon, new_ws, "--json", "context", "-s", shown, "-q", "heron")
    assert code == 0, err
    assert [m["sourceId"] for m in json.loads(out)["messages"]] == [f"event:{sid}:1"]  # its history
    code, _, err = maka(module_daemon, new_ws, "--json", "compact", "-s", shown)
    assert "nothing to compact" in err  # the session was found: one event is too little to compact
    twins = [s for s in sids if s[0] == sids[-1][0]]
    code, _, err = maka(module_daemon, new_ws, "episodes", "--session", twins[0][0])
    assert code == 2 and "ambiguous" in err and all(t in err for t in twins)


# Prose, not one letter repeated: the secret scan an append runs reads words several times
# faster than a single 3 MiB run of one character.
PROSE_3_MIB = ("lorem ipsum dolor sit amet " * (3 * 1024 * 1024 // 27 + 1))[: 3 * 1024 * 1024]


def test_search_says_when_large_events_were_left_out(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """Three matching events of 3 MiB: search lists the two that fit in one reply and says
    one more was left out; --json carries search_history's omitted count."""
    sid = call(module_daemon, new_ws, "open_session")["sessionId"]
    for letter in "abc":
        module_daemon.call(
            "append_events",
            {
                "workspace": str(new_ws),
                "sessionId": sid,
                "events": [{"type": "note", "text": f"heron {letter} {PROSE_3_MIB}"}],
            },
            timeout=120,
        )
    code, out, err = maka(module_daemon, new_ws, "search", "heron")
    assert code == 0, err
    assert "heron a" in out and "heron b" in out and "heron c" not in out
    assert "(1 more matching event was left out" in out
    code, out, _ = maka(module_daemon, new_ws, "search", "heron", "--json")
    assert json.loads(out)["omitted"] == 1

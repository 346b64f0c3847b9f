"""Source refs a call hands in must name what the workspace stores, over the socket."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from maka.errors import RemoteError
from tests.support import DaemonProcess

SECRET = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7dEf0hIj3kLm6n"


def ws(d: DaemonProcess) -> str:
    return str(d.workspace)


def call(d: DaemonProcess, method: str, workspace: str | None = None, **params: Any) -> Any:
    return d.call(method, {"workspace": workspace or ws(d), **params})


def open_gate(d: DaemonProcess, workspace: str | None = None) -> None:
    call(d, "set_settings", workspace, agentReadEnabled=True, extractToolEnabled=True)


def recorded(d: DaemonProcess, events: int, workspace: str | None = None, words: int = 2) -> str:
    """A session of ``events`` user messages of ``words`` words (seqs 1..events)."""
    sid: str = call(d, "open_session", workspace)["sessionId"]
    batch = [{"type": "user_message", "text": f"message {i} " + "word " * words} for i in range(events)]
    call(d, "append_events", workspace, sessionId=sid, events=batch)
    return sid


def pending(d: DaemonProcess, workspace: str | None = None) -> bytes | None:
    path = Path(workspace or ws(d)) / "memory" / "PENDING.md"
    return path.read_bytes() if path.exists() else None


def refused(d: DaemonProcess, method: str, workspace: str | None = None, **params: Any) -> dict[str, Any]:
    """The call's error data; asserts it is invalid_params and PENDING.md did not change."""
    before = pending(d, workspace)
    with pytest.raises(RemoteError) as info:
        call(d, method, workspace, **params)
    assert info.value.kind == "invalid_params", info.value.data
    assert pending(d, workspace) == before
    data: dict[str, Any] = info.value.data
    return data


def test_propose_keeps_refs_that_name_recorded_events(shared_daemon: DaemonProcess) -> None:
    """A proposal citing a recorded event, a range within its session and its whole span is
    queued with those refs, and memory_history lists them."""
    d = shared_daemon
    open_gate(d)
    sid = recorded(d, 3)
    refs = [f"event:{sid}:1", f"event:{sid}:2-3", f"event:{sid}:1-3"]
    result = call(d, "propose", title="T", content="Deploys on Tuesdays", sourceRefs=refs)
    assert result["queued"] and result["proposal"]["sourceRefs"] == refs
    history = call(d, "memory_history", id=result["proposal"]["id"])
    assert history["sourceRefs"] == refs


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ("event:ghost:1", "unknown_session"),
        ("event:{sid}:3", "past_last_seq"),
        ("event:{sid}:2-5", "past_last_seq"),
        ("event:{sid}:0", "not_a_source_ref"),
        ("event:{sid}:2-1", "not_a_source_ref"),
        ("file:src/app.py", "not_a_source_ref"),
        ("memory:", "not_a_source_ref"),
        ("memory:0123456789abcdef", "unknown_entry"),
        ("checkpoint:nope", "unknown_checkpoint"),
        ("episode:nope", "unknown_episode"),
    ],
)
def test_propose_refuses_a_ref_that_names_nothing(
    shared_daemon: DaemonProcess, ref: str, reason: str
) -> None:
    """A ref to an unknown session, past the session's last seq (alone or as a range running
    past it), malformed, or to a missing entry, checkpoint or episode is invalid_params at
    its index, with a stable reason and the ref; PENDING.md is not written."""
    d = shared_daemon
    open_gate(d)
    sid = recorded(d, 2)
    bad = ref.format(sid=sid)
    data = refused(
        d,
        "propose",
        title="T",
        content="Deploys on Tuesdays",
        sourceRefs=[f"event:{sid}:1", f"event:{sid}:2", bad],
    )
    assert (data["path"], data["reason"], data["ref"]) == ("$.sourceRefs[2]", reason, bad)
    if reason == "past_last_seq":
        assert data["lastSeq"] == 2
    assert call(d, "list_proposals")["proposals"] == []


def test_propose_refuses_another_workspaces_session(shared_daemon: DaemonProcess) -> None:
    """An event ref to a session recorded in another workspace is refused as unknown here."""
    d = shared_daemon
    open_gate(d)
    other = str(d.workspace) + "-other"
    Path(other).mkdir()
    theirs = recorded(d, 3, other)
    data = refused(d, "propose", title="T", content="Uses UTC", sourceRefs=[f"event:{theirs}:1"])
    assert (data["path"], data["reason"]) == ("$.sourceRefs[0]", "unknown_session")


def test_propose_accepts_refs_to_entries_checkpoints_and_episodes(shared_daemon: DaemonProcess) -> None:
    """memory:, checkpoint: and episode: refs naming what the workspace has are kept."""
    d = shared_daemon
    open_gate(d)
    sid = recorded(d, 20, words=300)
    entry = call(d, "add_entry", title="Editor", content="Uses vim")["entry"]
    checkpoint = call(d, "compact", sessionId=sid, mode="checkpoint", keepRecentTokens=1000)["checkpointId"]
    episode = call(
        d, "record_episode", sessionId=sid, summary="likes tea", tags=["tea"], sourceRefs=[f"event:{sid}:1"]
    )
    refs = [f"memory:{entry['id']}", f"checkpoint:{checkpoint}", f"episode:{episode['episodeId']}"]
    result = call(d, "propose", title="T", content="Prefers neovim now", sourceRefs=refs)
    assert result["queued"] and result["proposal"]["sourceRefs"] == refs


def test_a_refused_ref_holding_a_secret_is_not_echoed(shared_daemon: DaemonProcess) -> None:
    """A ref holding a secret is quoted in the error as the daemon would store it, redacted."""
    d = shared_daemon
    open_gate(d)
    data = refused(d, "propose", title="T", content="c", sourceRefs=[f"note:{SECRET}"])
    assert data["reason"] == "not_a_source_ref" and SECRET not in str(data)
    data = refused(d, "propose", title="T", content="c", sourceRefs=[f"event:{SECRET}:1"])
    assert data["reason"] == "unknown_session" and SECRET not in str(data)


def test_a_retry_answers_even_once_its_refs_are_gone(shared_daemon: DaemonProcess) -> None:
    """A retried requestId gets the first result, even after the cited session was deleted."""
    d = shared_daemon
    open_gate(d)
    sid = recorded(d, 1)
    params = {
        "title": "T",
        "content": "Ships on Fridays",
        "sourceRefs": [f"event:{sid}:1"],
        "requestId": "r1",
    }
    first = call(d, "propose", **params)
    call(d, "delete_session", sessionId=sid)
    assert call(d, "propose", **params) == first
    data = refused(d, "propose", title="T", content="Ships on Mondays", sourceRefs=[f"event:{sid}:1"])
    assert data["reason"] == "unknown_session"


def test_refs_still_resolve_after_compaction(shared_daemon: DaemonProcess) -> None:
    """Compaction keeps the events, so a ref to a compacted event is still accepted."""
    d = shared_daemon
    open_gate(d)
    sid = recorded(d, 20, words=300)
    call(d, "compact", sessionId=sid, mode="checkpoint", keepRecentTokens=1000)
    result = call(d, "propose", title="T", content="Keeps notes", sourceRefs=[f"event:{sid}:1-20"])
    assert result["queued"]


def test_a_global_proposal_cites_the_workspace_it_comes_from(shared_daemon: DaemonProcess) -> None:
    """scope global checks refs against the proposing workspace's ledger: its sessions are
    accepted, an unknown one refused and the user level's PENDING.md left as it was."""
    d = shared_daemon
    open_gate(d)
    call(d, "set_settings", "@user", enabled=True)
    sid = recorded(d, 2)
    result = call(
        d, "propose", title="T", content=f"global fact {sid}", scope="global", sourceRefs=[f"event:{sid}:2"]
    )
    assert result["queued"]
    user_pending = Path(d.data_dir) / "user" / "memory" / "PENDING.md"
    before = user_pending.read_bytes()
    with pytest.raises(RemoteError) as info:
        call(d, "propose", title="T", content=f"other {sid}", scope="global", sourceRefs=[f"event:{sid}:3"])
    assert info.value.kind == "invalid_params" and info.value.data["reason"] == "past_last_seq"
    assert user_pending.read_bytes() == before


def test_too_many_refs_are_refused_before_any_is_read(shared_daemon: DaemonProcess) -> None:
    """More refs than a call may name is too_large, nothing queued."""
    d = shared_daemon
    open_gate(d)
    with pytest.raises(RemoteError) as info:
        call(d, "propose", title="T", content="c", sourceRefs=["event:ghost:1"] * 10_001)
    assert info.value.kind == "too_large" and info.value.data["count"] == 10_001
    assert pending(d) is None


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ("event:ghost:1", "unknown_session"),
        ("event:{sid}:3", "past_last_seq"),
        ("event:{sid}:2-5", "past_last_seq"),
        ("event:{other}:1", "unknown_session"),
        ("memory:abc", "not_an_event_ref"),
    ],
)
def test_record_episode_refuses_a_ref_that_names_no_recorded_event(
    shared_daemon: DaemonProcess, ref: str, reason: str
) -> None:
    """record_episode refuses a ref to an unknown session, another workspace's, or past
    the session's last seq (alone or as a range), at its index; no episode is recorded."""
    d = shared_daemon
    sid = recorded(d, 2)
    other_ws = str(d.workspace) + "-other"
    Path(other_ws).mkdir()
    other = recorded(d, 3, other_ws)
    bad = ref.format(sid=sid, other=other)
    data = refused(
        d,
        "record_episode",
        sessionId=sid,
        summary="s",
        tags=["t"],
        sourceRefs=[f"event:{sid}:1", f"event:{sid}:1", bad],
    )
    assert (data["path"], data["reason"], data["ref"]) == ("$.sourceRefs[2]", reason, bad)
    if reason == "past_last_seq":
        assert data["lastSeq"] == 2
    assert call(d, "list_episodes", includeDeleted=True)["episodes"] == []


def test_record_episode_keeps_a_ref_given_twice_once(shared_daemon: DaemonProcess) -> None:
    """An episode citing the same recorded event twice cites it once."""
    d = shared_daemon
    sid = recorded(d, 2)
    refs = [f"event:{sid}:1-2", f"event:{sid}:1-2", f"event:{sid}:2"]
    episode = call(d, "record_episode", sessionId=sid, summary="s", tags=["t"], sourceRefs=refs)["episode"]
    assert episode["sourceRefs"] == [f"event:{sid}:1-2", f"event:{sid}:2"]


def test_propose_cites_a_user_level_entry(shared_daemon: DaemonProcess) -> None:
    """memory:@user/<id> is accepted when the user level's MEMORY.md holds that entry,
    refused (unknown_entry) when it does not."""
    d = shared_daemon
    open_gate(d)
    call(d, "set_settings", "@user", enabled=True)
    entry = call(d, "add_entry", "@user", title="Spelling", content=f"British English {d.workspace.name}")[
        "entry"
    ]
    ref = f"memory:@user/{entry['id']}"
    assert call(d, "propose", title="T", content="Spells colour with u", sourceRefs=[ref])["queued"]
    data = refused(
        d, "propose", title="T", content="Spells grey with e", sourceRefs=["memory:@user/0000000000000000"]
    )
    assert (data["path"], data["reason"]) == ("$.sourceRefs[0]", "unknown_entry")

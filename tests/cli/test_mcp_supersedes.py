"""memory_propose's `supersedes`: an agent corrects a fact through the MCP bridge and the
user reviews it as a replacement (old beside new); what an agent may not replace."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from maka.errors import RemoteError
from tests.cli.helpers import call, run_maka
from tests.cli.mcp_session import Host, mcp_host
from tests.support import DaemonProcess, SharedDaemon

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:resources/subscribe is removed")]
PENDING_URI = "maka://memory/PENDING.md"


def host(d: DaemonProcess, **kw: Any) -> Any:
    return mcp_host(d.socket, workspace=d.workspace, **kw)


def open_gates(d: DaemonProcess, workspace: str | None = None) -> None:
    params: dict[str, Any] = {"agentReadEnabled": True, "extractToolEnabled": True}
    if workspace is not None:
        params["workspace"] = workspace
    call(d, "set_settings", **params)


def entry(d: DaemonProcess, title: str, content: str, **kw: Any) -> str:
    entry_id: str = call(d, "add_entry", title=title, content=content, **kw)["entry"]["id"]
    return entry_id


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio, for the whole module: the shared bridge below lives as long as it."""
    return "asyncio"


@pytest.fixture(scope="module")
async def refusing_host(module_daemon: DaemonProcess) -> AsyncIterator[tuple[Host, DaemonProcess]]:
    """One `maka mcp` (and its workspace, gates open) for the replacements it must refuse:
    each refusal queues nothing, so one bridge serves them all (each bridge pays ~2 s of
    CPU importing the MCP SDK)."""
    workspace = module_daemon.root / "refusing"
    workspace.mkdir()
    d = SharedDaemon(module_daemon, workspace)
    open_gates(d)
    async with host(d) as h:
        yield h, d


def refused(d: DaemonProcess, method: str, **params: Any) -> dict[str, Any]:
    """The error data of a call that must fail."""
    with pytest.raises(RemoteError) as caught:
        call(d, method, **params)
    return caught.value.data


def active(d: DaemonProcess, workspace: str | None = None) -> dict[str, str]:
    params: dict[str, Any] = {"includeEntries": True}
    if workspace is not None:
        params["workspace"] = workspace
    return {e["id"]: e["content"] for e in call(d, "read_state", **params)["entries"]}


async def test_an_agent_replaces_a_changed_fact(shared_daemon: DaemonProcess) -> None:
    """memory_propose with supersedes (a short prefix of the id) queues a replacement; PENDING.md
    shows the old entry beside it, approving archives the old one, and packs show the new."""
    open_gates(shared_daemon)
    old = entry(shared_daemon, "Locker code", "The locker code is 4411.")
    async with host(shared_daemon) as h:
        is_error, text = await h.tool(
            "memory_propose",
            title="Locker code",
            content="The locker code is 7720.",
            supersedes=f"memory:{old[:10]}",
        )
        assert not is_error, text
        assert f"replaces memory:{old}" in text and "until the user approves" in text
        pending = await h.read(PENDING_URI)
    assert f"Replaces memory:{old} — now: Locker code: The locker code is 4411." in pending
    (view,) = call(shared_daemon, "list_proposals")["proposals"]
    assert view["proposal"]["supersedes"] == old
    assert view["replaces"]["id"] == old and view["replaces"]["content"] == "The locker code is 4411."
    assert old in active(shared_daemon)  # nothing changes before the user decides
    approved = call(shared_daemon, "approve", ids=[view["proposal"]["id"]])["approved"][0]
    assert approved["superseded"] == old
    assert list(active(shared_daemon).values()) == ["The locker code is 7720."]
    pack = call(shared_daemon, "build_context", budgetTokens=2000, query="locker code")
    text = "\n".join(s["text"] for s in pack["segments"])
    assert "7720" in text and "4411" not in text
    history = call(shared_daemon, "memory_history", id=view["proposal"]["id"])["events"]
    assert any((e.get("data") or {}).get("supersedes") == old for e in history)


@pytest.mark.parametrize("how", ["missing", "archived", "other_session", "ambiguous"])
async def test_what_an_agent_cannot_replace(refusing_host: tuple[Host, DaemonProcess], how: str) -> None:
    """A target that does not exist, is archived or is scoped to another session is refused
    with one message (nothing said of entries the session cannot see); an ambiguous prefix
    lists the candidates; nothing is queued."""
    h, shared_daemon = refusing_host
    other = call(shared_daemon, "open_session")["sessionId"]
    target = {
        "missing": "0123456789abcdef",
        "archived": entry(shared_daemon, "Old", "Archived fact about the boiler."),
        "other_session": entry(
            shared_daemon, "Scoped", "The other session's fact.", scope="session", sessionId=other
        ),
    }.get(how)
    if how == "archived":
        call(shared_daemon, "archive_entry", id=target)
    if how == "ambiguous":
        ids = [entry(shared_daemon, f"Fact {n}", f"Fact number {n} about gardens.") for n in range(40)]
        # 40 hex ids: at least two share their first character.
        firsts = Counter(i[0] for i in ids)
        target = max(firsts, key=lambda c: firsts[c])
        assert firsts[target] > 1
    is_error, text = await h.tool(
        "memory_propose", title="New", content="A corrected fact.", supersedes=f"memory:{target}"
    )
    assert is_error
    if how == "ambiguous":
        assert text.startswith("invalid_params: Ambiguous")
    else:
        assert text.startswith("invalid_params: supersedes must name an active entry")
        assert "other session" not in text and "archived" not in text
    assert call(shared_daemon, "list_proposals")["proposals"] == []


async def test_own_session_scoped_entry_is_replaceable(shared_daemon: DaemonProcess) -> None:
    """The bridge's own session may replace an entry scoped to it."""
    open_gates(shared_daemon)
    async with host(shared_daemon) as h:
        _, recorded = await h.tool("session_record", turns=[{"role": "user", "text": "hello"}])
        session = re.search(r"in session (\S+) as", recorded)
        assert session is not None
        old = entry(shared_daemon, "Scratch", "Scratch dir is /tmp/a.", scope="session", sessionId=session[1])
        is_error, text = await h.tool(
            "memory_propose", title="Scratch", content="Scratch dir is /tmp/b.", supersedes=old
        )
    assert not is_error, text
    (view,) = call(shared_daemon, "list_proposals")["proposals"]
    assert view["proposal"]["supersedes"] == old and view["replaces"]["id"] == old


def test_the_daemon_refuses_unsafe_replacements(shared_daemon: DaemonProcess) -> None:
    """A session-scoped proposal cannot replace a workspace entry; a second open replacement
    of one entry is refused; at most 20 replacements wait at once (too_large)."""
    open_gates(shared_daemon)
    sid = call(shared_daemon, "open_session")["sessionId"]
    ids = [entry(shared_daemon, f"Fact {n}", f"Stable fact number {n} about kites.") for n in range(22)]
    error = refused(
        shared_daemon,
        "propose",
        title="t",
        content="Kites everywhere.",
        scope="session",
        sessionId=sid,
        supersedes=ids[0],
    )
    assert error["kind"] == "invalid_params" and error["path"] == "$.supersedes"
    first = call(shared_daemon, "propose", title="t", content="Kite fact 0, corrected.", supersedes=ids[0])
    assert first["queued"]
    again = refused(
        shared_daemon,
        "propose",
        title="t",
        content="Kite fact 0, corrected twice.",
        supersedes=f"memory:{ids[0]}",
    )
    assert again["proposalId"] == first["proposal"]["id"]
    for n in range(1, 20):
        call(shared_daemon, "propose", title="t", content=f"Kite fact {n}, corrected.", supersedes=ids[n])
    full = refused(shared_daemon, "propose", title="t", content="Kite fact 21.", supersedes=ids[21])
    assert full["kind"] == "too_large" and full["limit"] == 20
    assert len(call(shared_daemon, "list_proposals")["proposals"]) == 20
    assert len(active(shared_daemon)) == 22  # nothing archived before the user decides


def test_a_workspace_proposal_overrides_a_user_level_entry(shared_daemon: DaemonProcess) -> None:
    """supersedes memory:@user/<id> from a workspace: reviewed beside the user-level entry;
    approved, the workspace's entry wins there and the user level keeps its own."""
    open_gates(shared_daemon)
    open_gates(shared_daemon, "@user")
    user_id = entry(shared_daemon, "Units", "The user prefers miles.", workspace="@user")
    queued = call(
        shared_daemon,
        "propose",
        title="Units",
        content="In this project distances are in kilometres.",
        supersedes=f"memory:@user/{user_id}",
    )
    assert queued["proposal"]["supersedes"] == f"@user/{user_id}"
    (view,) = call(shared_daemon, "list_proposals")["proposals"]
    assert view["replaces"]["id"] == f"@user/{user_id}"
    call(shared_daemon, "approve", ids=[queued["proposal"]["id"]])
    assert user_id in active(shared_daemon, "@user")
    pack = call(shared_daemon, "build_context", budgetTokens=2000, query="distances miles kilometres")
    reasons = {c["sourceId"]: c["reason"] for c in pack["trace"]["candidates"]}
    assert reasons[f"memory:@user/{user_id}"] == "overridden"


def test_cli_shows_a_replacement_old_beside_new(shared_daemon: DaemonProcess) -> None:
    """maka pending names the entry a proposal replaces; maka review shows the old entry beside
    the new and approving archives the old; maka memory show on the proposal shows the old."""
    open_gates(shared_daemon)
    old = entry(shared_daemon, "Offsite", "The team offsite is in Porto.")
    pid = call(
        shared_daemon, "propose", title="Offsite", content="The team offsite moved to Gdansk.", supersedes=old
    )["proposal"]["id"]
    listing = run_maka(shared_daemon, "pending")
    assert f"(replaces {old[:12]}" in listing.stdout and ": Offsite)" in listing.stdout
    shown = run_maka(shared_daemon, "memory", "show", pid)
    assert "Old — now in memory, archived if you approve:" in shown.stdout
    assert "The team offsite is in Porto." in shown.stdout
    for columns in ("120", "60"):  # side by side, and one under the other
        review = run_maka(shared_daemon, "review", input="s\n", env={"COLUMNS": columns})
        assert "a replacement" in review.stdout
        assert "The team offsite is in Porto." in review.stdout
        assert "The team offsite moved to Gdansk." in review.stdout
        assert review.stdout.index("Old — now in memory") < review.stdout.index("New — proposed instead")
    review = run_maka(shared_daemon, "review", input="a\n")
    assert "(archived)" in review.stdout
    assert list(active(shared_daemon).values()) == ["The team offsite moved to Gdansk."]

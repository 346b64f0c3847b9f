"""Every bundled Python client refuses a server run by another user (SO_PEERCRED), before
sending a byte, unless told which uid to expect (``server_uid`` / ``MAKA_SERVER_UID``)."""

from __future__ import annotations

import os
import shutil
import socket
import struct
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from maka import AsyncClient, Client, UntrustedServer
from maka import server_check as check
from maka.cli import main as cli_main
from maka.cli.common import EXIT_UNTRUSTED, EXIT_USAGE
from tests.cli.mcp_session import bridge_env, mcp_host
from tests.impostor import Impostor, needs_nobody
from tests.support import DaemonProcess

SETTLE_S = 0.3  # for a byte a client might have sent to show up in the impostor's count


@pytest.fixture(scope="module")
def impostor() -> Iterator[Impostor]:
    """One server run as nobody for the module."""
    server = Impostor()
    try:
        yield server
    finally:
        server.stop()


def sent_nothing(impostor: Impostor, before: int) -> bool:
    time.sleep(SETTLE_S)
    return impostor.received() == before


@needs_nobody
def test_the_client_refuses_a_server_of_another_user(impostor: Impostor) -> None:
    """Client: UntrustedServer naming the server's uid and the opt-out; nothing sent."""
    before = impostor.received()
    with pytest.raises(UntrustedServer) as info, Client(str(impostor.socket)) as client:
        client.call("ping")
    assert (info.value.server_uid, info.value.expected_uid) == (impostor.uid, os.geteuid())
    assert f"runs as uid {impostor.uid} (nobody)" in str(info.value)
    assert f"MAKA_SERVER_UID={impostor.uid}" in str(info.value)
    assert sent_nothing(impostor, before)


@needs_nobody
def test_the_async_client_refuses_a_server_of_another_user(impostor: Impostor) -> None:
    """AsyncClient: the same refusal, the same nothing sent."""
    before = impostor.received()

    async def go() -> None:
        async with AsyncClient(str(impostor.socket)) as client:
            await client.call("ping")

    with pytest.raises(UntrustedServer) as info:
        anyio.run(go)
    assert info.value.server_uid == impostor.uid
    assert sent_nothing(impostor, before)


@needs_nobody
def test_autostart_does_not_start_a_daemon_beside_an_impostor(impostor: Impostor) -> None:
    """With autostart on, a server of another user is refused, not taken for "no daemon"."""
    with pytest.raises(UntrustedServer), Client(str(impostor.socket), autostart=True) as client:
        client.call("ping")
    assert sorted(p.name for p in impostor.root.iterdir()) == ["s.sock"]


@needs_nobody
@pytest.mark.parametrize("how", ["uid", "any", "env uid", "env any"])
def test_the_opt_out_lets_that_server_through(
    impostor: Impostor, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """server_uid=<its uid> or "any", or MAKA_SERVER_UID likewise: both clients reach it."""
    server_uid: int | str | None = None
    if how == "uid":
        server_uid = impostor.uid
    elif how == "any":
        server_uid = "any"
    else:
        monkeypatch.setenv("MAKA_SERVER_UID", str(impostor.uid) if how == "env uid" else "any")
    with Client(str(impostor.socket), server_uid=server_uid) as client:  # type: ignore[arg-type]
        assert client.call("ping") == "pong"

    async def go() -> str:
        async with AsyncClient(str(impostor.socket), server_uid=server_uid) as client:  # type: ignore[arg-type]
            result: str = await client.call("ping")
            return result

    assert anyio.run(go) == "pong"


@needs_nobody
def test_the_cli_refuses_it_with_exit_5_and_lets_it_through_when_told(
    impostor: Impostor, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`maka ping` at a server of nobody's exits 5 saying whose it is; --server-uid or
    MAKA_SERVER_UID makes it answer; a bad --server-uid is a usage error."""
    monkeypatch.delenv("MAKA_SERVER_UID", raising=False)
    maka = ["--socket", str(impostor.socket), "--no-autostart"]
    assert cli_main([*maka, "ping"]) == EXIT_UNTRUSTED
    refused = capsys.readouterr().err
    assert f"runs as uid {impostor.uid} (nobody)" in refused and "--server-uid" in refused
    assert cli_main([*maka, "--server-uid", str(impostor.uid), "ping"]) == 0
    monkeypatch.setenv("MAKA_SERVER_UID", "any")
    assert cli_main([*maka, "ping"]) == 0
    assert cli_main([*maka, "--server-uid", "root", "ping"]) == EXIT_USAGE
    assert "must be a uid or 'any'" in capsys.readouterr().err


@needs_nobody
def test_the_mcp_bridge_refuses_it_as_a_tool_error(impostor: Impostor, short_tmp: Path) -> None:
    """`maka mcp` on a server of nobody's: tool calls fail with ``untrusted_server`` naming
    the uid, and the server receives nothing (not even the bridge's subscribe)."""
    before = impostor.received()

    async def go() -> tuple[bool, str]:
        env = {k: v for k, v in bridge_env().items() if k != "MAKA_SERVER_UID"}
        async with mcp_host(impostor.socket, "--no-autostart", workspace=short_tmp, env=env) as host:
            return await host.tool("memory_search", query="deploys")

    is_error, text = anyio.run(go)
    assert is_error and text.startswith("untrusted_server:")
    assert f"runs as uid {impostor.uid} (nobody)" in text
    assert sent_nothing(impostor, before)


@needs_nobody
def test_a_server_swapped_in_after_a_restart_is_refused_on_reconnect(short_tmp: Path) -> None:
    """Connected to our makad; it goes away and a socket of nobody's takes its path: the
    next call reconnects, finds the other user's server and refuses it."""
    d = DaemonProcess(short_tmp)
    d.start()
    impostor = Impostor()
    try:
        with Client(str(d.socket)) as client:
            assert client.call("ping") == "pong"
            d.stop()
            os.replace(impostor.socket, d.socket)  # its owner swapping the socket
            before = impostor.received()
            with pytest.raises(UntrustedServer):
                client.call("ping")
            assert sent_nothing(impostor, before)
    finally:
        impostor.stop()
        d.stop()


def test_our_own_daemon_passes_the_check(shared_daemon: DaemonProcess) -> None:
    """The default check lets a makad of our uid through (SO_PEERCRED says so)."""
    with Client(str(shared_daemon.socket)) as client:
        assert client.call("ping") == "pong"
        assert client._sock is not None
        assert check.peer_uid(client._sock) == os.geteuid()


def test_expected_server_uid_reads_the_argument_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our own uid by default; an argument wins over MAKA_SERVER_UID; anything but a uid
    or "any" is refused (a bool too)."""
    monkeypatch.delenv("MAKA_SERVER_UID", raising=False)
    assert check.expected_server_uid() == os.geteuid()
    monkeypatch.setenv("MAKA_SERVER_UID", " 1234 ")
    assert check.expected_server_uid() == 1234
    assert check.expected_server_uid("any") is None
    monkeypatch.setenv("MAKA_SERVER_UID", "ANY")
    assert check.expected_server_uid() is None
    assert check.expected_server_uid(7) == 7
    for bad in (-1, True, "root", "1.5"):
        with pytest.raises(ValueError):
            check.expected_server_uid(bad)  # type: ignore[arg-type]
    monkeypatch.setenv("MAKA_SERVER_UID", "nobody")
    with pytest.raises(ValueError):
        Client("/tmp/none.sock")


def test_xucred_is_read_as_macos_lays_it_out() -> None:
    """The macOS/BSD LOCAL_PEERCRED record: version 0, then the uid; other versions unknown."""
    record = struct.pack("@IIh16I", 0, 501, 1, *([20] * 16))
    assert len(record) == check.XUCRED_SIZE
    assert check.xucred_uid(record) == 501
    assert check.xucred_uid(struct.pack("@IIh16I", 1, 501, 1, *([20] * 16))) is None
    assert check.xucred_uid(b"\0\0") is None


@pytest.fixture
def no_peer_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """A system that cannot tell a socket's peer (the socket file is checked instead)."""
    monkeypatch.setattr(check, "peer_uid", lambda sock: None)


def test_without_peer_credentials_our_socket_in_private_folders_passes(
    shared_daemon: DaemonProcess, no_peer_credentials: None
) -> None:
    """The fallback accepts a socket of ours in folders only we and root can change."""
    with Client(str(shared_daemon.socket)) as client:
        assert client.call("ping") == "pong"


def test_a_symlinked_socket_path_passes_by_the_peer_check(
    shared_daemon: DaemonProcess, short_tmp: Path
) -> None:
    """Where the kernel names the peer, a socket path that is a symbolic link to our own
    daemon is reached: the server itself was checked, not the path."""
    link = short_tmp / "link.sock"
    link.symlink_to(shared_daemon.socket)
    with Client(str(link)) as client:
        assert client.call("ping") == "pong"


def test_without_peer_credentials_a_symlinked_socket_path_is_refused_as_one(
    shared_daemon: DaemonProcess, short_tmp: Path, no_peer_credentials: None
) -> None:
    """The fallback refuses a socket path that is a symbolic link, saying so and where it
    leads, not that its socket file belongs to some uid."""
    link = short_tmp / "link.sock"
    link.symlink_to(shared_daemon.socket)
    with pytest.raises(UntrustedServer) as refused, Client(str(link)) as c:
        c.call("ping")
    message = str(refused.value)
    assert refused.value.reason == (
        f"its socket path is a symbolic link (to {shared_daemon.socket}), which this client does not follow"
    )
    assert "connect to the path it leads to instead" in message
    assert "belongs to uid" not in message and "allow its uid" not in message


@needs_nobody
def test_without_peer_credentials_a_socket_of_nobody_is_refused(
    impostor: Impostor, no_peer_credentials: None
) -> None:
    """The fallback refuses a socket file of another user, and one in a folder of theirs."""
    mine = Path(tempfile.mkdtemp(prefix="mko", dir="/tmp"))
    try:
        moved = mine / "s.sock"
        os.replace(impostor.socket, moved)
        try:
            with (
                pytest.raises(UntrustedServer, match="its socket file belongs to uid"),
                Client(str(moved)) as c,
            ):
                c.call("ping")
        finally:
            os.replace(moved, impostor.socket)
    finally:
        shutil.rmtree(mine)
    ours = socket.socket(socket.AF_UNIX)
    try:
        ours.bind(str(impostor.root / "ours.sock"))  # our socket in nobody's folder
        ours.listen(1)
        with (
            pytest.raises(UntrustedServer, match=f"{impostor.root} belongs to uid"),
            Client(str(impostor.root / "ours.sock")) as c,
        ):
            c.call("ping")
    finally:
        ours.close()
        os.unlink(impostor.root / "ours.sock")

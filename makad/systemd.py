"""systemd integration: socket activation (LISTEN_FDS) and sd_notify (Type=notify)."""

from __future__ import annotations

import os
import socket

SD_LISTEN_FDS_START = 3


def activated_socket(env: dict[str, str] | None = None) -> socket.socket | None:
    """The first socket systemd passed to this process, or None."""
    env = dict(os.environ) if env is None else env
    try:
        pid = int(env.get("LISTEN_PID", ""))
        count = int(env.get("LISTEN_FDS", ""))
    except ValueError:
        return None
    if pid != os.getpid() or count < 1:
        return None
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(name, None)
    sock = socket.socket(fileno=SD_LISTEN_FDS_START)
    os.set_inheritable(sock.fileno(), False)
    return sock


def socket_name(sock: socket.socket) -> str | None:
    """The filesystem path a Unix socket is bound to (None for an abstract or unnamed one)."""
    try:
        name = sock.getsockname()
    except OSError:
        return None
    if isinstance(name, bytes):
        name = name.decode("utf-8", "surrogateescape")
    return name if isinstance(name, str) and name.startswith("/") else None


def notify(state: str) -> bool:
    """Send one sd_notify datagram; False when not running under a notify-aware manager."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(state.encode())
    except OSError:
        return False
    return True

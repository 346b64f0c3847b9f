"""Who is listening: a client talks only to a server running as the uid it expects.

A local user who can make the socket's folder before the daemon does (``/tmp/runtime-<uid>``
when ``XDG_RUNTIME_DIR`` is unset) or write to it can put a server of their own there: it
would receive every turn and proposal recorded, and could hand the agent invented memory.
So right after connecting, before sending a byte, a client asks the kernel which uid the
server runs as — ``SO_PEERCRED`` on Linux, ``getpeereid`` (``LOCAL_PEERCRED``) on macOS
and the BSDs — and refuses any other than its own (``UntrustedServer``).

``server_uid`` (a parameter of every client, or ``MAKA_SERVER_UID``) says otherwise: the
uid the server runs as instead (a makad run by another account on purpose), or ``"any"``
(no check at all).

Where the system cannot say who the peer is, the socket file stands in for it: it must be a
socket of the expected uid, in folders that only that uid, this one or root can change
(owned by one of them, and writable by nobody else unless sticky like ``/tmp``). Whoever
could have put it there is then trusted anyway; this is weaker than asking the kernel (it
says who made the file, not who holds the socket) and is used only where that is not
possible.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from maka.errors import UntrustedServer

SERVER_UID_ENV = "MAKA_SERVER_UID"
ANY_UID = "any"
ServerUid = int | Literal["any"]

# macOS and FreeBSD: getsockopt(SOL_LOCAL, LOCAL_PEERCRED) fills a struct xucred
# {u_int cr_version; uid_t cr_uid; short cr_ngroups; gid_t cr_groups[16];}.
SOL_LOCAL = 0
LOCAL_PEERCRED = 0x001
XUCRED_VERSION = 0
XUCRED_SIZE = struct.calcsize("@IIh16I")
_XUCRED_HEAD = struct.Struct("@II")
MAX_SYMLINK_HOPS = 40


def expected_server_uid(server_uid: ServerUid | str | None = None) -> int | None:
    """The uid the server must run as, None for any: ``server_uid``, else
    ``$MAKA_SERVER_UID``, else this process's effective uid. ``ValueError`` for anything
    but a uid or ``"any"``."""
    value: object = server_uid
    if value is None:
        value = os.environ.get(SERVER_UID_ENV, "").strip() or None
        if value is None:
            return os.geteuid()
    if isinstance(value, bool):
        raise ValueError("server_uid must be a uid or 'any', not a bool")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"server_uid must be a uid (0 or more) or 'any', not {value}")
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text == ANY_UID:
            return None
        if text.isdigit():
            return int(text)
    raise ValueError(f"server_uid ({SERVER_UID_ENV}) must be a uid or 'any', not {value!r}")


def check_server(sock: socket.socket, socket_path: str, expected: int | None) -> None:
    """Raise ``UntrustedServer`` unless the server at the other end of ``sock`` runs as
    ``expected`` (None: anyone will do)."""
    if expected is None:
        return
    uid = peer_uid(sock)
    if uid is None:
        check_socket_file(socket_path, expected)
        return
    if uid != expected:
        raise UntrustedServer(socket_path, expected, server_uid=uid)


def peer_uid(sock: socket.socket) -> int | None:
    """The uid the process at the other end of a connected Unix socket runs as (for a
    server: its effective uid when it listened), or None where the system cannot say."""
    if hasattr(socket, "SO_PEERCRED"):  # Linux: struct ucred {pid_t; uid_t; gid_t}
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        except OSError:
            return None
        return int(struct.unpack("3i", raw)[1])
    call = _getpeereid()
    if call is not None:
        uid = call(sock.fileno())
        if uid is not None:
            return uid
    try:
        raw = sock.getsockopt(SOL_LOCAL, getattr(socket, "LOCAL_PEERCRED", LOCAL_PEERCRED), XUCRED_SIZE)
    except OSError:
        return None
    return xucred_uid(raw)


def xucred_uid(raw: bytes) -> int | None:
    """``cr_uid`` of a ``struct xucred`` (macOS, FreeBSD), None when it is not one."""
    if len(raw) < _XUCRED_HEAD.size:
        return None
    version, uid = _XUCRED_HEAD.unpack_from(raw)
    return int(uid) if version == XUCRED_VERSION else None


def _getpeereid() -> Callable[[int], int | None] | None:
    """libc's ``getpeereid(fd, &uid, &gid)`` (macOS, the BSDs); None where there is none
    (glibc)."""
    if sys.platform.startswith("linux"):
        return None
    # Here, not at the top: every command loads this module, and Linux never gets this far.
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        function = libc.getpeereid
    except (OSError, AttributeError, TypeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32)]
    function.restype = ctypes.c_int

    def call(fd: int) -> int | None:
        uid, gid = ctypes.c_uint32(), ctypes.c_uint32()
        return int(uid.value) if function(fd, ctypes.byref(uid), ctypes.byref(gid)) == 0 else None

    return call


def check_socket_file(socket_path: str, expected: int) -> None:
    """Where the peer's uid cannot be read: the socket file must belong to ``expected``,
    in folders only ``expected``, this uid or root can change (``UntrustedServer``)."""
    path = Path(os.path.abspath(socket_path))
    try:
        st = os.lstat(path)
    except OSError as exc:
        problem = f"its socket file cannot be checked ({exc.strerror})"
        raise UntrustedServer(socket_path, expected, reason=problem) from None
    if stat.S_ISLNK(st.st_mode):
        # The connect followed it to a file this check does not look at.
        try:
            to = f" (to {os.readlink(path)})"
        except OSError:
            to = ""
        raise UntrustedServer(
            socket_path,
            expected,
            reason=f"its socket path is a symbolic link{to}, which this client does not follow",
            fix="connect to the path it leads to instead (MAKAD_SOCKET, `maka --socket`); "
            "MAKA_SERVER_UID=any turns the check off",
        )
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != expected:
        raise UntrustedServer(socket_path, expected, reason=f"its socket file belongs to uid {st.st_uid}")
    _check_folders(socket_path, expected, path.parent, 0)


def _check_folders(socket_path: str, expected: int, folder: Path, hops: int) -> None:
    """Every folder from ``/`` to ``folder``, through symlinks (each owned by a trusted uid)."""
    trusted = {0, os.geteuid(), expected}
    parts = folder.parts
    here = Path(parts[0])
    for index in range(len(parts)):
        if index:
            here = here / parts[index]
        try:
            st = os.lstat(here)
        except OSError as exc:
            raise UntrustedServer(
                socket_path, expected, reason=f"{here} cannot be checked ({exc.strerror})"
            ) from None
        if st.st_uid not in trusted:
            raise UntrustedServer(socket_path, expected, reason=f"{here} belongs to uid {st.st_uid}")
        if stat.S_ISLNK(st.st_mode):
            if hops >= MAX_SYMLINK_HOPS:
                raise UntrustedServer(socket_path, expected, reason=f"{here}: too many symlinks")
            rest = parts[index + 1 :]
            _check_folders(socket_path, expected, Path(os.path.realpath(here)).joinpath(*rest), hops + 1)
            return
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
            mode = stat.S_IMODE(st.st_mode)
            raise UntrustedServer(
                socket_path, expected, reason=f"{here} is writable by others (mode {mode:04o})"
            )

"""Errors raised by the clients: remote errors rebuilt from their code and kind."""

from __future__ import annotations

from typing import Any, Final


class MakaError(Exception):
    """Base of every client-side error."""


class DaemonUnavailable(MakaError):
    """No daemon answers on the socket."""

    def __init__(self, socket_path: str, reason: str, *, message: str | None = None) -> None:
        super().__init__(
            message
            or f"no makad is running on {socket_path} ({reason}); start one with `makad` "
            f"or `scripts/run`, or pass --socket / set MAKAD_SOCKET"
        )
        self.socket_path = socket_path
        self.reason = reason


class UntrustedServer(MakaError):
    """The server on the socket runs as another uid than this client expects (by default
    its own): refused before anything was sent, since it would read every request and
    could answer with invented memory. ``server_uid`` is the uid it runs as (None where the
    system cannot say and its socket file failed the check instead: ``reason``)."""

    def __init__(
        self,
        socket_path: str,
        expected_uid: int,
        *,
        server_uid: int | None = None,
        reason: str | None = None,
        fix: str | None = None,
    ) -> None:
        what = f"runs as {uid_name(server_uid)}" if server_uid is not None else f"is not trusted: {reason}"
        allow = server_uid if server_uid is not None else "UID"
        if fix is not None:  # allowing another uid is not the remedy (a symbolic link)
            message = f"the server on {socket_path} {what}; refusing to talk to it, nothing was sent. {fix}"
        else:
            message = (
                f"the server on {socket_path} {what}, not as {uid_name(expected_uid)}: refusing to talk "
                "to it (another user's server would read everything this client sends and could "
                "answer with invented memory). If it is the makad you mean to use, allow its uid: "
                f"MAKA_SERVER_UID={allow} (or server_uid={allow}, `maka --server-uid {allow}`); "
                "'any' turns the check off"
            )
        super().__init__(message)
        self.socket_path = socket_path
        self.server_uid = server_uid
        self.expected_uid = expected_uid
        self.reason = reason


def uid_name(uid: int) -> str:
    """``uid 1000 (alice)``, or ``uid 1000`` where the account has no name."""
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


class ProtocolError(MakaError):
    """The daemon's reply could not be understood, or the connection broke mid-reply."""


class RemoteError(MakaError):
    """A JSON-RPC error reply. ``kind`` is the stable machine-readable reason."""

    code: int
    kind: str

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data if isinstance(data, dict) else {}
        self.kind = str(self.data.get("kind", "unknown"))

    def __str__(self) -> str:
        return f"{self.message}{_why(self.code, self.message, self.data)} ({self.kind}, code {self.code})"


# The message of params that do not fit the method's schema; what is wrong is in data.
_GENERIC_INVALID_PARAMS: Final = "Invalid params"


def _why(code: int, message: str, data: dict[str, Any]) -> str:
    """What an error's text adds to its message from ``data``: the reason of an error about
    the whole message (too_large, bad_frame), and the param and reason of params that do not
    fit the method (``Invalid params`` alone would not say which param, nor what is wrong)."""
    reason = data.get("reason")
    if not isinstance(reason, str) or not reason:
        return ""
    if code == -32600:
        return f": {reason}"
    if code == -32602 and message == _GENERIC_INVALID_PARAMS:
        path = data.get("path")
        where = f"{path}: " if isinstance(path, str) and path not in ("", "$") else ""
        return f": {where}{reason}"
    return ""


class AppendPartlyDone(MakaError):
    """An ``append_events`` sent in parts (more events than one message may carry) of
    which the first ``appended`` events landed (seqs ``first_seq``..``last_seq``) and the
    next part failed with ``error``: refused whole, or, when ``failed_part_unknown`` (the
    connection was lost, a timeout), perhaps landed. With a ``request_id``, calling again
    with the same params appends no part twice; without one, send ``events[appended:]``
    (after checking the session when ``failed_part_unknown``)."""

    def __init__(
        self,
        *,
        appended: int,
        total: int,
        first_seq: int,
        last_seq: int,
        failed_part_unknown: bool,
        request_id: str | None,
        error: MakaError,
    ) -> None:
        outcome = "may have landed" if failed_part_unknown else "did not land"
        retry = (
            "calling again with the same requestId appends no part twice"
            if request_id is not None
            else f"send events[{appended}:] again"
        )
        super().__init__(
            f"append_events in parts: the first {appended} of {total} events were appended "
            f"(seq {first_seq}-{last_seq}); the next part failed and {outcome} ({error}); {retry}"
        )
        self.appended = appended
        self.total = total
        self.first_seq = first_seq
        self.last_seq = last_seq
        self.failed_part_unknown = failed_part_unknown
        self.request_id = request_id
        self.error = error


class InvalidParams(RemoteError): ...


class MethodNotFound(RemoteError): ...


class NotFound(RemoteError): ...


class Conflict(RemoteError): ...


class IncognitoBlocked(RemoteError): ...


class Disabled(RemoteError): ...


class GateClosed(RemoteError): ...


class TooLarge(RemoteError): ...


class ReplyTooLarge(RemoteError): ...


class SafeMode(RemoteError): ...


class InvalidSummary(RemoteError): ...


class IOFailure(RemoteError): ...


class InvalidWorkspace(RemoteError): ...


class InsufficientEvidence(RemoteError): ...


class CircuitOpen(RemoteError): ...


class ShuttingDown(RemoteError): ...


class TooManyConnections(RemoteError): ...


class InternalError(RemoteError): ...


BY_KIND: dict[str, type[RemoteError]] = {
    "invalid_params": InvalidParams,
    "method_not_found": MethodNotFound,
    "not_found": NotFound,
    "conflict": Conflict,
    "incognito_blocked": IncognitoBlocked,
    "disabled": Disabled,
    "gate_closed": GateClosed,
    "too_large": TooLarge,
    "reply_too_large": ReplyTooLarge,
    "safe_mode": SafeMode,
    "invalid_summary": InvalidSummary,
    "io_error": IOFailure,
    "invalid_workspace": InvalidWorkspace,
    "insufficient_evidence": InsufficientEvidence,
    "circuit_open": CircuitOpen,
    "shutting_down": ShuttingDown,
    "too_many_connections": TooManyConnections,
    "internal": InternalError,
}


def from_error_object(error: Any) -> RemoteError:
    if not isinstance(error, dict):
        return RemoteError(-32603, "malformed error reply")
    data = error.get("data")
    kind = data.get("kind") if isinstance(data, dict) else None
    cls = BY_KIND.get(kind, RemoteError) if isinstance(kind, str) else RemoteError
    return cls(int(error.get("code", -32603)), str(error.get("message", "")), data)

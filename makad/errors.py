"""One exception tree for every error makad can put on the wire.

    MakadError                      (code, kind)
    ├── InvalidParams               -32602 invalid_params
    ├── NotFound                    -32001 not_found
    ├── Conflict                    -32002 conflict
    ├── IncognitoBlocked            -32003 incognito_blocked
    ├── Disabled                    -32004 disabled
    ├── GateClosed                  -32005 gate_closed
    ├── TooLarge                    -32006 too_large
    │   └── ReplyTooLarge           -32006 reply_too_large
    ├── SafeMode                    -32007 safe_mode
    ├── InvalidSummary              -32008 invalid_summary
    ├── IOFailure                   -32009 io_error
    ├── InvalidWorkspace            -32010 invalid_workspace
    ├── InsufficientEvidence        -32011 insufficient_evidence
    ├── CircuitOpen                 -32012 circuit_open
    ├── ShuttingDown                -32013 shutting_down
    └── TooManyConnections          -32014 too_many_connections

The message is written for people and must never contain memory content or
exception text; ``data`` carries machine-readable details (always with ``kind``).
"""

from __future__ import annotations

from typing import Any, ClassVar


class MakadError(Exception):
    """Base of every error that is reported to a client."""

    code: ClassVar[int] = -32603
    kind: ClassVar[str] = "internal"

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = data

    def data(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.details}


class InvalidParams(MakadError):
    code = -32602
    kind = "invalid_params"


class NotFound(MakadError):
    code = -32001
    kind = "not_found"


class Conflict(MakadError):
    code = -32002
    kind = "conflict"


class IncognitoBlocked(MakadError):
    code = -32003
    kind = "incognito_blocked"


class Disabled(MakadError):
    code = -32004
    kind = "disabled"


class GateClosed(MakadError):
    code = -32005
    kind = "gate_closed"


class TooLarge(MakadError):
    code = -32006
    kind = "too_large"


class ReplyTooLarge(TooLarge):
    """A reply over the reply cap (written by the dispatcher, not raised by handlers)."""

    kind = "reply_too_large"


class SafeMode(MakadError):
    code = -32007
    kind = "safe_mode"


class InvalidSummary(MakadError):
    code = -32008
    kind = "invalid_summary"


class IOFailure(MakadError):
    code = -32009
    kind = "io_error"


class InvalidWorkspace(MakadError):
    code = -32010
    kind = "invalid_workspace"


class InsufficientEvidence(MakadError):
    code = -32011
    kind = "insufficient_evidence"


class CircuitOpen(MakadError):
    code = -32012
    kind = "circuit_open"


class ShuttingDown(MakadError):
    code = -32013
    kind = "shutting_down"


class TooManyConnections(MakadError):
    """The connection cap is reached (written once to a refused connection, id null)."""

    code = -32014
    kind = "too_many_connections"


ALL_ERRORS: tuple[type[MakadError], ...] = (
    InvalidParams,
    NotFound,
    Conflict,
    IncognitoBlocked,
    Disabled,
    GateClosed,
    TooLarge,
    ReplyTooLarge,
    SafeMode,
    InvalidSummary,
    IOFailure,
    InvalidWorkspace,
    InsufficientEvidence,
    CircuitOpen,
    ShuttingDown,
    TooManyConnections,
)

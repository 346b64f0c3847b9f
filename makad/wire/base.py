"""Base classes for wire types and the shape of one catalogue entry."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
from msgspec import Meta

# A record the wire shares with the layers below it: defined once, in core.
from makad.core.types import MAX_INT64
from makad.core.types import Warning as Warning
from makad.errors import MakadError

# An integer param that is stored or looked up (a SQLite integer): larger ones are
# invalid_params, never an internal error.
Int64 = Annotated[int, Meta(ge=-MAX_INT64 - 1, le=MAX_INT64)]
# A time in Unix ms, or a length of time in ms.
Ms = Annotated[int, Meta(ge=0, le=MAX_INT64)]
# An entry's own decay, as add_entry and propose take it.
DecayTtlMs = Annotated[
    Ms | None,
    Meta(
        description="A length of time in milliseconds after createdAt when the entry archives itself; "
        "null: the workspace's defaultDecayDays."
    ),
]

# What serves one method: (decoded params, the calling connection) -> the result.
Handler = Callable[[Any, Any], Awaitable[Any]]


class Params(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """Base of every method's by-name params: camelCase keys, unknown keys refused."""


class Result(msgspec.Struct, kw_only=True, rename="camel"):
    """Base of every structured result."""


class WorkspaceParams(Params):
    """Params of a workspace-scoped method."""

    workspace: str


@dataclass(frozen=True)
class MethodSpec:
    """One RPC method: its name, typed params and result, and the errors it may raise."""

    name: str
    params: type[Params]
    # A type, or a tuple of Structs when the result is one of them (told apart by their
    # fields: the OpenRPC document lists them as anyOf).
    result: Any
    summary: str
    errors: tuple[type[MakadError], ...] = field(default=())
    description: str = ""
    # In-memory only (no IO, no waiting): run on the connection's reader task itself.
    inline: bool = False
    # Usually answered from memory (a read of what is cached, re-checked with a stat):
    # started on the reader task, which hands the reading to a new task only if the
    # handler has to wait (a thread hop, a lock). Its work before that first wait
    # delays the connection's next request, so only cheap reads are eager.
    eager: bool = False
    # Its one reply may run to megabytes (events, search hits, an export): at most a few
    # such requests run at once, server-wide (``makad.rpc.dispatch.large_reply_slots``).
    large_reply: bool = False

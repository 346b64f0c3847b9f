"""The reply cap: no reply to one request or one batch is longer than its limit.

A batch reserves, before anything runs, the bytes of a ``reply_too_large`` error
for each element that will be answered; results spend what is left. So when a
result does not fit, its error (and the errors of the requests after it, which
are not run) always do, and the array as a whole never passes the limit. A batch
whose errors alone would not fit is answered with one error and nothing runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from makad.errors import ReplyTooLarge

# Marks a batch element that gets no reply (a notification).
NO_REPLY: Any = object()

_encoder = msgspec.json.Encoder()


def too_large_reply(id_: Any, limit: int, *, ran: bool, batch: bool = False) -> bytes:
    """The error that stands in for a reply past the cap; ``ran`` says whether the
    request was executed (its result was dropped) or not run at all."""
    data: dict[str, Any] = {"kind": ReplyTooLarge.kind, "limit": limit, "ran": ran}
    if batch:
        data["reason"] = "too many requests in the batch to answer within the limit"
    return _encoder.encode(
        {
            "jsonrpc": "2.0",
            "error": {"code": ReplyTooLarge.code, "message": "Reply too large", "data": data},
            "id": id_,
        }
    )


class BatchBudget:
    """Bytes left for the results of one batch, its error replies reserved up front."""

    def __init__(self, limit: int, reply_ids: Sequence[Any]) -> None:
        # Each answered element may need its error plus a comma; ``false`` is the longer flag.
        base = len(too_large_reply(None, limit, ran=False)) - len(b"null") + 1
        self._reserves = [0 if id_ is NO_REPLY else base + len(_encoder.encode(id_)) for id_ in reply_ids]
        self._free = limit - len(b"[]") - sum(self._reserves)
        self.fits = self._free >= 0
        self.spent = False

    def take(self, index: int, size: int) -> bool:
        """Whether element ``index``'s reply of ``size`` bytes fits; once one does not,
        the budget is spent and every later element is answered with its error."""
        extra = size + 1 - self._reserves[index]
        if extra > self._free:
            self.spent = True
            return False
        self._free -= extra
        return True

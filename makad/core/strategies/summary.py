"""The summary strategy: the latest checkpoint's summary and the working state, plus the
live tail — the "summary compaction" baseline. Memory and recall are left out
(``excluded`` in the trace)."""

from __future__ import annotations

from typing import Literal

import msgspec

from makad.core.assembly import assemble
from makad.core.context_types import ContextInputs, ContextPack, SegmentKind
from makad.core.tokens import TokenCounter

KINDS: frozenset[SegmentKind] = frozenset({"summary", "working_state"})


class SummaryTail:
    name: Literal["summary"] = "summary"
    pool: Literal["none"] = "none"  # no recall candidates to gather

    def build(self, inputs: ContextInputs, counter: TokenCounter | None = None) -> ContextPack:
        pack = assemble(msgspec.structs.replace(inputs, include=inputs.include & KINDS), counter)
        return msgspec.structs.replace(pack, trace=msgspec.structs.replace(pack.trace, strategy=self.name))

"""The deterministic strategy: ``makad.core.assembly`` as it ranks and shares the budget."""

from __future__ import annotations

from typing import Literal

from makad.core.assembly import assemble
from makad.core.context_types import ContextInputs, ContextPack
from makad.core.tokens import TokenCounter


class Deterministic:
    name: Literal["deterministic"] = "deterministic"
    pool: Literal["ranked"] = "ranked"

    def build(self, inputs: ContextInputs, counter: TokenCounter | None = None) -> ContextPack:
        return assemble(inputs, counter)

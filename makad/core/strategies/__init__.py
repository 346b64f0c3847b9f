"""build_context's strategies: one narrow interface, one small module each.

A strategy turns the gathered inputs into a pack: ``build(inputs, counter)``.
It may reorder or restrict the memory and recall candidates (a *selection*,
``ContextInputs.selection``) and widen or narrow what each segment kind may
take, but the pack is always made by ``makad.core.assembly.assemble``, so every
strategy obeys the same invariants: ``total_tokens <= budget_tokens``, tool
calls and their results stay adjacent, and the gates hold (memory only with
agent reads on and outside incognito, a session-scoped entry only in its own
session, the live history never recalled) — a selection orders candidates, it
never lets one past a gate.

``pool`` says which recall candidates the service gathers: ``ranked`` (the
full-text hits for the query), ``newest`` (the newest events, no query
needed) or ``none``.

- ``deterministic``: today's ranking and budget sharing (the default);
- ``full``: everything, newest first, each kind allowed up to the whole budget;
- ``recent``: newest first within the usual shares, no relevance ranking;
- ``summary``: the latest checkpoint summary and working state plus the live tail;
- ``curator`` / ``curator_shadow``: an LLM picks among the deterministic
  candidates (``makad.core.strategies.curator``); their ``build`` is the
  deterministic pack, the one used when the model fails or in shadow mode.
"""

from __future__ import annotations

from typing import Literal, Protocol

from makad.core.context_types import ContextInputs, ContextPack
from makad.core.strategies import curator, deterministic, newest, summary
from makad.core.tokens import TokenCounter
from makad.core.types import ContextStrategy

Pool = Literal["ranked", "newest", "none"]
STRATEGY_NAMES: tuple[ContextStrategy, ...] = (
    "deterministic",
    "full",
    "recent",
    "summary",
    "curator",
    "curator_shadow",
)


class Strategy(Protocol):
    """Builds one call's pack from its inputs (see module doc)."""

    @property
    def name(self) -> ContextStrategy: ...

    @property
    def pool(self) -> Pool: ...

    def build(self, inputs: ContextInputs, counter: TokenCounter | None = None) -> ContextPack: ...


_STRATEGIES: dict[ContextStrategy, Strategy] = {
    "deterministic": deterministic.Deterministic(),
    "full": newest.Full(),
    "recent": newest.Recent(),
    "summary": summary.SummaryTail(),
    "curator": curator.Curator(shadow=False),
    "curator_shadow": curator.Curator(shadow=True),
}


def strategy(name: ContextStrategy) -> Strategy:
    """The strategy of that name."""
    return _STRATEGIES[name]

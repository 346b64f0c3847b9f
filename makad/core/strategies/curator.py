"""The LLM curator's pure part: what it is offered, the prompt, reading its answer.

The curator chooses among the candidates the deterministic ranking found: the
memory entries and recall events that passed every gate (so an entry scoped to
another session, an archived or expired one, the live history, anything of a
disabled or incognito source is never offered) and that were not already shown
unchanged. Each is offered by its ref (``memory:<id>``, ``event:<session>:<seq>``)
with a short text, redacted again before it leaves the daemon. The model answers
``{"selected": [refs…]}``; only refs that were offered count (the others are
reported as ignored), and the pick is packed by the same trimmer as every
strategy (``ContextInputs.selection``), so the budget and adjacency hold.

``Curator.build`` is the deterministic pack: what ``curator`` falls back to and
what ``curator_shadow`` always returns. The HTTP exchange is the service's
(``makad.service.curator``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from makad.core.assembly import assemble
from makad.core.context_types import ContextInputs, ContextPack
from makad.core.redaction import redact
from makad.core.refs import event_ref, memory_ref
from makad.core.render import one_line
from makad.core.tokens import TokenCounter
from makad.core.types import Event

MAX_MEMORY_OFFERS = 20
MAX_RECALL_OFFERS = 40
OFFER_TEXT_CHARS = 240
# Candidates left out only for room or relevance: every gate let them through.
OFFERABLE: frozenset[str | None] = frozenset({None, "top_k", "budget", "session_cap"})

SYSTEM_PROMPT = (
    "You select context for an AI assistant. You get the user's current request and a list "
    "of candidate items, each on one line as `<ref> | <text>`. Choose the items the assistant "
    "needs to answer the request well, most useful first; leave out the rest. Answer with "
    'JSON only: {"selected": ["<ref>", ...]} using refs exactly as listed.'
)


@dataclass(frozen=True, slots=True)
class Offer:
    ref: str
    text: str


class Curator:
    def __init__(self, *, shadow: bool) -> None:
        self.shadow = shadow
        self.name: Literal["curator", "curator_shadow"] = "curator_shadow" if shadow else "curator"
        self.pool: Literal["ranked"] = "ranked"

    def build(self, inputs: ContextInputs, counter: TokenCounter | None = None) -> ContextPack:
        """The deterministic pack (the fallback, and shadow mode's answer)."""
        pack = assemble(inputs, counter)
        return msgspec.structs.replace(pack, trace=msgspec.structs.replace(pack.trace, strategy=self.name))


def offers(inputs: ContextInputs, pack: ContextPack) -> list[Offer]:
    """The candidates the curator may choose from, best first per kind (see module doc)."""
    entries = {memory_ref(e.id): e for e in inputs.memory_entries}
    events: dict[str, Event] = {}
    for hit in inputs.recall_hits:
        for event in (hit.event, *hit.neighbours):
            events.setdefault(event_ref(event.session_id, event.seq), event)
    out: list[Offer] = []
    counts = {"memory": 0, "recall": 0}
    caps = {"memory": MAX_MEMORY_OFFERS, "recall": MAX_RECALL_OFFERS}
    for candidate in pack.trace.candidates:
        if candidate.reason not in OFFERABLE or counts[candidate.kind] >= caps[candidate.kind]:
            continue
        text: str | None = None
        if candidate.kind == "memory":
            entry = entries.get(candidate.source_id)
            text = f"{entry.title}: {entry.content}" if entry is not None else None
        else:
            found = events.get(candidate.source_id)
            text = found.text if found is not None else None
        if text is None:
            continue
        counts[candidate.kind] += 1
        out.append(Offer(candidate.source_id, redact(one_line(text, OFFER_TEXT_CHARS)).text))
    return out


def prompt(query: str | None, offered: list[Offer]) -> list[dict[str, str]]:
    """The chat messages asking the model to choose."""
    listing = "\n".join(f"{o.ref} | {o.text}" for o in offered)
    request = redact(one_line(query, 2_000)).text if query else "(no explicit request)"
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Request: {request}\n\nCandidates:\n{listing}"},
    ]


@dataclass(frozen=True, slots=True)
class Answer:
    """The offered refs the model chose (its order) and the refs it named but was not offered."""

    selected: list[str]
    ignored: list[str]


class BadAnswer(Exception):
    """The model's answer cannot be used; ``reason`` is the trace's word for why."""

    def __init__(self, reason: str, ignored: list[str] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.ignored = ignored or []


def read_answer(content: str, offered: list[Offer]) -> Answer:
    """The model's choice, validated against what it was offered (raises ``BadAnswer``)."""
    value = _json_object(content)
    picked = value.get("selected") if isinstance(value, dict) else None
    if not isinstance(picked, list):
        raise BadAnswer("unparseable")
    known = {o.ref for o in offered}
    selected: list[str] = []
    ignored: list[str] = []
    for ref in picked:
        if not isinstance(ref, str):
            continue
        (selected if ref in known else ignored).append(ref)
    if not picked:
        raise BadAnswer("empty")
    if not selected:
        raise BadAnswer("no_known_refs", list(dict.fromkeys(ignored)))
    return Answer(list(dict.fromkeys(selected)), list(dict.fromkeys(ignored)))


def _json_object(content: str) -> Any:
    """The JSON object in the answer: all of it, or the outermost braces (a model in
    plain-text mode may wrap it in prose or a code fence)."""
    for text in (content, content[content.find("{") : content.rfind("}") + 1]):
        try:
            return msgspec.json.decode(text.strip().encode())
        except msgspec.DecodeError:
            continue
    raise BadAnswer("unparseable")


def curated(inputs: ContextInputs, answer: Answer, counter: TokenCounter | None = None) -> ContextPack:
    """The pack of the model's pick: the selected candidates, packed by the usual trimmer."""
    pack = assemble(msgspec.structs.replace(inputs, selection=answer.selected), counter)
    return msgspec.structs.replace(pack, trace=msgspec.structs.replace(pack.trace, strategy="curator"))

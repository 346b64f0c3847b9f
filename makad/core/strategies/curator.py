"""The LLM curator's pure part: when to ask, what it is offered, the prompt, its answer.

When to ask (the pressure threshold). The curator chooses only where the
deterministic pack had to: a kind (memory or recall) is *under pressure* when the
deterministic ranking left out, for room or relevance (``CHOICE_REASONS``:
``budget``, ``top_k``, ``session_cap``), at least one of its
candidates that passed every gate. With no kind under pressure everything that
could be shown fits, and the model is not asked at all (the fast path,
``pressured``).

What it is offered: the candidates of the kinds under pressure that passed every
gate (so an entry scoped to another session, an archived or expired one, the
live history, anything of a disabled or incognito source is never offered) and
that were not already shown unchanged. Each is offered by its ref
(``memory:<id>``, ``event:<session>:<seq>``) with a short text, redacted again
before it leaves the daemon. The model answers ``{"selected": [refs…]}``; only
refs that were offered count (the others are reported as ignored).

What it may change: only the kinds under pressure. Everything else the
deterministic pack showed — the entries or events of a kind that fit whole, the
working state, the summary, the live history — stays (``curated``): the pick is
packed after them by the same trimmer as every strategy
(``ContextInputs.selection``), so the budget and adjacency hold, and when the
pick would crowd any of them out its last choices are left out until nothing is
(``trimmed``).

``Curator.build`` is the deterministic pack: what ``curator`` falls back to and
what ``curator_shadow`` always returns. The HTTP exchange is the service's
(``makad.service.curator``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from makad.core.assembly import assemble
from makad.core.context_types import ContextInputs, ContextPack, TraceCandidate
from makad.core.redaction import redact
from makad.core.refs import event_ref, memory_ref
from makad.core.render import one_line
from makad.core.tokens import TokenCounter
from makad.core.types import CuratedKind, Event

MAX_MEMORY_OFFERS = 20
MAX_RECALL_OFFERS = 40
OFFER_TEXT_CHARS = 240
MAX_IGNORED = 20
MAX_IGNORED_CHARS = 200
# Why a candidate that passed every gate was left out for room or relevance: one of these
# in a kind means that kind did not all fit (the pressure threshold, see module doc).
CHOICE_REASONS: frozenset[str] = frozenset({"top_k", "budget", "session_cap"})
# Candidates the curator may be offered: shown, or left out only for room or relevance.
OFFERABLE: frozenset[str | None] = frozenset({None, *CHOICE_REASONS})
KINDS: tuple[CuratedKind, ...] = ("memory", "recall")

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


def pressured(pack: ContextPack) -> list[CuratedKind]:
    """The kinds under pressure in a deterministic pack (see module doc), in pack order.

    Every memory and attention candidate is in the trace; recall lists only its best, so
    what recall left out is what ``trace.dropped`` counts beyond the memory and attention
    candidates' share (attention lines are not the curator's to choose).
    """
    left = Counter((c.kind, c.reason) for c in pack.trace.candidates if not c.included)
    memory_left = sum(left["memory", reason] for reason in CHOICE_REASONS)
    attention_left = sum(left["attention", reason] for reason in CHOICE_REASONS)
    all_left = sum(pack.trace.dropped.get(reason, 0) for reason in CHOICE_REASONS)
    kinds: list[CuratedKind] = []
    if memory_left:
        kinds.append("memory")
    if all_left > memory_left + attention_left:
        kinds.append("recall")
    return kinds


def shown_refs(pack: ContextPack, kinds: tuple[CuratedKind, ...] = KINDS) -> list[str]:
    """The memory entries and recall events (one ref each) a pack shows, of ``kinds``."""
    return [c.source_id for c in pack.trace.candidates if c.included and c.kind in kinds]


def offers(inputs: ContextInputs, pack: ContextPack, kinds: list[CuratedKind] | None = None) -> list[Offer]:
    """The candidates the curator may choose from: those of ``kinds`` (default: the kinds
    under pressure), best first per kind (see module doc)."""
    chosen = frozenset(pressured(pack) if kinds is None else kinds)
    entries = {memory_ref(e.id): e for e in inputs.memory_entries}
    events: dict[str, Event] = {}
    for hit in inputs.recall_hits:
        for event in (hit.event, *hit.neighbours):
            events.setdefault(event_ref(event.session_id, event.seq), event)
    out: list[Offer] = []
    counts = {"memory": 0, "recall": 0}
    caps = {"memory": MAX_MEMORY_OFFERS, "recall": MAX_RECALL_OFFERS}
    for candidate in pack.trace.candidates:
        if (
            candidate.kind not in chosen
            or candidate.reason not in OFFERABLE
            or counts[candidate.kind] >= caps[candidate.kind]
        ):
            continue
        text = _offer_text(candidate, entries, events)
        if text is None:
            continue
        counts[candidate.kind] += 1
        out.append(Offer(candidate.source_id, redact(one_line(text, OFFER_TEXT_CHARS)).text))
    return out


def _offer_text(candidate: TraceCandidate, entries: dict[str, Any], events: dict[str, Event]) -> str | None:
    if candidate.kind == "memory":
        entry = entries.get(candidate.source_id)
        return f"{entry.title}: {entry.content}" if entry is not None else None
    found = events.get(candidate.source_id)
    return found.text if found is not None else None


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
    """The model's choice, validated against what it was offered (raises ``BadAnswer``).

    Of the refs it was not offered at most ``MAX_IGNORED`` are kept, each cut to
    ``MAX_IGNORED_CHARS``: they are for the trace and the ledger, which an answer naming
    thousands must not fill."""
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
        if ref in known:
            selected.append(ref)
        elif len(ignored) < MAX_IGNORED:
            cut = ref[:MAX_IGNORED_CHARS]
            if cut not in ignored:
                ignored.append(cut)
    if not picked:
        raise BadAnswer("empty")
    if not selected:
        raise BadAnswer("no_known_refs", ignored)
    return Answer(list(dict.fromkeys(selected)), ignored)


def _json_object(content: str) -> Any:
    """The JSON object in the answer: all of it, or the outermost braces (a model in
    plain-text mode may wrap it in prose or a code fence)."""
    for text in (content, content[content.find("{") : content.rfind("}") + 1]):
        try:
            return msgspec.json.decode(text.strip().encode())
        except msgspec.DecodeError:
            continue
    raise BadAnswer("unparseable")


@dataclass(frozen=True, slots=True)
class Curated:
    """The pack of the model's pick, and how many of its picks were left out (``trimmed``)."""

    pack: ContextPack
    trimmed: int


def curated(
    inputs: ContextInputs,
    deterministic: ContextPack,
    answer: Answer,
    counter: TokenCounter | None = None,
) -> Curated | None:
    """The pack of the model's pick among the kinds under pressure in ``deterministic``.

    The selection is what ``deterministic`` showed of the other kinds, in its order, then
    the pick. When that pack drops anything ``deterministic`` showed outside the kinds
    under pressure, the longest prefix of the pick that drops nothing is used (a pick
    takes room, so a shorter one never crowds out more); None when even no pick does
    (a tokenizer that is not additive could make it so).
    """
    kinds = pressured(deterministic)
    others = tuple(kind for kind in KINDS if kind not in kinds)
    kept = shown_refs(deterministic, others)
    picks = [ref for ref in answer.selected if ref not in kept]

    def attempt(count: int) -> ContextPack | None:
        pack = assemble(msgspec.structs.replace(inputs, selection=kept + picks[:count]), counter)
        return pack if keeps(deterministic, pack, kinds) else None

    best = attempt(len(picks))
    if best is not None:
        return Curated(_named(best), 0)
    low, high = 0, len(picks) - 1  # the largest count that keeps everything, by bisection
    found: tuple[int, ContextPack] | None = None
    while low <= high:
        middle = (low + high) // 2
        pack = attempt(middle)
        if pack is None:
            high = middle - 1
        else:
            found = (middle, pack)
            low = middle + 1
    if found is None:
        return None
    return Curated(_named(found[1]), len(picks) - found[0])


def keeps(deterministic: ContextPack, pack: ContextPack, kinds: list[CuratedKind]) -> bool:
    """Whether ``pack`` shows everything ``deterministic`` showed outside ``kinds``: the
    same segments of every other kind, and every history message."""
    mine = {segment.kind: segment.text for segment in pack.segments}
    for segment in deterministic.segments:
        if segment.kind not in kinds and mine.get(segment.kind) != segment.text:
            return False
    messages = {message.source_id for message in pack.messages}
    return all(message.source_id in messages for message in deterministic.messages)


def overlap(first: list[str], second: list[str]) -> float:
    """The Jaccard overlap of two lists of refs (1.0 when both are empty)."""
    a, b = set(first), set(second)
    return round(len(a & b) / len(a | b), 4) if a | b else 1.0


def _named(pack: ContextPack) -> ContextPack:
    return msgspec.structs.replace(pack, trace=msgspec.structs.replace(pack.trace, strategy="curator"))

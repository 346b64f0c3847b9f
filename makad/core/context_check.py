"""build_context never hands the agent an event whose hash chain is broken.

An event altered on disk (``makad.core.chain``) is left out of the pack — history
and recall alike — and the trace says so: ``trace.dropped["tampered"]`` counts
them and ``trace.tampered`` lists their refs. Excluding rather than marking:
text someone slipped into the ledger is exactly what must not reach the model.

Checking costs a hash per event, and a call reads far more events than it uses
(the history tail covers twice the budget, recall reads neighbours of a hundred
hits). So the pack is assembled first and only the events it uses are checked;
when one fails, the pack is assembled again without it, and the events the new
pack uses are checked in turn. After ``MAX_PASSES`` such rounds everything left
is checked at once, so a ledger full of altered rows costs one pass more, not
one per row.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping

import msgspec

from makad.core.assembly import assemble
from makad.core.chain import EventKey
from makad.core.context_types import ContextInputs, ContextPack
from makad.core.refs import event_ref
from makad.core.types import Event

MAX_PASSES = 3
# (events to check, stored rows already read that may sit around them) -> the failing keys
Check = Callable[[list[Event], Mapping[EventKey, Event]], set[EventKey]]


def assemble_checked(
    inputs: ContextInputs, check: Check | None, build: Callable[[ContextInputs], ContextPack] = assemble
) -> ContextPack:
    """``build(inputs)`` using only events that ``check`` finds intact (None: no check,
    e.g. an incognito session's events, which never left memory)."""
    pack = build(inputs)
    if check is None:
        return pack
    pool = _events(inputs)
    checked: set[EventKey] = set()
    tampered: set[EventKey] = set()
    for _ in range(MAX_PASSES):
        fresh = _used(pack) & pool.keys() - checked
        if not fresh:
            return _traced(pack, tampered)
        bad = check([pool[key] for key in fresh], pool)
        checked |= fresh
        if not bad:
            return _traced(pack, tampered)
        tampered |= bad
        pack = build(_without(inputs, tampered))
    rest = pool.keys() - checked
    bad = check([pool[key] for key in rest], pool) if rest else set()
    if bad:
        tampered |= bad
        pack = build(_without(inputs, tampered))
    return _traced(pack, tampered)


def _events(inputs: ContextInputs) -> dict[EventKey, Event]:
    pool = {(e.session_id, e.seq): e for e in inputs.history}
    for hit in inputs.recall_hits:
        for event in (hit.event, *hit.neighbours):
            pool.setdefault((event.session_id, event.seq), event)
    return pool


def _used(pack: ContextPack) -> set[EventKey]:
    """Every event the pack shows: history messages and the recall segment's ranges."""
    refs: list[str] = [message.source_id for message in pack.messages]
    refs += [ref for segment in pack.segments if segment.kind == "recall" for ref in segment.source_ids]
    return set(_keys(refs))


def _keys(refs: Iterable[str]) -> Iterable[EventKey]:
    """The (session, seq) of each ``event:<session>:<seq>`` or ``event:<session>:<a>-<b>``
    (session ids hold no ``:``); other refs are skipped."""
    for ref in refs:
        kind, _, rest = ref.partition(":")
        session, _, seqs = rest.rpartition(":")
        first, _, last = seqs.partition("-")
        if kind != "event" or not session or not first.isdigit() or not (last or first).isdigit():
            continue
        for seq in range(int(first), int(last or first) + 1):
            yield session, seq


def _without(inputs: ContextInputs, tampered: Collection[EventKey]) -> ContextInputs:
    def kept(event: Event) -> bool:
        return (event.session_id, event.seq) not in tampered

    hits = [
        msgspec.structs.replace(hit, neighbours=[n for n in hit.neighbours if kept(n)])
        for hit in inputs.recall_hits
        if kept(hit.event)
    ]
    return msgspec.structs.replace(inputs, history=[e for e in inputs.history if kept(e)], recall_hits=hits)


def _traced(pack: ContextPack, tampered: Collection[EventKey]) -> ContextPack:
    if not tampered:
        return pack
    dropped = {**pack.trace.dropped, "tampered": len(tampered)}
    trace = msgspec.structs.replace(
        pack.trace,
        dropped={reason: dropped[reason] for reason in sorted(dropped)},
        tampered=[event_ref(sid, seq) for sid, seq in sorted(tampered)],
    )
    return msgspec.structs.replace(pack, trace=trace)

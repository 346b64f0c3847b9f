"""The memory segment: which entries the agent sees, in what order, within a cap.

Entries are ranked once (``makad.core.ranking``); ``MemoryBuilder.build`` then
packs them best first into a cap, and may be called again with a larger cap when
unused budget flows to memory (``makad.core.budget``). Reasons an entry is left
out, in the order they are checked: ``disabled``, ``excluded``, ``scope``,
``archived``, ``inactive``, ``expired``, ``duplicate``, ``overridden``; then ``irrelevant``,
``already_shown``, ``top_k``, ``session_cap`` and ``budget``.

Choosing. When every entry that could be shown fits in memory's own cap (its
share), there is nothing to choose: all of them are shown, whatever their
number. Otherwise, with a query, an entry sharing no word or tag with it is not
relevant to this turn (``irrelevant``) and at most ``memory_top_k`` entries are
shown (``top_k``); without a query entries are taken most recent first until
the cap is full.

The session cap. The memory shown to one session between compactions is
bounded by ``memory_session_cap_bytes`` (60 KiB, the UTF-8 size of the blocks):
past it, an entry is shown only when it changed since the session saw it or,
with a query, when it is relevant to it and was not shown yet; any other is
left out as ``session_cap``.

A selection (``ContextInputs.selection``, set by a strategy of
``makad.core.strategies``) has chosen already: the selected entries are packed
in its order with no relevance or top-k filter (the session cap still applies,
a selected entry counting as relevant), and the others are ``not_selected``.

Levels. The candidates may hold user-level entries (``makad.core.levels``): they
are ranked with the workspace's, and when any is among them every shown entry's
ref line names its level. A user-level entry a workspace entry overrides is
``overridden``.

Each shown entry carries its confidence (``makad.core.confidence``) on its ref
line and in the trace. An entry something newer in the pack's candidates gives another
value (``makad.core.conflicts``) says ``possibly outdated: superseded by <ref>`` there,
and its trace candidate names that ref in ``superseded_by``; it is still shown (the user
decides what memory holds).
"""

from __future__ import annotations

from dataclasses import dataclass

from makad.core.confidence import Confidence, derive
from makad.core.context_types import Built, ContextInputs, Segment, TraceCandidate
from makad.core.levels import Level
from makad.core.ranking import RankedEntry, query_terms, rank_entries
from makad.core.refs import memory_ref
from makad.core.render import entry_hash, memory_block, memory_text
from makad.core.tokens import TokenCounter
from makad.core.types import Entry

# What joining two blocks of a segment costs at most ("\n\n").
BLOCK_SEPARATOR_TOKENS = 1


def memory_exclusion(entry: Entry, inputs: ContextInputs) -> str | None:
    """Why an entry can never be shown in this call, if it cannot."""
    if not inputs.memory_enabled:
        return "disabled"
    if "memory" not in inputs.include:
        return "excluded"
    if entry.scope == "session" and (inputs.session_id is None or entry.session_id != inputs.session_id):
        return "scope"
    if entry.status == "archived":
        return "archived"
    if entry.status != "active":
        return "inactive"
    if entry.decay_ttl_ms is not None and inputs.now_ms > entry.created_at + entry.decay_ttl_ms:
        return "expired"
    return None


@dataclass(slots=True)
class _Block:
    text: str
    tokens: int
    size: int
    confidence: Confidence


class MemoryBuilder:
    """Ranks the candidate entries once; ``build`` packs them into a cap."""

    def __init__(self, inputs: ContextInputs, counter: TokenCounter) -> None:
        self._inputs = inputs
        self._counter = counter
        # memory ref → the newer ref that gives its subject another value (``mark``)
        self._superseded: dict[str, str] = {}
        self.shown_refs: set[str] = set()  # the refs the last build showed
        self._exclusions: dict[int, str] = {}  # input position → reason
        # With user-level entries among the candidates, every block names its level.
        user_from = inputs.memory_user_from
        self._user_from = len(inputs.memory_entries) if user_from is None else user_from
        self._levels = self._user_from < len(inputs.memory_entries)
        seen: set[str] = set()
        for index, entry in enumerate(inputs.memory_entries):
            reason = memory_exclusion(entry, inputs)
            if reason is None and entry.id in seen:
                reason = "duplicate"
            if reason is None and index >= self._user_from and entry.id in inputs.memory_overridden:
                reason = "overridden"
            if reason is None:
                seen.add(entry.id)
            else:
                self._exclusions[index] = reason
        eligible = [e for i, e in enumerate(inputs.memory_entries) if i not in self._exclusions]
        ranked = (
            rank_entries(
                inputs.memory_entries,
                inputs.memory_bm25,
                inputs.query,
                inputs.now_ms,
                normalize_over=eligible,
            )
            if inputs.memory_entries
            else []
        )
        self._selected: dict[str, int] | None = None
        if inputs.selection is not None:
            self._selected = {ref: at for at, ref in enumerate(inputs.selection)}
            ranked = _in_selection_order(ranked, self._selected, self._exclusions)
        self._ranked = ranked
        self._has_query = bool(query_terms(inputs.query))
        self._frame_tokens = counter.count(memory_text([]))
        self._blocks: dict[int, _Block] = {}
        self._digests: dict[int, str] = {}
        self._choosing: bool | None = None  # decided by the first build, at memory's own cap

    def candidate_entries(self, limit: int) -> list[Entry]:
        """The best ``limit`` entries this segment could show, best first."""
        out: list[Entry] = []
        for item in self._ranked:
            if len(out) >= limit:
                break
            if item.index not in self._exclusions:
                out.append(item.entry)
        return out

    def mark(self, superseded: dict[str, str]) -> None:
        """Entries to show as possibly outdated: memory ref → the newer ref (before ``build``)."""
        self._superseded = {ref: newer for ref, newer in superseded.items() if ref.startswith("memory:")}
        self._blocks.clear()

    def _block(self, item: RankedEntry) -> _Block:
        block = self._blocks.get(item.index)
        if block is None:
            inputs = self._inputs
            entry = item.entry
            confidence = derive(entry, inputs.now_ms, inputs.memory_confidence.get(entry.id))
            level: Level | None = None
            if self._levels:
                level = "user" if item.index >= self._user_from else "workspace"
            outdated_by = self._superseded.get(memory_ref(entry.id))
            text = memory_block(entry, inputs.now_ms, inputs.limits, confidence, level, outdated_by)
            block = _Block(text, self._counter.count(text), len(text.encode()), confidence)
            self._blocks[item.index] = block
        return block

    def _everything_fits(self, cap: int) -> bool:
        """Whether every entry that could be shown fits in ``cap`` (counting stops past it).

        A quarter token a character of the content shown is a lower bound of a
        block's cost: when even that does not fit, no block is rendered to know it.
        """
        showable = [
            item for item in self._ranked if item.index not in self._exclusions and not self._unchanged(item)
        ]
        least = self._frame_tokens
        shown_max = self._inputs.limits.memory_entry_max_bytes  # a cut keeps at most this many
        for item in showable:
            least += min(len(item.entry.content.strip()), shown_max) // 4
            if least > cap:
                return False
        used = self._frame_tokens
        for item in showable:
            used += self._block(item).tokens + BLOCK_SEPARATOR_TOKENS
            if used > cap:
                return False
        return True

    def _digest(self, item: RankedEntry) -> str:
        digest = self._digests.get(item.index)
        if digest is None:
            digest = self._inputs.memory_hashes.get(item.entry.id) or entry_hash(item.entry)
            self._digests[item.index] = digest
        return digest

    def _unchanged(self, item: RankedEntry) -> bool:
        shown = self._inputs.already_shown
        return bool(shown) and shown.get(memory_ref(item.entry.id)) == self._digest(item)

    def build(self, cap: int) -> Built:
        inputs = self._inputs
        limits = inputs.limits
        if not self._ranked:
            return Built()
        if self._choosing is None:
            # A selection has chosen already: no relevance or top-k filter on top of it.
            self._choosing = self._selected is None and self._has_query and not self._everything_fits(cap)
        choosing = self._choosing
        session_bytes = inputs.memory_session_bytes
        used = self._frame_tokens
        chosen: list[tuple[str, int]] = []  # (block, index in candidates)
        candidates: list[TraceCandidate] = []
        for item in self._ranked:
            entry = item.entry
            source_id = memory_ref(entry.id)
            digest = self._digest(item)
            shown = inputs.already_shown.get(source_id)
            relevant = item.parts.bm25 > 0 or item.parts.tags > 0
            reason = self._exclusions.get(item.index)
            if self._selected is not None:
                relevant = source_id in self._selected
            block: _Block | None = None
            if reason is None and choosing and not relevant:
                reason = "irrelevant"
            elif reason is None and shown == digest:
                reason = "already_shown"
            elif reason is None and choosing and len(chosen) >= limits.memory_top_k:
                reason = "top_k"
            elif reason is None:
                block = self._block(item)
                past_cap = session_bytes + block.size > limits.memory_session_cap_bytes
                if (
                    past_cap
                    and shown is None
                    and not ((self._has_query or self._selected is not None) and relevant)
                ):
                    reason = "session_cap"
                elif used + block.tokens + BLOCK_SEPARATOR_TOKENS <= cap:
                    used += block.tokens + BLOCK_SEPARATOR_TOKENS
                    session_bytes += block.size
                    chosen.append((block.text, len(candidates)))
                else:
                    reason = "budget"
            candidates.append(
                TraceCandidate(
                    kind="memory",
                    source_id=source_id,
                    score=item.score,
                    parts=item.parts,
                    included=reason is None,
                    reason=reason,
                    tokens=block.tokens if block is not None else 0,
                    content_hash=digest,
                    confidence=block.confidence if block is not None else None,
                    bytes=block.size if block is not None and reason is None else 0,
                    superseded_by=self._superseded.get(source_id),
                )
            )
        text = memory_text(block for block, _ in chosen)
        tokens = self._counter.count(text)
        while chosen and tokens > cap:  # a tokenizer need not be additive
            _, index = chosen.pop()
            candidates[index].included = False
            candidates[index].reason = "budget"
            candidates[index].bytes = 0
            text = memory_text(block for block, _ in chosen)
            tokens = self._counter.count(text)
        truncated = any(c.reason in ("top_k", "budget") for c in candidates)
        wants_more = any(c.reason == "budget" for c in candidates)
        self.shown_refs = {candidates[index].source_id for _, index in chosen}
        if not chosen:
            return Built(None, truncated, candidates, wants_more=wants_more)
        segment = Segment(
            kind="memory",
            text=text,
            tokens=tokens,
            source_ids=[candidates[index].source_id for _, index in chosen],
        )
        return Built(segment, truncated, candidates, wants_more=wants_more)


def _in_selection_order(
    ranked: list[RankedEntry], selected: dict[str, int], exclusions: dict[int, str]
) -> list[RankedEntry]:
    """The selected entries first, in the selection's order; the others are ``not_selected``."""
    for item in ranked:
        if item.index not in exclusions and memory_ref(item.entry.id) not in selected:
            exclusions[item.index] = "not_selected"
    last = len(selected)
    return sorted(ranked, key=lambda item: selected.get(memory_ref(item.entry.id), last))

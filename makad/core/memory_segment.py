"""The memory segment: which entries the agent sees, in what order, within a cap.

Entries are ranked once (``makad.core.ranking``); ``MemoryBuilder.build`` then
packs them into a cap, and may be called again with a larger cap when unused
budget flows to memory (``makad.core.budget``).

Order. The segment is packed in four tiers, each entry at most once:

1. **pinned** entries (``makad.core.memory_select``): those matching the query
   first, each group in fill order (below);
2. entries **matching** the query (a word, a tag or another channel's part:
   ``makad.core.ranking.matches``; a word the service's bridge adds, ``makad.core.bridge``,
   counts as a word), best score first, at most ``memory_top_k``;
3. the other matching entries, best score first;
4. **every other entry**: first the ``MEMORY_NEAR_K`` nearest the query by the
   semantic channel's cosine (``ContextInputs.memory_near``, nearest first; only with
   the channel, ``makad.core.semantic``), then in fill order: confidence, then recency,
   then place in the file, then id (``memory_select.fill_order``) — the candidates that
   matched nothing and the entries of ``ContextInputs.memory_fill`` beyond them. Without a query nothing
   matches, so memory is the pinned entries, then fill order.

Room. Tiers 1 and 2 use memory's cap and, when one is left out for lack of room
(``budget``), memory asks for more (step 4 of ``makad.core.budget``). Tiers 3
and 4 only fill: ``build`` packs them within ``fill_cap`` — what is left of
memory's own cap once the kinds before memory and its own matching entries were
served (step 4), then what no kind used (step 6); left out they are ``top_k``
(tier 3) or ``budget`` (tier 4) and ask for nothing. ``own_cap`` says how far
memory's own cap grows: to hold every entry that could be shown when they fit in
the small-memory share (``memory_select.small_share``; measured as the segment holding
them all renders, though ``build`` adds the blocks up one by one; then every tier is packed
at once, nothing only fills), or else to hold the pinned entries up to that share.

A selection (``ContextInputs.selection``, set by a strategy of
``makad.core.strategies``) has chosen already: after the pinned entries, the
selected ones are packed in its order with no relevance or top-k filter (the
session cap still applies, a selected entry counting as relevant), and the
others are ``not_selected``. A pinned entry is never ``not_selected``.

Reasons an entry is left out, in the order they are checked: ``disabled``,
``excluded``, ``scope``, ``archived``, ``inactive``, ``expired``, ``duplicate``,
``overridden``, ``not_selected``; then ``already_shown``, ``session_cap``,
``top_k`` and ``budget``.

The session cap. The memory shown to one session between compactions is
bounded by ``memory_session_cap_bytes`` (60 KiB, the UTF-8 size of the blocks):
past it, an entry is shown only when it changed since the session saw it or when
it is pinned, matches the query or was selected, and was not shown yet; any other
is left out as ``session_cap``.

The trace lists every candidate of ``memory_entries``, in the order considered;
of the entries that only ``memory_fill`` holds, those the pack tried to fit. Tiers
3 and 4 stop trying after ``FILL_GIVE_UP_AFTER`` entries in a row did not fit (the
segment is full) or ``FILL_SCAN_MAX`` entries of ``memory_fill`` were looked at. A
long session was shown the first hundreds or thousands of entries in fill order as
they are: ``ContextInputs.memory_fill_shown`` says how many (``shown_prefix``), and the
walk passes over them as one step that counts them all, with the same outcome.

Levels. The candidates may hold user-level entries (``makad.core.levels``): they
are ranked with the workspace's, and when any is among them or in
``memory_fill`` every shown entry's ref line names its level. A user-level entry
a workspace entry overrides is ``overridden``.

Each shown entry carries its confidence (``makad.core.confidence``) on its ref
line and in the trace, and its title in the trace. An entry something newer in the
pack's candidates gives another value (``makad.core.conflicts``, ``mark``) says
``possibly outdated: superseded by <ref>`` there, and its trace row names that ref in
``superseded_by``; it is still shown (the user decides what memory holds).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice

from makad.core.confidence import Confidence, derive
from makad.core.context_types import Built, ContextInputs, FillKey, FillOrder, Segment, TraceCandidate
from makad.core.levels import Level
from makad.core.memory_select import fill_key, is_pinned
from makad.core.ranking import (
    RankedEntry,
    best_bm25,
    best_similarity,
    matches,
    query_terms,
    rank_entries,
    score_entry,
)
from makad.core.refs import MEMORY_PREFIX, memory_ref
from makad.core.render import BLOCK_SEPARATOR_TOKENS, entry_hash, memory_block, memory_text
from makad.core.semantic import MEMORY_NEAR_K
from makad.core.tokens import TokenCounter
from makad.core.types import Entry

# Tiers 3 and 4 give up once this many entries in a row did not fit: the segment is full.
FILL_GIVE_UP_AFTER = 16
# At most this many entries of ``memory_fill`` are looked at per build (gated or already
# shown ones are passed over without cost to the trace, but not for free).
FILL_SCAN_MAX = 5_000
# An entry every gate that concerns the call rather than the entry lets through.
_PROBE = Entry(id="", title="", content="")
_NO_ENTRY = 1 << 62
# Characters a block holds besides title and content (heading marks, its ref line):
# with at most six characters a token, a lower bound of its cost.
_BLOCK_CHARS_MIN = 24


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
    if entry.decay_ttl_ms and inputs.now_ms > entry.created_at + entry.decay_ttl_ms:  # 0: never
        return "expired"
    return None


@dataclass(slots=True)
class _Block:
    text: str
    tokens: int
    size: int
    confidence: Confidence


@dataclass(slots=True)
class _Walk:
    """Tiers 3 and 4 without the fill entries shown as they are (``MemoryBuilder._rest``),
    as far as any walk read them: the entries found, and whether the last entries passed
    over came after the last one found."""

    found: list[RankedEntry]
    source: Iterator[RankedEntry] | None = None
    skipped_last: bool = False


@dataclass(slots=True)
class _Pack:
    """One build's running state."""

    used: int
    session_bytes: int
    chosen: list[tuple[int, str]]  # (position in ``outcome``, block) of the entries shown
    outcome: list[tuple[RankedEntry, str | None, _Block | None]]  # each entry considered


class MemoryBuilder:
    """Ranks the candidate entries once; ``build`` packs them into a cap."""

    def __init__(self, inputs: ContextInputs, counter: TokenCounter) -> None:
        self._inputs = inputs
        self._counter = counter
        self._exclusions: dict[int, str] = {}  # input position → reason
        entries = inputs.memory_entries
        user_from = inputs.memory_user_from
        self._user_from = len(entries) if user_from is None else user_from
        # With user-level entries in play, every block names its level.
        self._levels = self._user_from < len(entries) or any(
            order.user_level and order.keyed for order in inputs.memory_fill
        )
        seen: set[str] = set()
        for index, entry in enumerate(entries):
            reason = memory_exclusion(entry, inputs)
            if reason is None and entry.id in seen:
                reason = "duplicate"
            if reason is None and index >= self._user_from and entry.id in inputs.memory_overridden:
                reason = "overridden"
            if reason is None:
                seen.add(entry.id)
            else:
                self._exclusions[index] = reason
        self._candidate_ids = {entry.id for entry in entries}
        eligible = [e for i, e in enumerate(entries) if i not in self._exclusions]
        self._terms = query_terms(inputs.query)
        self._best = best_bm25(inputs.memory_bm25.get(e.id, 0.0) for e in eligible) if self._terms else 0.0
        similar = inputs.memory_similarity
        self._best_similar = best_similarity(similar.get(e.id) for e in eligible) if similar else 0.0
        ranked = (
            rank_entries(
                entries,
                inputs.memory_bm25,
                inputs.query,
                inputs.now_ms,
                normalize_over=eligible,
                similarity=inputs.memory_similarity,
            )
            if entries
            else []
        )
        self._ranked = ranked
        user_values = inputs.memory_confidence
        places = inputs.memory_places
        pinned = sorted(
            (r for r in ranked if r.index not in self._exclusions and is_pinned(r.entry)),
            key=lambda r: (
                not matches(r.parts),
                fill_key(r.entry, inputs.now_ms, user_values.get(r.entry.id), places.get(r.entry.id, 0)),
            ),
        )
        pinned_at = {r.index for r in pinned}
        self._pinned = pinned_at
        self._selection = inputs.selection is not None
        self._fill_from_inputs = (
            not self._selection and bool(inputs.memory_fill) and memory_exclusion(_PROBE, inputs) is None
        )
        self._rest_matched: list[RankedEntry] = []
        self._tier3: set[int] = set()
        self._unmatched: list[tuple[FillKey, RankedEntry]] = []
        self._near: list[tuple[RankedEntry, bool]] | None = None  # ``_near_items``, once read
        self._near_ids: set[str] = set()
        if inputs.selection is not None:
            selected = {ref: at for at, ref in enumerate(inputs.selection)}
            chosen = []
            for item in ranked:
                if item.index in self._exclusions or item.index in pinned_at:
                    continue
                if memory_ref(item.entry.id) in selected:
                    chosen.append(item)
                else:
                    self._exclusions[item.index] = "not_selected"
            last = len(selected)
            chosen.sort(key=lambda item: selected.get(memory_ref(item.entry.id), last))
            self._want = [*pinned, *chosen]
        else:
            top_k = inputs.limits.memory_top_k
            matched = [
                r
                for r in ranked
                if r.index not in self._exclusions and r.index not in pinned_at and matches(r.parts)
            ]
            self._want = [*pinned, *matched[:top_k]]
            self._rest_matched = matched[top_k:]
            self._tier3 = {r.index for r in self._rest_matched}
            self._unmatched = sorted(
                (
                    (
                        fill_key(
                            r.entry, inputs.now_ms, user_values.get(r.entry.id), places.get(r.entry.id, 0)
                        ),
                        r,
                    )
                    for r in ranked
                    if r.index not in self._exclusions and r.index not in pinned_at and not matches(r.parts)
                ),
                key=lambda pair: pair[0],
            )
        self._frame_tokens = counter.count(memory_text([]))
        self._blocks: dict[int, _Block] = {}
        self._digests: dict[int, str] = {}
        self._fill_digests: dict[str, str] = {}  # entries only memory_fill holds: id → hash
        self._walked = _Walk([])
        self._fill_items: dict[str, RankedEntry] = {}  # entries only memory_fill holds, by id
        self._fill_user: set[int] = set()  # their indexes that are the user level's
        self._whole = False  # every entry fits the small-memory share (``own_cap``)
        # After a build: the least any entry it left out for room could cost (more room than
        # that is needed before another entry can show).
        self.least_left_out = _NO_ENTRY
        self._leasts: dict[int, int] = {}
        self._texts: dict[tuple[int, ...], tuple[str, int]] = {}  # the entries shown → text, tokens
        # memory ref → the newer ref that gives its subject another value (``mark``)
        self._superseded: dict[str, str] = {}
        self.shown_refs: set[str] = set()  # the refs the last build showed

    def candidate_entries(self, limit: int) -> list[Entry]:
        """The first ``limit`` entries this segment would try to show, in its order."""
        return [item.entry for item in islice(_chain(iter(self._want), self._rest()), limit)]

    def mark(self, superseded: dict[str, str]) -> None:
        """Entries to show as possibly outdated: memory ref → the newer ref (before any
        block is rendered: ``own_cap`` and ``build`` come after)."""
        self._superseded = {ref: newer for ref, newer in superseded.items() if ref.startswith("memory:")}
        self._blocks.clear()
        self._texts.clear()

    # ------------------------------------------------------------ the entries ---

    def _level(self, item: RankedEntry) -> Level | None:
        if not self._levels:
            return None
        if item.index < len(self._inputs.memory_entries):
            return "user" if item.index >= self._user_from else "workspace"
        return "user" if item.index in self._fill_user else "workspace"

    def _block(self, item: RankedEntry) -> _Block:
        block = self._blocks.get(item.index)
        if block is None:
            inputs = self._inputs
            entry = item.entry
            confidence = derive(entry, inputs.now_ms, inputs.memory_confidence.get(entry.id))
            outdated_by = self._superseded.get(memory_ref(entry.id))
            text = memory_block(
                entry, inputs.now_ms, inputs.limits, confidence, self._level(item), outdated_by
            )
            block = _Block(text, self._counter.count(text), len(text.encode()), confidence)
            self._blocks[item.index] = block
        return block

    def _digest(self, item: RankedEntry) -> str:
        digest = self._digests.get(item.index)
        if digest is None:
            digest = self._inputs.memory_hashes.get(item.entry.id) or entry_hash(item.entry)
            self._digests[item.index] = digest
        return digest

    def _unchanged(self, item: RankedEntry) -> bool:
        shown = self._inputs.already_shown
        if not shown:
            return False
        digest = shown.get(memory_ref(item.entry.id))
        return digest is not None and digest == self._digest(item)

    def _fill_digest(self, entry: Entry) -> str:
        """The content hash of an entry only ``memory_fill`` holds."""
        known = self._fill_digests.get(entry.id)
        if known is None:
            known = self._inputs.memory_hashes.get(entry.id) or entry_hash(entry)
            self._fill_digests[entry.id] = known
        return known

    def _fill_item(self, entry: Entry, user_level: bool) -> RankedEntry | None:
        """The ranked form of an entry only ``memory_fill`` holds; None when it cannot be shown."""
        item = self._fill_items.get(entry.id)
        if item is not None:
            return item
        if not self._fill_ok(entry, user_level):
            return None
        inputs = self._inputs
        index = len(inputs.memory_entries) + len(self._fill_items)
        raw = inputs.memory_bm25.get(entry.id)
        item = score_entry(
            index,
            entry,
            raw,
            self._terms,
            self._best,
            inputs.now_ms,
            inputs.memory_similarity.get(entry.id),
            self._best_similar,
        )
        self._fill_items[entry.id] = item
        if user_level:
            self._fill_user.add(index)
        return item

    def _fill_ok(self, entry: Entry, user_level: bool) -> bool:
        """Whether an entry only ``memory_fill`` holds may be shown in this call."""
        inputs = self._inputs
        if memory_exclusion(entry, inputs) is not None:
            return False
        return not (user_level and entry.id in inputs.memory_overridden)

    def _near_items(self) -> list[tuple[RankedEntry, bool]]:
        """The first ``MEMORY_NEAR_K`` entries of ``memory_near`` that tier 4 holds (matching
        nothing, not pinned, showable), nearest first; each with whether only ``memory_fill``
        holds it."""
        if self._near is not None:
            return self._near
        near: list[tuple[RankedEntry, bool]] = []
        self._near = near
        if self._selection or not self._inputs.memory_near:
            return near
        unmatched = {item.entry.id: item for _, item in self._unmatched}
        orders = self._inputs.memory_fill if self._fill_from_inputs else []
        for entry_id in self._inputs.memory_near:
            if len(near) >= MEMORY_NEAR_K:
                break
            if entry_id in self._near_ids:
                continue
            candidate = unmatched.get(entry_id)
            if candidate is not None:
                near.append((candidate, False))
                self._near_ids.add(entry_id)
                continue
            if entry_id in self._candidate_ids:  # matched, pinned or gated: not tier 4's
                continue
            for order in orders:
                at = order.positions.get(entry_id)
                if at is None or at >= len(order.keyed) or order.keyed[at][1].id != entry_id:
                    continue
                found = self._fill_item(order.keyed[at][1], order.user_level)
                if found is not None:
                    near.append((found, True))
                    self._near_ids.add(entry_id)
                break
        return near

    def _rest(self, walk: _Walk | None = None) -> Iterator[RankedEntry]:
        """Tiers 3 and 4 in order (see module doc), read only as far as the caller goes.
        With ``walk``, the entries only ``memory_fill`` holds that the session was shown as
        they are are passed over (still counted in ``FILL_SCAN_MAX``): the budget's walks
        have nothing to do with them, and a session that saw much of its memory has many."""
        yield from self._rest_matched
        shown_as_is = self._inputs.already_shown if walk is not None else None
        for near, fill_only in self._near_items():
            if shown_as_is and fill_only and walk is not None:
                digest = shown_as_is.get(MEMORY_PREFIX + near.entry.id)
                if digest is not None and digest == self._fill_digest(near.entry):
                    walk.skipped_last = True
                    continue
            if walk is not None:
                walk.skipped_last = False
            yield near
        near_ids = self._near_ids
        streams: list[Iterator[tuple[FillKey, RankedEntry | tuple[Entry, bool] | None]]] = [
            iter(self._unmatched)
        ]
        shown = self._inputs.already_shown if walk is not None else None
        passed = 0
        if self._fill_from_inputs:
            fill = self._inputs.memory_fill
            if shown and len(fill) == 1:
                stream, passed = self._after_shown(fill[0])
                streams.append(stream)
            else:
                streams.extend(_tagged(order) for order in fill)
        if len(streams) == 1:
            yield from (item for _, item in self._unmatched if item.entry.id not in near_ids)
            return
        scanned = 0
        given: set[str] = set(near_ids)
        candidates = self._candidate_ids
        for _, item in heapq.merge(*streams, key=lambda pair: pair[0]):
            if item is None:  # the entries of the shown prefix, passed over as one
                scanned += passed
                if walk is not None:
                    walk.skipped_last = True
                continue
            if isinstance(item, RankedEntry):
                if item.entry.id in near_ids:
                    continue
                if walk is not None:
                    walk.skipped_last = False
                yield item
                continue
            entry, user_level = item
            entry_id = entry.id
            if entry_id in candidates or entry_id in given:
                continue
            scanned += 1
            if scanned > FILL_SCAN_MAX:
                return
            if shown and walk is not None:  # pass over an entry shown as it is
                digest = shown.get(MEMORY_PREFIX + entry_id)
                if (
                    digest is not None
                    and self._fill_ok(entry, user_level)
                    and digest == self._fill_digest(entry)
                ):
                    given.add(entry_id)
                    walk.skipped_last = True
                    continue
            found = self._fill_item(entry, user_level)
            if found is not None:
                given.add(entry.id)
                if walk is not None:
                    walk.skipped_last = False
                yield found

    def _after_shown(
        self, order: FillOrder
    ) -> tuple[Iterator[tuple[FillKey, tuple[Entry, bool] | None]], int]:
        """The fill order as the walk reads it, its shown prefix (``memory_fill_shown``)
        standing in as one item at the key of its last entry the walk would pass over
        (the candidates are not passed over: the walk takes them from the candidates);
        and how many entries that item stands for (at most ``FILL_SCAN_MAX``, so that the
        walk's scan limit cannot fall inside the prefix)."""
        prefix = min(self._inputs.memory_fill_shown, FILL_SCAN_MAX, len(order.keyed))
        if prefix <= 0 or not order.positions or order.user_level:
            return _tagged(order), 0
        keyed, positions, candidates = order.keyed, order.positions, self._candidate_ids
        inside = sum(1 for entry_id in candidates if positions.get(entry_id, prefix) < prefix)
        rest = _tagged(order, prefix)
        if inside >= prefix:  # every entry of the prefix is a candidate
            return rest, 0
        last = prefix - 1
        while keyed[last][1].id in candidates:
            last -= 1
        return _chain_pairs((keyed[last][0], None), rest), prefix - inside

    def _walk(self) -> Iterator[RankedEntry]:
        """Tiers 3 and 4 as the budget walks them (``_rest`` with a walk): each entry is
        looked at once per call, however often the segment is built."""
        walked = self._walked
        found = walked.found
        at = 0
        while True:
            if at == len(found):
                if walked.source is None:
                    walked.source = self._rest(walked)
                item = next(walked.source, None)
                if item is None:
                    return
                found.append(item)
            yield found[at]
            at += 1

    # ------------------------------------------------------------ the budget ---

    def _showable_cost(self, limit: int, pinned_only: bool = False) -> int | None:
        """What every entry that could be shown costs as ``build`` adds it up (or only the
        pinned ones), None when the segment holding them all, as rendered, is over ``limit``.
        A quarter token a character of the content shown is a lower bound of a block's
        cost: past the limit, nothing is rendered."""
        items: Iterator[RankedEntry] = iter(self._want)
        if not pinned_only:
            items = _chain(items, self._walk())
        least = used = self._frame_tokens
        shown_max = self._inputs.limits.memory_entry_max_bytes  # a cut keeps at most this many
        rendered: list[RankedEntry] = []
        for item in items:
            if pinned_only and item.index not in self._pinned:
                break
            if self._unchanged(item):
                continue
            least += min(len(item.entry.content.strip()), shown_max) // 4
            if least > limit:
                return None
            rendered.append(item)
        blocks = [self._block(item) for item in rendered]
        used += sum(block.tokens + BLOCK_SEPARATOR_TOKENS for block in blocks)
        # Whether they fit is what the segment as rendered costs (each block counted alone
        # rounds up); what is returned is what ``build`` adds up as it packs them.
        if used > limit and self._counter.count(memory_text(block.text for block in blocks)) > limit:
            return None
        return used

    def own_cap(self, cap: int, small: int) -> int:
        """Memory's own cap: ``cap`` (its share), grown to hold every entry that could be
        shown when they fit in ``small`` (the small-memory share), or else the pinned
        entries up to ``small``."""
        if not self._ranked and not self._fill_from_inputs:
            return cap
        whole = self._showable_cost(small) if small > 0 else None
        if whole is not None:
            self._whole = True  # then nothing only fills: every entry is packed at once
            return max(cap, whole)
        if small <= cap or not self._pinned:
            return cap
        pinned = self._showable_cost(small, pinned_only=True)
        return max(cap, small if pinned is None else pinned)

    def _offer(
        self, item: RankedEntry, pack: _Pack, limit: int, relevant: bool
    ) -> tuple[str | None, _Block | None]:
        """Try to add one entry within ``limit``: why it stays out (None: it is in)."""
        inputs = self._inputs
        shown = inputs.already_shown.get(memory_ref(item.entry.id))
        if shown is not None and shown == self._digest(item):
            return "already_shown", None
        block = self._block(item)
        if (
            pack.session_bytes + block.size > inputs.limits.memory_session_cap_bytes
            and shown is None
            and not relevant
        ):
            return "session_cap", block
        if pack.used + block.tokens + BLOCK_SEPARATOR_TOKENS > limit:
            return "budget", block
        pack.used += block.tokens + BLOCK_SEPARATOR_TOKENS
        pack.session_bytes += block.size
        return None, block

    def _note(self, item: RankedEntry, reason: str | None, block: _Block | None, pack: _Pack) -> None:
        if reason is None and block is not None:
            pack.chosen.append((len(pack.outcome), block.text))
        pack.outcome.append((item, reason, block))

    def _row(self, item: RankedEntry, reason: str | None, block: _Block | None) -> TraceCandidate:
        included = reason is None
        row = TraceCandidate(
            kind="memory",
            source_id=memory_ref(item.entry.id),
            score=item.score,
            parts=item.parts,
            included=included,
            reason=reason,
            tokens=block.tokens if block is not None else 0,
            content_hash=self._digest(item),
            confidence=block.confidence if block is not None else None,
            bytes=block.size if block is not None and included else 0,
            title=item.entry.title,
        )
        if item.index in self._pinned:
            row.pinned = True
        newer = self._superseded.get(row.source_id)
        if newer is not None:
            row.superseded_by = newer
        return row

    def build(self, cap: int, fill_cap: int | None = None) -> Built:
        """The segment within ``cap``; tiers 3 and 4 only within ``fill_cap`` (default: ``cap``).
        Its trace rows are made only when asked for (``Built.rows``): the budget may build
        the segment several times and keep one."""
        if not self._ranked and not self._fill_from_inputs:
            return Built()
        # A memory shown whole has nothing that only fills: every entry fits.
        fill_limit = cap if fill_cap is None or self._whole else min(cap, fill_cap)
        pack = _Pack(self._frame_tokens, self._inputs.memory_session_bytes, [], [])
        listed: set[int] = set()
        wants_more = wants_fill = False
        self.least_left_out = _NO_ENTRY
        reason: str | None
        block: _Block | None
        for item in self._want:
            if pack.used + self._least(item) > cap and not self._unchanged(item):
                reason, block = "budget", None  # surely too big: not even rendered
            else:
                reason, block = self._offer(item, pack, cap, relevant=True)
            if reason == "budget":
                wants_more = True
                self._left_out(item)
            self._note(item, reason, block, pack)
            listed.add(item.index)
        misses = 0
        rest = self._walk()
        if fill_limit <= pack.used:  # no room to fill: only the candidates are listed
            # The next entry that would fill is left out for room: what no kind uses may
            # still go to it (budget step 6), as to any entry the walk leaves out.
            first = next(self._rest(), None)
            wants_fill = first is not None
            if first is not None:
                self._left_out(first)
            rest = iter(())
        for item in rest:
            if misses >= FILL_GIVE_UP_AFTER:
                wants_fill = True
                break
            if pack.used + self._least(item) > fill_limit and not self._unchanged(item):
                reason, block = "budget", None
            else:
                reason, block = self._offer(item, pack, fill_limit, relevant=matches(item.parts))
            if reason == "already_shown" and item.index >= len(self._inputs.memory_entries):
                continue  # an entry only memory_fill holds, and nothing to do with it: not listed
            if reason in ("budget", "session_cap"):
                misses += 1
            else:
                misses = 0
            if reason == "budget":
                wants_fill = True
                self._left_out(item)
                if item.index in self._tier3:
                    reason = "top_k"
            self._note(item, reason, block, pack)
            listed.add(item.index)
        else:
            # The walk passed over shown entries after the last one it gave: the segment was
            # full before them (as when one of them is the next to be looked at).
            wants_fill = wants_fill or (misses >= FILL_GIVE_UP_AFTER and self._walked.skipped_last)
        for item in self._ranked:  # every other candidate, in rank order
            if item.index in listed:
                continue
            reason = self._exclusions.get(item.index)
            if reason is None:
                reason = (
                    "already_shown"
                    if self._unchanged(item)
                    else "top_k"
                    if item.index in self._tier3
                    else "budget"
                )
                if reason != "already_shown":
                    wants_fill = True
                    self._left_out(item)
            self._note(item, reason, None, pack)
        return self._finish(pack, cap, wants_more, wants_fill)

    def _least(self, item: RankedEntry) -> int:
        """A lower bound of what the entry's block costs (see ``_BLOCK_CHARS_MIN``)."""
        least = self._leasts.get(item.index)
        if least is None:
            entry = item.entry
            shown = len(entry.title) + min(len(entry.content), self._inputs.limits.memory_entry_max_bytes)
            least = self._leasts[item.index] = (shown + _BLOCK_CHARS_MIN) // 6
        return least

    def _left_out(self, item: RankedEntry) -> None:
        self.least_left_out = min(self.least_left_out, self._least(item))

    def _finish(self, pack: _Pack, cap: int, wants_more: bool, wants_fill: bool) -> Built:
        outcome, chosen = pack.outcome, pack.chosen
        key = tuple(outcome[at][0].index for at, _ in chosen)
        known = self._texts.get(key)
        if known is None:
            text = memory_text(block for _, block in chosen)
            known = self._texts[key] = (text, self._counter.count(text))
        text, tokens = known
        while chosen and tokens > cap:  # a tokenizer need not be additive
            at, _ = chosen.pop()
            item, _, block = outcome[at]
            outcome[at] = (item, "budget", block)
            wants_fill = True
            text = memory_text(block for _, block in chosen)
            tokens = self._counter.count(text)
        truncated = any(reason in ("top_k", "budget") for _, reason, _ in outcome)

        def rows() -> list[TraceCandidate]:
            return [self._row(item, reason, block) for item, reason, block in outcome]

        built = Built(None, truncated, wants_more=wants_more, wants_fill=wants_fill, rows=rows)
        self.shown_refs = {memory_ref(outcome[at][0].entry.id) for at, _ in chosen}
        if chosen:
            built.segment = Segment(
                kind="memory",
                text=text,
                tokens=tokens,
                source_ids=[memory_ref(outcome[at][0].entry.id) for at, _ in chosen],
            )
        return built


def _tagged(order: FillOrder, start: int = 0) -> Iterator[tuple[FillKey, tuple[Entry, bool]]]:
    """A fill order's entries (from ``start``), each with whether it is the user level's."""
    level = order.user_level
    keyed = order.keyed if start == 0 else islice(order.keyed, start, None)
    return ((key, (entry, level)) for key, entry in keyed)


def _chain_pairs(
    first: tuple[FillKey, None], rest: Iterator[tuple[FillKey, tuple[Entry, bool]]]
) -> Iterator[tuple[FillKey, tuple[Entry, bool] | None]]:
    yield first
    yield from rest


def shown_prefix(
    inputs: ContextInputs, order: FillOrder, start: int, digest: Callable[[Entry], str]
) -> tuple[int, int | None]:
    """How far ``order`` runs, from ``start`` (a prefix known to hold), through entries the
    session was shown as they are (``inputs.already_shown``, ``digest`` giving an entry's
    hash) that this call's gates let through; and until when that holds (ms, None: while
    the shown entries and the order do): the first time one of them expires."""
    shown = inputs.already_shown
    keyed = order.keyed
    at = start
    until: int | None = None
    while at < len(keyed):
        entry = keyed[at][1]
        known = shown.get(MEMORY_PREFIX + entry.id)
        if known is None or memory_exclusion(entry, inputs) is not None or known != digest(entry):
            break
        if entry.decay_ttl_ms:  # None or 0: never decays
            ends = entry.created_at + entry.decay_ttl_ms
            until = ends if until is None else min(until, ends)
        at += 1
    return at, until


def _chain(first: Iterator[RankedEntry], second: Iterator[RankedEntry]) -> Iterator[RankedEntry]:
    yield from first
    yield from second

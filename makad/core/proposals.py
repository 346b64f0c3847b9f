"""The approval gate's rules, without IO: what a proposal is, what an approval does.

An approval is decided in full before anything is written (``plan_approval``):
each proposal's new entry id and content, or the active entry it duplicates.
The plan is recorded as an intent, then carried out one file at a time
(``approve_into`` MEMORY.md, ``remove_approved`` from PENDING.md) and recorded
(``approval_events``). Each step applies to the file as it is at that moment
and may be repeated: an entry is upserted by its planned id, a proposal
removed by its id, an event skipped once it is recorded, so a crash at any
point is finished from the plan alone.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol, cast

import msgspec
from msgspec import UNSET, UnsetType

from makad.core import memory_format as fmt
from makad.core.canonical import content_hash
from makad.core.entries import clean_entry, is_open, normalize_tags, redact_all
from makad.core.entry_comment import ORIGINS
from makad.core.importers import ImportItem
from makad.core.levels import USER_ID_PREFIX
from makad.core.memory_select import with_pin
from makad.core.redaction import redact
from makad.core.refs import MEMORY_PREFIX
from makad.core.types import Entry, MemoryEvent, NewMemoryEvent, Origin, Scope
from makad.errors import ECHO_LIMIT, InvalidParams, NotFound, TooLarge, echoed

# Open proposals that replace an entry (``supersedes``) one queue holds at most: an agent
# cannot line up the whole memory for archiving in one review.
MAX_OPEN_REPLACEMENTS = 20
# An approve or reject naming ids that are no open proposal lists this many of them in
# its error (``data.ids``), each cut to this many characters, and counts them all.
MAX_MISSING_SHOWN = 20
MAX_MISSING_ID_CHARS = ECHO_LIMIT


class Scrubber(Protocol):
    """Stand-ins for client-chosen identifiers that hold a secret (``service.identifiers``)."""

    def scrub_optional(self, value: str | None) -> str | None: ...

    def scrub_refs(self, refs: list[str]) -> list[str]: ...


class Edit(Protocol):
    """What the user changed before approving (UNSET: kept as proposed)."""

    @property
    def title(self) -> str | UnsetType: ...

    @property
    def content(self) -> str | UnsetType: ...

    @property
    def tags(self) -> list[str] | UnsetType: ...

    @property
    def supersedes(self) -> str | UnsetType | None: ...


class PlannedItem(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """One proposal of an approval: the entry it becomes, or (``duplicate_of``) the active
    entry that already holds its content."""

    proposal_id: str
    entry: Entry
    edited: bool = False
    duplicate_of: str | None = None


class ApprovalPlan(msgspec.Struct, frozen=True, kw_only=True):
    """A whole approval, as recorded in its intent (``at``: when superseded entries are
    archived; ``redactions``: secrets the approval removed)."""

    items: tuple[PlannedItem, ...]
    at: int
    redactions: int = 0

    def to_payload(self) -> dict[str, object]:
        return cast(dict[str, object], msgspec.to_builtins(self))

    @classmethod
    def from_payload(cls, payload: Mapping[str, object]) -> ApprovalPlan:
        return msgspec.convert(payload, cls)


class MemoryApproval(NamedTuple):
    """MEMORY.md with a plan applied: the entries written, and which entry each archived."""

    doc: fmt.MemoryDocument
    touched: frozenset[str]
    superseded: dict[str, str]


def candidates(memory: fmt.MemoryDocument, pending: fmt.MemoryDocument) -> list[Entry]:
    """What a new proposal is compared with: the active entries and the open proposals."""
    active = [e for e in fmt.entries(memory) if e.status == "active"]
    return [*active, *(e for e in fmt.entries(pending) if is_open(e))]


def same_content(content: str, entries: Iterable[Entry]) -> Entry | None:
    """The first of ``entries`` whose canonical content is ``content``'s."""
    digest = content_hash(content)
    return next((e for e in entries if content_hash(e.content) == digest), None)


def open_proposal(pending: fmt.MemoryDocument, proposal_id: str) -> Entry:
    """The open proposal with that id, else NotFound."""
    section = fmt.find(pending, proposal_id)
    if section is None or not is_open(section.entry):
        raise not_open([proposal_id])
    return section.entry


def open_ids(pending: fmt.MemoryDocument) -> set[str]:
    """The ids of PENDING.md's open proposals."""
    return {s.entry.id for s in pending.sections if is_open(s.entry)}


def not_open(missing: Sequence[str]) -> NotFound:
    """The refusal of ids that name no open proposal: the first ``MAX_MISSING_SHOWN`` of
    them (each cut to ``MAX_MISSING_ID_CHARS`` characters), and ``missingCount`` when
    there are more, so the error stays small whatever was asked for."""
    shown = [echoed(i, MAX_MISSING_ID_CHARS) for i in missing[:MAX_MISSING_SHOWN]]
    if len(missing) > MAX_MISSING_SHOWN:
        return NotFound("no open proposal with that id", ids=shown, missingCount=len(missing))
    return NotFound("no open proposal with that id", ids=shown)


def queued_origin(proposal_id: str, history: Iterable[MemoryEvent]) -> Origin | None:
    """The origin a proposal was queued with, read from its lineage: ``imported`` for an
    import, ``extracted`` for the agent, the entry's own for one back from MEMORY.md."""
    for event in history:
        if event.proposal_id != proposal_id:
            continue
        if event.action == "imported" or (event.action == "proposed" and event.actor == "import"):
            return "imported"
        if event.action == "proposed":
            return "extracted"
        if event.action == "returned":
            origin = (event.data or {}).get("origin")
            return cast(Origin, origin) if origin in ORIGINS else "unknown"
    return None


def returned_entry(proposal_id: str, history: Iterable[MemoryEvent]) -> bool:
    """Whether the proposal is an entry of MEMORY.md that a save lacked and the daemon
    queued back (``makad.core.save_merge``): approving it brings that entry back."""
    return any(
        e.action == "returned" and e.proposal_id == proposal_id and (e.data or {}).get("file") == "memory"
        for e in history
    )


def plan_approval(
    pending: fmt.MemoryDocument,
    memory: fmt.MemoryDocument,
    ids: Sequence[str],
    edits: Mapping[str, Edit],
    *,
    origins: Mapping[str, Origin],
    default_decay_ms: int | None,
    now: int,
    scrub: Scrubber,
    scope: Scope | None = None,
    returned: Collection[str] = (),
) -> ApprovalPlan:
    """The full approval of ``ids`` (with the user's ``edits``), decided up front.

    ``scope``: every entry's, whatever its proposal said (the user level's are ``global``).

    An entry's origin is the one it was queued with (``origins``), not what PENDING.md
    says now; its decay is its own, else ``default_decay_ms``. The same content is
    never approved twice: a proposal whose canonical content is already active (or
    earlier in this batch) resolves to that entry. A proposal in ``returned`` (an entry a
    save dropped, queued back) becomes that entry again: its id and creation date are
    kept, so its lineage and the refs to it go on (unless MEMORY.md holds that id again).
    """
    proposals = {s.entry.id: s.entry for s in pending.sections}
    missing = [i for i in dict.fromkeys(ids) if i not in proposals or not is_open(proposals[i])]
    if missing:
        raise not_open(missing)
    active: dict[str, Entry] = {}
    # What fmt.find gives, looked up once per proposal rather than read through each time.
    sections: dict[str, fmt.Section] = {}
    for section in memory.sections:
        existing = section.entry
        sections.setdefault(existing.id, section)
        if existing.status == "active":
            active.setdefault(content_hash(existing.content), existing)
    items: list[PlannedItem] = []
    used: set[str] = set()
    redactions = 0
    for offset, proposal_id in enumerate(dict.fromkeys(ids)):
        edit = edits.get(proposal_id)
        proposed = _edited(proposals[proposal_id], edit, sections)
        # The user may have edited PENDING.md by hand: redact what is approved, again.
        title, content, count = clean_entry(proposed.title, proposed.content)
        redactions += count
        same = active.get(content_hash(content))
        if same is not None:
            items.append(
                PlannedItem(
                    proposal_id=proposal_id, entry=same, edited=edit is not None, duplicate_of=same.id
                )
            )
            continue
        # An entry a save dropped, approved back, is that entry again (unless MEMORY.md
        # holds its id meanwhile).
        back = proposal_id in returned and proposal_id not in used and proposal_id not in sections
        if back:
            created, entry_id = now + offset, proposal_id
            used.add(entry_id)
        else:
            created, entry_id = _fresh_id(content, now + offset, used)
        origin = origins.get(proposal_id, proposed.origin)
        edited = edit is not None and any(
            not isinstance(value, UnsetType) for value in (edit.title, edit.content, edit.tags)
        )
        dates = _dates(
            proposed, back or origin == "imported", created, edited=edited, default_decay_ms=default_decay_ms
        )
        entry = Entry(
            id=entry_id,
            title=title,
            content=content,
            origin=origin,
            created_at=dates[0],
            updated_at=dates[1],
            status="active",
            tags=redact_all(proposed.tags),
            decay_ttl_ms=dates[2],
            scope=scope or proposed.scope,
            session_id=None if scope else scrub.scrub_optional(proposed.session_id),
            source_refs=scrub.scrub_refs(proposed.source_refs),
            supersedes=scrub.scrub_optional(proposed.supersedes),
        )
        items.append(PlannedItem(proposal_id=proposal_id, entry=entry, edited=edit is not None))
        active[content_hash(content)] = entry
    return ApprovalPlan(items=tuple(items), at=now, redactions=redactions)


def _dates(
    proposal: Entry, keeps_dates: bool, approved_at: int, *, edited: bool, default_decay_ms: int | None
) -> tuple[int, int, int | None]:
    """(createdAt, updatedAt, decayTtlMs) of the entry approving ``proposal`` makes.

    An entry is created when it is approved, except one that ``keeps_dates``: an imported
    one keeps the dates its source gave it (a ChatGPT memory from 2024 stays from 2024),
    an entry a save dropped, approved back, the dates it had; either is edited now if the
    user edited it on approval. A decay the workspace's default gives it still counts from
    the approval, so an old memory is not archived the moment it is approved.
    """
    own_decay = proposal.decay_ttl_ms
    decay = default_decay_ms if own_decay is None else own_decay
    if not keeps_dates or not 0 < proposal.created_at < approved_at:
        return approved_at, approved_at, decay
    created = proposal.created_at
    updated = approved_at if edited else min(max(proposal.updated_at, created), approved_at)
    if own_decay is None and decay:
        decay += approved_at - created
    return created, updated, decay


def _edited(proposal: Entry, edit: Edit | None, memory: Mapping[str, fmt.Section]) -> Entry:
    """The proposal with the user's edit applied (not yet cleaned); ``memory``: MEMORY.md's
    sections by id."""
    if edit is None:
        return proposal
    supersedes = proposal.supersedes
    if edit.supersedes is not UNSET:
        supersedes = _replaceable(memory, proposal.id, edit.supersedes)
    return msgspec.structs.replace(
        proposal,
        title=proposal.title if isinstance(edit.title, UnsetType) else edit.title,
        content=proposal.content if isinstance(edit.content, UnsetType) else edit.content,
        tags=proposal.tags if isinstance(edit.tags, UnsetType) else normalize_tags(edit.tags),
        supersedes=supersedes,
    )


def _replaceable(memory: Mapping[str, fmt.Section], proposal_id: str, target: str | None) -> str | None:
    """``target`` when it names an active entry of MEMORY.md (what an approval may supersede)."""
    if target is None:
        return None
    section = memory.get(target)
    if section is None or section.entry.status != "active":
        raise InvalidParams(
            "supersedes must name an active entry of MEMORY.md",
            path=f"$.edits.{proposal_id}.supersedes",
        )
    return target


def replacement_target(value: str | None, *, user_level: bool) -> str | None:
    """The entry id a proposal's ``supersedes`` names: the id or its ``memory:`` ref as a
    pack cites it (spaces around ignored). In the user level's own queue an id may carry
    the ``@user/`` prefix packs give user-level entries; in a workspace's, that prefix
    stays: it names a user-level entry the workspace's one overrides (``makad.core.levels``)."""
    if value is None or not value.strip():
        return None
    target = value.strip().removeprefix(MEMORY_PREFIX)
    return target.removeprefix(USER_ID_PREFIX) if user_level else target


def no_replaceable(target: str) -> InvalidParams:
    """The one refusal for a ``supersedes`` naming no entry the proposal may replace: the
    same whether the entry does not exist, is not active or is scoped to another session,
    so it says nothing about entries the proposing session cannot see."""
    return InvalidParams(
        "supersedes must name an active entry of MEMORY.md that this session can see "
        "(its id or memory:<id>; a user-level entry from a workspace as @user/<id>)",
        path="$.supersedes",
        supersedes=target,
    )


def replaceable_entry(
    memory: fmt.MemoryDocument,
    target: str,
    *,
    session_id: str | None,
    scope: Scope,
    session_of: Callable[[str], str] | None = None,
) -> Entry:
    """The active entry ``target`` names, when a proposal from ``session_id`` with
    ``scope`` may replace it; else ``no_replaceable``.

    An entry scoped to a session is replaceable only from that session (its id as
    ``session_of`` gives it: the id the session is called by). A session-scoped
    proposal may replace only a session-scoped entry: approving it would take a fact every
    other session sees away from them, for one session's replacement."""
    section = fmt.find(memory, target)
    entry = section.entry if section is not None else None
    if entry is None or entry.status != "active":
        raise no_replaceable(target)
    owner = entry.session_id
    if owner is not None and session_of is not None:
        owner = session_of(owner)
    if entry.scope == "session" and (session_id is None or owner != session_id):
        raise no_replaceable(target)
    if scope == "session" and entry.scope != "session":
        raise InvalidParams(
            "a session-scoped proposal cannot replace an entry every session sees: "
            "propose it with scope workspace",
            path="$.supersedes",
            supersedes=target,
        )
    return entry


def check_open_replacements(pending: fmt.MemoryDocument, target: str, *, user_level: bool) -> None:
    """Refuse a second open proposal replacing the same entry (approving both would leave
    two replacements active) and more than ``MAX_OPEN_REPLACEMENTS`` open replacements."""
    waiting = [e for e in fmt.entries(pending) if is_open(e) and e.supersedes]
    named = {e.id: replacement_target(e.supersedes, user_level=user_level) for e in waiting}
    same = next((e for e in waiting if named[e.id] == target), None)
    if same is not None:
        raise InvalidParams(
            "an open proposal already replaces that entry: it waits for the user's review",
            path="$.supersedes",
            supersedes=target,
            proposalId=same.id,
        )
    if len(waiting) >= MAX_OPEN_REPLACEMENTS:
        raise TooLarge(
            f"at most {MAX_OPEN_REPLACEMENTS} proposals replacing entries may wait for the "
            "user's review at once",
            path="$.supersedes",
            limit=MAX_OPEN_REPLACEMENTS,
        )


def _fresh_id(content: str, created: int, used: set[str]) -> tuple[int, str]:
    """(creation time, entry id) unused in this batch: the time moves on by a millisecond
    while the id would repeat one."""
    entry_id = fmt.new_entry_id(content, created)
    while entry_id in used:
        created += 1
        entry_id = fmt.new_entry_id(content, created)
    used.add(entry_id)
    return created, entry_id


def approve_into(memory: fmt.MemoryDocument, plan: ApprovalPlan) -> MemoryApproval:
    """MEMORY.md with the plan's entries upserted and what they supersede archived."""
    touched: set[str] = set()
    superseded: dict[str, str] = {}
    # One pass over the document, not one per entry: what upserting each in turn gives.
    doc = fmt.Upserts(memory)
    for item in plan.items:
        if item.duplicate_of is not None:  # already active: nothing to write
            continue
        entry = item.entry
        doc.upsert(entry)
        touched.add(entry.id)
        target = doc.find(entry.supersedes) if entry.supersedes else None
        if target is not None and target.entry.status == "active":
            archived = msgspec.structs.replace(target.entry, status="archived", updated_at=plan.at)
            doc.upsert(archived)
            touched.add(target.entry.id)
            superseded[entry.id] = target.entry.id
    return MemoryApproval(doc.doc(), frozenset(touched), superseded)


def remove_approved(pending: fmt.MemoryDocument, plan: ApprovalPlan) -> fmt.MemoryDocument:
    """PENDING.md without the plan's proposals."""
    return without(pending, [item.proposal_id for item in plan.items])


def without(doc: fmt.MemoryDocument, ids: Iterable[str]) -> fmt.MemoryDocument:
    """``doc`` without the sections of ``ids`` (those it has), removed in turn."""
    return fmt.remove_each(doc, list(ids))


def reject_from(pending: fmt.MemoryDocument, ids: Iterable[str]) -> tuple[fmt.MemoryDocument, list[Entry]]:
    """PENDING.md without the open proposals ``ids``, and those proposals (NotFound for
    the first that is not open there)."""
    rejected = [open_proposal(pending, i) for i in dict.fromkeys(ids)]
    return without(pending, [e.id for e in rejected]), rejected


def approval_events(
    plan: ApprovalPlan, superseded: Mapping[str, str], recorded: Collection[str]
) -> list[NewMemoryEvent]:
    """The lineage steps of an approval, but for the proposals in ``recorded`` (whose
    approval an earlier attempt recorded already)."""
    events: list[NewMemoryEvent] = []
    for item in plan.items:
        if item.proposal_id in recorded:
            continue
        entry = item.entry
        if item.edited:
            events.append(
                NewMemoryEvent(action="edited", actor="user", proposal_id=item.proposal_id, entry_id=entry.id)
            )
        data: dict[str, object] = {"sourceRefs": entry.source_refs}
        if item.duplicate_of is not None:
            data["duplicateOf"] = item.duplicate_of
        events.append(
            NewMemoryEvent(
                action="approved", actor="user", proposal_id=item.proposal_id, entry_id=entry.id, data=data
            )
        )
        if entry.id in superseded:
            events.append(
                NewMemoryEvent(
                    action="archived",
                    actor="user",
                    entry_id=superseded[entry.id],
                    data={"supersededBy": entry.id},
                )
            )
    return events


def was_approved(proposal_id: str, history: Iterable[MemoryEvent]) -> bool:
    """Whether this proposal's own approval is recorded since it was last queued. (An
    entry a save dropped is queued again under its entry id, whose first approval was
    another's; dropped again after its approval, it waits for a new one.)"""
    approved = False
    for event in history:
        if event.proposal_id == proposal_id and event.action in ("approved", "returned"):
            approved = event.action == "approved"
    return approved


def fitting_count(text: str, newline: str, new: Sequence[Entry], cap: int) -> int:
    """How many of ``new``, in order, a file now holding ``text`` can take under ``cap``
    bytes (each new section's rendered size plus the blank line before it: an upper bound)."""
    used = len(text.encode("utf-8", "surrogateescape"))
    for count, entry in enumerate(new):
        used += len(fmt.render_entry(entry, (), newline).encode("utf-8")) + 2 * len(newline)
        if used > cap:
            return count
    return len(new)


def new_proposal(
    title: str,
    content: str,
    *,
    origin: Origin,
    tags: Iterable[str],
    scope: Scope,
    session_id: str | None,
    source_refs: list[str],
    supersedes: str | None,
    decay_ttl_ms: int | None,
    draft: bool,
    now: int,
) -> Entry:
    """A proposal of cleaned ``title`` and ``content``, as queued in PENDING.md (a
    ``draft`` waits for more work, else it waits for the user's review). An agent's
    proposal (origin ``extracted``) never carries the ``pinned`` tag: pinning an entry is
    the user's decision (``makad.core.memory_select``)."""
    kept = normalize_tags(tags)
    if origin == "extracted":
        kept = with_pin(kept, False)
    return Entry(
        id=fmt.new_entry_id(content, now),
        title=title,
        content=content,
        origin=origin,
        created_at=now,
        updated_at=now,
        status="draft" if draft else "review_required",
        tags=kept,
        decay_ttl_ms=decay_ttl_ms,
        scope=scope,
        session_id=session_id,
        source_refs=source_refs,
        supersedes=supersedes,
    )


def lineage_refs(entry: Entry | None, history: Iterable[MemoryEvent]) -> list[str]:
    """Where an entry came from: its own source refs, else the first its lineage recorded."""
    if entry is not None and entry.source_refs:
        return list(entry.source_refs)
    for event in history:
        refs = (event.data or {}).get("sourceRefs")
        if isinstance(refs, list) and refs:
            return [str(r) for r in refs]
    return []


def imported_proposals(
    cleaned: Iterable[tuple[ImportItem, str, str, str]],
    known: Collection[str],
    rejected: Collection[str],
    source_format: str,
    now: int,
) -> tuple[list[Entry], int]:
    """The proposals an import queues from its cleaned items (item, title, content,
    canonical hash), and how many it skips: content already ``known`` (in either file),
    ``rejected`` before, or earlier in the same import."""
    seen = set(known)
    new: list[Entry] = []
    duplicates = 0
    for offset, (item, title, content, digest) in enumerate(cleaned):
        if digest in seen or digest in rejected:
            duplicates += 1
            continue
        seen.add(digest)
        created = item.created_at_ms or now + offset
        new.append(
            Entry(
                id=fmt.new_entry_id(content, created),
                title=title,
                content=content,
                origin="imported",
                created_at=created,
                updated_at=item.updated_at_ms or created,
                status="review_required",
                tags=normalize_tags(item.tags),
                source_refs=[redact(f"import:{source_format}:{item.source_id}").text],
                decay_ttl_ms=item.decay_ttl_ms,
            )
        )
    return new, duplicates

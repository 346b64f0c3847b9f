"""The approval gate's pure rules (makad.core.proposals, makad.core.entries)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import UNSET

from makad.core import memory_format as fmt
from makad.core import proposals as rules
from makad.core.canonical import content_hash
from makad.core.entries import MAX_TITLE_CHARS, clean_entry, normalize_tags
from makad.core.importers import ImportItem
from makad.core.types import Entry, MemoryEvent
from makad.errors import InvalidParams, NotFound, TooLarge
from makad.wire.proposals import ProposalEdit
from tests.core.plain_scrubber import Plain

NOW = 1_700_000_000_000


def entry(entry_id: str, content: str, **fields: object) -> Entry:
    made = Entry(id=entry_id, title=f"T {entry_id}", content=content, created_at=1, updated_at=1)
    return msgspec.structs.replace(made, **fields)


def doc_of(*entries: Entry) -> fmt.MemoryDocument:
    doc = fmt.new_document()
    for e in entries:
        doc = fmt.upsert(doc, e)
    return doc


def plan(
    pending: fmt.MemoryDocument,
    memory: fmt.MemoryDocument,
    ids: list[str],
    edits: dict[str, ProposalEdit] | None = None,
) -> rules.ApprovalPlan:
    return rules.plan_approval(
        pending, memory, ids, edits or {}, origins={}, default_decay_ms=None, now=NOW, scrub=Plain()
    )


def test_a_proposal_whose_content_is_active_resolves_to_that_entry() -> None:
    """Approving content MEMORY.md already holds (in another spelling) adds nothing: the
    plan names the active entry as the duplicate and MEMORY.md is unchanged."""
    active = entry("m1", "Prefers  TABS")
    memory = doc_of(active)
    pending = doc_of(entry("p1", "prefers tabs", status="review_required"))
    made = plan(pending, memory, ["p1"])
    assert [(i.proposal_id, i.duplicate_of, i.entry.id) for i in made.items] == [("p1", "m1", "m1")]
    applied = rules.approve_into(memory, made)
    assert fmt.render(applied.doc) == fmt.render(memory) and applied.touched == frozenset()


def test_the_same_content_twice_in_one_batch_is_approved_once() -> None:
    """Two proposals of one content in the same approval: the second is the first's duplicate."""
    pending = doc_of(entry("p1", "x y", status="review_required"), entry("p2", "X  y", status="draft"))
    made = plan(pending, fmt.new_document(), ["p1", "p2"])
    first, second = made.items
    assert first.duplicate_of is None and second.duplicate_of == first.entry.id
    assert [e.id for e in fmt.entries(rules.approve_into(fmt.new_document(), made).doc)] == [first.entry.id]


def test_only_open_proposals_can_be_approved() -> None:
    """Every id that is not an open proposal is named in one NotFound."""
    pending = doc_of(entry("p1", "a", status="review_required"), entry("p2", "b", status="active"))
    with pytest.raises(NotFound) as caught:
        plan(pending, fmt.new_document(), ["p1", "p2", "p3"])
    assert caught.value.details["ids"] == ["p2", "p3"]


def test_an_edit_may_supersede_only_an_active_entry() -> None:
    """supersedes naming an archived entry is refused at its edit's path; naming an active
    one archives it in the same MEMORY.md write."""
    memory = doc_of(entry("m1", "old", status="archived"), entry("m2", "older"))
    pending = doc_of(entry("p1", "new", status="review_required"))
    with pytest.raises(InvalidParams) as caught:
        plan(pending, memory, ["p1"], {"p1": ProposalEdit(supersedes="m1")})
    assert caught.value.details["path"] == "$.edits.p1.supersedes"
    made = plan(pending, memory, ["p1"], {"p1": ProposalEdit(supersedes="m2", title="  Fresh   title ")})
    applied = rules.approve_into(memory, made)
    new_id = made.items[0].entry.id
    assert made.items[0].entry.title == "Fresh title" and made.items[0].edited
    assert applied.superseded == {new_id: "m2"}
    assert fmt.find(applied.doc, "m2").entry.status == "archived"  # type: ignore[union-attr]
    assert fmt.find(applied.doc, "m2").entry.updated_at == NOW  # type: ignore[union-attr]


def test_a_recorded_plan_reads_back_as_it_was_planned() -> None:
    """The intent payload round-trips, and a payload in the earlier dict shape (``edited``
    always present, no ``duplicateOf``) still reads."""
    pending = doc_of(entry("p1", "a", status="review_required"))
    made = plan(pending, fmt.new_document(), ["p1"])
    payload = made.to_payload()
    assert rules.ApprovalPlan.from_payload(payload) == made
    old = {
        "items": [{"proposalId": "p1", "entry": msgspec.to_builtins(made.items[0].entry), "edited": False}],
        "at": NOW,
        "redactions": 0,
    }
    assert rules.ApprovalPlan.from_payload(old) == made


def test_approval_events_skip_what_an_earlier_attempt_recorded() -> None:
    """A completion repeated after a crash appends no second approval for a recorded one."""
    memory = doc_of(entry("m1", "old"))
    pending = doc_of(entry("p1", "a", status="review_required"), entry("p2", "b", status="review_required"))
    made = plan(pending, memory, ["p1", "p2"], {"p2": ProposalEdit(supersedes="m1")})
    applied = rules.approve_into(memory, made)
    events = rules.approval_events(made, applied.superseded, recorded={"p1"})
    assert [(e.action, e.proposal_id or e.entry_id) for e in events] == [
        ("edited", "p2"),
        ("approved", "p2"),
        ("archived", "m1"),
    ]
    assert rules.approval_events(made, applied.superseded, recorded={"p1", "p2"}) == []


ids = st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4)
contents = st.lists(st.sampled_from(["one", "ONE", "two", "three", "t w o"]), min_size=4, max_size=4)


@settings(max_examples=60, deadline=None)
@given(chosen=ids, bodies=contents, active_body=st.sampled_from(["one", "four"]))
def test_an_approval_applied_again_changes_nothing(
    chosen: list[str], bodies: list[str], active_body: str
) -> None:
    """Whatever is approved: applying the plan twice (a crash, then recovery) leaves the
    files as applying it once, each proposal leaves PENDING.md, and no content is active twice."""
    proposals = [entry(i, body, status="review_required") for i, body in zip("abcd", bodies, strict=True)]
    pending = doc_of(*proposals)
    memory = doc_of(entry("m", active_body))
    made = plan(pending, memory, chosen)
    once = rules.approve_into(memory, made)
    twice = rules.approve_into(once.doc, made)
    assert fmt.render(twice.doc) == fmt.render(once.doc)
    left = rules.remove_approved(pending, made)
    assert fmt.render(rules.remove_approved(left, made)) == fmt.render(left)
    assert not {s.entry.id for s in left.sections} & set(chosen)
    hashes = [content_hash(e.content) for e in fmt.entries(once.doc) if e.status == "active"]
    assert len(hashes) == len(set(hashes))


def test_the_queued_origin_comes_from_the_lineage() -> None:
    """An import's proposal is imported, the agent's extracted, one back from MEMORY.md its
    old origin (unknown when the record holds none we know); other proposals' steps don't count."""

    def ev(action: str, actor: str, proposal_id: str, data: dict[str, object] | None = None) -> MemoryEvent:
        return MemoryEvent(id=1, ts=1, action=action, actor=actor, proposal_id=proposal_id, data=data)

    assert (
        rules.queued_origin("p", [ev("proposed", "agent", "q"), ev("imported", "import", "p")]) == "imported"
    )
    assert rules.queued_origin("p", [ev("proposed", "agent", "p")]) == "extracted"
    assert rules.queued_origin("p", [ev("returned", "daemon", "p", {"origin": "manual"})]) == "manual"
    assert rules.queued_origin("p", [ev("returned", "daemon", "p", {"origin": "bogus"})]) == "unknown"
    assert rules.queued_origin("p", []) is None


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 400), max_size=6), cap=st.integers(0, 4000), more=st.integers(0, 2000))
def test_a_larger_cap_never_fits_fewer(sizes: list[int], cap: int, more: int) -> None:
    """fitting_count is a prefix length: at most all of them, and monotone in the cap."""
    new = [entry(f"e{i}", "x" * n) for i, n in enumerate(sizes)]
    fits = rules.fitting_count(fmt.HEADER, "\n", new, cap)
    assert 0 <= fits <= len(new)
    assert rules.fitting_count(fmt.HEADER, "\n", new, cap + more) >= fits


def test_an_import_skips_known_rejected_and_repeated_content() -> None:
    """Content in either file, rejected before, or seen earlier in the import is counted
    as a duplicate; the rest becomes review_required proposals of origin imported."""

    def item(source_id: str) -> ImportItem:
        return ImportItem(source_id=source_id, source_format="markdown", title="t", content="c")

    cleaned = [(item("1"), "t", "c", "known"), (item("2"), "t", "c", "bad"), (item("3"), "t", "new", "h3")]
    cleaned.append((item("4"), "t", "new", "h3"))
    new, duplicates = rules.imported_proposals(cleaned, {"known"}, {"bad"}, "markdown", NOW)
    assert duplicates == 3
    assert [(e.origin, e.status, e.source_refs) for e in new] == [
        ("imported", "review_required", ["import:markdown:3"])
    ]


def test_entry_validation_is_one_rule_for_every_writer() -> None:
    """A title is one trimmed line within its cap; an empty one is invalid params."""
    assert clean_entry("  two\n words ", "body")[:2] == ("two words", "body")
    with pytest.raises(InvalidParams):
        clean_entry(" \n ", "body")
    with pytest.raises(TooLarge):
        clean_entry("x" * (MAX_TITLE_CHARS + 1), "body")
    assert normalize_tags(["Coding Style", "coding  style", " ", "B"]) == ["coding-style", "b"]


def test_unset_edit_fields_keep_the_proposal() -> None:
    """An edit that changes nothing but the tags keeps the proposal's title and content."""
    pending = doc_of(entry("p1", "body", status="review_required", tags=["a"]))
    made = plan(pending, fmt.new_document(), ["p1"], {"p1": ProposalEdit(tags=["New Tag"])})
    planned = made.items[0].entry
    assert (planned.title, planned.content, planned.tags) == ("T p1", "body", ["new-tag"])
    assert ProposalEdit().title is UNSET

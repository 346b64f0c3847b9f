"""A batch approval applied in one pass writes exactly what applying it entry by entry writes.

The references below are the entry-by-entry rules (``fmt.upsert``, ``fmt.find`` and
``fmt.remove`` on the whole document for each proposal); the rules under test
(``rules.approve_into``, ``rules.remove_approved``, ``rules.without``) must give the same
text, the same ids (``~n`` suffixes included), the same touched and superseded ids.
"""

from __future__ import annotations

import random

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core import memory_format as fmt
from makad.core import proposals as rules
from makad.core.types import Entry
from makad.wire.proposals import ProposalEdit
from tests.core.plain_scrubber import Plain

NOW = 1_700_000_000_000


def reference_approve_into(memory: fmt.MemoryDocument, plan: rules.ApprovalPlan) -> rules.MemoryApproval:
    """Each planned entry upserted into the whole document in turn."""
    touched: set[str] = set()
    superseded: dict[str, str] = {}
    for item in plan.items:
        if item.duplicate_of is not None:
            continue
        entry = item.entry
        memory = fmt.upsert(memory, entry)
        touched.add(entry.id)
        target = fmt.find(memory, entry.supersedes) if entry.supersedes else None
        if target is not None and target.entry.status == "active":
            archived = msgspec.structs.replace(target.entry, status="archived", updated_at=plan.at)
            memory = fmt.upsert(memory, archived)
            touched.add(target.entry.id)
            superseded[entry.id] = target.entry.id
    return rules.MemoryApproval(memory, frozenset(touched), superseded)


def reference_without(doc: fmt.MemoryDocument, ids: list[str]) -> fmt.MemoryDocument:
    """Each id removed from the whole document in turn."""
    for section_id in ids:
        doc = fmt.remove(doc, section_id)
    return doc


def _ids(doc: fmt.MemoryDocument) -> list[str]:
    return [s.entry.id for s in doc.sections]


def _same_doc(got: fmt.MemoryDocument, want: fmt.MemoryDocument) -> None:
    assert fmt.render(got) == fmt.render(want)
    assert _ids(got) == _ids(want)
    assert [s.entry for s in got.sections] == [s.entry for s in want.sections]
    assert [s.declared_id for s in got.sections] == [s.declared_id for s in want.sections]
    assert (got.preamble, got.newline, got.bom) == (want.preamble, want.newline, want.bom)


def _section(rnd: random.Random, n: int, ids: list[str]) -> str:
    """One section in one of the shapes a MEMORY.md holds."""
    shape = rnd.randrange(7)
    if shape == 0 and ids:  # a repeated id: read as <id>~n
        entry_id = rnd.choice(ids)
    elif shape == 1:  # typed by hand: no comment, id derived from the text
        return f"## Hand {n}\nTyped by hand, note {n}.\n\n"
    elif shape == 2:  # a comment without an id
        return f"## Idless {n}\n<!-- maka-memory: status=active -->\nNo id {n}.\n"
    elif shape == 3 and ids:  # an id spelled with a suffix already
        entry_id = rnd.choice(ids) + "~2"
    else:
        entry_id = f"e{n:04d}"
    ids.append(entry_id)
    status = rnd.choice(["active", "active", "archived"])
    gap = rnd.choice(["", "\n", "\n\n", "  \n"])
    extra = rnd.choice(["", " unknown=kept", " tags=a,b"])
    tail = rnd.choice(["", "  ", "\n\n\n"])
    return (
        f"## Title {n}{rnd.choice(['', ' #', '  '])}\n{gap}"
        f"<!-- maka-memory: id={entry_id} createdAt={n} status={status}{extra} -->\n"
        f"Content {n}.{tail}\n"
    )


def _memory_text(rnd: random.Random, count: int) -> str:
    ids: list[str] = []
    preamble = rnd.choice(["# Maka Memory\n\n", "# Notes\nsome prose\n", "", "\ufeff# Maka Memory\n"])
    body = "".join(_section(rnd, n, ids) for n in range(count))
    if body and rnd.random() < 0.3:
        body = body.rstrip("\n")  # the last section without a line end
    text = preamble + body
    return text.replace("\n", "\r\n") if rnd.random() < 0.25 else text


def _proposal(n: int, content: str, supersedes: str | None = None) -> Entry:
    return Entry(
        id=f"p{n:04d}",
        title=f"Proposal {n}",
        content=content,
        origin="agent",
        created_at=1,
        updated_at=1,
        status="review_required",
        supersedes=supersedes,
    )


def _pending(proposals: list[Entry], newline: str = "\n") -> fmt.MemoryDocument:
    doc = fmt.new_document(newline, fmt.PENDING_HEADER)
    for proposal in proposals:
        doc = fmt.upsert(doc, proposal)
    return doc


def _batch(
    rnd: random.Random, memory: fmt.MemoryDocument, count: int
) -> tuple[list[Entry], dict[str, ProposalEdit]]:
    """Proposals (some repeating content, some superseding entries) and the user's edits."""
    active = [s.entry.id for s in memory.sections if s.entry.status == "active"]
    anything = [s.entry.id for s in memory.sections]
    proposals: list[Entry] = []
    edits: dict[str, ProposalEdit] = {}
    for n in range(count):
        content = f"Fact {n} {rnd.randrange(10**6)}"
        kind = rnd.randrange(6)
        if kind == 0 and proposals:
            content = rnd.choice(proposals).content  # repeats one earlier in the batch
        elif kind == 1 and memory.sections:
            content = rnd.choice(memory.sections).entry.content  # already in MEMORY.md
        supersedes = rnd.choice(anything) if kind == 2 and anything else None
        proposals.append(_proposal(n, content, supersedes))
        if kind == 3 and active:
            edits[f"p{n:04d}"] = ProposalEdit(supersedes=rnd.choice(active))
        elif kind == 4:
            edits[f"p{n:04d}"] = ProposalEdit(content=f"Edited {n}", title=f"Edited title {n}")
    return proposals, edits


@pytest.mark.parametrize("seed", range(40))
def test_a_batch_approval_writes_what_approving_entry_by_entry_writes(seed: int) -> None:
    """Varied files (repeated ids, hand-typed entries, CRLF, a BOM, odd blank lines) and
    batches (duplicates, supersedes, edits): same text, ids, touched and superseded ids."""
    rnd = random.Random(seed)
    memory = fmt.parse(_memory_text(rnd, rnd.randrange(0, 40)))
    proposals, edits = _batch(rnd, memory, rnd.randrange(1, 30))
    pending = _pending(proposals, memory.newline)
    ids = [p.id for p in proposals]
    rnd.shuffle(ids)
    scope = "global" if seed % 5 == 0 else None
    plan = rules.plan_approval(
        pending, memory, ids, edits, origins={}, default_decay_ms=None, now=NOW, scrub=Plain(), scope=scope
    )
    got = rules.approve_into(memory, plan)
    want = reference_approve_into(memory, plan)
    _same_doc(got.doc, want.doc)
    assert (got.touched, got.superseded) == (want.touched, want.superseded)
    _same_doc(
        rules.remove_approved(pending, plan), reference_without(pending, [i.proposal_id for i in plan.items])
    )
    again = rules.approve_into(got.doc, plan)  # a crash's retry: nothing changes
    _same_doc(again.doc, reference_approve_into(want.doc, plan).doc)


def test_an_approval_into_a_file_whose_ids_repeat_keeps_the_suffixes() -> None:
    """Superseding the second and third copies of a repeated id archives those very
    sections, and the new entries append after them, as entry by entry."""
    text = (
        "".join(f"## Copy {n}\n<!-- maka-memory: id=dup createdAt={n} -->\nCopy {n}.\n\n" for n in range(4))
        + "## Hand\nTyped.\n"
    )
    memory = fmt.parse("# Maka Memory\n\n" + text)
    hand = memory.sections[-1].entry.id
    proposals = [
        _proposal(1, "New one", "dup~2"),
        _proposal(2, "New two", "dup~3"),
        _proposal(3, "New three", hand),
    ]
    pending = _pending(proposals)
    plan = rules.plan_approval(
        pending,
        memory,
        [p.id for p in proposals],
        {},
        origins={},
        default_decay_ms=None,
        now=NOW,
        scrub=Plain(),
    )
    got = rules.approve_into(memory, plan)
    want = reference_approve_into(memory, plan)
    _same_doc(got.doc, want.doc)
    assert got.superseded == want.superseded
    assert sorted(got.superseded.values()) == sorted(["dup~2", "dup~3", hand])


def test_an_approval_that_only_repeats_active_content_leaves_the_document_as_it_was() -> None:
    """A plan whose every item is a duplicate returns the very document it was given."""
    memory = fmt.parse("# Maka Memory\n\n## A\n<!-- maka-memory: id=a createdAt=1 -->\nSame.\n")
    pending = _pending([_proposal(1, "Same.")])
    plan = rules.plan_approval(
        pending, memory, ["p0001"], {}, origins={}, default_decay_ms=None, now=NOW, scrub=Plain()
    )
    assert rules.approve_into(memory, plan).doc is memory


@settings(max_examples=150, deadline=None)
@given(
    declared=st.lists(st.sampled_from(["a", "b", "a~2", "c", "a~3", None]), max_size=12),
    removed=st.lists(st.sampled_from(["a", "b", "a~2", "a~3", "a~4", "c", "zz"]), max_size=8),
)
def test_removing_many_sections_is_removing_each_in_turn(
    declared: list[str | None], removed: list[str]
) -> None:
    """Removing ids from a file whose ids repeat (or are derived) gives what removing them
    one at a time gives, ``~n`` renumbering included."""
    parts = []
    for n, entry_id in enumerate(declared):
        if entry_id is None:
            parts.append(f"## Hand {n}\nTyped {n}.\n\n")
        else:
            parts.append(f"## T{n}\n<!-- maka-memory: id={entry_id} status=review_required -->\nC{n}.\n\n")
    doc = fmt.parse("# Maka Pending Proposals\n\n" + "".join(parts))
    _same_doc(rules.without(doc, removed), reference_without(doc, removed))


@settings(max_examples=150, deadline=None)
@given(
    declared=st.lists(st.sampled_from(["a", "b", "a~2", "c", "a~3", None]), max_size=10),
    ops=st.lists(
        st.tuples(st.sampled_from(["a", "b", "a~2", "a~3", "c", "new", "new~2"]), st.booleans()), max_size=8
    ),
    rename=st.booleans(),
)
def test_upserting_many_entries_is_upserting_each_in_turn(
    declared: list[str | None], ops: list[tuple[str, bool]], rename: bool
) -> None:
    """``fmt.Upserts`` applied to a file whose ids repeat (or a hand-typed entry holds an
    id ``renamed`` gave it, which the next write renumbers) gives, after every step, the
    document ``fmt.upsert`` gives, and finds the same sections."""
    parts = []
    for n, entry_id in enumerate(declared):
        if entry_id is None:
            parts.append(f"## Hand {n}\nTyped {n}.\n")
        else:
            parts.append(f"## T{n}\n<!-- maka-memory: id={entry_id} createdAt={n} -->\nC{n}.\n")
    doc = fmt.parse("# Maka Memory\n\n" + "".join(parts))
    first_hand = next((at for at, s in enumerate(doc.sections) if s.derived), None)
    if rename and first_hand is not None and fmt.find(doc, "a~2") is None:
        doc = fmt.renamed(doc, {first_hand: "a~2"})
    hand = [s.entry.id for s in doc.sections if s.derived]
    batch = fmt.Upserts(doc)
    for step, (entry_id, archive) in enumerate(ops):
        target = hand[step % len(hand)] if hand and entry_id == "c" else entry_id
        found = fmt.find(doc, target)
        assert (batch.find(target) or None) == found
        if found is not None:
            entry = msgspec.structs.replace(
                found.entry, status="archived" if archive else "active", updated_at=step
            )
        else:
            entry = Entry(
                id=target, title=f"New {step}", content=f"N{step}", created_at=step, updated_at=step
            )
        doc = fmt.upsert(doc, entry)
        batch.upsert(entry)
        _same_doc(batch.doc(), doc)

"""Memory levels (makad.core.levels): which user-level entries a workspace overrides, and
how the memory segment shows the two levels together."""

from __future__ import annotations

from makad.core.assembly import assemble
from makad.core.context_types import ContextInputs
from makad.core.levels import level_of, overridden, user_level_id
from makad.core.types import Entry

NOW = 1_800_000_000_000


def entry(entry_id: str, title: str, content: str, **kw: object) -> Entry:
    return Entry(id=entry_id, title=title, content=content, created_at=NOW, updated_at=NOW, **kw)  # type: ignore[arg-type]


def test_same_title_overrides_whatever_the_case_and_spacing() -> None:
    """A workspace entry titled like a user-level one (case, spaces aside) overrides it."""
    found = overridden(
        [entry("w1", "Tabs  or SPACES", "four spaces here")],
        [entry("u1", "tabs or spaces", "tabs everywhere"), entry("u2", "Quotes", "single quotes")],
    )
    assert found == {"@user/u1": "w1"}


def test_near_duplicate_content_overrides_and_unrelated_does_not() -> None:
    """Content at the near-duplicate threshold overrides; a different text does not."""
    text = "The user edits code in Neovim with the lazy.nvim plugin manager and a dark theme."
    found = overridden(
        [
            entry("w1", "Editor here", text + "!"),
            entry("w2", "Other", "Deploys with Ansible to Debian hosts."),
        ],
        [entry("u1", "Editor", text), entry("u2", "Shell", "Uses fish as the login shell, with starship.")],
    )
    assert found == {"@user/u1": "w1"}


def test_supersedes_across_levels_only_in_the_user_ref_form() -> None:
    """supersedes "@user/<id>" (or memory:@user/<id>) overrides; a bare id names a workspace entry."""
    user = [entry("u1", "A", "alpha words"), entry("u2", "B", "beta words"), entry("u3", "C", "gamma words")]
    found = overridden(
        [
            entry("w1", "X", "one thing", supersedes="@user/u1"),
            entry("w2", "Y", "another thing", supersedes="memory:@user/u2"),
            entry("w3", "Z", "third thing", supersedes="u3"),
        ],
        user,
    )
    assert found == {"@user/u1": "w1", "@user/u2": "w2"}


def test_session_scoped_workspace_entries_override_nothing() -> None:
    """A session-scoped workspace entry speaks for one session: the user-level one stays."""
    found = overridden(
        [entry("w1", "Tabs", "spaces", scope="session", session_id="s1")],
        [entry("u1", "Tabs", "tabs")],
    )
    assert found == {}


def test_memory_segment_marks_levels_and_drops_overridden() -> None:
    """With user-level candidates every block names its level; an overridden one is left
    out with reason overridden, and the workspace entry on that topic is shown."""
    own = entry("w1", "Tabs or spaces", "This repository indents with four spaces.")
    mine = entry(user_level_id("u1"), "Tabs or spaces", "Indents with tabs.")
    other = entry(user_level_id("u2"), "Spelling", "British English spelling.")
    inputs = ContextInputs(
        budget_tokens=4000,
        now_ms=NOW,
        memory_entries=[own, mine, other],
        memory_user_from=1,
        memory_overridden={mine.id: own.id},
    )
    pack = assemble(inputs)
    reasons = {c.source_id: c.reason for c in pack.trace.candidates}
    assert reasons == {"memory:w1": None, "memory:@user/u1": "overridden", "memory:@user/u2": None}
    text = pack.segments[0].text
    assert "memory:w1 · workspace level" in text
    assert "memory:@user/u2 · user level" in text
    assert "Indents with tabs" not in text
    assert pack.trace.dropped == {"overridden": 1}


def test_workspace_only_blocks_are_unchanged() -> None:
    """Without user-level candidates the blocks carry no level (the packs stay as they were)."""
    pack = assemble(ContextInputs(budget_tokens=4000, now_ms=NOW, memory_entries=[entry("w1", "T", "c")]))
    assert "level" not in pack.segments[0].text
    assert level_of("w1") == "workspace" and level_of("@user/w1") == "user"


def test_a_workspace_id_like_a_user_ref_stays_the_workspace_entry() -> None:
    """A workspace entry whose (hand-made) id reads "@user/x" is shown as the workspace's; the
    user-level entry under the same ref is a duplicate: one ref never names two entries."""
    own = entry("@user/x", "Mine", "workspace words")
    theirs = entry(user_level_id("x"), "Theirs", "user-level words")
    pack = assemble(
        ContextInputs(budget_tokens=4000, now_ms=NOW, memory_entries=[own, theirs], memory_user_from=1)
    )
    assert [(c.source_id, c.reason) for c in pack.trace.candidates] == [
        ("memory:@user/x", None),
        ("memory:@user/x", "duplicate"),
    ]
    text = pack.segments[0].text
    assert "memory:@user/x · workspace level" in text and "user-level words" not in text

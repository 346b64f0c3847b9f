"""Memory levels: a workspace's own memory and the user-level memory (workspace ``@user``).

The user level holds what the user wants everywhere ("answers in British English").
``build_context`` in a workspace ranks its entries together with the workspace's
own; each is told apart by its ref: a user-level entry's id is prefixed with
``@user/`` (``memory:@user/<id>``) for the call, so its manifest rows and
already-shown checks never meet a workspace entry's. A workspace entry on the same
topic — the same title, near-duplicate content (``makad.core.canonical``), or a
``supersedes`` naming the user-level entry as ``@user/<id>`` — wins: the user-level one is left out
as ``overridden``.

The level is the file's: an entry in the user level's MEMORY.md whose comment names no
scope (typed by hand) reads as ``global`` there (``read_at_user_level``), as it reads as
``workspace`` in a workspace's; the file keeps its bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Final, Literal

import msgspec

from makad.core import memory_format as fmt
from makad.core.canonical import SIMILARITY_THRESHOLD, canonical
from makad.core.entry_comment import read_comment
from makad.core.types import Entry, Scope
from makad.errors import InvalidParams

USER_LEVEL: Final = "@user"
USER_ID_PREFIX: Final = "@user/"

Level = Literal["workspace", "user"]


def user_level_id(entry_id: str) -> str:
    """The id a user-level entry carries inside a workspace's context call."""
    return USER_ID_PREFIX + entry_id


def level_scope(level: Level, scope: Scope, session_id: str | None) -> Scope:
    """The scope an entry written at ``level`` gets: at the user level every entry is
    ``global``, and none can belong to a session (sessions live in workspaces)."""
    if level != "user":
        return scope
    if scope == "session" or session_id is not None:
        raise InvalidParams(
            f'"{USER_LEVEL}" has no sessions: a session-scoped entry stays in its workspace',
            path="$.sessionId" if session_id is not None else "$.scope",
        )
    return "global"


def read_at_user_level(doc: fmt.MemoryDocument) -> fmt.MemoryDocument:
    """``doc`` (the user level's MEMORY.md, just parsed) with each entry whose comment names
    no scope it understands read as ``global``, the user level's scope; its bytes unchanged
    (a later write of the entry leaves the scope token out as long as it stays global)."""
    sections = list(doc.sections)
    changed = False
    for index, section in enumerate(sections):
        entry = section.entry
        if entry.scope != "workspace" or entry.session_id is not None or _names_scope(section):
            continue
        sections[index] = dataclasses.replace(section, entry=msgspec.structs.replace(entry, scope="global"))
        changed = True
    return dataclasses.replace(doc, sections=tuple(sections)) if changed else doc


def _names_scope(section: fmt.Section) -> bool:
    found = fmt.comment_of(section)
    return found is not None and "scope" in read_comment(found[1]).values


def level_of(entry_id: str) -> Level:
    return "user" if entry_id.startswith(USER_ID_PREFIX) else "workspace"


def _topic_title(title: str) -> str:
    return canonical(title)


def _sorted_tokens(content: str) -> str:
    # token_sort_ratio is the ratio of the sorted tokens: sorted once per entry here.
    return " ".join(sorted(canonical(content).split()))


# Near duplicates are looked for among the workspace entries that share one of the
# user-level entry's rarest words (in the workspace): comparing each pair would cost
# seconds at 10k × 500 entries.
RARE_WORDS: Final = 4


def overridden(workspace: Iterable[Entry], user: Sequence[Entry]) -> dict[str, str]:
    """User-level ids (as ``user_level_id``) → the workspace entry that speaks for the same
    topic. ``workspace`` are the workspace's active entries, ``user`` the user level's
    (with their stored ids). Session-scoped workspace entries speak for one session only
    and override nothing."""
    if not user:
        return {}
    from rapidfuzz import fuzz, process  # on the first comparison, not at start-up

    winners = [e for e in workspace if e.scope != "session"]
    if not winners:
        return {}
    by_title: dict[str, str] = {}
    supersedes: dict[str, str] = {}
    by_word: dict[str, list[int]] = {}
    choices: list[str] = []
    for index, entry in enumerate(winners):
        by_title.setdefault(_topic_title(entry.title), entry.id)
        named = (entry.supersedes or "").removeprefix("memory:")
        if named.startswith(USER_ID_PREFIX):  # across levels, only as the ref shows it
            supersedes.setdefault(named.removeprefix(USER_ID_PREFIX), entry.id)
        tokens = _sorted_tokens(entry.content)
        choices.append(tokens)
        for word in set(tokens.split()):
            by_word.setdefault(word, []).append(index)
    found: dict[str, str] = {}
    for entry in user:
        winner = supersedes.get(entry.id)
        if winner is None:
            title = _topic_title(entry.title)
            winner = by_title.get(title) if title else None
        if winner is None:
            tokens = _sorted_tokens(entry.content)
            known = [w for w in set(tokens.split()) if w in by_word]
            rare = sorted(known, key=lambda w: (len(by_word[w]), w))[:RARE_WORDS]
            near = sorted({i for w in rare for i in by_word[w]})
            best = process.extractOne(
                tokens,
                [choices[i] for i in near],
                scorer=fuzz.ratio,
                score_cutoff=SIMILARITY_THRESHOLD,
            )
            if best is not None:
                winner = winners[near[best[2]]].id
        if winner is not None:
            found[user_level_id(entry.id)] = winner
    return found

"""A session's working state: the next revision from a patch, and the caps it must keep.

Both stores (the SQLite ledger and the in-memory incognito sessions) apply a
``set_working_state`` through ``patch_working_state``, so the rules are one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, TypedDict

from makad.core.session_notes import make_room_for_client_notes
from makad.core.tokens import estimate_tokens
from makad.core.types import MAX_NOTE_SECTION_TOKENS, MAX_NOTES_TOKENS, NOTE_SECTIONS, WorkingState
from makad.errors import Conflict, InvalidParams, TooLarge

MAX_GOALS: Final = 8
MAX_OPEN_THREADS: Final = 12
MAX_DECISIONS: Final = 20
# One goal, open thread or decision: a line or a short paragraph. Checked on what the
# client sent, before redaction reads it: every read of the state carries every item.
MAX_ITEM_CHARS: Final = 2_000


class WorkingStateChange(TypedDict, total=False):
    """One ``set_working_state``: the fields to replace (``notes`` merges by section), the
    revision it expects, and the id it replays under."""

    goals: list[str] | None
    open_threads: list[str] | None
    decisions: list[str] | None
    notes: Mapping[str, str] | None
    expected_revision: int | None
    request_id: str | None


# An unknown-section error names at most this many of them.
SHOWN_SECTIONS: Final = 20
_LIST_CAPS: Final = {"goals": MAX_GOALS, "openThreads": MAX_OPEN_THREADS, "decisions": MAX_DECISIONS}


def check_item_lengths(lists: Mapping[str, list[str] | None], notes: Mapping[str, str] | None = None) -> None:
    """What can be refused in a change before anything reads its text (the redactor would
    read every item): ``TooLarge`` naming the field when an item of a list (by wire name)
    is over ``MAX_ITEM_CHARS`` or a list is over its cap, ``InvalidParams`` for an
    unknown note section."""
    for field, items in lists.items():
        for index, item in enumerate(items or ()):
            if len(item) > MAX_ITEM_CHARS:
                raise TooLarge(
                    f"an item of {field} is over {MAX_ITEM_CHARS} characters",
                    field=field,
                    index=index,
                    limit=MAX_ITEM_CHARS,
                    actual=len(item),
                )
    for field, items in lists.items():
        _check_count(field, items or ())
    if notes:
        _check_sections(notes)


def _check_count(field: str, items: Sequence[str]) -> None:
    cap = _LIST_CAPS[field]
    if len(items) > cap:
        raise TooLarge(f"at most {cap} {field}", field=field, limit=cap, count=len(items))


def _check_sections(notes: Mapping[str, str]) -> None:
    """``InvalidParams`` naming the first few unknown sections (a client may send many)."""
    if len(notes) <= len(NOTE_SECTIONS) and all(section in NOTE_SECTIONS for section in notes):
        return
    unknown = sorted(set(notes) - set(NOTE_SECTIONS))
    if unknown:
        raise InvalidParams(
            "unknown note section",
            sections=unknown[:SHOWN_SECTIONS],
            unknownCount=len(unknown),
            allowed=list(NOTE_SECTIONS),
        )


def check_revision(session_id: str, expected: int | None, current: WorkingState) -> None:
    """``Conflict`` when a write expects another revision than the current one."""
    if expected is not None and expected != current.revision:
        raise Conflict(
            "the working state has changed",
            sessionId=session_id,
            expectedRevision=expected,
            currentRevision=current.revision,
        )


def patch_working_state(
    current: WorkingState,
    *,
    goals: list[str] | None = None,
    open_threads: list[str] | None = None,
    decisions: list[str] | None = None,
    notes: Mapping[str, str] | None = None,
) -> WorkingState:
    """The next revision: given lists replace, ``notes`` merge by section ("" removes one).

    Over a cap → ``TooLarge`` (see ``check_working_state``).
    """
    merged = dict(current.notes)
    for section, text in (notes or {}).items():
        if text:
            merged[section] = text
        else:
            merged.pop(section, None)
    make_room_for_client_notes(merged, set(notes or ()))
    state = WorkingState(
        goals=list(current.goals if goals is None else goals),
        open_threads=list(current.open_threads if open_threads is None else open_threads),
        decisions=list(current.decisions if decisions is None else decisions),
        notes=merged,
        revision=current.revision + 1,
    )
    check_working_state(state)
    return state


def check_working_state(state: WorkingState) -> None:
    """Enforce the working-state caps: ``TooLarge`` or ``InvalidParams`` when over."""
    _check_count("goals", state.goals)
    _check_count("openThreads", state.open_threads)
    _check_count("decisions", state.decisions)
    _check_sections(state.notes)
    total = 0
    for section, text in state.notes.items():
        tokens = estimate_tokens(text)
        if tokens > MAX_NOTE_SECTION_TOKENS:
            raise TooLarge(
                "a note section is over its token cap",
                field="notes",
                section=section,
                limit=MAX_NOTE_SECTION_TOKENS,
                tokens=tokens,
            )
        total += tokens
    if total > MAX_NOTES_TOKENS:
        raise TooLarge(
            "the notes are over their token cap",
            field="notes",
            limit=MAX_NOTES_TOKENS,
            tokens=total,
        )

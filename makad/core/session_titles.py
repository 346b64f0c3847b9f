"""A session's title: free text a client names a session with, shown in every session list."""

from __future__ import annotations

from typing import Final

from makad.core.compaction import abbreviate
from makad.errors import TooLarge

# As an entry's title: a longer one (a host naming a session by its first prompt) is kept
# shortened, cut at a word with an ellipsis, since every ``list_sessions`` carries every title.
MAX_SESSION_TITLE_CHARS: Final = 300
# What a client may send at all, checked before redaction reads it.
MAX_SENT_TITLE_CHARS: Final = 65_536


def check_session_title(title: str | None) -> None:
    """``TooLarge`` (field ``title``) when ``title`` is over ``MAX_SENT_TITLE_CHARS``."""
    if title is not None and len(title) > MAX_SENT_TITLE_CHARS:
        raise TooLarge(
            f"title is over {MAX_SENT_TITLE_CHARS} characters",
            field="title",
            limit=MAX_SENT_TITLE_CHARS,
            actual=len(title),
        )


def stored_title(redacted: str) -> str:
    """The title as kept: as sent when it fits ``MAX_SESSION_TITLE_CHARS``, else shortened."""
    if len(redacted) <= MAX_SESSION_TITLE_CHARS:
        return redacted
    return abbreviate(redacted, MAX_SESSION_TITLE_CHARS)

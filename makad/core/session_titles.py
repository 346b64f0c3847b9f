"""A session's title: free text a client names a session with, shown in every session list."""

from __future__ import annotations

from typing import Final

from makad.errors import TooLarge

# As an entry's title. Checked on what the client sent, before redaction reads it: every
# ``list_sessions`` carries every title.
MAX_SESSION_TITLE_CHARS: Final = 300


def check_session_title(title: str | None) -> None:
    """``TooLarge`` (field ``title``) when ``title`` is over ``MAX_SESSION_TITLE_CHARS``."""
    if title is not None and len(title) > MAX_SESSION_TITLE_CHARS:
        raise TooLarge(
            f"title is over {MAX_SESSION_TITLE_CHARS} characters",
            field="title",
            limit=MAX_SESSION_TITLE_CHARS,
            actual=len(title),
        )

"""The rules every entry obeys, whoever writes it (the user, the agent, an import).

An entry's title is one line of at most 300 characters, its content at most
32 KiB; both are redacted, hold no control character but tabs and line breaks, and the
content is stored as it will read back (``makad.core.entry_text.prepare``). Tags are
lower-case slugs, once each. A proposal is open (waiting in PENDING.md for the user)
while ``review_required`` or ``draft``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from makad.core.entry_text import prepare
from makad.core.redaction import redact
from makad.core.types import Entry, EntryStatus
from makad.errors import InvalidParams, TooLarge

MAX_TITLE_CHARS: Final = 300
MAX_ENTRY_BYTES: Final = 32 * 1024
OPEN_STATUSES: Final[tuple[EntryStatus, ...]] = ("review_required", "draft")


def is_open(entry: Entry) -> bool:
    """Whether ``entry`` is a proposal still waiting for the user's decision."""
    return entry.status in OPEN_STATUSES


# C0 controls but tab, line feed and carriage return; DEL; C1 controls. NUL makes a file
# binary to every tool (enough of them make it read as UTF-16, which the daemon refuses);
# the others are terminal commands (ESC, CSI, BEL): `cat MEMORY.md` would run them.
_CONTROLS: Final = re.compile(r"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f]")


def without_controls(text: str) -> str:
    """``text`` without the control characters no memory file holds."""
    return _CONTROLS.sub("", text)


def clean_entry(title: str, content: str, *, title_required: bool = True) -> tuple[str, str, int]:
    """(title, content, secrets redacted) as stored; InvalidParams or TooLarge when the
    entry cannot be stored at all. ``title_required`` false: an empty title is kept (an
    entry the user wrote under a bare ``## `` heading keeps it when its content changes)."""
    title = " ".join(without_controls(title).split())
    content = without_controls(content)
    if not title and title_required:
        raise InvalidParams("title must not be empty", path="$.title")
    if len(title) > MAX_TITLE_CHARS:
        raise TooLarge(
            f"title is over {MAX_TITLE_CHARS} characters", limit=MAX_TITLE_CHARS, actual=len(title)
        )
    if len(content.encode("utf-8", "surrogatepass")) > MAX_ENTRY_BYTES:
        raise TooLarge(f"content is over {MAX_ENTRY_BYTES} bytes", limit=MAX_ENTRY_BYTES)
    red_title, red_content = redact(title), redact(content)
    # Stored as it will read back: line endings normalised, blocks it leaves open
    # closed, link reference definitions neutralized (makad.core.entry_text).
    stored = prepare(red_content.text).content
    return red_title.text, stored, red_title.count + red_content.count


def normalize_tags(tags: Iterable[str]) -> list[str]:
    """Lower-case slugs (runs of whitespace as ``-``), redacted, each once, in order."""
    out: dict[str, None] = {}  # in order, each once (a list's `in` made 90,000 tags take minutes)
    for tag in tags:
        # A secret pasted as a tag must not survive as a slug.
        slug = "-".join(without_controls(redact(tag).text).strip().lower().split())
        if slug:
            out.setdefault(slug)
    return list(out)


def redact_all(values: Iterable[str]) -> list[str]:
    return [redact(value).text for value in values]

"""The ``<!-- maka-memory: key=value ... -->`` comment under an entry's heading.

Reading keeps every token: known keys with values this version understands
become Entry fields; everything else -- unknown keys, tokens without ``=``, a
known key with a value out of range or from a future version (``origin=robot``,
``status=frozen``, ``createdAt=2024-01-01``), a repeated key -- is *held*:
kept byte for byte, the entry falling back to the default for that field.

Writing an existing comment is an edit, not a re-render: tokens whose field
the operation did not change stay exactly as they were (held ones included);
a changed field replaces its first token (its other tokens go) or is added
after the last known token; a field that went back to its unwritten default
is dropped. A comment is written from scratch only for a section without one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, get_args
from urllib.parse import quote, unquote

from makad.core.types import MAX_INT64, Entry, EntryStatus, Origin, Scope
from makad.core.undecodable import display

ORIGINS: Final[frozenset[str]] = frozenset(get_args(Origin))
STATUSES: Final[frozenset[str]] = frozenset(get_args(EntryStatus))
SCOPES: Final[frozenset[str]] = frozenset(get_args(Scope))
# Comment key -> Entry attribute, in the V0.1 order they are written.
FIELDS: Final = {
    "id": "id",
    "origin": "origin",
    "createdAt": "created_at",
    "updatedAt": "updated_at",
    "status": "status",
    "tags": "tags",
    "decayTtlMs": "decay_ttl_ms",
    "scope": "scope",
    "session": "session_id",
    "source": "source_refs",
    "supersedes": "supersedes",
}
_DIGITS: Final = re.compile(r"[0-9]+")
_UNSAFE_VALUE: Final = re.compile(r"[%,<>=\s\x00-\x1f\x7f]")


@dataclass(slots=True)
class CommentFields:
    """What one comment says: parsed values, every token, and the held ones."""

    values: dict[str, object] = field(default_factory=dict)
    tokens: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    malformed: bool = False
    # The text after ``-->`` on the comment line (content, and a malformed comment).
    trailing: str = ""
    closed: bool = True


def read_comment(rest: str) -> CommentFields:
    """Read the comment text after ``maka-memory:``; never raises."""
    fields = CommentFields()
    end = rest.find("-->")
    if end < 0:
        fields.malformed, fields.closed = True, False
        end = len(rest)
    else:
        fields.trailing = rest[end + 3 :].strip(" \t")
        fields.malformed = bool(fields.trailing)
    for token in rest[:end].split():
        fields.tokens.append(token)
        key, sep, value = token.partition("=")
        if not sep:
            fields.malformed = True
            fields.held.append(token)
        elif key not in FIELDS:
            fields.held.append(token)
        elif key in fields.values:
            fields.malformed = True
            fields.held.append(token)
        else:
            parsed = _parse_value(key, display(value))
            if parsed is _INVALID:
                fields.malformed = True
                fields.held.append(token)
            else:
                fields.values[key] = parsed
    return fields


def held_keys(held: Sequence[str]) -> set[str]:
    """Known keys among the held tokens (their value was not understood or repeated)."""
    return {key for key, sep, _ in (t.partition("=") for t in held) if sep and key in FIELDS}


_INVALID: Final = object()


def understood(key: str, value: str) -> bool:
    """Whether ``key=value`` (``key`` one of ``FIELDS``) is a value this version reads."""
    return _parse_value(key, display(value)) is not _INVALID


def _parse_value(key: str, value: str) -> object:
    if key == "id":
        return unquote(value) or _INVALID
    if key in ("session", "supersedes"):
        return unquote(value) or None
    if key in ("tags", "source"):
        return [unquote(item) for item in value.split(",") if item]
    if key == "origin":
        return value if value in ORIGINS else _INVALID
    if key == "status":
        return value if value in STATUSES else _INVALID
    if key == "scope":
        return value if value in SCOPES else _INVALID
    if key == "decayTtlMs" and value.lower() in ("", "null", "none"):
        return None
    if _DIGITS.fullmatch(value) and len(value) <= 19 and int(value) <= MAX_INT64:
        return int(value)
    return _INVALID


def encode(value: str) -> str:
    """Percent-encode only what would break a token (spaces, commas, %, <, >, =, controls)."""
    return _UNSAFE_VALUE.sub(lambda match: quote(match.group(), safe=""), value)


def field_tokens(entry: Entry) -> dict[str, str]:
    """The tokens the daemon writes for ``entry``, by key, in V0.1 order.

    ``tags`` only when there are some (an empty ``tags=`` is still read: none);
    ``decayTtlMs`` only when set; ``scope``, ``session``, ``source`` and ``supersedes``
    only when not default.
    """
    out = {
        "id": f"id={encode(entry.id)}",
        "origin": f"origin={entry.origin}",
        "createdAt": f"createdAt={entry.created_at}",
        "updatedAt": f"updatedAt={entry.updated_at}",
        "status": f"status={entry.status}",
    }
    if entry.tags:
        out["tags"] = "tags=" + ",".join(encode(tag) for tag in entry.tags)
    if entry.decay_ttl_ms is not None:
        out["decayTtlMs"] = f"decayTtlMs={entry.decay_ttl_ms}"
    if entry.scope != "workspace":
        out["scope"] = f"scope={entry.scope}"
    if entry.session_id:
        out["session"] = f"session={encode(entry.session_id)}"
    if entry.source_refs:
        out["source"] = "source=" + ",".join(encode(ref) for ref in entry.source_refs)
    if entry.supersedes:
        out["supersedes"] = f"supersedes={encode(entry.supersedes)}"
    return out


def edit_tokens(tokens: Sequence[str], before: Entry, declared_id: str, after: Entry) -> list[str]:
    """The comment tokens for ``after``, changing only what differs from ``before``."""
    fresh = field_tokens(after)
    changed = {
        key
        for key, attr in FIELDS.items()
        if getattr(after, attr) != (declared_id if key == "id" else getattr(before, attr))
    }
    out: list[str] = []
    seen: set[str] = set()
    last_known = -1
    for token in tokens:
        key, sep, _ = token.partition("=")
        if sep and key in FIELDS:
            if key in changed and (key in seen or key not in fresh):
                seen.add(key)
                continue
            out.append(fresh[key] if key in changed else token)
            seen.add(key)
            last_known = len(out) - 1
        else:
            out.append(token)
    missing = [fresh[key] for key in fresh if key not in seen and (key in changed or key == "id")]
    out[last_known + 1 : last_known + 1] = missing
    return out

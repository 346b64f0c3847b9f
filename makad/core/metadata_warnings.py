"""Warnings about metadata comments typed by hand that the daemon does not understand.

A value this version does not know (``status=actve``), a key close to a known one
(``stauts=``, ``tag=``), a token without ``=``, an unclosed comment, a key given twice in
one comment, an id two entries share, a date typed in seconds: each stays in the file byte
for byte and the entry reads as it always did (``makad.core.entry_comment``: forward
compatibility); these warnings only say so, with the closest valid spelling. A key close
to no known one (``reviewer=ann``) is the user's own and warns about nothing.

Pure and cheap on a clean file: only sections whose comment held a token, is malformed,
repeats an id or gives a date in seconds are read again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache, partial
from typing import Final

from makad.core import memory_format as fmt
from makad.core.closest import closest
from makad.core.confidence import USER_FIELD, USER_LEVELS, understood_user_value
from makad.core.entry_comment import FIELDS, ORIGINS, SCOPES, understood
from makad.core.entry_text import split_lines
from makad.core.typed_dates import DATE_KEYS, FORMAT_EXAMPLE, day, meant, unit_mistake
from makad.core.types import MAX_INT64, Entry, Warning
from makad.core.undecodable import display

# The same cap as the other file warnings: one per line up to this many of a kind.
MAX_PER_KIND: Final = 10
# ``id`` is no guess for an unknown key: any short key (kind=, ip=) would be "did you mean id=".
GUESSED_KEYS: Final = tuple(key for key in (*FIELDS, USER_FIELD) if key != "id")
MEMORY_STATUSES: Final = ("active", "archived")
_MORE: Final = {
    "unknown_value": "metadata values makad does not understand",
    "unknown_key": "metadata keys makad does not know",
    "bad_metadata": "malformed metadata comments or tokens",
    "duplicate_key": "metadata keys given twice in one comment",
    "duplicate_id": "entries whose id another entry has",
    "unlikely_date": "dates that read as a day no one meant",
}
DAY_MS: Final = 86_400_000


def metadata(doc: fmt.MemoryDocument, file_name: str = "MEMORY.md") -> list[Warning]:
    """``unknown_value``, ``unknown_key``, ``bad_metadata``, ``duplicate_key``,
    ``duplicate_id`` and ``unlikely_date`` warnings for ``doc``'s metadata comments, on each
    comment's line."""
    flagged = {index for index, section in enumerate(doc.sections) if _suspect(section)}
    if not flagged:
        return []
    found: list[Found] = []
    # The first entry naming each id, and its heading line: what a repeated id repeats.
    first: dict[str, tuple[str, int]] = {}
    line = 1 + _line_count(doc.preamble)
    for index, section in enumerate(doc.sections[: max(flagged) + 1]):
        if not section.derived:
            first.setdefault(section.declared_id, (section.entry.title, line))
        if index in flagged:
            found.extend(_section_warnings(section, line, file_name, first))
        line += _line_count(section.raw)
    return _capped(found, file_name)


# A warning's kind, line, message and entry id; a message that guesses a value is worked
# out only for the warnings shown (past the cap of its kind only the count is).
Found = tuple[str, int, str | Callable[[], str], str]


def _suspect(section: fmt.Section) -> bool:
    if section.unknown_fields or (not section.derived and section.entry.id != section.declared_id):
        return True
    if unit_mistake(section.entry.created_at) or unit_mistake(section.entry.updated_at):
        return True
    # A comment naming no id reads as malformed; only one unclosed or with text after
    # ``-->`` is worth a warning.
    return section.comment_malformed and not _closed_cleanly(section)


def _closed_cleanly(section: fmt.Section) -> bool:
    """Whether the section's comment ends with ``-->`` and nothing after it."""
    where = fmt.comment_of(section)
    if where is None:
        return True
    closing = where[1].find("-->")
    return closing >= 0 and not where[1][closing + 3 :].strip(" \t")


def _line_count(text: str) -> int:
    if "\r" in text:
        return len(split_lines(text))
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _section_warnings(
    section: fmt.Section, line: int, file_name: str, first: dict[str, tuple[str, int]]
) -> Iterator[Found]:
    where = fmt.comment_of(section)
    if where is None:
        return
    at = line + where[0]
    rest = where[1]
    closing = rest.find("-->")
    entry = section.entry
    name = f'{file_name} line {at}, entry "{entry.title}"'
    if closing < 0:
        yield (
            "bad_metadata",
            at,
            f"{name}: its metadata comment has no closing -->, so the whole line is read as "
            "metadata; end the line with -->",
            entry.id,
        )
    elif rest[closing + 3 :].strip(" \t"):
        yield (
            "bad_metadata",
            at,
            f"{name}: the text after --> on the comment line is read as the start of the entry's "
            "content; put it on a line of its own",
            entry.id,
        )
    # Read as ``entry_comment.read_comment`` reads them; a token it did not hold was read.
    held = set(section.unknown_fields)
    counted: dict[str, str] = {}
    raw_tokens = (rest if closing < 0 else rest[:closing]).split()
    listed = _spaced_lists(raw_tokens)
    for index, raw_token in enumerate(raw_tokens):
        key, sep, value = raw_token.partition("=")
        if raw_token not in held:
            if key in DATE_KEYS and key not in counted:
                yield from _unlikely_date(name, at, key, value, entry.id)
            counted.setdefault(key, raw_token)
            continue
        token = display(raw_token)
        key, sep, value = token.partition("=")
        if not sep:
            guess: str | None
            if index in listed:
                guess = display(listed[index])
            elif token.casefold() == "pinned":
                guess = "tags=pinned"
            else:
                guess = _guess_key(token)
            yield (
                "bad_metadata",
                at,
                f"{name}: {token} has no =, so it is kept as written and ignored"
                + (f"; did you mean {guess}?" if guess else ""),
                entry.id,
            )
        elif key in FIELDS or key == USER_FIELD:
            if key == USER_FIELD and not value:
                continue  # an empty confidence= says nothing
            if key in counted:
                yield (
                    "duplicate_key",
                    at,
                    f"{name}: {key}= is given twice: {display(counted[key])} counts, {token} is "
                    "kept as written and ignored",
                    entry.id,
                )
            elif not (understood_user_value(value) if key == USER_FIELD else understood(key, value)):
                if key == USER_FIELD:
                    counted[key] = raw_token  # the first confidence= is the one read
                yield ("unknown_value", at, partial(_unknown_value, name, key, value, entry), entry.id)
            else:
                counted[key] = raw_token
        elif (guess := _guess_key(key)) is not None:
            if guess.removesuffix("=") in DATE_KEYS and len(dates := meant(value)) == 1:
                value = str(dates[0])
            yield (
                "unknown_key",
                at,
                f"{name}: {token} has a key makad does not know, so it is kept as written and "
                f"ignored; did you mean {guess}{value}?",
                entry.id,
            )
    if not section.derived and entry.id != section.declared_id:
        title, first_line = first.get(section.declared_id, ("?", 0))
        yield (
            "duplicate_id",
            at,
            f'{name}: id={section.declared_id} is also the id of "{title}" (line {first_line}), '
            f"so this entry answers to {entry.id} while the file is kept as written; delete the "
            "id= token of one of them to give it an id of its own",
            entry.id,
        )


def _spaced_lists(tokens: list[str]) -> dict[int, str]:
    """For each token that continues a list typed with a space after its comma
    (``tags=ops, deploy``), the list as one token: ``tags=ops,deploy``."""
    out: dict[int, str] = {}
    start = 0
    while start < len(tokens):
        end = start + 1
        if "=" in tokens[start]:
            while end < len(tokens) and tokens[end - 1].endswith(",") and "=" not in tokens[end]:
                end += 1
        if end - start > 1:
            out.update(dict.fromkeys(range(start + 1, end), "".join(tokens[start:end]).rstrip(",")))
        start = end
    return out


def _unlikely_date(name: str, at: int, key: str, value: str, entry_id: str) -> Iterator[Found]:
    """``unlikely_date`` when ``key=value`` (read) is a number in seconds or microseconds."""
    ms = int(value)
    mistake = unit_mistake(ms)
    if mistake is None:
        return
    unit, meant_ms = mistake
    what = "created" if key == "createdAt" else "updated"
    yield (
        "unlikely_date",
        at,
        f"{name}: {key}={value} is read in Unix milliseconds, the unit makad reads, so the entry "
        f"reads as {what} on {day(ms)}; it looks like Unix {unit} (the token is kept as written); "
        f"did you mean {key}={meant_ms} ({day(meant_ms)})?",
        entry_id,
    )


@lru_cache(maxsize=256)  # the same few keys repeat over a file's entries
def _guess_key(typed: str) -> str | None:
    guess = closest(typed, GUESSED_KEYS)
    return None if guess is None else f"{guess}="


def _unknown_value(name: str, key: str, value: str, entry: Entry) -> str:
    """What ``key=value`` is not, what the entry reads as instead, and the likely meaning."""
    token = f"{key}={value}"
    if key == "status":
        what = f"{token} is not a status makad knows, so the entry reads as {entry.status}"
        guess = closest(value, MEMORY_STATUSES)
    elif key == "origin":
        what = f"{token} is not an origin makad knows, so the entry reads as origin {entry.origin}"
        guess = closest(value, sorted(ORIGINS))
    elif key == "scope":
        what = f"{token} is not a scope makad knows, so the entry reads as scope {entry.scope}"
        guess = closest(value, sorted(SCOPES))
    elif key in DATE_KEYS:
        what = f"{token} is not a date in Unix milliseconds, so " + (
            "the entry has no creation date (its age is unknown) and never decays"
            if key == "createdAt"
            else "the entry reads as updated when it was created"
        )
        readings = meant(value)
        if not readings:
            return f"{name}: {what} (the token is kept as written); {FORMAT_EXAMPLE}"
        if len(readings) == 1:
            guess = str(readings[0])
        else:
            shown = " or ".join(f"{key}={ms} ({day(ms)})" for ms in readings)
            return f"{name}: {what} (the token is kept as written); did you mean {shown}?"
    elif key == "decayTtlMs":
        what = f"{token} is not a whole number of milliseconds, so the entry never decays"
        guess = _days(value)
    elif key == USER_FIELD:
        what = (
            f"{token} is not high, medium, low or a number from 0 to 1, so the entry's confidence is derived"
        )
        guess = _confidence(value)
    else:  # id: an empty value
        what = f"{token} names no id, so the entry's id comes from its text"
        guess = None
    hint = f"; did you mean {key}={guess}?" if guess else ""
    return f"{name}: {what} (the token is kept as written){hint}"


def _days(value: str) -> str | None:
    """``30d`` (days) in milliseconds."""
    number = value.lower().removesuffix("days").removesuffix("day").removesuffix("d")
    if number != value.lower() and number.isdigit() and 0 < int(number) * DAY_MS <= MAX_INT64:
        return str(int(number) * DAY_MS)
    return None


def _confidence(value: str) -> str | None:
    """A level misspelt (``hgh``) or a percentage (``80``) as the value meant."""
    try:
        number = float(value)
    except ValueError:
        return closest(value, USER_LEVELS)
    if number.is_integer() and 1 < number <= 100:
        return f"{number / 100:g}"
    return None


def _capped(found: list[Found], file_name: str) -> list[Warning]:
    """The first ``MAX_PER_KIND`` of each kind, then one warning per kind counting the rest."""
    out: list[Warning] = []
    counts: dict[str, int] = {}
    for kind, line, message, entry_id in found:
        counts[kind] = counts.get(kind, 0) + 1
        if counts[kind] <= MAX_PER_KIND:
            shown = message if isinstance(message, str) else message()
            out.append(Warning(kind=kind, line=line, message=shown, entry_id=entry_id))
    for kind, count in counts.items():
        if count > MAX_PER_KIND:
            out.append(
                Warning(kind=kind, message=f"{file_name} has {count - MAX_PER_KIND} more {_MORE[kind]}")
            )
    return out

"""The values a line assigns to credential-like keys, read in one linear pass.

The shapes are detect-secrets' keyword rules: ``password = "…"`` (also ``==``, ``!=``,
``:=``, ``=>``), ``api_key: …``, ``private_key "…";`` and ``"…" == secret``, where the key
is any word holding a keyword (``password``, ``api_key``, ``secret``…), and a command-line
option's value: ``--password hunter2``, ``--client-secret …`` (not detect-secrets'). detect-secrets
writes each shape as a regular expression searched over the line; those search again
from every keyword and rescan the rest of the line each time (a line of ``password``
repeated took seconds), and its ``is_indirect_reference`` regex is cubic on a run of
blanks (a 1,000-character line took 18 seconds). Here each key is looked at once, each
value is read to its end once, and a keyword inside a value already read starts no other
value, so a line costs time proportional to its length.

One reading differs from detect-secrets' on purpose: a value in backticks ends at the
next backtick (detect-secrets runs it to the last backtick before a quote).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from typing import Final, NamedTuple

_QUOTES: Final = "'\"`"
# What ends any value: a quote of either kind or a vertical tab (``[^\v'"]``).
_STOPS: Final = re.compile(r"['\"\x0b]")
_UNQUOTED_END: Final = re.compile(r"[\s'\"]")
_BLANK: Final = re.compile(r"\s")
# A value's last character is none of these (``[^\v,'"`]``).
_BAD_LAST: Final = ",'\"`\x0b"
# What an unquoted value loses at its end (its cut is at the first blank).
_TRAILING: Final = ",`.;:!?)]}>"
_SEMICOLON_REACH: Final = 50  # ``[^\s]{0,50}?`` before a ``"…";`` value
_WORD_RUN: Final = re.compile(r"\w*+")
_BLANK_RUN: Final = re.compile(r"\s*+")
_NON_BLANK_RUN: Final = re.compile(rf"\S{{0,{_SEMICOLON_REACH}}}+")
_QUOTE: Final = re.compile(r"['\"`]")
# What every ``key = value`` shape has right after its key (closing quotes or brackets,
# blanks, an operator's first character): a key without it skips those shapes.
_OPERATOR_AHEAD: Final = re.compile(r"[\]'\"]{0,2}\s*+[:!=]")
# detect-secrets skips its indirect-reference test on longer lines; so does this one.
_REFERENCE_LINE: Final = 1000


class Value(NamedTuple):
    start: int
    end: int
    quoted: bool


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _may_start(char: str) -> bool:
    """A value starts with a word character (detect-secrets' ``(?=\\w+)``), or with
    ``-`` or ``+``, as random keys in the base64 alphabets may (``/`` or ``.`` would
    be a path)."""
    return _is_word(char) or char in "-+"


def _skip_blanks(line: str, pos: int) -> int:
    return _BLANK_RUN.match(line, pos).end()  # type: ignore[union-attr]


class _Reader:
    """One line's values, each read once."""

    def __init__(self, line: str) -> None:
        self.line = line
        self.found: dict[tuple[int, int], bool] = {}
        self.until = 0  # the end of the furthest value found
        self._stops: dict[int, int] = {}
        self._marks: list[int] | None = None
        # The last unquoted value's reach: from ``_unquoted_from``, the first blank or
        # quote is at ``_unquoted_end`` (a later start before it ends there too).
        self._unquoted_from = 0
        self._unquoted_end = -1
        # The quotes already read as ``"…";`` (reading one again finds the same value).
        self._semicolon_tried: set[int] = set()
        # Every quote in ``[_semicolon_from, _semicolon_to]`` is among those.
        self._semicolon_from = 0
        self._semicolon_to = -1
        # Where the line's last ``;`` is: a ``"…";`` value closes before it.
        self.last_semicolon = line.rfind(";")

    def quoted(self, open_at: int, *, semicolon: bool = False) -> None:
        """The value in the quotes opening at ``open_at`` (followed by ``;`` if asked)."""
        line = self.line
        quote = line[open_at]
        start = open_at + 1
        if semicolon:
            if open_at in self._semicolon_tried:
                return
            self._semicolon_tried.add(open_at)
        if quote == "`":
            close = line.find("`", start)
            if close < 0 or _STOPS.search(line, start, close) is not None:
                return
        else:
            close = self._stop(start)
            if close < 0 or line[close] != quote:
                return
        if semicolon and line[close + 1 : close + 2] != ";":
            return
        if _BLANK.search(line, start, close) is None:
            self.keep(start, close, quoted=True)

    def _stop(self, start: int) -> int:
        stop = self._stops.get(start)
        if stop is None:
            found = _STOPS.search(self.line, start)
            stop = self._stops[start] = found.start() if found is not None else -1
        return stop

    def unquoted(self, start: int) -> None:
        """The value starting at ``start`` without quotes: up to a blank or a quote, less
        trailing punctuation."""
        line = self.line
        if self._unquoted_from <= start <= self._unquoted_end:
            end = self._unquoted_end
        else:
            found = _UNQUOTED_END.search(line, start)
            end = found.start() if found is not None else len(line)
            self._unquoted_from, self._unquoted_end = start, end
        while end > start and line[end - 1] in _TRAILING:
            end -= 1
        self.keep(start, end, quoted=False)

    def keep(self, start: int, end: int, *, quoted: bool) -> None:
        line = self.line
        if end <= start or not _may_start(line[start]) or line[end - 1] in _BAD_LAST:
            return
        self.found.setdefault((start, end), quoted)
        self.until = max(self.until, end)

    def value_after(self, pos: int, *, quote_required: bool) -> None:
        """The value right after an operator ending at ``pos`` (blanks skipped)."""
        line = self.line
        pos = _skip_blanks(line, pos)
        if pos < len(line) and line[pos] in _QUOTES:
            self.quoted(pos)
        elif not quote_required and pos < len(line) and _may_start(line[pos]):
            self.unquoted(pos)  # (one that cannot start a value is not read to its end)

    def mark_before(self, pos: int, quote: str) -> int:
        """The nearest position before ``pos`` holding ``quote`` or, for a quote other than
        a backtick, any quote or vertical tab; -1 when there is none."""
        if quote == "`":
            return self.line.rfind("`", 0, pos)
        if self._marks is None:
            self._marks = [m.start() for m in _STOPS.finditer(self.line)]
        index = bisect.bisect_left(self._marks, pos)
        return self._marks[index - 1] if index else -1


def keyword_values(line: str, keyword: re.Pattern[str], any_case: re.Pattern[str]) -> Iterator[Value]:
    """Each value the line assigns to a key holding a keyword (``keyword`` matched in the
    lower-cased line, or ``any_case`` in the line itself when lowering it would move its
    characters), once, in line order; none when the line assigns a call or a lookup
    (``secret = get_secret()``)."""
    simple = _simple_value(line, keyword)
    if simple is not None:
        yield simple
    else:
        yield from general_values(line, keyword, any_case)


def general_values(line: str, keyword: re.Pattern[str], any_case: re.Pattern[str]) -> Iterator[Value]:
    """``keyword_values`` without the shortcut for the commonest line (``_SIMPLE_LINE``),
    which finds what this finds on such a line, at a fraction of the cost."""
    if not ("=" in line or ":" in line or "!" in line or ";" in line or "--" in line):
        return  # every shape needs an operator (``"v" !! key`` too), a ``;`` or ``--``
    if is_indirect_reference(line):
        return
    reader = _Reader(line)
    lowered = line.lower()
    if len(lowered) != len(line):
        lowered, keyword = line, any_case
    word_until = 0
    for hit in keyword.finditer(lowered):
        hit_start, hit_end = hit.span()
        if hit_start < word_until or hit_start < reader.until:
            continue  # inside a key or a value already read
        end = _WORD_RUN.match(line, hit_end).end()  # type: ignore[union-attr]
        word_until = end
        if line[hit_start:hit_end] == lowered[hit_start:hit_end]:
            _compared_before(reader, hit_start)
        _after_key(reader, end)
        if _is_flag(line, hit_start, end):
            _after_flag(reader, end)
    for (start, end), quoted in sorted(reader.found.items()):
        yield Value(start, end, quoted)


# The commonest line: ``key = value``, ``key: value``, ``export KEY="value"``, nothing
# else. No brackets (no call or lookup), no ``;``, no backtick, no quote but the value's,
# no ``=`` or ``>`` opening the value (``==``, ``=>``), no blank before a ``:``.
_SIMPLE_LINE: Final = re.compile(
    r"[ \t]*+(?:export[ \t]++)?([A-Za-z0-9_]++)(?:[ \t]*+=|:)[ \t]*+"
    r"(?:([A-Za-z0-9_+-][^\s'\"`()\[\];]*+)|(['\"])([A-Za-z0-9_+-][^\s'\"`()\[\];]*+)\3)[ \t]*+"
)


def _simple_value(line: str, keyword: re.Pattern[str]) -> Value | None:
    """The value of a ``_SIMPLE_LINE`` whose key holds a keyword, read as the general path
    reads it (the key's first keyword is the line's first; it is followed by ``=`` or
    ``:``, then the value; every later keyword is inside the key or the value, no other
    shape applies); None for any other line, which the general path reads."""
    if not line.isascii():
        return None
    match = _SIMPLE_LINE.fullmatch(line)
    if match is None:
        return None
    key_start, key_end = match.span(1)
    if keyword.search(line.lower(), key_start, key_end) is None:
        return None
    if match.group(2) is not None:
        start, end = match.span(2)
        trimmed = match.group(2).rstrip(_TRAILING)  # never empty: the first character stays
        return Value(start, start + len(trimmed), False)
    start, end = match.span(4)
    if line[end - 1] in _BAD_LAST:
        return None
    return Value(start, end, True)


def _after_key(reader: _Reader, key_end: int) -> None:
    """``key = value`` and its kin, for the key ending at ``key_end``."""
    line = reader.line
    if _OPERATOR_AHEAD.match(line, key_end) is None:
        _quoted_then_semicolon(reader, key_end)  # no operator follows: only this shape
        return
    closing = key_end
    while closing < key_end + 2 and closing < len(line) and line[closing] in "]'\"":
        closing += 1
    if line[closing : closing + 1] == ":" and line[closing + 1 : closing + 2] != "=":
        reader.value_after(closing + 1, quote_required=False)  # api_key: value
    at = _skip_blanks(line, closing)
    if line.startswith(":=", at):
        reader.value_after(at + 2, quote_required=False)  # key := value
    elif line.startswith("!=", at):
        reader.value_after(at + (3 if line.startswith("!==", at) else 2), quote_required=False)
    elif line.startswith("=", at):
        equals = at
        while equals < at + 3 and line.startswith("=", equals):
            equals += 1
        reader.value_after(equals, quote_required=False)  # key = value, key == value
        if line.startswith("=>", at):
            reader.value_after(at + 2, quote_required=True)  # key => "value"
    _quoted_then_semicolon(reader, key_end)


def _is_flag(line: str, hit_start: int, key_end: int) -> bool:
    """Whether the key is a command-line option ending at ``key_end`` (``--password``,
    ``--db-password``): a word of letters, digits, ``-`` and ``_`` opening with ``--``
    after a blank or the line's start, at most 40 characters before the keyword."""
    if key_end >= len(line) or line[key_end] not in " \t":
        return False
    floor = max(0, hit_start - 40)
    if line.find("--", floor, hit_start + 2) < 0:
        return False  # (the walk below would find no ``--``: cheaper to look first)
    start = hit_start
    while start > floor and (_is_word(line[start - 1]) or line[start - 1] == "-"):
        start -= 1
    if not line.startswith("--", start) or (start > 0 and not line[start - 1].isspace()):
        return False
    return key_end < len(line) and line[key_end] in " \t"


def _after_flag(reader: _Reader, key_end: int) -> None:
    """``--password value``: the next word, unless it is another option."""
    line = reader.line
    at = _skip_blanks(line, key_end)
    if at < len(line) and line[at] != "-":
        reader.value_after(at, quote_required=False)


def _quoted_then_semicolon(reader: _Reader, key_end: int) -> None:
    """``key … "value";``: at most 50 characters without a blank, blanks, the quotes (a
    quote among the 50 first, then the first one after the blanks)."""
    line = reader.line
    if reader.last_semicolon <= key_end:
        return  # every such value closes before a ``;`` after the key
    run_end = _NON_BLANK_RUN.match(line, key_end).end()  # type: ignore[union-attr]
    first = key_end
    if reader._semicolon_from <= key_end <= reader._semicolon_to + 1:
        first = max(key_end, reader._semicolon_to + 1)  # the quotes before were read
    else:
        reader._semicolon_from = key_end
    for quote in _QUOTE.finditer(line, first, run_end + 1):
        reader.quoted(quote.start(), semicolon=True)
    reader._semicolon_to = max(reader._semicolon_to, run_end)
    if run_end < len(line) and line[run_end].isspace():
        after = _skip_blanks(line, run_end)
        if after < len(line) and line[after] in _QUOTES:
            reader.quoted(after, semicolon=True)


def _compared_before(reader: _Reader, key_start: int) -> None:
    """``"value" == key``: a quoted value compared with a word holding the keyword."""
    line = reader.line
    word_start = key_start
    while word_start > 0 and _is_word(line[word_start - 1]):
        word_start -= 1
    pos = word_start
    while pos > 0 and line[pos - 1].isspace():
        pos -= 1
    operator = pos
    while operator > 0 and pos - operator < 4 and line[operator - 1] in "!=":
        operator -= 1
    if not 2 <= pos - operator <= 3:
        return
    close = operator
    while close > 0 and line[close - 1].isspace():
        close -= 1
    close -= 1
    if close < 1 or line[close] not in _QUOTES:
        return
    open_at = reader.mark_before(close, line[close])
    if open_at >= 0 and line[open_at] == line[close] and _BLANK.search(line, open_at, close) is None:
        reader.keep(open_at + 1, close, quoted=True)


# detect-secrets' indirect reference, ``([^\v=!:]*)\s*(:=?|[!=]{1,3})\s*([\w.-]+[\[\(][^\v]*
# [\]\)])``: its first group may be empty, so the search holds exactly when an operator is
# followed by a name and an opening bracket, and a closing one comes later, before any
# vertical tab.
_CALL_OR_LOOKUP: Final = re.compile(r"(?::=?|[!=]{1,3})\s*+[\w.-]++[\[(]")
_CLOSERS: Final = re.compile(r"[)\]]")


def is_indirect_reference(line: str) -> bool:
    """Whether the line assigns a call or a lookup (``secret = get_secret()``,
    ``key = headers['k']``): its keyword values are references, not secrets."""
    if len(line) > _REFERENCE_LINE or (")" not in line and "]" not in line):
        return False
    closers = [m.start() for m in _CLOSERS.finditer(line)]
    tabs = [i for i, char in enumerate(line) if char == "\x0b"] if "\x0b" in line else []
    for found in _CALL_OR_LOOKUP.finditer(line):
        closer = bisect.bisect_left(closers, found.end())
        if closer == len(closers):
            return False  # no closing bracket after this opening one, nor after any later
        tab = bisect.bisect_left(tabs, found.end())
        if tab == len(tabs) or tabs[tab] > closers[closer]:
            return True
    return False

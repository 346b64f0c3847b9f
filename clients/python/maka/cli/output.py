"""Printing for people: tables that fit the terminal (rich), relative ages (humanize), entry cards.

Both libraries are imported when something is printed for people, so `--json`, completion
and hooks do not pay for them.
"""

from __future__ import annotations

import codecs
import io
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, TextIO

# The characters a terminal acts on rather than shows: the C0 controls but tab and line
# feed (a carriage return only when a line feed follows it), DEL and the C1 controls. Text
# an agent or a tool recorded (a session title, an event, an episode) may hold them:
# printed raw, an escape sequence could set the clipboard (OSC 52), retitle the window,
# clear the screen, or hide or overwrite lines of what maka printed.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")


def shown(text: str) -> str:
    """``text`` with each control character a terminal acts on as a visible ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def json_shown(text: str) -> str:
    """Likewise as a JSON escape (``\\u00NN``): ``json.dumps`` escapes C0 controls in
    strings but leaves DEL and C1 raw, and all of them are only ever in strings."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class ControlsShown:
    """A text stream that writes every control character a terminal acts on in a visible
    form; everything else (``fileno``, ``isatty``, ``encoding``, ``flush`` …) is the
    stream's own."""

    def __init__(self, inner: TextIO, form: Callable[[str], str]) -> None:
        self.inner = inner
        self.form = form

    def write(self, text: str) -> int:
        self.inner.write(self.form(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def unfiltered(stream: TextIO) -> TextIO:
    """The stream under a ``ControlsShown``, for output whose escapes are maka's own (the
    colours of a table whose cells went through ``shown``, a progress bar)."""
    return stream.inner if isinstance(stream, ControlsShown) else stream


@contextmanager
def controls_shown(json_output: bool) -> Iterator[None]:
    """While it runs, stdout and stderr show control characters as escapes (JSON escapes
    on stdout for ``--json``)."""
    saved = sys.stdout, sys.stderr
    sys.stdout = ControlsShown(sys.stdout, json_shown if json_output else shown)
    sys.stderr = ControlsShown(sys.stderr, shown)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def print_json(value: Any, file: TextIO | None = None) -> None:
    """``value`` as indented JSON; characters the stream's encoding cannot hold as ``\\u``
    escapes, and so are control characters (DEL and C1 too, which JSON allows raw)."""
    out = file or sys.stdout
    print(json_shown(json.dumps(value, indent=2, ensure_ascii=not holds_unicode(out))), file=out)


def holds_unicode(stream: TextIO) -> bool:
    """Whether ``stream``'s encoding can write every character (UTF-8, UTF-16, GB 18030 …)."""
    try:
        name = codecs.lookup(stream.encoding or "utf-8").name
    except LookupError:
        return False
    return name.startswith(("utf-", "gb18030"))


def display_width(text: str) -> int:
    """Columns the text takes in a terminal (CJK characters take two)."""
    from rich.cells import cell_len

    return cell_len(text)


def one_line(text: str) -> str:
    return " ".join(text.split())


def truncate(text: str, width: int) -> str:
    """The text cut to ``width`` columns, ending in … when cut."""
    if display_width(text) <= width:
        return text
    from rich.text import Text

    cut = Text(text)
    cut.truncate(width, overflow="ellipsis")
    return cut.plain


def pad(text: str, width: int) -> str:
    return text + " " * max(0, width - display_width(text))


def terminal_width(stream: TextIO | None = None) -> int | None:
    """The width to fit output to, or None when the output is not a terminal (no cutting)."""
    stream = stream or sys.stdout
    if not stream.isatty():
        return None
    return shutil.get_terminal_size((100, 24)).columns


def colorful(stream: TextIO | None = None) -> bool:
    """Colours for a terminal that takes them, unless NO_COLOR is set (no-color.org)."""
    stream = stream or sys.stdout
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


# Cell styles by value, for the columns whose values mean something at a glance.
STYLES = {
    "active": "green",
    "archived": "dim",
    "draft": "yellow",
    "open": "green",
    "incognito": "magenta",
    "manual": "cyan",
    "extracted": "yellow",
    "imported": "blue",
    "hand-typed": "magenta",
    "true": "green",
    "false": "dim",
}
_UNCUT = 1_000_000  # render width off a terminal: nothing is cut


def table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], width: int | None = None, *, color: bool = False
) -> str:
    """Aligned columns (rich renders them; CJK counts double); when ``width`` is given the
    last column is cut to fit it with an ellipsis, to no fewer than 8 columns. The other
    columns are never cut, on a terminal narrower than they need too: lines then run past
    its edge (it wraps them) rather than show ids no command takes back.
    ``color``: ANSI styles for a terminal."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    grid = Table(
        box=None,
        padding=(0, 1),
        pad_edge=False,
        show_edge=False,
        header_style="bold" if color else "",
        expand=False,
    )
    headers = [shown(h) for h in headers]
    cells = [[shown(one_line(c)) for c in row] for row in rows]
    widths = [
        max([display_width(h), *(display_width(row[i]) for row in cells)]) for i, h in enumerate(headers)
    ]
    # Only the last column gives way to the terminal's width (rich measures and cuts it).
    fixed = sum(widths[:-1]) + 2 * (len(widths) - 1)
    room = None if width is None else max(8, width - fixed)
    for index, header in enumerate(headers):
        last = index == len(headers) - 1
        grid.add_column(
            header,
            no_wrap=True,
            overflow="ellipsis",
            width=min(room, widths[index]) if last and room else widths[index],
        )
    for row in cells:
        grid.add_row(*(Text(c, style=STYLES.get(c, "") if color else "") for c in row))
    out = io.StringIO()
    console = Console(
        file=out,
        width=_UNCUT if width is None or room is None else max(width, fixed + min(room, widths[-1])),
        force_terminal=color,
        color_system="standard" if color else None,
        no_color=not color,
        highlight=False,
        legacy_windows=False,
    )
    console.print(grid, crop=True, overflow="ellipsis", no_wrap=True)
    return "\n".join(line.rstrip() for line in out.getvalue().rstrip("\n").split("\n"))


def show_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print a table for people: fitted to a terminal and coloured there, whole elsewhere."""
    color = colorful()
    out = unfiltered(sys.stdout) if color else sys.stdout  # the cells are shown() already
    print(table(headers, rows, terminal_width(), color=color), file=out)


def now_ms() -> int:
    return int(time.time() * 1000)


def age(ms: int | None, now: int | None = None) -> str:
    """'just now', '3 minutes ago', 'a day ago', '3 days ago' (humanize) — or the date when
    older than 60 days."""
    if not ms:
        return "-"
    import humanize

    millis = (now if now is not None else now_ms()) - ms
    if millis < 0:
        return "in the future"
    if millis < 60_000:
        return "just now"
    if millis > 60 * 86_400_000:
        return time.strftime("%Y-%m-%d", time.localtime(ms / 1000))
    return str(humanize.naturaltime(timedelta(milliseconds=millis)))


def timestamp(ms: int | None) -> str:
    if not ms:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


SHORT_ID_CHARS = 12


def short_id(entry_id: str) -> str:
    return entry_id[:SHORT_ID_CHARS]


def short_ids(ids: Iterable[str]) -> dict[str, str]:
    """Each id's shortest prefix of at least SHORT_ID_CHARS that no other id starts with.

    Legacy ``manual-<ms>`` ids share long prefixes, so a fixed cut would collide; an id
    that is itself the start of another (``x`` and ``x~2``) is shown whole (exact ids win),
    and so is one whose cut would fall in its ``~N`` (an id two entries of the file share,
    told apart by that suffix): ``x~`` alone would not say which.
    """
    pool = sorted(set(ids))
    out: dict[str, str] = {}
    for index, entry_id in enumerate(pool):
        shared = max(
            (_common_prefix(entry_id, pool[j]) for j in (index - 1, index + 1) if 0 <= j < len(pool)),
            default=0,
        )
        cut = max(SHORT_ID_CHARS, shared + 1)
        out[entry_id] = entry_id if 0 <= entry_id.find("~") < cut else entry_id[:cut]
    return out


def _common_prefix(a: str, b: str) -> int:
    length = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        length += 1
    return length


# An entry's origin as people read it: ``unknown`` is the file format's value for an
# entry typed into the file by hand (docs/FORMAT.md), kept as it is in --json.
HAND_TYPED = "hand-typed"


def origin_label(origin: Any) -> str:
    return HAND_TYPED if origin in (None, "unknown") else str(origin)


def sources_text(refs: list[str], unresolved: Collection[str] = ()) -> str:
    """Source refs, comma-separated, each naming nothing stored marked ``(not in the ledger)``."""
    return ", ".join(f"{ref} (not in the ledger)" if ref in unresolved else ref for ref in refs)


def entry_card(entry: dict[str, Any], now: int | None = None, unresolved: Collection[str] = ()) -> list[str]:
    """An entry (or proposal) as lines: title, metadata, then its content; a source ref in
    ``unresolved`` (one that names nothing the workspace stores) says so."""
    origin = origin_label(entry.get("origin"))
    if origin == HAND_TYPED:
        origin += " (typed into the file; origin unknown)"
    meta = [f"id {entry.get('id', '?')}", f"origin {origin}"]
    if entry.get("status") in ("archived", "draft"):
        meta.append(str(entry["status"]))
    if entry.get("scope", "workspace") != "workspace":
        scope = f"scope {entry['scope']}"
        if entry.get("sessionId"):
            scope += f" ({entry['sessionId']})"
        meta.append(scope)
    lines = [str(entry.get("title", "")), "  " + "  ·  ".join(meta)]
    dates = f"  created {age(entry.get('createdAt'), now)}"
    if entry.get("updatedAt") and entry.get("updatedAt") != entry.get("createdAt"):
        dates += f"  ·  updated {age(entry.get('updatedAt'), now)}"
    lines.append(dates)
    if entry.get("tags"):
        lines.append("  tags " + ", ".join(entry["tags"]))
    if entry.get("decayTtlMs"):
        days = entry["decayTtlMs"] / 86_400_000
        lines.append(f"  decays after {days:g} days")
    if entry.get("sourceRefs"):
        lines.append("  sources " + sources_text(entry["sourceRefs"], unresolved))
    if entry.get("supersedes"):
        lines.append(f"  supersedes {entry['supersedes']}")
    lines.append("")
    lines.extend("  " + line for line in str(entry.get("content", "")).splitlines())
    return lines


def wrap(line: str, width: int) -> list[str]:
    """``line`` as lines of at most ``width`` columns, broken between words (a word wider
    than the room is broken where it must be); every piece keeps the line's indentation.
    Runs of spaces inside a wrapped line become one."""
    if width <= 0 or display_width(line) <= width:
        return [line]
    text = line.lstrip(" ")
    indent = line[: len(line) - len(text)]
    if 2 * display_width(indent) > width:
        indent = ""
    room = max(1, width - display_width(indent))
    rows: list[str] = []
    current = ""
    for word in text.split():
        for piece in _pieces(word, room):
            joined = f"{current} {piece}" if current else piece
            if display_width(joined) <= room:
                current = joined
            else:
                rows.append(current)
                current = piece
    rows.append(current)
    return [indent + row for row in rows]


def _pieces(word: str, room: int) -> list[str]:
    """``word`` cut into parts of at most ``room`` columns (one part when it fits)."""
    if display_width(word) <= room:
        return [word]
    parts, current = [], ""
    for char in word:
        if current and display_width(current + char) > room:
            parts.append(current)
            current = ""
        current += char
    return [*parts, current] if current else parts


def wrap_all(lines: list[str], width: int) -> list[str]:
    return [piece for line in lines for piece in wrap(line, width)]


def side_by_side(left: list[str], right: list[str], width: int, gap: str = " │ ") -> list[str]:
    """Two columns of lines, the left one padded to half the width; long lines wrap
    within their column, between words."""
    half = (width - display_width(gap)) // 2
    left = wrap_all(left, half)
    right = wrap_all(right, width - half - display_width(gap))
    rows = max(len(left), len(right))
    out = []
    for i in range(rows):
        a = left[i] if i < len(left) else ""
        b = right[i] if i < len(right) else ""
        out.append((pad(a, half) + gap + b).rstrip())
    return out

"""An entry's content inside a memory file: written so it never changes how the rest parses.

Whatever an agent, an import or a client hands the daemon, the section it
writes must end "closed": a user's ``## Title`` typed after it is still a
section of its own, and no definition inside it changes the user's text.
This is checked with markdown-it's own block parse (CommonMark), not with a
list of dangerous strings:

- **Section starts** -- a content line that would start a section (an ATX
  ``## `` outside a fenced code block, or any ``## `` line followed by a
  metadata comment) is written with one more leading backslash; a reader
  removes exactly one backslash from the same lines. Lines that already start
  with backslashes before ``##`` get one more too, so the escape is
  reversible: content reads back as it was written.
- **Blocks left open** -- content followed by a probe ``## `` line (directly,
  and after a blank line) is parsed; while the probe is not a top-level
  heading, the block swallowing it is closed by appending its closer line: the
  fence's own marker for fenced code (any length, backticks or tildes),
  ``</pre>``-style tags for ``<pre>``/``<script>``/``<style>``/``<textarea>``,
  ``-->``, ``?>``, ``>`` and ``]]>`` for the other HTML blocks that end on a
  marker. HTML blocks that end only at a blank line (``<div>``, ``<details>``,
  any lone tag) get a blank line after the section instead.
- **Link reference definitions** -- they apply to the whole document, so each
  one in the content is neutralized by a backslash before its ``[``.

Closers and neutralizing backslashes are part of the stored content
(``prepare`` returns it), so what the daemon returns is what reads back. If
the loop does not settle in a few rounds the content is indented four spaces
(a code block), which always ends at the next unindented line.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

COMMENT: Final = re.compile(r"[ \t]*<!--[ \t]*maka-memory:")
# A U+FEFF starting a line is a byte order mark left by two files joined (``cat a.md
# b.md``): not part of the line where sections start, though it stays in the file.
LINE_BOM: Final = "\ufeff"
H2: Final = re.compile(r"\ufeff? {0,3}##(?=[ \t]|\Z)")
LINE: Final = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
EOL: Final = re.compile(r"(?:\r\n|\r|\n)\Z")


@functools.cache
def markdown() -> MarkdownIt:
    """The block parser, built on first use: the daemon does not pay for markdown-it
    until it first checks content that could open a block."""
    from markdown_it import MarkdownIt

    # Only block structure matters here; inline parsing would be wasted work.
    return MarkdownIt("commonmark").disable(["inline", "text_join"])


_ESCAPABLE: Final = re.compile(r"(\ufeff? {0,3})(\\*)(?=##(?:[ \t]|\Z))")
# Without one of these characters no line can open a fence or an HTML block, define a
# link reference or start a section: the common case skips the parser entirely.
_RISKY: Final = re.compile(r"[`~<#\[]")
_PROBE: Final = "## probe"
_MAX_ROUNDS: Final = 8
_LEAF_BLOCKS: Final = frozenset({"paragraph_open", "heading_open", "fence", "code_block", "html_block", "hr"})
_HTML_CLOSERS: Final[tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...]] = (
    (
        re.compile(r"<(script|pre|style|textarea)(?=[ \t>]|\Z)", re.IGNORECASE),
        lambda m: f"</{m.group(1).lower()}>",
    ),
    (re.compile(r"<!--"), lambda m: "-->"),
    (re.compile(r"<\?"), lambda m: "?>"),
    (re.compile(r"<!\[CDATA\["), lambda m: "]]>"),
    (re.compile(r"<![A-Za-z]"), lambda m: ">"),
)


# One ``findall`` over a 16 MiB import of short lines makes millions of strings without
# letting go of the interpreter: seconds in which no other thread ran, the event loop
# included. A longer text is split in pieces of about this many characters, each ending
# at a line break (never inside a CRLF), and other threads run between them.
LINE_PIECE_CHARS: Final = 64 * 1024
_LINE_END: Final = re.compile(r"\r\n?|\n")


# Every line break ``str.splitlines`` knows, CRLF as one.
_ANY_LINE_END: Final = re.compile(r"\r\n?|[\n\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def text_lines(text: str, piece: int = LINE_PIECE_CHARS) -> list[str]:
    """``text.splitlines()`` in pieces of about ``piece`` characters that each end at a
    line break, so that an import's 16 MiB of short lines never hold the interpreter in
    one call (as ``split_lines``)."""
    if len(text) <= piece:
        return text.splitlines()
    lines: list[str] = []
    start, size = 0, len(text)
    while start < size:
        ending = _ANY_LINE_END.search(text, start + piece - 1)
        end = size if ending is None else ending.end()
        lines += text[start:end].splitlines()
        start = end
    return lines


def split_lines(text: str, piece: int = LINE_PIECE_CHARS) -> list[str]:
    """Lines with their endings; the same line breaks as markdown-it (CRLF, CR, LF)."""
    if len(text) <= piece:
        return LINE.findall(text)
    lines: list[str] = []
    start, size = 0, len(text)
    while start < size:
        ending = _LINE_END.search(text, start + piece - 1)
        end = size if ending is None else ending.end()
        lines += LINE.findall(text, start, end)
        start = end
    return lines


def strip_eol(line: str) -> str:
    return EOL.sub("", line)


def is_blank(line: str) -> bool:
    return not line.strip(" \t\r\n")


def join_content(lines: Sequence[str]) -> str:
    """Lines (without endings) as content: blank lines at both ends dropped, joined by LF."""
    start, end = 0, len(lines)
    while start < end and is_blank(lines[start]):
        start += 1
    while end > start and is_blank(lines[end - 1]):
        end -= 1
    return "\n".join(lines[start:end])


def content_lines(content: str) -> list[str]:
    """``content`` as the lines a section holds: line endings and blank ends normalised."""
    joined = join_content([strip_eol(line) for line in split_lines(content)])
    return joined.split("\n") if joined else []


def block_tokens(lines: Sequence[str], env: dict[str, Any] | None = None) -> list[Token] | None:
    """markdown-it's block tokens for ``lines``, reading metadata comments as blank lines.

    Memory files are parsed the same way (a malformed comment must not open an HTML
    block, a line's leading byte order mark is left out), so content is checked exactly
    as the file will be read. None if it fails.
    """
    source = "\n".join("" if COMMENT.match(line) else line.removeprefix(LINE_BOM) for line in lines)
    try:
        return markdown().parse(source, env)
    except Exception:  # fail-open: the caller falls back to its safe choice
        return None


@dataclass(frozen=True, slots=True)
class Prepared:
    """Content as stored, the lines written for it, and whether a blank line must follow."""

    content: str
    lines: tuple[str, ...]
    blank_after: bool = False


@functools.lru_cache(maxsize=16)  # a write prepares the same content to clean it, then to render it
def prepare(content: str) -> Prepared:
    """Close or neutralize what ``content`` leaves open; idempotent (see the module doc)."""
    lines = content_lines(content)
    if not _RISKY.search(content):
        return Prepared("\n".join(lines), tuple(lines))
    for _ in range(_MAX_ROUNDS):
        escaped = _escape_and_parse(lines)
        if escaped is None:
            break
        written, parsed = escaped
        definitions = _definition_lines(written, parsed.tokens, parsed.env)
        if definitions:
            lines = [
                _neutralize_definition(line) if i in definitions else line for i, line in enumerate(lines)
            ]
            continue
        state, closer = _closure(written, parsed.tokens)
        if state != "open":
            return Prepared("\n".join(lines), tuple(written), blank_after=state == "blank")
        if closer is None:
            break
        lines = [*lines, closer]
    indented = ["    " + line if line.strip() else line for line in lines]
    return Prepared("\n".join(indented), tuple(indented))


@dataclass(frozen=True, slots=True)
class _Parsed:
    tokens: list[Token]
    env: dict[str, Any]


def _parse(lines: Sequence[str]) -> _Parsed | None:
    env: dict[str, Any] = {}
    tokens = block_tokens(lines, env)
    return None if tokens is None else _Parsed(tokens, env)


# --- section starts ----------------------------------------------------------------


def escape(lines: Sequence[str]) -> list[str] | None:
    """``lines`` with every section-starting line escaped; None if no stable form is found."""
    if not any(_ESCAPABLE.match(line) for line in lines):
        return list(lines)
    escaped = _escape_and_parse(lines)
    return None if escaped is None else escaped[0]


def _escape_and_parse(lines: Sequence[str]) -> tuple[list[str], _Parsed] | None:
    """The escaped lines and their parse (each round re-parses what it would write)."""
    # First guess: every candidate line. Only lines inside fences come back out, so
    # content without a fenced `## ` line settles with a single parse.
    chosen = {i for i, line in enumerate(lines) if _ESCAPABLE.match(line)}
    for _ in range(_MAX_ROUNDS):
        written = [_add_backslash(line) if i in chosen else line for i, line in enumerate(lines)]
        parsed = _parse(written)
        if parsed is None:
            return None
        wanted = _escaped_lines(written, with_backslash=False, tokens=parsed.tokens)
        if wanted == chosen:
            return written, parsed
        chosen = wanted
    return None


def unescape(lines: Sequence[str]) -> list[str]:
    """The inverse of ``escape``: one backslash removed from each escaped line."""
    if not any(_has_escape(line) for line in lines):
        return list(lines)
    tokens = block_tokens(lines) if _may_fence(lines) else []
    escaped = _escaped_lines(lines, with_backslash=True, tokens=tokens or [])
    return [_drop_backslash(line) if i in escaped else line for i, line in enumerate(lines)]


def _may_fence(lines: Sequence[str]) -> bool:
    return any("```" in line or "~~~" in line for line in lines)


def _escaped_lines(lines: Sequence[str], *, with_backslash: bool, tokens: list[Token]) -> set[int]:
    """Lines ``escape`` escapes (or, with_backslash, the ones it has escaped)."""
    fenced: set[int] = set()
    for token in tokens:
        if token.type == "fence" and token.map is not None:
            fenced.update(range(token.map[0] + 1, token.map[1]))
    out: set[int] = set()
    for i, line in enumerate(lines):
        if not (_has_escape(line) if with_backslash else _ESCAPABLE.match(line)):
            continue
        if i not in fenced or _comment_follows(lines, i):
            out.add(i)
    return out


def _has_escape(line: str) -> bool:
    match = _ESCAPABLE.match(line)
    return match is not None and bool(match.group(2))


def _add_backslash(line: str) -> str:
    match = _ESCAPABLE.match(line)
    assert match is not None
    return line[: match.end(1)] + "\\" + line[match.end(1) :]


def _drop_backslash(line: str) -> str:
    match = _ESCAPABLE.match(line)
    assert match is not None
    return line[: match.end(1)] + line[match.end(1) + 1 :]


def _comment_follows(lines: Sequence[str], index: int) -> bool:
    """True when the next non-blank line is a metadata comment (an anchored heading)."""
    for line in lines[index + 1 :]:
        if not is_blank(line):
            return COMMENT.match(line) is not None
    return False


# --- blocks left open ------------------------------------------------------------------


def _closure(written: list[str], tokens: list[Token]) -> tuple[str, str | None]:
    """("closed" | "blank" | "open", the closer line for an open block if one exists).

    Only the last top-level block can be open at the end: the probes re-parse from
    where it starts (nothing before it is open there), not the whole content.
    """
    start = max((t.map[0] for t in tokens if t.level == 0 and t.map is not None), default=0)
    tail = written[start:]
    tight = block_tokens([*tail, _PROBE])
    loose = block_tokens([*tail, "", _PROBE])
    if tight is None or loose is None:
        return "open", None
    tight_ok = _is_heading(tight, len(tail))
    loose_ok = _is_heading(loose, len(tail) + 1)
    if tight_ok and loose_ok:
        return "closed", None
    swallower = _swallower(tight, len(tail)) if not tight_ok else _swallower(loose, len(tail) + 1)
    closer = _closer(swallower)
    if closer is None and loose_ok:
        return "blank", None
    return "open", closer


def _is_heading(tokens: list[Token], line: int) -> bool:
    return any(
        t.type == "heading_open"
        and t.level == 0
        and t.markup == "##"
        and t.map is not None
        and t.map[0] == line
        for t in tokens
    )


def _swallower(tokens: list[Token], line: int) -> Token | None:
    found = None
    for token in tokens:
        if (
            token.type in ("fence", "html_block")
            and token.map is not None
            and token.map[0] <= line < token.map[1]
        ):
            found = token
    return found


def _closer(token: Token | None) -> str | None:
    if token is None:
        return None
    if token.type == "fence":
        return token.markup
    first = token.content.split("\n", 1)[0].lstrip(" ")
    for pattern, closer in _HTML_CLOSERS:
        match = pattern.match(first)
        if match:
            return closer(match)
    return None  # an HTML block that only a blank line ends


# --- link reference definitions ------------------------------------------------------------


def _definition_lines(lines: Sequence[str], tokens: list[Token], env: dict[str, Any]) -> set[int]:
    """First lines of link reference definitions (lines no leaf block covers, holding a ``[``)."""
    covered: set[int] = set()
    for token in tokens:
        if token.type in _LEAF_BLOCKS and token.map is not None:
            covered.update(range(*token.map))
    starts: set[int] = set()
    run_has_start = False  # one escape per run: the lines after it become its paragraph
    for i, line in enumerate(lines):
        if i in covered or is_blank(line) or COMMENT.match(line):  # comments parse as blank
            run_has_start = False
        elif not run_has_start and "[" in line:
            starts.add(i)
            run_has_start = True
    for definition in env.get("references", {}).values():
        where = definition.get("map") if isinstance(definition, dict) else None
        if where and "[" in lines[where[0]]:
            starts.add(where[0])
    return starts


def _neutralize_definition(line: str) -> str:
    at = line.index("[")
    return line[:at] + "\\" + line[at:]

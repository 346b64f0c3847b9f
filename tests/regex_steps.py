"""A step-counting model of Python's backtracking regex engine, for linearity tests.

``re`` keeps no count of its work, and a wall-clock bound in a unit test fails on a busy
machine. This module re-runs a compiled pattern's parse tree (``re._parser``) with the
same backtracking order as ``re`` (greedy and lazy repeats, alternation left to right,
atomic groups and possessive repeats without backtracking into them, lookarounds,
backreferences) and counts every node it tries. The count is deterministic, and it
grows the way ``re``'s work grows: a pattern that is quadratic on some input is
quadratic here (``re``'s literal-prefix and one-character-repeat shortcuts change the
constant, not the power). ``steps`` raises ``TooManySteps`` past a budget instead of
running for minutes.
"""

from __future__ import annotations

import gc
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as P  # type: ignore[attr-defined]
from typing import Any

Cont = Callable[[int], bool]
# The flags as plain ints: ``re.RegexFlag`` arithmetic goes through ``enum`` on every step.
_IGNORECASE, _ASCII = int(re.IGNORECASE), int(re.ASCII)
_MULTILINE, _DOTALL = int(re.MULTILINE), int(re.DOTALL)


class TooManySteps(Exception):
    """The model tried more nodes than its budget allows."""


@dataclass
class _Run:
    text: str
    flags: int
    budget: int
    steps: int = 0
    groups: dict[int, tuple[int, int]] = field(default_factory=dict)
    # What a class said of a character, and a lookbehind's width, by the tree node (alive
    # for the run): the same answers, worked out once.
    classes: dict[tuple[int, str, int], bool] = field(default_factory=dict)
    widths: dict[int, int] = field(default_factory=dict)


def _category(code: Any, char: str, ascii_only: bool) -> bool:
    name = str(code)
    word = char.isalnum() or char == "_"
    digit = char.isdigit() if not ascii_only else char in "0123456789"
    space = char.isspace() if not ascii_only else char in " \t\n\r\f\v"
    if ascii_only:
        word = char.isascii() and word
    table = {
        "CATEGORY_DIGIT": digit,
        "CATEGORY_NOT_DIGIT": not digit,
        "CATEGORY_SPACE": space,
        "CATEGORY_NOT_SPACE": not space,
        "CATEGORY_WORD": word,
        "CATEGORY_NOT_WORD": not word,
        "CATEGORY_LINEBREAK": char == "\n",
        "CATEGORY_NOT_LINEBREAK": char != "\n",
    }
    return table[name]


def _fold(char: str, flags: int) -> str:
    return char.lower() if flags & _IGNORECASE else char


def _in_class_cached(run: _Run, items: list[Any], char: str) -> bool:
    key = (id(items), char, run.flags & (_IGNORECASE | _ASCII))
    found = run.classes.get(key)
    if found is None:
        found = run.classes[key] = _in_class(items, char, run.flags)
    return found


def _in_class(items: list[Any], char: str, flags: int) -> bool:
    negate = False
    found = False
    options = {char, char.lower(), char.upper()} if flags & _IGNORECASE else {char}
    for op, arg in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            found = found or chr(arg) in options
        elif name == "RANGE":
            found = found or any(arg[0] <= ord(c) <= arg[1] for c in options)
        elif name == "CATEGORY":
            found = found or _category(arg, char, bool(flags & _ASCII))
        else:  # pragma: no cover - a construct this model does not know
            raise NotImplementedError(name)
    return found != negate


def _is_word(text: str, pos: int) -> bool:
    return 0 <= pos < len(text) and (text[pos].isalnum() or text[pos] == "_")


def _at(code: Any, run: _Run, pos: int) -> bool:
    text, n = run.text, len(run.text)
    name = code.name
    multiline = bool(run.flags & _MULTILINE)
    if name == "AT_BEGINNING":
        return pos == 0 or (multiline and text[pos - 1] == "\n")
    if name == "AT_BEGINNING_STRING":
        return pos == 0
    if name == "AT_END":
        if multiline:
            return pos == n or text[pos] == "\n"
        return pos == n or (pos == n - 1 and text[pos] == "\n")
    if name == "AT_END_STRING":
        return pos == n
    if name == "AT_BOUNDARY":
        return _is_word(text, pos - 1) != _is_word(text, pos)
    if name == "AT_NON_BOUNDARY":
        return _is_word(text, pos - 1) == _is_word(text, pos)
    raise NotImplementedError(name)  # pragma: no cover


def _width(seq: list[Any]) -> int:
    low, high = P.SubPattern(P.State(), seq).getwidth()
    assert low == high, "a lookbehind has a fixed width"
    return int(low)


def _match(run: _Run, seq: list[Any], i: int, pos: int, k: Cont) -> bool:
    run.steps += 1
    if run.steps > run.budget:
        raise TooManySteps
    if i == len(seq):
        return k(pos)
    op, arg = seq[i]
    name = op.name  # str(op) would call its Python __repr__ on every step
    text, n, flags = run.text, len(run.text), run.flags

    def rest(p: int) -> bool:
        return _match(run, seq, i + 1, p, k)

    if name == "LITERAL":
        return pos < n and _fold(text[pos], flags) == _fold(chr(arg), flags) and rest(pos + 1)
    if name == "NOT_LITERAL":
        return pos < n and _fold(text[pos], flags) != _fold(chr(arg), flags) and rest(pos + 1)
    if name == "ANY":
        return pos < n and (bool(flags & _DOTALL) or text[pos] != "\n") and rest(pos + 1)
    if name == "IN":
        return pos < n and _in_class_cached(run, arg, text[pos]) and rest(pos + 1)
    if name == "AT":
        return _at(arg, run, pos) and rest(pos)
    if name == "BRANCH":
        # A loop, not any(): the recursion must stay in Python frames (no C stack).
        for alternative in arg[1]:  # noqa: SIM110
            if _match(run, list(alternative), 0, pos, rest):
                return True
        return False
    if name == "SUBPATTERN":
        group, add_flags, del_flags, sub = arg
        saved_flags = run.flags
        run.flags = (run.flags | add_flags) & ~del_flags

        def close(p: int) -> bool:
            run.flags = saved_flags
            before = run.groups.get(group) if group is not None else None
            if group is not None:
                run.groups[group] = (pos, p)
            if rest(p):
                return True
            if group is not None:
                if before is None:
                    run.groups.pop(group, None)
                else:
                    run.groups[group] = before
            run.flags = (saved_flags | add_flags) & ~del_flags
            return False

        try:
            return _match(run, list(sub), 0, pos, close)
        finally:
            run.flags = saved_flags
    if name in ("MAX_REPEAT", "MIN_REPEAT"):
        low, high, item = arg
        item = list(item)
        greedy = name == "MAX_REPEAT"

        def repeat(count: int, p: int) -> bool:
            def again(q: int) -> bool:
                if q == p and count >= low:
                    return False  # an empty iteration ends the loop
                return repeat(count + 1, q)

            if greedy:
                if count < high and _match(run, item, 0, p, again):
                    return True
                return count >= low and rest(p)
            if count >= low and rest(p):
                return True
            return count < high and _match(run, item, 0, p, again)

        return repeat(0, pos)
    if name == "POSSESSIVE_REPEAT":
        low, high, item = arg
        item = list(item)
        p, count = pos, 0
        while count < high:
            end = _first_end(run, item, p)
            if end is None or end == p:
                break
            p, count = end, count + 1
        return count >= low and rest(p)
    if name == "ATOMIC_GROUP":
        end = _first_end(run, list(arg), pos)
        return end is not None and rest(end)
    if name in ("ASSERT", "ASSERT_NOT"):
        direction, sub = arg
        sub = list(sub)
        if direction == 1:
            found = _match(run, sub, 0, pos, lambda q: True)
        else:
            width = run.widths.get(id(arg[1]), -1)
            if width < 0:
                width = run.widths[id(arg[1])] = _width(sub)
            found = pos - width >= 0 and _match(run, sub, 0, pos - width, lambda q: q == pos)
        return found == (name == "ASSERT") and rest(pos)
    if name == "GROUPREF":
        span = run.groups.get(arg)
        if span is None:
            return False
        piece = text[span[0] : span[1]]
        return text.startswith(piece, pos) and rest(pos + len(piece))
    if name == "GROUPREF_EXISTS":
        group, yes, no = arg
        branch = yes if group in run.groups else no
        return _match(run, list(branch or []), 0, pos, rest)
    raise NotImplementedError(name)  # pragma: no cover


def _first_end(run: _Run, seq: list[Any], pos: int) -> int | None:
    """Where the first match of ``seq`` at ``pos`` ends (no backtracking into it after)."""
    ends: list[int] = []
    found = _match(run, seq, 0, pos, lambda q: ends.append(q) or True)
    return ends[0] if found else None


def _tree(pattern: re.Pattern[str]) -> list[Any]:
    return list(P.parse(pattern.pattern, pattern.flags & ~re.UNICODE))


def steps(pattern: re.Pattern[str], text: str, method: str = "finditer", budget: int = 5_000_000) -> int:
    """How many nodes the model tries for ``pattern.<method>(text)``: ``match`` and
    ``fullmatch`` try the start only, ``search`` every start up to the first match, and
    ``finditer`` (also ``findall``, ``sub``, ``split``) every match in turn."""
    tree = _tree(pattern)
    run = _Run(text, int(pattern.flags), budget)
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 50 * len(text) + 10_000))
    # A run holds one closure per character on its stack: the cyclic collector would walk
    # them all again and again, half the run's time. What it leaves is freed afterwards.
    collecting = gc.isenabled()
    gc.disable()
    try:
        if method in ("match", "fullmatch"):
            end = len(text) if method == "fullmatch" else None
            run.groups = {}
            _match(run, tree, 0, 0, lambda q: end is None or q == end)
            return run.steps
        pos = 0
        while pos <= len(text):
            found, end = -1, None
            for start in range(pos, len(text) + 1):
                run.groups = {}
                end = _first_end(run, tree, start)
                if end is not None:
                    found = start
                    break
            if end is None or method == "search":
                break
            pos = end if end > found else found + 1
        return run.steps
    finally:
        sys.setrecursionlimit(old_limit)
        if collecting:
            gc.enable()


def alphabet(pattern: re.Pattern[str]) -> list[str]:
    """The characters a pattern names (its literals and a few members of each class, and
    of each class's complement): what pathological inputs for it are made of."""
    chars: set[str] = set()

    def walk(seq: Any) -> None:
        for op, arg in seq:
            name = str(op)
            if name in ("LITERAL", "NOT_LITERAL"):
                chars.add(chr(arg))
            elif name == "IN":
                for item_op, item in arg:
                    item_name = str(item_op)
                    if item_name == "LITERAL":
                        chars.add(chr(item))
                    elif item_name == "RANGE":
                        chars.update({chr(item[0]), chr(item[1]), chr((item[0] + item[1]) // 2)})
                    elif item_name == "CATEGORY":
                        chars.update(_CATEGORY_SAMPLES.get(str(item), ""))
            elif name == "CATEGORY":
                chars.update(_CATEGORY_SAMPLES.get(str(arg), ""))
            for inner in _inner_sequences(name, arg):
                walk(inner)

    walk(_tree(pattern))
    return sorted(chars | set(" \n\t.-_a0A"))


def _inner_sequences(name: str, arg: Any) -> list[Any]:
    """The sequences of nodes inside a node of a parse tree (none for a leaf)."""
    if name == "BRANCH":
        return list(arg[1])
    if name == "SUBPATTERN":
        return [arg[3]]
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        return [arg[2]]
    if name == "ATOMIC_GROUP":
        return [arg]
    if name in ("ASSERT", "ASSERT_NOT"):
        return [arg[1]]
    if name == "GROUPREF_EXISTS":
        return [arg[1] or [], arg[2] or []]
    return []


def literals(pattern: re.Pattern[str]) -> list[str]:
    """The runs of two or more literal characters a pattern names (its prefixes, its
    fixed middles): repeated, they are the inputs that make a search restart."""
    found: set[str] = set()

    def walk(seq: Any) -> None:
        run = ""
        for op, arg in seq:
            name = str(op)
            if name == "LITERAL":
                run += chr(arg)
                continue
            if len(run) > 1:
                found.add(run)
            run = ""
            for inner in _inner_sequences(name, arg):
                walk(inner)
        if len(run) > 1:
            found.add(run)

    walk(_tree(pattern))
    return sorted(found)


def largest_bound(pattern: re.Pattern[str]) -> int:
    """The largest finite upper bound of a repeat in the pattern (``{20,255}``: 255), 0
    when there is none: below that length a bounded repeat still grows with the input."""
    largest = 0

    def walk(seq: Any) -> None:
        nonlocal largest
        for op, arg in seq:
            name = str(op)
            if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                if arg[1] != P.MAXREPEAT:
                    largest = max(largest, int(arg[1]))
                walk(arg[2])
            elif name == "BRANCH":
                for alternative in arg[1]:
                    walk(alternative)
            elif name == "SUBPATTERN":
                walk(arg[3])
            elif name == "ATOMIC_GROUP":
                walk(arg)
            elif name in ("ASSERT", "ASSERT_NOT"):
                walk(arg[1])

    walk(_tree(pattern))
    return largest


_CATEGORY_SAMPLES = {
    "CATEGORY_DIGIT": "07",
    "CATEGORY_NOT_DIGIT": "x ",
    "CATEGORY_SPACE": " \t\n",
    "CATEGORY_NOT_SPACE": "xZ9",
    "CATEGORY_WORD": "aZ9_é",
    "CATEGORY_NOT_WORD": " -.",
}

__all__ = ["TooManySteps", "alphabet", "largest_bound", "literals", "steps"]
_ = C  # the opcodes are compared by name; imported so a renamed module fails loudly

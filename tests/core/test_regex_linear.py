"""Every regular expression makad runs on user or agent text does work linear in its
input: the count of steps of a backtracking model of ``re`` (``tests.regex_steps``),
on pathological strings made of the pattern's own characters, grows fourfold, not
sixteen-fold, when the input does. Which regexes exist is checked too: a new one fails
until it is listed here, with the way it is called."""

from __future__ import annotations

import importlib
import math
import pkgutil
import re
from collections.abc import Iterator
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import makad
from makad.core import (
    attention,
    base64_texts,
    behaviors,
    bounded_json,
    bridge,
    canonical,
    cjk,
    compaction,
    conflicts,
    entries,
    entry_comment,
    entry_text,
    episodes,
    feedback,
    file_warnings,
    keyword_values,
    memory_format,
    misspelt_comment,
    normal_form,
    outside_text,
    ownership,
    ranking,
    recall,
    redaction,
    refs,
    render,
    secret_detectors,
    secret_views,
    session_notes,
    suggestions,
    typed_dates,
    undecodable,
    when,
)
from makad.core.importers import chatgpt, claude, markdown, records, sniffing, timestamps
from makad.rpc import allowed, dispatch
from makad.store import ephemeral, identity, memory_files
from tests.regex_steps import TooManySteps, alphabet, largest_bound, literals, steps

MATCH = "match"  # called at one position (match, fullmatch)
SEARCH = "finditer"  # searched through the text (search, finditer, findall, sub)


class Site(NamedTuple):
    label: str
    pattern: re.Pattern[str]
    method: str


def _sites() -> list[Site]:
    lib = secret_detectors.library()
    listed = [
        # Imports
        Site("records._NON_BLANK", records._NON_BLANK, SEARCH),
        Site("records._LINK", records._LINK, SEARCH),
        Site("records._MARKUP", records._MARKUP, SEARCH),
        Site("records._EMPHASIS", records._EMPHASIS, SEARCH),
        Site("records._TAG_JUNK", records._TAG_JUNK, SEARCH),
        Site("records._DASHES", records._DASHES, SEARCH),
        Site("records._CLAUSE_END", records._CLAUSE_END, SEARCH),
        Site("markdown.BULLET", markdown.BULLET, MATCH),
        Site("markdown._CHECKBOX", markdown._CHECKBOX, SEARCH),
        Site("markdown._FENCE", markdown._FENCE, MATCH),
        Site("chatgpt.LINE", chatgpt.LINE, MATCH),
        Site("chatgpt._LIST_MARK", chatgpt._LIST_MARK, SEARCH),
        Site("claude.INDEX_LINK", claude.INDEX_LINK, MATCH),
        Site("sniffing._ENTRY_HEADING", sniffing._ENTRY_HEADING, MATCH),
        Site("sniffing._CONTROL", sniffing._CONTROL, SEARCH),
        Site("sniffing._JSON_OPENING", sniffing._JSON_OPENING, MATCH),
        Site("timestamps._NUMBER", timestamps._NUMBER, MATCH),
        Site("bounded_json._BLANK", bounded_json._BLANK, MATCH),
        # Redaction
        Site("base64_texts.BASE64_RUN", base64_texts.BASE64_RUN, SEARCH),
        Site("base64_texts._STANDARD_PIECE", base64_texts._STANDARD_PIECE, SEARCH),
        Site("base64_texts._URLSAFE_PIECE", base64_texts._URLSAFE_PIECE, SEARCH),
        Site("base64_texts._TEXT", base64_texts._TEXT, SEARCH),
        Site("base64_texts._NOT_TEXT", base64_texts._NOT_TEXT, SEARCH),
        Site("base64_texts._ASCII_LEADS", base64_texts._ASCII_LEADS, SEARCH),
        Site("base64_texts._ASCII_GROUPS", base64_texts._ASCII_GROUPS, SEARCH),
        Site("keyword_values._STOPS", keyword_values._STOPS, SEARCH),
        Site("keyword_values._UNQUOTED_END", keyword_values._UNQUOTED_END, SEARCH),
        Site("keyword_values._BLANK", keyword_values._BLANK, SEARCH),
        Site("keyword_values._WORD_RUN", keyword_values._WORD_RUN, MATCH),
        Site("keyword_values._BLANK_RUN", keyword_values._BLANK_RUN, MATCH),
        Site("keyword_values._NON_BLANK_RUN", keyword_values._NON_BLANK_RUN, MATCH),
        Site("keyword_values._QUOTE", keyword_values._QUOTE, SEARCH),
        Site("keyword_values._CALL_OR_LOOKUP", keyword_values._CALL_OR_LOOKUP, SEARCH),
        Site("keyword_values._CLOSERS", keyword_values._CLOSERS, SEARCH),
        Site("keyword_values._OPERATOR_AHEAD", keyword_values._OPERATOR_AHEAD, MATCH),
        Site("keyword_values._SIMPLE_LINE", keyword_values._SIMPLE_LINE, MATCH),
        Site("secret_views._IGNORABLE", secret_views._IGNORABLE, SEARCH),
        Site("secret_views._SUSPECT", secret_views._SUSPECT, SEARCH),
        Site("secret_views._ESCAPE", secret_views._ESCAPE, SEARCH),
        Site("secret_views._PLUS", secret_views._PLUS, SEARCH),
        Site("secret_detectors._SYMBOL", secret_detectors._SYMBOL, SEARCH),
        Site("secret_detectors._ASCII_DIGIT", secret_detectors._ASCII_DIGIT, SEARCH),
        Site("secret_detectors._ASCII_LETTER", secret_detectors._ASCII_LETTER, SEARCH),
        Site("secret_detectors._PASSWORD_KEY", secret_detectors._PASSWORD_KEY, SEARCH),
        Site("secret_detectors._REFERENCE", secret_detectors._REFERENCE, MATCH),
        Site("secret_detectors._SEGMENT_END", secret_detectors._SEGMENT_END, SEARCH),
        Site("secret_detectors._SEPARATORS", secret_detectors._SEPARATORS, SEARCH),
        Site("secret_detectors._SEPARATOR", secret_detectors._SEPARATOR, SEARCH),
        Site("secret_detectors._SPLIT_START", secret_detectors._SPLIT_START, SEARCH),
        Site("library.keyword", lib.keyword, SEARCH),
        Site("library.keyword_any_case", lib.keyword_any_case, SEARCH),
        Site("redaction._KEY_TAIL", redaction._KEY_TAIL, MATCH),
        Site("redaction._MARKER", redaction._MARKER, SEARCH),
        # Memory files, entries, history, context
        Site("entries._CONTROLS", entries._CONTROLS, SEARCH),
        Site("entry_text.COMMENT", entry_text.COMMENT, MATCH),
        Site("entry_text.H2", entry_text.H2, MATCH),
        Site("entry_text.LINE", entry_text.LINE, SEARCH),
        Site("entry_text.EOL", entry_text.EOL, SEARCH),
        Site("entry_text._LINE_END", entry_text._LINE_END, SEARCH),
        Site("entry_text._ANY_LINE_END", entry_text._ANY_LINE_END, SEARCH),
        Site("entry_text._ESCAPABLE", entry_text._ESCAPABLE, MATCH),
        Site("entry_text._RISKY", entry_text._RISKY, SEARCH),
        *(
            Site(f"entry_text._HTML_CLOSERS[{i}]", opener, SEARCH)
            for i, (opener, _) in enumerate(entry_text._HTML_CLOSERS)
        ),
        Site("memory_format._BLANK_END", memory_format._BLANK_END, SEARCH),
        Site("memory_format._LINE_BREAKS", memory_format._LINE_BREAKS, SEARCH),
        Site("memory_format._LINE_BREAK", memory_format._LINE_BREAK, SEARCH),
        Site("memory_format._ANY_ATX", memory_format._ANY_ATX, MATCH),
        Site("bridge._WORD", bridge._WORD, SEARCH),
        Site("file_warnings._SLIPPED_HEADING", file_warnings._SLIPPED_HEADING, MATCH),
        Site("file_warnings._UNSPACED_HEADING", file_warnings._UNSPACED_HEADING, SEARCH),
        Site("file_warnings._FENCE", file_warnings._FENCE, MATCH),
        Site("misspelt_comment._OPENING", misspelt_comment._OPENING, MATCH),
        Site("misspelt_comment._SEPARATORS", misspelt_comment._SEPARATORS, SEARCH),
        Site("canonical._HEADING_ESCAPE", canonical._HEADING_ESCAPE, SEARCH),
        Site("canonical._LINE_BREAK", canonical._LINE_BREAK, SEARCH),
        Site("canonical._WORD", canonical._WORD, SEARCH),
        Site("canonical._CONTRACTED_NOT", canonical._CONTRACTED_NOT, SEARCH),
        Site("canonical._POSSESSIVE", canonical._POSSESSIVE, SEARCH),
        Site("outside_text._TITLE_LINE", outside_text._TITLE_LINE, MATCH),
        Site("entry_comment._DIGITS", entry_comment._DIGITS, MATCH),
        Site("entry_comment._UNSAFE_VALUE", entry_comment._UNSAFE_VALUE, SEARCH),
        Site("undecodable._SURROGATE", undecodable._SURROGATE, SEARCH),
        Site("undecodable._LINE", undecodable._LINE, SEARCH),
        Site("cjk._CJK_RUN", cjk._CJK_RUN, SEARCH),
        Site("cjk._QUERY_TOKEN", cjk._QUERY_TOKEN, SEARCH),
        Site("normal_form._LONG_NON_ASCII", normal_form._LONG_NON_ASCII, SEARCH),
        Site("normal_form._ASCII", normal_form._ASCII, SEARCH),
        Site("normal_form._ASTRAL", normal_form._ASTRAL, SEARCH),
        *(
            Site(
                f"normal_form._classes({astral}).{name}", getattr(normal_form._classes(astral), name), SEARCH
            )
            for astral in (False, True)
            for name in ("long_marks", "cut")
        ),
        Site("compaction._FENCE", compaction._FENCE, MATCH),
        Site("compaction._ANCHORED_PATH", compaction._ANCHORED_PATH, MATCH),
        Site("compaction._RELATIVE_PATH", compaction._RELATIVE_PATH, MATCH),
        Site("compaction._BARE_FILE", compaction._BARE_FILE, MATCH),
        Site("episodes._NOT_SLUG", episodes._NOT_SLUG, SEARCH),
        Site("episodes._HASHTAG", episodes._HASHTAG, SEARCH),
        Site("episodes._WORD", episodes._WORD, SEARCH),
        Site("episodes._SCRIPT_RUN", episodes._SCRIPT_RUN, SEARCH),
        Site("feedback._WORD", feedback._WORD, SEARCH),
        Site("ranking._WORD", ranking._WORD, SEARCH),
        Site("recall._CAPITALIZED", recall._CAPITALIZED, SEARCH),
        Site("render._WHITESPACE", render._WHITESPACE, SEARCH),
        Site("render.SPEAKER_LABEL", render.SPEAKER_LABEL, MATCH),
        *(
            Site(f"render._FENCE_CLOSERS[{tag}]", closer, SEARCH)
            for tag, closer in render._FENCE_CLOSERS.items()
        ),
        Site("session_notes._ERROR_TEXT", session_notes._ERROR_TEXT, MATCH),
        Site("session_notes._VERDICT_LINE", session_notes._VERDICT_LINE, SEARCH),
        Site("session_notes._LINE_BREAK", session_notes._LINE_BREAK, SEARCH),
        Site("behaviors.DONE_SAID", behaviors.DONE_SAID, MATCH),
        Site("behaviors.DROPPED_SAID", behaviors.DROPPED_SAID, MATCH),
        Site("behaviors.ACK_SAID", behaviors.ACK_SAID, MATCH),
        Site("behaviors.GOOD_ACK", behaviors.GOOD_ACK, SEARCH),
        Site("behaviors.ASKS_MORE", behaviors.ASKS_MORE, SEARCH),
        Site("behaviors.PRAISE_OPENS", behaviors.PRAISE_OPENS, MATCH),
        Site("behaviors.PRAISE_THEN", behaviors.PRAISE_THEN, MATCH),
        Site("behaviors.BUT_SAID", behaviors.BUT_SAID, SEARCH),
        Site("behaviors.OPENER_SAID", behaviors.OPENER_SAID, MATCH),
        Site("behaviors.DROPPED_ANYWHERE", behaviors.DROPPED_ANYWHERE, SEARCH),
        Site("behaviors.LET_GO_CLAUSE", behaviors.LET_GO_CLAUSE, SEARCH),
        Site("behaviors.NOT_NEEDED_CLAUSE", behaviors.NOT_NEEDED_CLAUSE, SEARCH),
        Site("behaviors.LET_GO_CJK", behaviors.LET_GO_CJK, SEARCH),
        Site("behaviors.DEFERS_SAID", behaviors.DEFERS_SAID, SEARCH),
        Site("behaviors.SIGNS_OFF", behaviors.SIGNS_OFF, SEARCH),
        Site("behaviors.REMAINS_SAID", behaviors.REMAINS_SAID, SEARCH),
        Site("suggestions._SAYS_RESUME", suggestions._SAYS_RESUME, MATCH),
        Site("behaviors.REPORTS_DONE", behaviors.REPORTS_DONE, SEARCH),
        Site("behaviors.NOT_DONE", behaviors.NOT_DONE, SEARCH),
        Site("suggestions.ID_PATTERN", suggestions.ID_PATTERN, MATCH),
        Site("suggestions._LINE", suggestions._LINE, MATCH),
        Site("suggestions._WH", suggestions._WH, MATCH),
        Site("suggestions._POLITE", suggestions._POLITE, MATCH),
        Site("attention._WORD", attention._WORD, SEARCH),
        Site("behaviors._NAMING_WORD", behaviors._NAMING_WORD, SEARCH),
        Site("session_notes.RESTATEMENT", session_notes.RESTATEMENT, MATCH),
        # Facts that changed, and one owner per fact
        Site("conflicts._SENTENCES", conflicts._SENTENCES, SEARCH),
        Site("conflicts._CHANGE_NAMED", conflicts._CHANGE_NAMED, SEARCH),
        Site("conflicts._CHANGED_PASSIVE", conflicts._CHANGED_PASSIVE, SEARCH),
        Site("conflicts._CHANGE_BARE", conflicts._CHANGE_BARE, SEARCH),
        Site("conflicts._IS_NOW", conflicts._IS_NOW, SEARCH),
        Site("conflicts._NO_LONGER_VERB", conflicts._NO_LONGER_VERB, SEARCH),
        Site("conflicts._NO_LONGER_IS", conflicts._NO_LONGER_IS, SEARCH),
        Site("conflicts._VERB_STATEMENT", conflicts._VERB_STATEMENT, SEARCH),
        Site("conflicts._EVENT_STATEMENT", conflicts._EVENT_STATEMENT, SEARCH),
        Site("conflicts._HAS_COUNT", conflicts._HAS_COUNT, SEARCH),
        Site("conflicts._WORDS", conflicts._WORDS, SEARCH),
        Site("conflicts._COPULA", conflicts._COPULA, SEARCH),
        Site("conflicts._VALUE_LEAD", conflicts._VALUE_LEAD, MATCH),
        Site("conflicts._CODE", conflicts._CODE, MATCH),
        Site("conflicts._NUMBER", conflicts._NUMBER, MATCH),
        Site("conflicts._NOT_NUMERIC", conflicts._NOT_NUMERIC, SEARCH),
        Site("conflicts._TIME", conflicts._TIME, SEARCH),
        Site("conflicts._DATE_NUMBER", conflicts._DATE_NUMBER, MATCH),
        Site("conflicts._CAPITALIZED", conflicts._CAPITALIZED, MATCH),
        Site("conflicts._WORD", conflicts._WORD, SEARCH),
        Site("conflicts._SPEAKER", conflicts._SPEAKER, MATCH),
        Site("ownership._MARKER", ownership._MARKER, MATCH),
        Site("ownership._WHITESPACE", ownership._WHITESPACE, SEARCH),
        Site("ownership._HEADING", ownership._HEADING, MATCH),
        *(Site(f"when._ABSOLUTE[{i}]", absolute, SEARCH) for i, absolute in enumerate(when._ABSOLUTE)),
        Site("when._RELATIVE", when._RELATIVE, SEARCH),
        Site("refs.SESSION_ID", refs.SESSION_ID, MATCH),
        Site("refs.EVENT_REF", refs.EVENT_REF, MATCH),
        Site("typed_dates._SLASHED", typed_dates._SLASHED, MATCH),
        # Wire, service and store
        Site("dispatch._PATH", dispatch._PATH, SEARCH),
        Site("allowed._STEP", allowed._STEP, SEARCH),
        Site("ephemeral._WORD", ephemeral._WORD, SEARCH),
        Site("identity._ID", identity._ID, MATCH),
        Site("memory_files._BACKUP_NAME", memory_files._BACKUP_NAME, MATCH),
        Site("memory_files._TEMP_NAME", memory_files._TEMP_NAME, MATCH),
    ]
    for index, rule in enumerate(lib.rules):
        listed.append(Site(f"rule[{index}] {rule.kind}", rule.regex, SEARCH))
        if rule.left is not None:
            listed.append(Site(f"rule[{index}] {rule.kind} left", rule.left, MATCH))
    return listed


SITES = _sites()


def _patterns_in(value: object, depth: int = 0) -> Iterator[re.Pattern[str]]:
    if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
        yield value
    elif isinstance(value, secret_detectors._Rule):
        yield value.regex
        if value.left is not None:
            yield value.left
    elif depth < 2 and isinstance(value, list | tuple):
        for item in value:
            yield from _patterns_in(item, depth + 1)
    elif depth < 2 and isinstance(value, dict):
        for item in value.values():
            yield from _patterns_in(item, depth + 1)


def test_every_regular_expression_in_makad_is_listed() -> None:
    """Each compiled pattern held by a makad module (and each rule of the secret
    detector) is one of the sites this module checks: a new regex must be audited."""
    listed = {id(site.pattern) for site in SITES}
    missing = []
    for module_info in pkgutil.walk_packages(makad.__path__, "makad."):
        if module_info.name.endswith("__main__"):
            continue  # running it starts a daemon
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            missing += [f"{module_info.name}.{name}" for p in _patterns_in(value) if id(p) not in listed]
    assert missing == []


def test_no_regex_is_built_inline() -> None:
    """makad calls regexes through compiled, listed patterns only (``re.sub(...)`` and
    the like with a literal pattern would escape the list above)."""
    inline = re.compile(r"\bre\.(?:sub|subn|match|search|findall|finditer|split|fullmatch)\(")
    root = makad.__path__[0]
    found = []
    for module_info in pkgutil.walk_packages(makad.__path__, "makad."):
        path = module_info.module_finder.path  # type: ignore[union-attr]
        source_path = f"{path}/{module_info.name.rsplit('.', 1)[-1]}.py"
        try:
            with open(source_path, encoding="utf-8") as source:
                text = source.read()
        except OSError:
            continue
        found += [f"{source_path.removeprefix(root)}:{m.start()}" for m in inline.finditer(text)]
    assert found == []


# Inputs of about BASE characters (or four times a pattern's largest bounded repeat, which
# grows with the input up to its bound, so that the smaller input holds several whole
# matches and neither a match of all of it nor a window still filling makes it look
# cheap), then four times as many: a linear pattern's count of
# steps grows about fourfold, a quadratic one's sixteen-fold, a cubic 64-fold.
BASE = 160
GROWTH_LIMIT = 6.0


def _growth(site: Site, prefix: str, unit: str, suffix: str) -> tuple[int, int]:
    base = max(BASE, 4 * largest_bound(site.pattern))
    small = max(2, math.ceil(base / len(unit)))
    texts = [prefix + unit * count + suffix for count in (small, 4 * small)]
    try:
        return steps(site.pattern, texts[0], site.method), steps(site.pattern, texts[1], site.method)
    except TooManySteps:
        return 1, 1_000_000


def _is_linear(counts: tuple[int, int]) -> bool:
    return counts[1] <= GROWTH_LIMIT * counts[0] + 200


@st.composite
def _pathological(draw: st.DrawFn, site: Site) -> tuple[str, str, str]:
    """A prefix, a unit repeated, a suffix: each made of the pattern's literals (its
    prefixes and fixed middles) and of members of its classes and their complements."""
    pieces = st.sampled_from([*literals(site.pattern), *alphabet(site.pattern)])
    unit = "".join(draw(st.lists(pieces, min_size=1, max_size=3)))
    prefix = "".join(draw(st.lists(pieces, max_size=2)))
    suffix = "".join(draw(st.lists(pieces, max_size=2)))
    return prefix, unit, suffix


@pytest.mark.parametrize("site", SITES, ids=[site.label for site in SITES])
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_each_regex_works_linearly_on_pathological_strings(site: Site, data: st.DataObject) -> None:
    """Strings built of a pattern's own characters, repeated: its work grows linearly."""
    prefix, unit, suffix = data.draw(_pathological(site))
    assert _is_linear(_growth(site, prefix, unit, suffix)), (prefix, unit, suffix)


# The shapes that were quadratic or worse before (each with the site that fell to it).
KNOWN = [
    ("records._LINK", "", "[", ""),
    ("records._LINK", "", "[a](", ""),
    ("markdown._FENCE", "", " ", "x"),
    ("markdown.BULLET", "-", " ", "\nx"),
    ("secret_detectors._REFERENCE", "a", "a", ""),
    ("secret_views._ESCAPE", "", "%", ""),
    ("redaction._KEY_TAIL", "", " ", ""),
    ("render.SPEAKER_LABEL", "", " ", ""),
    ("keyword_values._CALL_OR_LOOKUP", "", "= ", ""),
    ("keyword_values._CALL_OR_LOOKUP", "", "=a", ""),
    ("entry_text._ESCAPABLE", "", "\\", ""),
    ("conflicts._CODE", "_", "Z_A", ""),
    # Linear, but each match spans up to a hundred characters: at twice its bound the
    # smaller input held one match and the count looked 6.5-fold.
    ("conflicts._EVENT_STATEMENT", "", "begin\t", ""),
]


def _rule_shapes() -> list[tuple[str, str, str, str]]:
    shapes = []
    for site in SITES:
        if site.label.startswith("rule["):
            for literal in literals(site.pattern)[:3]:
                shapes += [(site.label, "", literal, ""), (site.label, "", literal + "-", "!")]
    private_key = next(s.label for s in SITES if "private_key" in s.label)
    return [*shapes, (private_key, "", "-----BEGIN PRIVATE KEY-----\nAAAA\n", "")]


@pytest.mark.parametrize("shape", KNOWN + _rule_shapes(), ids=lambda shape: f"{shape[0]}:{shape[2]!r}")
def test_the_shapes_that_were_super_linear_are_linear(shape: tuple[str, str, str, str]) -> None:
    """``[[[[…``, runs of blanks, ``eyJeyJ…``, ``-----BEGIN …`` repeated without an end,
    a rule's prefix repeated: each pattern's work on them grows linearly."""
    label, prefix, unit, suffix = shape
    site = next(site for site in SITES if site.label == label)
    assert _is_linear(_growth(site, prefix, unit, suffix))

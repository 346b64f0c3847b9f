"""Search text that SQLite FTS5 can match in Chinese, Japanese and Korean (pure, no IO).

FTS5's ``unicode61`` tokenizer splits on spaces and punctuation, so a Chinese or
Japanese sentence — written without spaces — becomes one giant token that no
query ever matches. We keep ``porter unicode61 remove_diacritics 2`` for Latin
text and rewrite every run of CJK characters, on both the index and the query
side, into overlapping character bigrams: ``東京大学`` → ``東京 京大 大学 学``.
This is the approach of Lucene's ``CJKAnalyzer`` / Elasticsearch's ``cjk``
analyzer. Why it and not the alternatives:

- the ``trigram`` tokenizer only matches queries of three or more characters,
  and most Chinese words are two;
- ICU or dictionary segmenters (jieba, MeCab) are not in Python's SQLite, add
  dictionaries and native dependencies, and segment a query differently from
  the sentence that contains it;
- bigrams need no dictionary, treat zh, ja and ko alike, are deterministic, and
  BM25 over bigrams ranks a sentence sharing more of the query's bigrams higher.

Each run also emits its last character as a unigram, so every character of the
run is the first character of some indexed token. A one-character query is
then a prefix query (``"猫"*``) and finds the character anywhere in a run.

Queries never reach FTS5 as syntax: every token is quoted, English stop words
and the words that frame a question ("likely", "ever mentioned") are dropped
(unless nothing else is left), and the terms are OR-ed so BM25
ranks by how much of the query a row matches. Text is NFKC-normalized first,
so full-width Latin letters and half-width katakana match their usual forms.
"""

from __future__ import annotations

import operator
import re
from typing import Final

from makad.core.normal_form import normalized

# CJK letters (not punctuation): ideographs and extensions, 々〆〇, hiragana,
# katakana (without the ・ middle dot), hangul syllables and jamo.
_CJK_CLASS: Final = (
    "\u3005-\u3007"
    "\u3041-\u3096\u309d-\u309f"
    "\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\u1100-\u11ff\u3131-\u318e\uac00-\ud7af"
    "\U00020000-\U0003134f"
)
_CJK_RUN: Final = re.compile(f"[{_CJK_CLASS}]+")
# A query token: a CJK run, or a run of word characters that are not CJK
# (mirrors unicode61, for which "_" and punctuation separate tokens).
_QUERY_TOKEN: Final = re.compile(f"(?P<cjk>[{_CJK_CLASS}]+)|[^\\W_{_CJK_CLASS}]+")

# Lucene's English stop set plus the function words questions are made of.
ENGLISH_STOP_WORDS: Final = frozenset(
    """a an and are as at be but by for if in into is it no not of on or such that the
    their then there these they this to was will with i me my we our us you your he she
    him her his its what which who whom how when where why do does did done have has had
    can could would should shall may might must been being were am from about so than
    too very just also any all some""".split()  # noqa: SIM905 - a word list reads better as prose
)
# Words that frame a question rather than name its topic ("Would X likely…", "Has X
# ever mentioned…"): matched against a conversation they find turns that happen to
# use them, not the answer. Dropped from queries like stop words.
QUESTION_FRAME_WORDS: Final = frozenset(
    """likely considered ever both something anything thing things mention mentioned
    say said much many often ways""".split()  # noqa: SIM905 - a word list reads better as prose
)
QUERY_NOISE_WORDS: Final = ENGLISH_STOP_WORDS | QUESTION_FRAME_WORDS
# What follows the apostrophe of a contraction or possessive ("what's", "Ann's", "we'll"):
# the index holds each as a word of its own, so searching for it matched every entry
# with a possessive in it.
_CONTRACTION_TAILS: Final = frozenset({"s", "t", "d", "ll", "re", "ve", "m"})
_APOSTROPHES: Final = frozenset("'\u2019\u02bc")

MAX_QUERY_TERMS: Final = 32
# A query (search_history, build_context) is read up to this many characters: every pattern
# that reads it (words, dates, CJK runs) then runs over a bounded text. Over a whole 11 MB
# query each held the interpreter, and so every other request, for seconds at a time.
MAX_QUERY_CHARS: Final = 16_384
INDEX_PIECE_CHARS: Final = 1 << 20
# An event's index text is made from at most this many times its length of NFKC text. Text
# of any script grows little under NFKC; a run of characters it makes many of (U+FDFA is 18)
# is indexed for its head only, so one appended event cannot cost the index (and the CPU)
# 18 times its size.
MAX_INDEX_GROWTH: Final = 4
# A CJK run's bigrams are made this many at a time (``_grams_text``).
GRAM_PIECE_CHARS: Final = 1 << 14


def is_cjk(char: str) -> bool:
    """Whether one character is a CJK letter that the bigram transform rewrites."""
    return _CJK_RUN.fullmatch(char) is not None


def cjk_grams(run: str) -> list[str]:
    """The index tokens of one CJK run: overlapping bigrams, then its last character."""
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)] + [run[-1]]


def index_text(text: str, *, bounded: bool = False) -> str:
    """The text to put in an FTS5 column: ``text`` with every CJK run bigrammed; when
    ``bounded``, from at most ``MAX_INDEX_GROWTH`` times its length of NFKC text."""
    if text.isascii():  # NFKC leaves ASCII as it is, and it holds no CJK
        return text
    folded = normalized(text, limit=MAX_INDEX_GROWTH * len(text) if bounded else None)
    if len(folded) <= INDEX_PIECE_CHARS:
        return _CJK_RUN.sub(_bigrammed, folded)
    # In pieces, each cut where no CJK run spans it (NFKC can make a text 18 times longer,
    # and one ``sub`` over it keeps the interpreter from every other thread throughout).
    out: list[str] = []
    start = 0
    while start < len(folded):
        cut = start + INDEX_PIECE_CHARS
        if cut < len(folded):
            run = _CJK_RUN.match(folded, cut)
            if run is not None:
                cut = run.end()
        out.append(_CJK_RUN.sub(_bigrammed, folded[start:cut]))
        start = cut
    return "".join(out)


def _bigrammed(match: re.Match[str]) -> str:
    return " " + _grams_text(match.group()) + " "


def _grams_text(run: str) -> str:
    """``" ".join(cjk_grams(run))``, made ``GRAM_PIECE_CHARS`` bigrams at a time.

    One run can be millions of characters long (U+3300 and its neighbours are each four
    katakana under NFKC): a list of one two-character string per character took some
    50 bytes each, over half a gigabyte for one appended event, and joining and freeing
    it were single calls that kept every other thread from running for seconds.
    """
    pieces: list[str] = []
    for start in range(0, len(run) - 1, GRAM_PIECE_CHARS):
        # Overlapping the next piece by one character: its last bigram ends there.
        piece = run[start : start + GRAM_PIECE_CHARS + 1]
        pieces.append(" ".join(map(operator.add, piece[:-1], piece[1:])))
    pieces.append(run[-1])
    return " ".join(pieces)


def query_head(query: str) -> str:
    """The part of a query that is read: its first ``MAX_QUERY_CHARS`` characters."""
    return query[:MAX_QUERY_CHARS]


def query_tokens(query: str) -> list[tuple[str, bool]]:
    """The distinct search tokens of arbitrary user text as ``(token, is_prefix)``.

    Words are lower-cased and stop words and question-framing words dropped
    (unless nothing else is left), and so is the tail of a contraction or possessive
    ("what's", "Ann's");
    CJK runs become bigrams, and a one-character run a prefix token. At most
    ``MAX_QUERY_TERMS`` are kept, the longest first (a long word is usually a
    rarer one), which bounds the cost of a long query.
    """
    words: list[tuple[str, bool]] = []
    grams: list[tuple[str, bool]] = []
    text = normalized(query)
    for match in _QUERY_TOKEN.finditer(text):
        token = match.group()
        if match.group("cjk") is None:
            if (
                token.lower() in _CONTRACTION_TAILS
                and text[match.start() - 1 : match.start()] in _APOSTROPHES
            ):
                continue
            words.append((token.lower(), False))
        elif len(token) == 1:
            grams.append((token, True))
        else:
            grams.extend((token[i : i + 2], False) for i in range(len(token) - 1))
    kept = [w for w in words if w[0] not in QUERY_NOISE_WORDS]
    if not kept and not grams:
        kept = words
    tokens = list(dict.fromkeys(kept + grams))
    if len(tokens) > MAX_QUERY_TERMS:
        tokens = sorted(tokens, key=lambda t: len(t[0]), reverse=True)[:MAX_QUERY_TERMS]
    return tokens


def query_terms(query: str) -> list[str]:
    """FTS5 terms for arbitrary user text: each token quoted, never FTS5 syntax."""
    return [f'"{token}"*' if prefix else f'"{token}"' for token, prefix in query_tokens(query)]


def match_expression(query: str) -> str | None:
    """A safe FTS5 MATCH expression OR-ing the query's terms; ``None`` if it has none."""
    terms = query_terms(query)
    return " OR ".join(terms) if terms else None

"""Secret redaction, applied to every text before it is written anywhere.

Each secret becomes ``[REDACTED:<kind>]``. Detection has four layers; where
their findings overlap, the earlier layer wins:

1. Formats: high-precision patterns for current credential formats (OpenAI,
   Anthropic, GitHub, AWS, Slack, Stripe, Google, Hugging Face, npm, Telegram,
   Mailchimp, JWT, PEM and PuTTY private keys) plus the patterns detect-secrets
   maintains for GitLab, PyPI, npm, SendGrid, Square and Azure storage keys.
2. Context: a value recognised by what surrounds it -- AWS secret keys,
   passwords in URLs, bearer tokens, ``*token = <value>`` assignments.
3. Keywords: detect-secrets' keyword rules (``password = "..."``,
   ``api_key: ...``), run only on lines holding a keyword. Their values must
   also pass a stricter test than detect-secrets' own (no spaces, 6+ chars,
   no placeholder or reference, and an unquoted value needs a digit or a
   symbol), because prose says "secret:" far more often than code does.
4. Base64: a run of 20+ base64 characters that decodes to UTF-8 text holding a
   secret is replaced whole (``base64_<kind>``; nested once more at most).

Detection runs on a normalized view of the text (``secret_views``): invisible
characters (format and default-ignorable code points: zero-width spaces and
joiners, soft hyphens, BOMs…) are dropped and full-width / mathematical forms of
ASCII are folded, so ``sk-ant-\u200bapi03…`` is found; the replacement covers
the original characters and nothing outside the secret changes. ``redact_joined``
reads consecutive texts (one append's events) as one stream, so a token split
across two events is redacted in both. Identifiers cannot take a marker (two
would merge): ``identifier_stand_in`` replaces one holding a secret by a keyed hash.

Not used from detect-secrets: the high-entropy plugins (they only look inside
quoted strings -- no hit at all on LoCoMo -- and on CPython's stdlib all 9 of
their hits are alphabet constants), the Discord pattern (no literal anchor) and
``KeywordDetector.analyze_line`` itself (~620 us/KB: per-line settings and
file-type lookups), whose regexes are used directly instead. Its Telegram and
Mailchimp patterns are rewritten around their literal middle (``:AA``,
``-us``): as published they have no literal prefix and cost 11-16 us/KB each.

Speed: every secret above contains a run of 20+ token characters, ``://``, a
private-key header, or a keyword, so a text without any of those is returned
after a few substring scans and one regex pass. Each rule is its own regex
with a literal prefix (one big alternation measured ~25x slower in CPython),
and word boundaries are checked in code so that prefix optimisation holds.

``redact`` is deterministic and idempotent: markers never match again.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from makad.core.lazy_imports import loading
from makad.core.secret_views import (
    BASE64_RUN,
    decode_base64_run,
    has_suspects,
    normalized_view,
    visible,
)
from makad.core.types import Entry

MARKER_PREFIX: Final = "[REDACTED:"
IDENTIFIER_PREFIX: Final = "redacted-"
# base64 inside base64 is looked into once more, no deeper.
MAX_BASE64_DEPTH = 2

Span = tuple[int, int, str]


class Redacted(msgspec.Struct, frozen=True):
    """The redacted text, how many secrets were replaced, and their kinds (sorted, unique)."""

    text: str
    count: int
    kinds: list[str]


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    regex: re.Pattern[str]
    group: int = 0  # the group holding the secret; 0 is the whole match
    is_valid: Callable[[str], bool] | None = None
    word_start: bool = True  # the match must not continue a word on its left
    # What must come right before the match; it becomes part of the secret.
    # Checked in code: a leading lookbehind would defeat the literal-prefix scan.
    left: re.Pattern[str] | None = None
    left_width: int = 0
    needs: str = ""  # skip the rule unless the lower-cased text holds this


def _rule(
    kind: str,
    pattern: str,
    group: int = 0,
    is_valid: Callable[[str], bool] | None = None,
    word_start: bool = True,
    left: str | None = None,
    left_width: int = 0,
    needs: str = "",
) -> _Rule:
    left_regex = re.compile(left + r"\Z") if left else None
    return _Rule(kind, re.compile(pattern), group, is_valid, word_start, left_regex, left_width, needs)


def _has_digit_and_letter(value: str) -> bool:
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


_END = r"(?![A-Za-z0-9_-])"
_PEM_LABEL = r"(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"

_OWN_FORMATS: Final = (
    _rule(
        "private_key",
        # Up to the END line; a truncated block runs over its base64 and header lines.
        rf"-----BEGIN {_PEM_LABEL}(?:[\s\S]*?-----END {_PEM_LABEL}"
        r"|(?:\r?\n(?:[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9+/]*={1,2}|[A-Za-z-]+: [^\r\n]*)"
        r"(?=[\r\n]|\Z))*)",
        word_start=False,
    ),
    _rule(
        "private_key",
        r"PuTTY-User-Key-File-\d: [\s\S]*?(?:Private-MAC: [0-9a-fA-F]+|\Z)",
        word_start=False,
    ),
    _rule("anthropic_key", r"sk-ant-[A-Za-z0-9_-]{20,}"),
    _rule("openai_key", r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"),
    _rule("openai_key", r"sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}" + _END),
    _rule("openai_key", r"sk-[A-Za-z0-9]{32,}" + _END),
    _rule("github_token", r"gh[pousr]_[A-Za-z0-9]{36,255}" + _END),
    _rule("github_token", r"github_pat_[A-Za-z0-9_]{50,255}" + _END),
    _rule("aws_access_key", r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    _rule(
        "slack_webhook",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,}",
    ),
    _rule("slack_token", r"xox[abposre]-[A-Za-z0-9-]{15,}"),
    _rule("slack_token", r"xapp-\d-[A-Za-z0-9-]{20,}"),
    _rule("stripe_key", r"sk_(?:live|test)_[A-Za-z0-9]{16,}"),
    _rule("stripe_key", r"rk_(?:live|test)_[A-Za-z0-9]{16,}"),
    _rule("stripe_key", r"whsec_[A-Za-z0-9]{24,}"),
    _rule("google_api_key", r"AIza[0-9A-Za-z_-]{35}" + _END),
    _rule("google_oauth_secret", r"GOCSPX-[A-Za-z0-9_-]{28}" + _END),
    _rule("huggingface_token", r"hf_[A-Za-z0-9]{34,}" + _END),
    _rule("npm_token", r"npm_[A-Za-z0-9]{36}" + _END),
    # Anchored on their fixed middle, so the search is a fast literal scan.
    _rule(
        "telegram_bot_token",
        r":AA[A-Za-z0-9_-]{33}" + _END,
        word_start=False,
        left=r"(?<![0-9])[0-9]{8,10}",
        left_width=10,
    ),
    _rule(
        "mailchimp_key",
        r"-us[0-9]{1,2}(?![A-Za-z0-9])",
        word_start=False,
        left=r"(?<![A-Za-z0-9])[0-9a-f]{32}",
        left_width=32,
    ),
    # (the JWT rule, which checks its match with detect-secrets, is in ``_Library``)
)
_JWT: Final = r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"


_CONTEXT_RULES: Final = (
    _rule(
        "aws_secret_key",
        r"(?i:aws_?secret(?:_?access)?(?:_?key)?)[\"']?\s*[:=]\s*[\"']?"
        r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        1,
        needs="aws",
    ),
    # userinfo may hold ':' but never '@', '/' or '[', so a marker never matches.
    _rule(
        "url_password",
        r"://[^\s:/?#\[\]@]*:([^\s/?#\[\]@]+)@(?=[A-Za-z0-9\[])",
        1,
        word_start=False,
    ),
    _rule("bearer_token", r"[Bb]earer[ \t]+([A-Za-z0-9._~+/-]{20,}=*)", 1, _has_digit_and_letter),
    _rule(
        "generic_secret",
        r"(?i:token)[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9_.~+/=-]{20,})",
        1,
        _has_digit_and_letter,
        word_start=False,
        needs="token",
    ),
)


# Every rule needs a run like this, "://" or a private-key header.
_LONG_RUN: Final = re.compile(r"[A-Za-z0-9_+/=.-]{20}")


@dataclass(frozen=True, slots=True)
class _Library:
    """Everything taken from detect-secrets, with the rules in the order they rank."""

    rules: tuple[_Rule, ...]
    keyword: re.Pattern[str]
    keyword_any_case: re.Pattern[str]
    # detect-secrets' keyword regexes and the group holding the value in each.
    keyword_rules: tuple[tuple[re.Pattern[str], int], ...]
    is_indirect_reference: Callable[[str], bool]
    is_sequential_string: Callable[[str], bool]
    is_templated_secret: Callable[[str], bool]


def preload() -> None:
    """Load the secret scanner now rather than on the first text (``makad.warmup``)."""
    _library()


@functools.cache
def _library() -> _Library:
    """Loaded on the first text that may hold a secret, not at import: importing
    detect-secrets (it pulls in requests) costs more than the daemon's whole start-up."""
    with loading():  # the warm-up thread may be importing it (makad.core.lazy_imports)
        return _load_library()


def _load_library() -> _Library:
    from detect_secrets.filters import heuristic
    from detect_secrets.plugins import keyword
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.npm import NpmDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector

    # detect-secrets' own format patterns, for services the rules above do not name.
    library_formats = (
        ("gitlab_token", GitLabTokenDetector(), 0),
        ("pypi_token", PypiTokenDetector(), 0),
        ("npm_token", NpmDetector(), 1),
        ("sendgrid_key", SendGridDetector(), 0),
        ("square_oauth_secret", SquareOAuthDetector(), 0),
        ("azure_storage_key", AzureStorageKeyDetector(), 0),
    )
    jwt = _rule("jwt", _JWT, is_valid=JwtTokenDetector.is_formally_valid)
    library_rules = tuple(
        _Rule(kind, regex, group) for kind, plugin, group in library_formats for regex in plugin.denylist
    )
    return _Library(
        rules=(*_OWN_FORMATS, jwt, *library_rules, *_CONTEXT_RULES),
        keyword=re.compile("|".join(keyword.DENYLIST)),
        keyword_any_case=re.compile("|".join(keyword.DENYLIST), re.IGNORECASE),
        keyword_rules=(
            (keyword.FOLLOWED_BY_COLON_EQUAL_SIGNS_REGEX, 4),
            (keyword.FOLLOWED_BY_COLON_REGEX, 4),
            (keyword.FOLLOWED_BY_EQUAL_SIGNS_REGEX, 5),
            (keyword.PRECEDED_BY_EQUAL_COMPARISON_SIGNS_QUOTES_REQUIRED_REGEX, 2),
            (keyword.FOLLOWED_BY_QUOTES_AND_SEMICOLON_REGEX, 3),
            (keyword.FOLLOWED_BY_ARROW_FUNCTION_SIGN_QUOTES_REQUIRED_REGEX, 4),
        ),
        is_indirect_reference=heuristic.is_indirect_reference,
        is_sequential_string=heuristic.is_sequential_string,
        is_templated_secret=heuristic.is_templated_secret,
    )


_PLACEHOLDERS: Final = frozenset(
    {
        "null",
        "none",
        "nil",
        "true",
        "false",
        "undefined",
        "required",
        "optional",
        "redacted",
        "secret",
        "password",
        "example",
        "placeholder",
        "changeme",
        "string",
        "your_password",
        "your_api_key",
        "your_token",
        "your_secret",
    }
)
_LONG_LINE: Final = 2000
_TRAILING_PUNCTUATION: Final = ".,;:!?)]}>"
_SYMBOL: Final = re.compile(r"[^A-Za-z0-9._-]")
_PASSWORD_KEY: Final = re.compile(r"pass|pwd|contrase", re.IGNORECASE)
_REFERENCE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*[(\[]")  # a call or a lookup


def redact(text: str) -> Redacted:
    """Replace every secret in ``text`` with ``[REDACTED:<kind>]``."""
    spans = _find(text, 0) if text.isascii() else find_spans(text)
    return _apply(text, spans) if spans else Redacted(text, 0, [])


def find_spans(text: str, depth: int = 0) -> list[Span]:
    """The secrets in ``text``: sorted, non-overlapping ``(start, end, kind)``.

    Detection runs on the normalized view (invisible characters dropped, ASCII
    look-alikes folded); each span is mapped back so it covers the original
    characters, the invisible ones inside the secret included.
    """
    view = normalized_view(text)
    if view is None:
        return _find(text, depth)
    return [(*view.original(start, end), kind) for start, end, kind in _find(view.text, depth)]


def _find(text: str, depth: int) -> list[Span]:
    folded = text.lower()
    has_run = _LONG_RUN.search(text) is not None
    has_format = has_run or "://" in text or "-----BEGIN" in text or "PuTTY-User-Key-File" in text
    if len(folded) == len(text):
        if not (has_format or _may_hold_keyword(folded)):
            return []
        keyword, lowered = _library().keyword, folded
        has_keyword = _may_hold_keyword(folded) and keyword.search(folded) is not None
    else:  # lower() lengthened a character (e.g. U+0130): positions would drift
        keyword, lowered = _library().keyword_any_case, text
        has_keyword = keyword.search(text) is not None
    if not (has_keyword or has_format):
        return []
    spans: list[Span] = []
    if has_format:
        _add(spans, _rule_spans(text, folded))
    if has_keyword:
        _add(spans, _keyword_spans(text, keyword.finditer(lowered)))
    if has_run and depth < MAX_BASE64_DEPTH:
        _add(spans, _base64_spans(text, depth))
    return spans


def _apply(text: str, spans: list[Span]) -> Redacted:
    if not spans:
        return Redacted(text, 0, [])
    pieces: list[str] = []
    cursor = 0
    for start, end, kind in spans:
        pieces.append(text[cursor:start])
        pieces.append(f"{MARKER_PREFIX}{kind}]")
        cursor = end
    pieces.append(text[cursor:])
    return Redacted("".join(pieces), len(spans), sorted({kind for _, _, kind in spans}))


def _base64_spans(text: str, depth: int) -> Iterator[Span]:
    """Whole base64 runs whose decoded text holds a secret (kind ``base64_<inner kind>``)."""
    for match in BASE64_RUN.finditer(text):
        decoded = decode_base64_run(match.group())
        if decoded is None:
            continue
        inner = find_spans(decoded, depth + 1)
        if inner:
            yield match.start(), match.end(), "base64_" + inner[0][2].removeprefix("base64_")


# --- several texts as one -----------------------------------------------------------------

# How far on each side of a boundary the joined text is looked at first; a secret
# found within JOIN_SLACK of a window edge may go on past it, so the window grows.
JOIN_WINDOW = 256
JOIN_SLACK = 64


def redact_joined(texts: Sequence[str]) -> tuple[list[Redacted], int]:
    """Redact consecutive texts (one append's events) as one stream.

    Each text is redacted on its own, and the text around every boundary is
    scanned joined: a secret split across two texts (a streamed token, a key
    whose ``api_key =`` is in the previous text) is redacted in each text it
    touches. Returns the texts and how many secrets there were (a split secret
    counts once).
    """
    own = [find_spans(text) for text in texts]
    if len(texts) < 2:
        return [_apply(text, spans) for text, spans in zip(texts, own, strict=True)], sum(map(len, own))
    offsets = [0]
    for text in texts:
        offsets.append(offsets[-1] + len(text))
    joined = "".join(texts)
    extra: list[list[Span]] = [[] for _ in texts]
    split = 0
    for start, end, kind in _joined_spans(joined, offsets, own):
        first = bisect.bisect_right(offsets, start) - 1
        pieces = 0
        index = first
        while index < len(texts) and offsets[index] < end:
            low, high = max(start, offsets[index]), min(end, offsets[index + 1])
            if high > low:
                extra[index].append((low - offsets[index], high - offsets[index], kind))
                pieces += 1
            index += 1
        split += max(0, pieces - 1)
    results = [_apply(text, _union(spans, more)) for text, spans, more in zip(texts, own, extra, strict=True)]
    return results, sum(r.count for r in results) - split


def _joined_spans(joined: str, offsets: list[int], own: list[list[Span]]) -> list[Span]:
    """Secrets of the joined text that only the join reveals: those crossing a boundary,
    or on a line that does (their context is on the other side).

    Most boundaries need nothing; a long word cut in two is scanned alone (cheap); a
    line holding a context (a keyword, a URL, a key header), characters the normalized
    view changes, or an own secret near the boundary is scanned in a window that grows
    while a secret reaches its edge.
    """
    size = len(joined)
    boundaries = [b for b in offsets[1:-1] if 0 < b < size]
    windows: list[list[int]] = []
    found: list[Span] = []
    for k in range(1, len(offsets) - 1):
        at = offsets[k]
        if not 0 < at < size:
            continue
        before, after = own[k - 1], own[k]
        # A secret of either text on the line of the boundary (or ending right before it,
        # like a private key cut inside its last line) is looked at whole.
        left = bool(before) and before[-1][1] + 1 >= _line_start(joined, at) - offsets[k - 1]
        right = bool(after) and after[0][0] <= _line_end(joined, at) + 1 - at
        need = "window" if left or right else _crossing_need(joined, at)
        if need is None:
            continue
        if isinstance(need, tuple):  # a long word cut in two: only it can hold the secret
            low, high = need
            _add(
                found,
                [
                    (start + low, end + low, kind)
                    for start, end, kind in find_spans(joined[low:high])
                    if start + low < at < end + low
                    and (
                        kind != "generic_secret" or _joined_value(joined, boundaries, start + low, end + low)
                    )
                ],
            )
            continue
        low, high = max(0, at - JOIN_WINDOW), min(size, at + JOIN_WINDOW)
        if left:
            low = min(low, offsets[k - 1] + before[-1][0])
        if right:
            high = max(high, at + after[0][1])
        if windows and low <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], high)
        else:
            windows.append([low, high])
    for low, high in windows:
        low, high = _line_edges(joined, low, high)
        while True:
            kept = [
                (start + low, end + low, kind)
                for start, end, kind in find_spans(joined[low:high])
                if _spans_boundary(joined, boundaries, start + low, end + low)
                and (kind != "generic_secret" or _joined_value(joined, boundaries, start + low, end + low))
            ]
            grow = any(
                (start - low < JOIN_SLACK and low > 0) or (high - end < JOIN_SLACK and high < size)
                for start, end, _ in kept
            )
            if not grow:
                break
            width = high - low
            low, high = _line_edges(joined, max(0, low - width), min(size, high + width))
        _add(found, kept)
    return found


# Every format holds a run this long (see ``_LONG_RUN``): a shorter cut word holds none.
_SPLIT_WORD = 20
# The formats whose secrets can be letters alone (AWS access keys, Google API keys).
_LETTERS_ONLY_PREFIXES: Final = ("AKIA", "ASIA", "ABIA", "ACCA", "AIza")
# What the context rules and multi-word formats need before a value, lower-cased.
_CONTEXT_WORDS: Final = ("://", "-----begin", "putty-user-key-file", "bearer", "token", "aws")


def _crossing_need(joined: str, at: int) -> str | tuple[int, int] | None:
    """What the boundary at ``at`` needs scanned, judged the way ``_find``'s fast path
    judges a text, on the line up to the end of the word the boundary cuts: ``"window"``
    when it holds a keyword, a URL, a key header or another context (every context comes
    before its value), or characters the normalized view changes; the span of the cut
    word alone when that word is 20+ characters long; else nothing."""
    floor, ceiling = max(0, at - JOIN_WINDOW), min(len(joined), at + JOIN_WINDOW)
    start = at
    while start > floor and not joined[start - 1].isspace():
        start -= 1
    end = at
    while end < ceiling and not joined[end].isspace():
        end += 1
    line = max(joined.rfind("\n", floor, start), joined.rfind("\r", floor, start), floor - 1) + 1
    before = joined[line:end]
    lowered = before.lower()
    if (
        has_suspects(before)
        or any(word in lowered for word in _CONTEXT_WORDS)
        or (_may_hold_keyword(lowered) and _library().keyword.search(lowered) is not None)
    ):
        return "window"
    if end - start < _SPLIT_WORD or not start < at < end:
        return None
    word = joined[start:end]
    # Only two formats can be letters alone; any other secret has a digit or a symbol.
    if word.isalpha() and not any(prefix in word for prefix in _LETTERS_ONLY_PREFIXES):
        return None
    return start, end


def _joined_value(text: str, boundaries: list[int], start: int, end: int) -> bool:
    """Whether a keyword's value found across texts is really split off by a boundary: one
    cuts the value mid-word (no blank on either side, and no sentence end before it unless
    the value is quoted), or one falls between the keyword and the value (nothing but
    blanks and quotes in between), or one cuts the keyword itself (``pass`` + ``word = …``).
    Prose that ends one text and starts the next ("secret: patience." + "git@…"), or a
    keyword from the other text lending its context to a value ("${DB_PASSWORD}" + a JSON
    object), is none of these."""
    index = bisect.bisect_right(boundaries, start)
    if index < len(boundaries) and boundaries[index] < end:
        at = boundaries[index]
        if text[at - 1].isspace() or text[at].isspace():
            return False
        quoted = start > 0 and end < len(text) and text[start - 1] == text[end] and text[end] in "'\"`"
        return quoted or text[at - 1] not in ".!?,;:"
    if index == 0 or boundaries[index - 1] < _line_start(text, start, JOIN_WINDOW):
        return False
    at = boundaries[index - 1]
    if not text[at:start].strip(" \t\"'`"):
        return True
    word_start = at
    while word_start > 0 and not text[word_start - 1].isspace():
        word_start -= 1
    word = text[word_start:start].lower()
    return any(
        word_start + hit.start() < at < word_start + hit.end()
        and _KEY_TAIL.fullmatch(text, word_start + hit.end(), start) is not None
        for hit in _library().keyword.finditer(word)
    )


# What may follow a keyword before its value: the rest of the name, an operator, a quote.
_KEY_TAIL: Final = re.compile(r"[A-Za-z0-9_]*['\"]?\s*(?::=|[:=]{1,3}>?)\s*['\"`]?")


def _line_edges(text: str, low: int, high: int) -> tuple[int, int]:
    """Widen ``[low, high)`` to whole lines, unless a line is too long to take whole."""
    end = _line_end(text, high, _LONG_LINE)
    return _line_start(text, low), (end if end < min(len(text), high + _LONG_LINE) else high)


def _line_start(text: str, pos: int, limit: int = _LONG_LINE) -> int:
    """Where the line holding ``pos`` starts, looking back at most ``limit`` characters."""
    floor = max(0, pos - limit)
    start = max(text.rfind("\n", floor, pos), text.rfind("\r", floor, pos)) + 1
    return start if start > floor or floor == 0 else pos


def _spans_boundary(text: str, boundaries: list[int], start: int, end: int) -> bool:
    """Whether a boundary lies inside the span, or on the line around it (within reach)."""
    line_start = _line_start(text, start, JOIN_WINDOW)
    line_end = _line_end(text, end, JOIN_WINDOW)
    index = bisect.bisect_right(boundaries, line_start)
    return index < len(boundaries) and boundaries[index] < line_end


def _union(spans: list[Span], more: list[Span]) -> list[Span]:
    """Both sets of spans, overlapping ones merged into one (the earlier span's kind)."""
    if not more:
        return spans
    merged: list[Span] = []
    for start, end, kind in sorted([*spans, *more]):
        if merged and start < merged[-1][1]:
            last = merged[-1]
            merged[-1] = (last[0], max(last[1], end), last[2])
        else:
            merged.append((start, end, kind))
    return merged


# --- secrets as values --------------------------------------------------------------------


def secrets_in(text: str) -> frozenset[str]:
    """The secrets in a text as values (invisible characters dropped), to compare texts."""
    return frozenset(visible(text[start:end]) for start, end, _ in find_spans(text))


def redact_values(text: str, values: frozenset[str]) -> Redacted:
    """Redact only the secrets whose value (see ``secrets_in``) is one of ``values``."""
    return _apply(text, [span for span in find_spans(text) if visible(text[span[0] : span[1]]) in values])


def redact_tree(value: Any) -> Any:
    """A JSON-like value with every string in it (keys included) redacted."""
    if isinstance(value, str):
        return redact(value).text
    if isinstance(value, dict):
        return {redact_tree(k): redact_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(item) for item in value]
    return value


def redact_entry(entry: Entry) -> Entry:
    """A memory entry with its text fields redacted (the same entry when it holds none)."""
    title, content = redact(entry.title), redact(entry.content)
    tags = [redact(tag) for tag in entry.tags]
    refs = [redact(ref) for ref in entry.source_refs]
    if not (title.count or content.count or any(t.count for t in tags) or any(r.count for r in refs)):
        return entry
    return msgspec.structs.replace(
        entry,
        title=title.text,
        content=content.text,
        tags=[t.text for t in tags],
        source_refs=[r.text for r in refs],
    )


def identifier_stand_in(value: str, key: bytes) -> str:
    """An identifier (session id, request id, entry id) with no secret in it.

    Returned unchanged when it holds none; else ``redacted-<16 hex>``, a keyed
    hash of the whole value: distinct identifiers stay distinct (a retry or a
    later call with the same value finds the same record), the stand-in is a
    valid session id, and without the key it cannot be checked against a guess.
    """
    if not find_spans(value):
        return value
    digest = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), key=key, digest_size=8)
    return f"{IDENTIFIER_PREFIX}{digest.hexdigest()}"


def _may_hold_keyword(lowered: str) -> bool:
    # Every detect-secrets keyword holds one of these; plain substring tests
    # are several times cheaper than the keyword alternation.
    return (
        "key" in lowered
        or "pass" in lowered
        or "pwd" in lowered
        or "secret" in lowered
        or "contrase" in lowered
    )


def _add(spans: list[Span], found: Iterable[Span]) -> None:
    """Keep each new span unless one already kept (ranked higher) overlaps it.

    ``spans`` stays sorted and non-overlapping, so a neighbour check suffices.
    """
    for span in found:
        index = bisect.bisect_left(spans, span)
        if index > 0 and spans[index - 1][1] > span[0]:
            continue
        if index < len(spans) and spans[index][0] < span[1]:
            continue
        spans.insert(index, span)


def _rule_spans(text: str, folded: str) -> Iterator[Span]:
    for rule in _library().rules:
        if rule.needs and rule.needs not in folded:
            continue
        for match in rule.regex.finditer(text):
            start, end = match.span(rule.group)
            if rule.left is not None:
                left = rule.left.search(text, max(0, start - rule.left_width), start)
                if left is None:
                    continue
                start = left.start()
            secret = text[start:end]
            if start == end or MARKER_PREFIX in secret:
                continue
            if rule.word_start and match.start() > 0 and _is_word_char(text[match.start() - 1]):
                continue
            if rule.is_valid is None or rule.is_valid(secret):
                yield start, end, rule.kind


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _keyword_spans(text: str, hits: Iterator[re.Match[str]]) -> Iterator[Span]:
    done_until = -1
    for hit in hits:
        if hit.start() < done_until:
            continue
        start = max(text.rfind("\n", 0, hit.start()), text.rfind("\r", 0, hit.start())) + 1
        end = line_end = _line_end(text, hit.start())
        done_until = end
        if end - start > _LONG_LINE:
            # Minified JSON and the like: look around the keyword, not at the whole
            # line. Windows overlap, and a value touching a cut edge waits for the next.
            start, end = max(start, hit.start() - 200), min(end, hit.end() + 800)
            done_until = end - 400
        for value_start, value_end in _keyword_values(text[start:end]):
            if end == line_end or start + value_end < end - 50:
                yield start + value_start, start + value_end, "generic_secret"


def _line_end(text: str, pos: int, limit: int | None = None) -> int:
    """Where the line holding ``pos`` ends; with ``limit``, at most that far ahead."""
    stop = len(text) if limit is None else min(len(text), pos + limit)
    ends = [found for found in (text.find("\n", pos, stop), text.find("\r", pos, stop)) if found >= 0]
    return min(ends, default=stop)


def _keyword_values(line: str) -> Iterator[tuple[int, int]]:
    library = _library()
    if library.is_indirect_reference(line):
        return
    found: set[tuple[int, int]] = set()
    for regex, group in library.keyword_rules:
        pos = 0
        # search, not finditer: an unquoted value is cut at its first space,
        # and the next assignment on the line may start right after it.
        while (match := regex.search(line, pos)) is not None:
            start, end = match.span(group)
            quoted = start > 0 and line[start - 1] in "'\"`"
            span = _trim_value(line, start, end, quoted)
            pos = max(span[1] if span else 0, match.start() + 1)
            if span is None or span in found:
                continue
            # A quoted password may be a plain word; other keys' values must look random.
            lenient = quoted and _PASSWORD_KEY.search(line, max(0, start - 40), start) is not None
            if _plausible(line[span[0] : span[1]], lenient):
                found.add(span)
                yield span


def _trim_value(line: str, start: int, end: int, quoted: bool) -> tuple[int, int] | None:
    if start < 0 or start >= end:
        return None
    value = line[start:end]
    if quoted:
        return None if any(c.isspace() for c in value) else (start, end)
    cut = next((i for i, c in enumerate(value) if c.isspace()), len(value))
    value = value[:cut].rstrip(_TRAILING_PUNCTUATION)
    return (start, start + len(value)) if value else None


def _plausible(value: str, lenient: bool) -> bool:
    """Whether a keyword's value looks like a credential rather than prose or a reference."""
    if len(value) < 6 or MARKER_PREFIX in value or value.startswith("$"):
        return False
    library = _library()
    if library.is_templated_secret(value) or library.is_sequential_string(value) or len(set(value)) < 3:
        return False
    if value.lower().strip("<>[]{}'\"") in _PLACEHOLDERS:
        return False
    if lenient:
        return True
    if _REFERENCE.match(value):
        return False
    has_digit = any(c.isdigit() for c in value)
    has_letter = any(c.isalpha() for c in value)
    return has_letter and (has_digit or bool(_SYMBOL.search(value)))

"""Where the secrets in a text are: sorted, non-overlapping ``(start, end, kind)`` spans
(``makad.core.redaction`` replaces them). Detection has four layers; where
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
the original characters and nothing outside the secret changes.

Not used from detect-secrets: the high-entropy plugins (they only look inside
quoted strings -- no hit at all on LoCoMo -- and on CPython's stdlib all 9 of
their hits are alphabet constants), the Discord pattern (no literal anchor) and
``KeywordDetector.analyze_line`` itself (~620 us/KB: per-line settings and
file-type lookups), whose regexes are used directly instead. Its Telegram and
Mailchimp patterns are rewritten around their literal middle (``:AA``,
``-us``): as published they have no literal prefix and cost 11-16 us/KB each.

Speed: every secret above contains a run of 20+ token characters, ``://``, a
private-key header, or a keyword, so a text without any of those is returned
after a few substring scans. Each rule is its own regex
with a literal prefix (one big alternation measured ~25x slower in CPython),
and word boundaries are checked in code so that prefix optimisation holds.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from makad.core.secret_views import BASE64_RUN, decode_base64_run, normalized_view

MARKER_PREFIX: Final = "[REDACTED:"
# base64 inside base64 is looked into once more, no deeper.
MAX_BASE64_DEPTH = 2
Span = tuple[int, int, str]


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
# Every rule needs a run of 20 of these, "://" or a private-key header.
_RUN_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+/=.-")
_LONG_RUN_LENGTH: Final = 20
# Each byte of a text's UTF-8 as 1 when it is one of _RUN_CHARS, else 0. The run
# characters are ASCII and every byte of a non-ASCII character is 0x80 or above, so the
# bytes hold 20 ones in a row exactly where the text holds 20 run characters in a row.
_RUN_BYTES: Final = bytes(int(chr(byte) in _RUN_CHARS) for byte in range(256))
_RUN_OF_ONES: Final = b"\x01" * _LONG_RUN_LENGTH


def has_long_run(text: str) -> bool:
    """Whether ``text`` holds 20 run characters in a row. (The regex
    ``[A-Za-z0-9_+/=.-]{20}`` says the same, but its search restarts at every character
    and counts up to the end of each word again: 6x slower on prose.)"""
    return _RUN_OF_ONES in text.encode("utf-8", "surrogatepass").translate(_RUN_BYTES)


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
    library()


@functools.cache
def library() -> _Library:
    """Loaded on the first text that may hold a secret, not at import: importing
    detect-secrets (it pulls in requests) costs more than the daemon's whole start-up."""
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
LONG_LINE: Final = 2000
_TRAILING_PUNCTUATION: Final = ".,;:!?)]}>"
_SYMBOL: Final = re.compile(r"[^A-Za-z0-9._-]")
_PASSWORD_KEY: Final = re.compile(r"pass|pwd|contrase", re.IGNORECASE)
_REFERENCE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*[(\[]")  # a call or a lookup


def find_spans(text: str, depth: int = 0) -> list[Span]:
    """The secrets in ``text``: sorted, non-overlapping ``(start, end, kind)``.

    Detection runs on the normalized view (invisible characters dropped, ASCII
    look-alikes folded); each span is mapped back so it covers the original
    characters, the invisible ones inside the secret included.
    """
    if text.isascii():  # nothing to normalize (O(1) in CPython): the common case
        return _find(text, depth)
    view = normalized_view(text)
    if view is None:
        return _find(text, depth)
    return [(*view.original(start, end), kind) for start, end, kind in _find(view.text, depth)]


def _find(text: str, depth: int) -> list[Span]:
    folded = text.lower()
    has_run = has_long_run(text)
    has_format = has_run or "://" in text or "-----BEGIN" in text or "PuTTY-User-Key-File" in text
    if len(folded) == len(text):
        if not (has_format or may_hold_keyword(folded)):
            return []
        keyword, lowered = library().keyword, folded
        has_keyword = may_hold_keyword(folded) and keyword.search(folded) is not None
    else:  # lower() lengthened a character (e.g. U+0130): positions would drift
        keyword, lowered = library().keyword_any_case, text
        has_keyword = keyword.search(text) is not None
    if not (has_keyword or has_format):
        return []
    spans: list[Span] = []
    if has_format:
        add_spans(spans, _rule_spans(text, folded))
    if has_keyword:
        add_spans(spans, _keyword_spans(text, keyword.finditer(lowered)))
    if has_run and depth < MAX_BASE64_DEPTH:
        add_spans(spans, _base64_spans(text, depth))
    return spans


def _base64_spans(text: str, depth: int) -> Iterator[Span]:
    """Whole base64 runs whose decoded text holds a secret (kind ``base64_<inner kind>``)."""
    for match in BASE64_RUN.finditer(text):
        decoded = decode_base64_run(match.group())
        if decoded is None:
            continue
        inner = find_spans(decoded, depth + 1)
        if inner:
            yield match.start(), match.end(), "base64_" + inner[0][2].removeprefix("base64_")


def may_hold_keyword(lowered: str) -> bool:
    # Every detect-secrets keyword holds one of these; plain substring tests
    # are several times cheaper than the keyword alternation.
    return (
        "key" in lowered
        or "pass" in lowered
        or "pwd" in lowered
        or "secret" in lowered
        or "contrase" in lowered
    )


def add_spans(spans: list[Span], found: Iterable[Span]) -> None:
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
    for rule in library().rules:
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
        end = line_end = end_of_line(text, hit.start())
        done_until = end
        if end - start > LONG_LINE:
            # Minified JSON and the like: look around the keyword, not at the whole
            # line. Windows overlap, and a value touching a cut edge waits for the next.
            start, end = max(start, hit.start() - 200), min(end, hit.end() + 800)
            done_until = end - 400
        for value_start, value_end in _keyword_values(text[start:end]):
            if end == line_end or start + value_end < end - 50:
                yield start + value_start, start + value_end, "generic_secret"


def end_of_line(text: str, pos: int, limit: int | None = None) -> int:
    """Where the line holding ``pos`` ends; with ``limit``, at most that far ahead."""
    stop = len(text) if limit is None else min(len(text), pos + limit)
    ends = [found for found in (text.find("\n", pos, stop), text.find("\r", pos, stop)) if found >= 0]
    return min(ends, default=stop)


def _keyword_values(line: str) -> Iterator[tuple[int, int]]:
    found_library = library()
    if found_library.is_indirect_reference(line):
        return
    found: set[tuple[int, int]] = set()
    for regex, group in found_library.keyword_rules:
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
    checks = library()
    if checks.is_templated_secret(value) or checks.is_sequential_string(value) or len(set(value)) < 3:
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

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
import itertools
import operator
import re
import string
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from makad.core.base64_texts import base64_runs, decoded_texts
from makad.core.keyword_values import keyword_values
from makad.core.secret_views import View, normalized_view, unescaped_view

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
    # What must come right before the match, ``left_widths`` characters long (the first
    # width that fits wins); it becomes part of the secret. Checked in code: a leading
    # lookbehind would defeat the literal-prefix scan.
    left: re.Pattern[str] | None = None
    left_widths: tuple[int, ...] = ()
    # Skip the rule unless the lower-cased text holds one of these (cheaper than a search),
    # and each of ``needs_all``.
    needs: tuple[str, ...] = ()
    needs_all: tuple[str, ...] = ()


def _rule(
    kind: str,
    pattern: str,
    group: int = 0,
    is_valid: Callable[[str], bool] | None = None,
    word_start: bool = True,
    left: str | None = None,
    left_widths: tuple[int, ...] = (),
    needs: str | tuple[str, ...] = (),
    needs_all: tuple[str, ...] = (),
) -> _Rule:
    left_regex = re.compile(left) if left else None
    needed = (needs,) if isinstance(needs, str) else needs
    return _Rule(
        kind, re.compile(pattern), group, is_valid, word_start, left_regex, left_widths, needed, needs_all
    )


_TOKEN_BODY: Final = "[A-Za-z0-9_-]"


def _run_rule(kind: str, prefix: str, rest: str, needs: str, **options: object) -> _Rule:
    """A token whose prefix is made of its body's characters (``eyJ`` in a JWT): tried once
    per run of those characters, at the first prefix in the run not glued to a word
    character, as a search from every prefix would, but without reading the rest of the
    run again from each later prefix (quadratic on ``eyJeyJeyJ…``)."""
    pattern = rf"(?<!{_TOKEN_BODY})(?>{_TOKEN_BODY}*?(?<!\w)(?={prefix}))({prefix}{rest})"
    return _Rule(kind, re.compile(pattern), 1, word_start=False, needs=(needs,), **options)  # type: ignore[arg-type]


def _has_digit_and_letter(value: str) -> bool:
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


_END = r"(?![A-Za-z0-9_-])"
_PEM_LABEL = r"(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
_OWN_FORMATS: Final = (
    _rule(
        "private_key",
        # Up to the END line; a truncated block runs over its base64 and header lines.
        # (The block's text stops at the next BEGIN or END line: each character is read
        # for one header at most, where a lazy scan per header was quadratic.)
        rf"-----BEGIN {_PEM_LABEL}(?:(?:[^-]++|-(?!----(?:BEGIN|END) ))*+-----END {_PEM_LABEL}"
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
    # The lookbehind after the prefix: a prefix inside a word fails at once (the body
    # holds every character of the prefix, so a search would read on from each one).
    _rule("github_token", r"github_pat_(?<!\wgithub_pat_)[A-Za-z0-9_]{50,255}+" + _END),
    # (The prefixes as needs: the search tries the alternation at each ``A`` of ``AAAA…``.)
    _rule(
        "aws_access_key",
        r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
        needs=("a3t", "akia", "asia", "abia", "acca"),
    ),
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
        left_widths=(10, 9, 8),
    ),
    _rule(
        "mailchimp_key",
        r"-us[0-9]{1,2}(?![A-Za-z0-9])",
        word_start=False,
        left=r"(?<![A-Za-z0-9])[0-9a-f]{32}",
        left_widths=(32,),
    ),
    # GitLab's formats (as detect-secrets writes them; the agent token's long body as a
    # run rule).
    _rule("gitlab_token", r"(?:glpat|gldt|glft|glsoat|glrt)-[A-Za-z0-9_-]{20,50}+(?!\w)"),
    _rule("gitlab_token", r"GR1348941[A-Za-z0-9_-]{20,50}+(?!\w)"),
    _rule("gitlab_token", r"glcbt-(?:[0-9a-fA-F]{2}_)?[A-Za-z0-9_-]{20,50}+(?!\w)"),
    _rule("gitlab_token", r"glimt-[A-Za-z0-9_-]{25}(?!\w)"),
    _rule("gitlab_token", r"glptt-[A-Za-z0-9_-]{40}(?!\w)"),
    _run_rule("gitlab_token", "glagent-", r"[A-Za-z0-9_-]{50,1024}+(?!\w)", needs="glagent-"),
    _rule("gitlab_token", r"gloas-[A-Za-z0-9_-]{64}(?!\w)"),
    # npm's ``.npmrc`` line ``//registry…/:_authToken=<token>``, read from its key.
    _rule(
        "npm_token",
        r"/:_authToken=[ \t]*+(npm_[^\s'\"]++|[A-Fa-f0-9-]{36})",
        1,
        word_start=False,
    ),
    # (the JWT rule, which checks its match with detect-secrets, is in ``_Library``)
)
_JWT_PREFIX: Final = "eyJ"
_JWT_REST: Final = r"[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]*+"
_CONTEXT_RULES: Final = (
    _rule(
        "aws_secret_key",
        r"(?i:aws_?secret(?:_?access)?(?:_?key)?)[\"']?\s*+[:=]\s*+[\"']?"
        r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        1,
        needs="aws",
    ),
    # userinfo may hold ':' but never '@', '/' or '[', so a marker never matches.
    _rule(
        "url_password",
        r"://[^\s:/?#\[\]@]*+:([^\s/?#\[\]@]++)@(?=[A-Za-z0-9\[])",
        1,
        word_start=False,
    ),
    _rule(
        "bearer_token",
        r"[Bb]earer[ \t]++([A-Za-z0-9._~+/-]{20,}+=*+)",
        1,
        _has_digit_and_letter,
        needs="bearer",  # no literal prefix: the search would try every character
    ),
    # An Authorization header's credentials: after a scheme (``Basic`` holds base64 of
    # ``user:password``), or alone, a token of 20+ characters without dashes.
    _rule(
        "bearer_token",
        r"(?i:(?:proxy-)?authorization)[\"']?[ \t]*+[:=][ \t]*+[\"']?"
        r"(?i:basic|bearer|token|digest|negotiate|apikey|key)[ \t]++([A-Za-z0-9._~+/=-]{16,}+)",
        1,
        _has_digit_and_letter,
        word_start=False,
        needs="authorization",
    ),
    _rule(
        "bearer_token",
        r"(?i:(?:proxy-)?authorization)[\"']?[ \t]*+[:=][ \t]*+[\"']?([A-Za-z0-9._~+/=]{20,}+)(?!-)",
        1,
        _has_digit_and_letter,
        word_start=False,
        needs="authorization",
    ),
    # Headers named for an API key or a token: ``X-Api-Key: …``, ``Private-Token: …``.
    _rule(
        "generic_secret",
        r"(?i:(?:x-(?:goog-)?)?api-key)[\"']?[ \t]*+[:=][ \t]*+[\"']?([A-Za-z0-9._~+/=-]{16,}+)",
        1,
        _has_digit_and_letter,
        word_start=False,
        needs="api-key",
    ),
    _rule(
        "generic_secret",
        r"(?i:(?:x-auth|x-access|private)-token)[\"']?[ \t]*+[:=][ \t]*+[\"']?([A-Za-z0-9._~+/=-]{16,}+)",
        1,
        _has_digit_and_letter,
        word_start=False,
        needs="-token",
    ),
    # A command-line option named for a token or a credential key: ``--token …``,
    # ``--auth-token …``, ``--api-key …``, ``--access-key …`` (not ``--sort-key``, not a
    # path; ``--password …`` is a keyword's: ``makad.core.keyword_values``).
    _rule(
        "generic_secret",
        r"(?<![\w-])--(?:(?:[A-Za-z0-9]++-)*+(?i:token)|(?i:api|access|secret|auth|private|client|account)-key)"
        r"[ \t]++(?![/~.])([A-Za-z0-9._~+/=-]{16,}+)",
        1,
        _has_digit_and_letter,
        word_start=False,
        # The leading lookbehind is tried at every character of the text: run only on a
        # text that holds a whole option name's parts.
        needs=("token", "-key"),
        needs_all=("--",),
    ),
    _rule(
        "generic_secret",
        r"(?i:token)[\"']?\s*+[:=]\s*+[\"']?([A-Za-z0-9_.~+/=-]{20,}+)",
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
    # The format rules alone (no context): what the joins of path segments are read with.
    formats: tuple[_Rule, ...]
    # Every rule's ``needs``, looked up once per text.
    needs: tuple[str, ...]
    keyword: re.Pattern[str]
    keyword_any_case: re.Pattern[str]
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
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector

    # detect-secrets' own format patterns, for services the rules above do not name (each
    # is a literal prefix and a bounded or final run: linear, as the tests check).
    library_formats = (
        ("pypi_token", PypiTokenDetector()),
        ("sendgrid_key", SendGridDetector()),
        ("square_oauth_secret", SquareOAuthDetector()),
        ("azure_storage_key", AzureStorageKeyDetector()),
    )
    jwt = _run_rule("jwt", _JWT_PREFIX, _JWT_REST, needs="eyj", is_valid=JwtTokenDetector.is_formally_valid)
    library_rules = tuple(_Rule(kind, regex) for kind, plugin in library_formats for regex in plugin.denylist)
    formats = (*_OWN_FORMATS, jwt, *library_rules)
    rules = (*formats, *_CONTEXT_RULES)
    return _Library(
        rules=rules,
        formats=formats,
        needs=tuple(sorted({needed for rule in rules for needed in (*rule.needs, *rule.needs_all)})),
        keyword=re.compile("|".join(keyword.DENYLIST)),
        keyword_any_case=re.compile("|".join(keyword.DENYLIST), re.IGNORECASE),
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
_SYMBOL: Final = re.compile(r"[^A-Za-z0-9._-]")
_PASSWORD_KEY: Final = re.compile(r"pass|pwd|contrase", re.IGNORECASE)
_REFERENCE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*+[(\[]")  # a call or a lookup
# A longer text is read in windows of WINDOW characters (each with OVERLAP more on either
# side), so no single scan of the detector runs over more than WINDOW + 2 * OVERLAP: a
# secret is found by the window its start falls in, whole if it is shorter than OVERLAP.
WINDOW: Final = 128 * 1024
OVERLAP: Final = 16 * 1024


def find_spans(text: str, depth: int = 0) -> list[Span]:
    """The secrets in ``text``: sorted, non-overlapping ``(start, end, kind)``.

    Detection runs on the normalized view (invisible characters dropped, ASCII
    look-alikes folded); each span is mapped back so it covers the original
    characters, the invisible ones inside the secret included.
    """
    if len(text) <= WINDOW + 2 * OVERLAP:
        return _find_normalized(text, depth)
    spans: list[Span] = []
    for low in range(0, len(text), WINDOW):
        start = max(0, low - OVERLAP)
        found = _find_normalized(text[start : low + WINDOW + OVERLAP], depth)
        more = [(a + start, b + start, kind) for a, b, kind in found if low <= a + start < low + WINDOW]
        # A span reaching back into the previous window (windows overlap) keeps its part
        # from ``low`` on: one shorter than OVERLAP the previous window found whole, but a
        # stretch redacted whole for its density (``DENSE_KIND``) can be longer.
        more += [(low, b + start, kind) for a, b, kind in found if a + start < low < b + start]
        # Only the spans reaching past ``low`` can overlap the window's (which all start
        # at ``low`` or later): merged with them alone, not with every span so far, the
        # union costs what the window found, so a long text costs time linear in its size.
        keep = bisect.bisect_right(spans, low, key=operator.itemgetter(1))
        spans[keep:] = union(spans[keep:], more)
    return spans


def _find_normalized(text: str, depth: int) -> list[Span]:
    if text.isascii():  # nothing to normalize (O(1) in CPython): the common case
        return _find(text, depth)
    view = normalized_view(text)
    if view is None:
        return _find(text, depth)
    return [(*view.original(start, end), kind) for start, end, kind in _find(view.text, depth)]


def _find(text: str, depth: int) -> list[Span]:
    """The secrets of the text itself, of its unescaped view (URL and JSON escapes
    decoded), and the tokens a path separator cuts in two (or in up to four)."""
    dense: list[Span] = []
    spans = _layers(text, depth, everything=True, dense=dense)
    if "%" in text or "\\" in text:
        unescaped = unescaped_view(text)
        if unescaped is not None:
            dense_view: list[Span] = []
            add_spans(
                spans, _mapped([unescaped], _layers(unescaped.text, depth, everything=True, dense=dense_view))
            )
            spans = union(spans, _mapped([unescaped], _split_spans(unescaped.text, depth)))
            dense.extend(_mapped([unescaped], dense_view))
    if "/" in text or "\\" in text:
        spans = union(spans, _split_spans(text, depth))
    return union(spans, dense)


def _may_hold_split_token(text: str) -> bool:
    """Whether a path separator may cut a token in ``text``: a token and the separators
    cutting it are 20+ run characters in a row (``\\`` counted as one)."""
    if "\\" in text:
        return has_long_run(text.replace("\\", "/"))
    return "/" in text and has_long_run(text)


# What ends a path segment besides a separator.
_SEGMENT_END: Final = re.compile(r"[\s/\\'\"`<>()\[\]{},;]")
_SEPARATORS: Final = re.compile(r"[/\\]++")
_SEPARATOR: Final = re.compile(r"[/\\]")
# The starts of the format tokens, and the middles of the two whose start is a number
# (a Telegram bot's id before ``:AA``, a Mailchimp key's hex before ``-us``).
_SPLIT_START: Final = re.compile(
    r"sk[-_]|rk_|gh[pousr]_|github_pat|A3T|AKIA|ASIA|ABIA|ACCA|xox|xapp-|whsec_|AIza|GOCSPX-"
    r"|hf_|npm_|gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|GR1348941|eyJ|pypi-|SG\.|sq0csp-"
    r"|AccountKey=|:AA|-us[0-9]"
)
# How far before ``:AA`` and ``-us`` their tokens start, and what they start with.
_LEFT_PARTS: Final = {":AA": 10, "-us": 32}
_NUMBER_OR_CUT: Final = frozenset("0123456789abcdef/\\")
# The longest fixed start a token has (``sk-svcacct-``, ``github_pat_``): the _SPLIT_START
# above is only its beginning, so every segment up to that far joins.
_LONGEST_START: Final = 11
MAX_SEGMENT: Final = 256
MAX_SPLITS: Final = 3


def _split_spans(text: str, depth: int) -> list[Span]:
    """Format tokens (no context rules, no keywords) that path separators cut: the
    segment holding a token's start joined with the next one, two, then three; what a
    join finds across a separator is mapped back over it. Once the pieces hold a whole
    token, a next segment joins only if it starts within the token's fixed start
    (``sk/-/svcacc/t-…``) or could go on a token (``_may_continue``): a path's own words
    (``/details``) do not, so a token whole in a path keeps the path after it.

    Past ``_joins_budget(text)`` segments joined so, a segment holding a token's start is
    not joined but redacted whole with the segments it would join (``DENSE_CUTS_KIND``)."""
    if not _may_hold_split_token(text):
        return []
    found: list[Span] = []
    dense: list[Span] = []
    budget = _joins_budget(text)
    for cut, reach in sorted(_cuts(text).items()):
        first = cut
        floor = max(0, cut - MAX_SEGMENT)
        while first > floor and _SEGMENT_END.match(text, first - 1) is None:
            first -= 1
        if budget <= 0:
            last = max((end for _, end in _segments_after(text, cut)), default=cut)
            dense.append((first, last, DENSE_CUTS_KIND))
            continue
        if not _may_join_a_token(text, first, cut):
            continue
        budget -= 1
        pieces = [(first, cut)]
        # Until the pieces hold a whole token, any next segment may be its rest
        # (``sk-…/euceiu/…``): only a token already whole stops at a path's own words.
        whole = bool(_layers(text[first:cut], depth, everything=False))
        for at, end in _segments_after(text, cut):
            if whole and at > reach and not _may_continue(text[at:end]):
                break
            pieces.append((at, end))
            across = _across(text, pieces, depth)
            found = union(found, across)
            whole = whole or bool(across)
    return union(found, dense)


# Joining the segments around a cut costs ~50-200 µs (the format rules run on each join):
# a text may have this many cut token starts joined, one per JOIN_CHARS characters, at
# least MIN_JOINS. Prose, code, logs and URL lists stay far below it; a run such as
# ``sk-ant-\\/sk-ant-\\/…`` (a cut token start every 9 characters, ~20 µs a byte read
# in full) has the rest redacted whole, as ``DENSE_CUTS_KIND``.
JOIN_CHARS: Final = 200
MIN_JOINS: Final = 64
DENSE_CUTS_KIND: Final = "dense_token_cuts"


def _joins_budget(text: str) -> int:
    return max(MIN_JOINS, len(text) // JOIN_CHARS)


def _segments_after(text: str, cut: int) -> Iterator[tuple[int, int]]:
    """The (start, end) of each of the up to ``MAX_SPLITS`` non-empty segments that follow
    the separators after ``cut``, in order, up to the first empty one."""
    following = _SEPARATORS.match(text, cut)
    for _ in range(MAX_SPLITS):
        if following is None:
            return
        at = following.end()
        stop = _SEGMENT_END.search(text, at, at + MAX_SEGMENT)
        end = stop.start() if stop is not None else min(len(text), at + MAX_SEGMENT)
        if end == at:
            return
        yield at, end
        following = _SEPARATORS.match(text, end)


def _may_join_a_token(text: str, first: int, cut: int) -> bool:
    """Whether the segment ``text[first:cut]`` joined with as many of the next segments as
    ``_split_spans`` may join to it holds a run of 20 (every token does): without one, no
    join finds anything, and what the segment holds alone does not matter."""
    pieces = [text[first:cut]]
    pieces.extend(text[at:end] for at, end in _segments_after(text, cut))
    return has_long_run("".join(pieces))


def _cuts(text: str) -> dict[int, int]:
    """The separators that may cut a token, each with how far its token's fixed start
    reaches: one inside a token's start (``sk/-proj-…``), the first after a token's start
    in its segment, or one inside the number a Telegram or Mailchimp token starts with.
    The starts are looked for with the separators taken out, so a start cut is found too."""
    squeezed = text.replace("/", "").replace("\\", "")
    starts = list(_SPLIT_START.finditer(squeezed))
    if not starts:
        # No token starts here: listing the separators (one Python object each, seconds
        # on a megabyte of ``////…``) would be for nothing.
        return {}
    separators = _separator_positions(text)
    shifted = _shifted(separators)
    cuts: dict[int, int] = {}

    def position(squeezed_at: int) -> int:
        # Each separator before a character shifts its position in ``text`` by one.
        return squeezed_at + bisect.bisect_right(shifted, squeezed_at)

    def add(cut: int, reach: int) -> None:
        cuts[cut] = max(reach, cuts.get(cut, reach))

    for start in starts:
        first, last = position(start.start()), position(start.end() - 1)
        middle = _LEFT_PARTS.get(start.group()[:3])
        reach = position(start.end() if middle is not None else start.start() + _LONGEST_START)
        inside = bisect.bisect_right(separators, first)
        if inside < len(separators) and separators[inside] < last:
            add(separators[inside], reach)  # the start itself is cut
            if middle is None:
                continue
        if middle is not None:
            # The number before it, separators and all: each separator in it may be a
            # cut (the first may also be the path's own, before the number).
            number = first
            while number > max(0, first - middle - MAX_SPLITS - 1) and text[number - 1] in _NUMBER_OR_CUT:
                number -= 1
            for found in _SEPARATOR.finditer(text, max(1, number), first):
                add(found.start(), reach)
        elif first > 0 and _is_word_char(text[first - 1]):
            continue  # glued to a word: not a token's start
        stop = _SEGMENT_END.search(text, last + 1, last + 1 + MAX_SEGMENT)
        if stop is not None and text[stop.start()] in "/\\":
            add(stop.start(), reach)
    return cuts


# Each ASCII byte as 1 when it is a path separator, else 0.
_SEPARATOR_BYTES: Final = bytes(int(chr(byte) in "/\\") for byte in range(256))


def _separator_positions(text: str) -> list[int]:
    """Where the separators are. (Picked in C for an ASCII text: a match object per
    separator costs seconds on a megabyte of ``////…``.)"""
    if text.isascii():
        flags = text.encode("ascii").translate(_SEPARATOR_BYTES)
        return list(itertools.compress(range(len(text)), flags))
    return [found.start() for found in _SEPARATOR.finditer(text)]


def _shifted(separators: list[int]) -> list[int]:
    """For each separator, the position in the text without separators of the character
    right after it (so a bisect on it counts the separators before a position)."""
    return list(map(operator.sub, separators, range(len(separators))))


def _may_continue(segment: str) -> bool:
    """Whether a path segment could be the rest of a token: short, or holding a digit, a
    capital, ``-`` or ``_`` (a path's plain words, ``details``, are not)."""
    return len(segment) <= 5 or any(c.isdigit() or c.isupper() or c in "-_" for c in segment)


def _across(text: str, pieces: list[tuple[int, int]], depth: int) -> list[Span]:
    """The format tokens of the pieces joined that cross a join, in ``text``'s positions."""
    joined = "".join(text[a:b] for a, b in pieces)
    if not has_long_run(joined):
        return []
    joins: list[int] = []  # where each piece after the first starts in ``joined``
    offset = 0
    for a, b in pieces[:-1]:
        offset += b - a
        joins.append(offset)
    out: list[Span] = []
    for start, end, kind in _layers(joined, depth, everything=False):
        if any(start < at < end for at in joins):
            out.append((_position(pieces, start), _position(pieces, end - 1) + 1, kind))
    return out


def _position(pieces: list[tuple[int, int]], index: int) -> int:
    """The position in the text of character ``index`` of the pieces joined."""
    for a, b in pieces:
        if index < b - a:
            return a + index
        index -= b - a
    raise IndexError(index)


def _mapped(views: list[View], spans: list[Span]) -> list[Span]:
    """Spans found in the last view of a chain, mapped back to the text the first was made of."""
    out = []
    for start, end, kind in spans:
        for view in reversed(views):
            start, end = view.original(start, end)
        out.append((start, end, kind))
    return out


def _layers(text: str, depth: int, *, everything: bool, dense: list[Span] | None = None) -> list[Span]:
    """Formats, then (with ``everything``) context rules and keywords, then base64; a
    stretch of a long line too dense with keywords to read (``DENSE_KEYWORDS``) goes to
    ``dense`` whole, to be redacted as it is."""
    folded = text.lower()
    has_run = has_long_run(text)
    has_format = has_run or "://" in text or "-----BEGIN" in text or "PuTTY-User-Key-File" in text
    if len(folded) == len(text):
        if not (has_format or (everything and may_hold_keyword(folded))):
            return []
        keyword, lowered = library().keyword, folded
        has_keyword = everything and may_hold_keyword(folded) and keyword.search(folded) is not None
    else:  # lower() lengthened a character (e.g. U+0130): positions would drift
        keyword, lowered = library().keyword_any_case, text
        has_keyword = everything and keyword.search(text) is not None
    if not (has_keyword or has_format):
        return []
    spans: list[Span] = []
    if has_format:
        rules = library().rules if everything else library().formats
        add_spans(spans, _rule_spans(text, folded, rules))
    if has_keyword:
        add_spans(spans, _keyword_spans(text, lowered, keyword, [] if dense is None else dense))
    if has_run and depth < MAX_BASE64_DEPTH:
        add_spans(spans, _base64_spans(text, depth))
    return spans


def _base64_spans(text: str, depth: int) -> Iterator[Span]:
    """Base64 runs whose decoded text holds a secret (kind ``base64_<inner kind>``): the
    whole piece when it decodes to text alone, else the characters encoding the secret."""
    for match in base64_runs(text):
        for decoded in decoded_texts(match.group()):
            if not _may_hold_secret(decoded.text):
                continue
            inner = find_spans(decoded.text, depth + 1)
            if inner:
                start, end = decoded.chars(inner[0][0], inner[-1][1])
                kind = "base64_" + inner[0][2].removeprefix("base64_")
                yield match.start() + start, match.start() + end, kind


def _may_hold_secret(text: str) -> bool:
    """The detector's own first test, cheaper than calling it: a run of 20, a keyword's
    letters, a URL or a key header (invisible and look-alike characters aside)."""
    return (
        has_long_run(text)
        or may_hold_keyword(text.lower())
        or "://" in text
        or "-----BEGIN" in text
        or "PuTTY" in text
        or not text.isascii()
    )


def may_hold_keyword(lowered: str) -> bool:
    # Every detect-secrets keyword holds one of these; plain substring tests
    # are several times cheaper than the keyword alternation.
    return (
        holds(lowered, "key")
        or holds(lowered, "pass")
        or holds(lowered, "pwd")
        or holds(lowered, "secret")
        or holds(lowered, "contrase")
    )


def holds(text: str, word: str) -> bool:
    """``word in text``, answered first by looking for each of its characters alone. A
    substring search moves one character at a time through a run of a character of the
    word (``aws`` in ``aaaa…``: ~15 ns a character); a one-character search is a memchr."""
    return all(char in text for char in word) and word in text


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


def union(spans: list[Span], more: list[Span]) -> list[Span]:
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


def _rule_spans(text: str, folded: str, rules: tuple[_Rule, ...]) -> Iterator[Span]:
    present = frozenset(needed for needed in library().needs if holds(folded, needed))
    for rule in rules:
        if rule.needs and present.isdisjoint(rule.needs):
            continue
        if not present.issuperset(rule.needs_all):
            continue
        for match in rule.regex.finditer(text):
            start, end = match.span(rule.group)
            if rule.left is not None:
                left = rule.left
                fits = (w for w in rule.left_widths if w <= start and left.fullmatch(text, start - w, start))
                width = next(fits, None)
                if width is None:
                    continue
                start -= width
            secret = text[start:end]
            if start == end or MARKER_PREFIX in secret:
                continue
            if rule.word_start and match.start() > 0 and _is_word_char(text[match.start() - 1]):
                continue
            if rule.is_valid is None or rule.is_valid(secret):
                yield start, end, rule.kind


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _keyword_spans(text: str, lowered: str, keyword: re.Pattern[str], dense: list[Span]) -> Iterator[Span]:
    done_until = -1
    for hit in keyword.finditer(lowered):
        if hit.start() < done_until:
            continue
        # The line around the keyword, looked for no further than LONG_LINE either way.
        floor = max(0, hit.start() - LONG_LINE - 1)
        start = max(text.rfind("\n", floor, hit.start()), text.rfind("\r", floor, hit.start())) + 1
        if start == 0 and floor > 0:
            start = floor
        end = line_end = end_of_line(text, hit.start(), LONG_LINE + 1)
        done_until = end
        if end - start > LONG_LINE:
            # Minified JSON and the like: look around the keyword, not at the whole
            # line. Windows overlap, and a value touching a cut edge waits for the next.
            start, end = max(start, hit.start() - 200), min(end, hit.end() + 800)
            line_end = -1 if end < len(text) and text[end] not in "\r\n" else end
            done_until = end - 400
            if _dense(keyword, lowered, start, end):
                dense.append((start, end, DENSE_KIND))
                continue
        for value_start, value_end in _keyword_values(text[start:end]):
            if end == line_end or start + value_end < end - 50:
                yield start + value_start, start + value_end, "generic_secret"


# A window of a long line holding more keywords than this (one every ~10 characters:
# ``pwd=\\/pwd=\\/…``) is not read value by value, which costs a few µs a keyword, seen
# in each of the overlapping windows and each view of the text: the whole window is
# redacted as ``DENSE_KIND``. No prose, code, JSON or key=value text comes near it.
DENSE_KEYWORDS: Final = 96
DENSE_KIND: Final = "dense_keywords"


def _dense(keyword: re.Pattern[str], lowered: str, start: int, end: int) -> bool:
    for count, _ in enumerate(keyword.finditer(lowered, start, end), start=1):
        if count > DENSE_KEYWORDS:
            return True
    return False


def end_of_line(text: str, pos: int, limit: int | None = None) -> int:
    """Where the line holding ``pos`` ends; with ``limit``, at most that far ahead."""
    stop = len(text) if limit is None else min(len(text), pos + limit)
    newline = text.find("\n", pos, stop)
    if newline >= 0:
        stop = newline
    ret = text.find("\r", pos, stop)
    return ret if ret >= 0 else stop


def _keyword_values(line: str) -> Iterator[tuple[int, int]]:
    found_library = library()
    for start, end, quoted in keyword_values(line, found_library.keyword, found_library.keyword_any_case):
        # A quoted password may be a plain word; other keys' values must look random.
        lenient = quoted and _PASSWORD_KEY.search(line, max(0, start - 40), start) is not None
        if _plausible(line[start:end], lenient):
            yield start, end


def _plausible(value: str, lenient: bool) -> bool:
    """Whether a keyword's value looks like a credential rather than prose or a reference."""
    if len(value) < 6 or MARKER_PREFIX in value or value.startswith("$"):
        return False
    if library().is_templated_secret(value) or is_sequential_string(value) or len(set(value)) < 3:
        return False
    if value.lower().strip("<>[]{}'\"") in _PLACEHOLDERS:
        return False
    if lenient:
        return True
    if _REFERENCE.match(value):
        return False
    if value.isascii():  # (str.isdigit and str.isalpha are these on ASCII: one search each)
        has_digit = _ASCII_DIGIT.search(value) is not None
        has_letter = _ASCII_LETTER.search(value) is not None
    else:
        has_digit = any(c.isdigit() for c in value)
        has_letter = any(c.isalpha() for c in value)
    return has_letter and (has_digit or bool(_SYMBOL.search(value)))


# detect-secrets' ``is_sequential_string`` sequences (``filters.heuristic``), built once:
# the function builds them again on every call, a third of a keyword value's checks.
_SEQUENCES: Final = (
    string.ascii_uppercase + string.ascii_uppercase + string.digits + "+/",
    string.digits + string.ascii_uppercase + string.ascii_uppercase + "+/",
    (string.digits + string.ascii_uppercase) * 2,
    string.digits * 2,
    string.hexdigits.upper() + string.hexdigits.upper(),
    string.ascii_uppercase + "=/",
)
_ASCII_DIGIT: Final = re.compile(r"[0-9]")
_ASCII_LETTER: Final = re.compile(r"[A-Za-z]")


def is_sequential_string(value: str) -> bool:
    """Whether ``value``, upper-cased, is part of an alphabet or a counting sequence
    (``ABCDEF``, ``123456``): detect-secrets' test, with its sequences built once."""
    upper = value.upper()
    return any(upper in sequence for sequence in _SEQUENCES)

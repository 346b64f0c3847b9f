"""Secret shapes times the places secrets travel in: a URL's path or query string, a file
name, a JSON string, an Authorization header. Shared by the redactor's own tests and
the daemon's (every write path), with the check that nothing of a secret is left, read
the way an attacker would read it: as is, URL-unescaped, JSON-unescaped, and decoded
from base64 in both alphabets at every alignment."""

from __future__ import annotations

import base64
import binascii
import json
import re
import urllib.parse
from typing import NamedTuple

from hypothesis import strategies as st

from tests.core.secret_corpus import ALNUM, CASES, HEX, URLSAFE, fake

# Format tokens: recognised by their shape anywhere (in a path, a name, a query).
TOKENS = [c for c in CASES if " " not in c.secret and "\n" not in c.secret and c.text.find(c.secret) >= 0]
FORMAT_TOKENS = [
    c
    for c in TOKENS
    if c.kind not in ("generic_secret", "bearer_token", "url_password", "aws_secret_key", "slack_webhook")
]
PRIVATE_KEYS = [c for c in CASES if c.kind == "private_key" and "-----BEGIN" in c.secret]


class Shape(NamedTuple):
    """A secret, what is put in the wrapper (the secret itself or an encoding of a text
    holding it), and whether it needs a context (a key's name) to be recognised."""

    label: str
    secret: str
    carried: str
    needs_context: bool


@st.composite
def shapes(draw: st.DrawFn) -> Shape:
    kind = draw(st.sampled_from(["format", "base64", "high_entropy", "private_key"]))
    if kind == "format":
        case = draw(st.sampled_from(FORMAT_TOKENS))
        return Shape(case.kind, case.secret, case.secret, needs_context=False)
    if kind == "base64":
        case = draw(st.sampled_from(TOKENS))
        encode = draw(st.sampled_from([base64.b64encode, base64.urlsafe_b64encode]))
        carried = encode(case.text.encode()).decode()
        if draw(st.booleans()):
            carried = carried.rstrip("=")
        return Shape("base64_" + case.kind, case.secret, carried, needs_context=False)
    if kind == "high_entropy":
        seed = str(draw(st.integers(0, 10_000)))
        alphabet = draw(st.sampled_from([ALNUM, HEX, URLSAFE]))
        secret = fake("he" + seed, draw(st.integers(24, 64)), alphabet)
        if not (any(c.isdigit() for c in secret) and any(c.isalpha() for c in secret)):
            secret = "7" + secret[1:] + "q"
        return Shape("high_entropy", secret, secret, needs_context=True)
    case = draw(st.sampled_from(PRIVATE_KEYS))
    return Shape("private_key", case.secret, case.secret, needs_context=False)


KEY_NAMES = ["api_key", "access_token", "token", "secret", "password", "client_secret"]
NEUTRAL = ["id", "q", "ref", "v", "sig", "blob"]


@st.composite
def wrapped(draw: st.DrawFn, shape: Shape) -> str:
    """The text an agent or a tool would write with ``shape`` inside."""
    carried = shape.carried
    multiline = "\n" in carried
    places = ["query", "json", "header"]
    if not shape.needs_context and not multiline:
        places += ["url_path", "url_path_end", "file", "file_glued", "windows_file", "json_php"]
    place = draw(st.sampled_from(places))
    name = draw(st.sampled_from(KEY_NAMES if shape.needs_context else KEY_NAMES + NEUTRAL))
    host = draw(st.sampled_from(["api.example.com", "cdn.example.org:8443", "10.0.0.7"]))
    if place == "url_path":
        return (
            f"GET https://{host}/v1/{draw(st.sampled_from(['files', 'x', 'u/7']))}/{carried}/details?page=2"
        )
    if place == "url_path_end":
        return f"see https://{host}/d/{carried}"
    if place == "query":
        params = {"page": "2", name: carried, "lang": "en"}
        if draw(st.booleans()):
            return f"https://{host}/v1/items?{urllib.parse.urlencode(params)}"
        return f"https://{host}/v1/items?page=2&{name}={carried}&lang=en"
    if place == "file":
        return f"wrote /home/u/.cache/tool/{carried}.json"
    if place == "file_glued":
        return f"cached at ~/.cache/app/blob-{carried}.bin (3 KB)"
    if place == "windows_file":
        return f"C:\\Users\\me\\AppData\\Local\\{carried}.tmp"
    if place in ("json", "json_php"):
        text = json.dumps({"url": f"https://{host}/x", name: carried, "n": 1})
        return text.replace("/", "\\/") if place == "json_php" else text
    if shape.needs_context or draw(st.booleans()):
        scheme = draw(st.sampled_from(["Bearer", "token", "Basic"]))
        value = base64.b64encode(f"alice:{carried}".encode()).decode() if scheme == "Basic" else carried
        return f"curl -H 'Authorization: {scheme} {value}' https://{host}/v1"
    return f"Authorization: {carried}"


@st.composite
def split_tokens(draw: st.DrawFn) -> tuple[str, str]:
    """A format token cut by one to three path separators, in a path or a URL."""
    case = draw(st.sampled_from(FORMAT_TOKENS))
    secret = case.secret
    cuts = sorted(draw(st.lists(st.integers(2, len(secret) - 2), min_size=1, max_size=3, unique=True)))
    separator = draw(st.sampled_from(["/", "\\"]))
    pieces = [secret[a:b] for a, b in zip([0, *cuts], [*cuts, len(secret)], strict=True)]
    path = separator.join(pieces)
    around = draw(st.sampled_from(["open /tmp/cache/{}/x", "GET https://api.example.com/v2/{}", "{}"]))
    return secret, around.format(path)


_STANDARD = re.compile(r"[A-Za-z0-9+/]+")
_URLSAFE = re.compile(r"[A-Za-z0-9_-]+")


def _decodings(text: str) -> list[str]:
    out = []
    for pattern, table in ((_STANDARD, None), (_URLSAFE, str.maketrans("-_", "+/"))):
        for run in pattern.findall(text):
            run = run.translate(table) if table else run
            for alignment in range(4):
                body = run[alignment:]
                body = body[: len(body) - len(body) % 4]
                if body:
                    out.append(binascii.a2b_base64(body).decode("latin-1"))
    return out


def readings(text: str) -> list[str]:
    """The text as is, URL-unescaped, JSON-unescaped, without path separators, and every
    base64 decoding of each of those (twice: base64 in base64)."""
    joined = text.replace("/", "").replace("\\", "")  # path segments put back together
    plain = [text, urllib.parse.unquote(text), text.replace("\\/", "/"), joined]
    once = [decoded for p in plain for decoded in _decodings(p)]
    return [*plain, *once, *(d for p in once for d in _decodings(p))]


def leaked(secret: str, text: str, size: int = 10) -> list[str]:
    """The pieces of ``secret`` (``size`` characters, every 5) found in any reading."""
    pieces = [secret[i : i + size] for i in range(0, max(1, len(secret) - size + 1), 5)]
    seen = readings(text)
    return [piece for piece in pieces if any(piece in reading for reading in seen)]

"""A fixed corpus for comparing the redactor's output with recorded hashes of it.

Each item is a name and the texts it stands for: a single text (``redact`` and
``find_spans``) or several (``redact_joined``, one append's events). The texts are the
string literals of the redaction tests (frozen in ``tests/data/redaction_literals.json``, so
editing a test does not move the corpus), the secret corpus' cases, and seeded random
mixtures of the shapes that cost the scanner most: dense ``key = value`` lines of every
operator and quoting, near-miss keywords, comparisons and options, code, prose, JSON,
runs without a blank, base64 blobs, hex, path separators cutting tokens, invisible and
full-width characters, URL and JSON escapes, lines longer than ``LONG_LINE`` and texts
longer than the detector's window, with real-looking secrets (``secret_corpus``) in them.

``python -m tests.core.redaction_corpus`` prints one ``<name> <sha256>`` line per item:
what ``tests/data/redaction_hashes.txt`` holds for the redactor the hashes were recorded with.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
from collections.abc import Iterator
from pathlib import Path

from makad.core.redaction import find_spans, redact, redact_joined
from tests.core.secret_corpus import CASES, NEAR_MISSES

DATA = Path(__file__).parents[1] / "data"
LITERALS = DATA / "redaction_literals.json"
HASHES = DATA / "redaction_hashes.txt"

_KEYWORDS = [
    "password",
    "passwd",
    "pwd",
    "secret",
    "api_key",
    "apikey",
    "auth_key",
    "private_key",
    "client_secret",
    "db_pass",
    "key_pass",
    "contraseña",
    "contrasena",
    "DB_PASSWORD",
    "ApiKey",
    "my_secret_value",
    "token",
    "access_token",
    "aws_secret_access_key",
    "Authorization",
    "X-Api-Key",
    "Private-Token",
]
_NEAR = [
    "pass",
    "key",
    "keys",
    "keyboard",
    "secretive",
    "passage",
    "compass",
    "monkey",
    "pwdx",
    "secre",
    "passw",
]
_OPERATORS = [
    "=",
    " = ",
    ": ",
    ":",
    " := ",
    " == ",
    " != ",
    " => ",
    "===",
    "!==",
    " ",
    "\t=\t",
    '": "',
    "'] = '",
]
_QUOTES = ["", "", "'", '"', "`"]
_PROSE = [
    "The deploy went fine on Tuesday; we agreed to keep the staging cluster until the migration is done.",
    "Her secret: patience. His password is something only we know.",
    "Remember the keyboard shortcut, the key to the garden and the passage through the compass rose.",
    "We met at the café à Paris — naïve façade, über Straße, 我们今天讨论了部署流程。",
    "Bearer tokens are passed in the Authorization header, see https://example.com/docs?q=1&x=2.",
]
_CODE = [
    "def connect(host, port):\n    return socket.create_connection((host, port), timeout=3)\n",
    "password = get_password()\nkey = headers['k']\nsecret = os.environ[\"SECRET\"]\n",
    'if ("s3cr3tV4lue" == my_password) { login(); }\n',
    'const apiKey = "{{ API_KEY }}";\nlet pwd = `abc${x}def`;\n',
    "export DB_PASSWORD=${DB_PASSWORD:-changeme}\ncurl -H 'X-Api-Key: $KEY' https://api.example.com/v1\n",
    "for (i = 0; i < n; i++) { a[i] = b[i] * 2; }\n",
]


def _rand_value(rnd: random.Random) -> str:
    kind = rnd.randrange(9)
    if kind == 0:
        return "".join(rnd.choices(string.ascii_letters + string.digits, k=rnd.randrange(3, 40)))
    if kind == 1:
        return "".join(rnd.choices(string.ascii_lowercase, k=rnd.randrange(3, 12)))
    if kind == 2:
        return rnd.choice(
            ["null", "changeme", "${DB_PASSWORD}", "<your-api-key>", "{secret}", "123456", "abcdef"]
        )
    if kind == 3:
        return "".join(rnd.choices(string.printable[:94], k=rnd.randrange(4, 24)))
    if kind == 4:
        return rnd.choice(CASES).secret.split("\n")[0]
    if kind == 5:
        return f"get_secret({rnd.randrange(9)})"
    if kind == 6:
        return "hunter" + str(rnd.randrange(1000)) + rnd.choice(["!", ".", ",", ";", ")", ""])
    if kind == 7:
        return base64.b64encode(rnd.randbytes(rnd.randrange(10, 60))).decode()
    return "".join(rnd.choices("ab =:'\"`;-_$!.", k=rnd.randrange(2, 20)))


def _assignment(rnd: random.Random) -> str:
    key = rnd.choice(_KEYWORDS + _NEAR)
    if rnd.random() < 0.2:
        key = (
            rnd.choice(["", "my_", "x-", "--", "--db-", "$"])
            + key
            + rnd.choice(["", "_1", "s", "Value", "]"])
        )
    quote = rnd.choice(_QUOTES)
    value = _rand_value(rnd)
    shape = rnd.randrange(5)
    if shape == 0:
        return f"{quote}{value}{quote} {rnd.choice(['==', '!=', '==='])} {key}"
    if shape == 1:
        return f"{key} {quote or chr(34)}{value}{quote or chr(34)};"
    return f"{key}{rnd.choice(_OPERATORS)}{quote}{value}{quote}"


def _secret_piece(rnd: random.Random) -> str:
    case = rnd.choice(CASES)
    how = rnd.randrange(8)
    if how == 0:
        return case.text
    secret = case.secret
    if how == 1:
        return secret
    if how == 2:
        at = rnd.randrange(1, max(2, len(secret)))
        return secret[:at] + rnd.choice(["/", "\\", "//", "/-/"]) + secret[at:]
    if how == 3:
        at = rnd.randrange(1, max(2, len(secret)))
        return secret[:at] + rnd.choice(["\u200b", "\u00ad", "\ufeff"]) + secret[at:]
    if how == 4:
        return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" and rnd.random() < 0.5 else c for c in secret)
    if how == 5:
        wrapped = base64.b64encode(f"token={secret}".encode()).decode()
        return rnd.choice(["", "/v1/files/", "blob-", "q=a+"]) + wrapped
    if how == 6:
        return "".join(f"%{ord(c):02X}" if c in "/+=-_" else c for c in secret)
    return secret.replace("/", "\\/")


def _piece(rnd: random.Random) -> str:
    kind = rnd.randrange(12)
    if kind < 3:
        return _assignment(rnd)
    if kind == 3:
        return rnd.choice(_PROSE)
    if kind == 4:
        return rnd.choice(_CODE)
    if kind == 5:
        return _secret_piece(rnd)
    if kind == 6:
        return rnd.choice(NEAR_MISSES)
    if kind == 7:
        return json.dumps(
            {rnd.choice(_KEYWORDS + _NEAR + ["name", "id"]): _rand_value(rnd) for _ in range(3)}
        )
    if kind == 8:
        return base64.b64encode(rnd.randbytes(rnd.randrange(20, 200))).decode()
    if kind == 9:
        return rnd.randbytes(rnd.randrange(8, 40)).hex()
    if kind == 10:
        return " ".join(rnd.choices(_NEAR + _KEYWORDS, k=rnd.randrange(2, 12)))
    return rnd.choice(
        ["https://user:", "://", "-----BEGIN RSA PRIVATE KEY-----", "Bearer ", "--token ", "eyJ", "sk-"]
    )


_SEPARATORS = ["\n", "\n", " ", "", "\r\n", "\t", ";", ", ", "/", "\n\n"]


def _mixture(rnd: random.Random, size: int, separators: list[str]) -> str:
    parts: list[str] = []
    total = 0
    while total < size:
        piece = _piece(rnd)
        parts.append(piece + rnd.choice(separators))
        total += len(parts[-1])
    return "".join(parts)


def _repeated(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def items() -> Iterator[tuple[str, list[str]]]:
    """Every item of the corpus: a name and its texts, the same on every run."""
    literals: list[str] = json.loads(LITERALS.read_text(encoding="utf-8"))
    for index, text in enumerate(literals):
        yield f"literal-{index}", [text]
    for index, case in enumerate(CASES):
        yield f"case-{index}", [case.text]
    for index, text in enumerate(NEAR_MISSES):
        yield f"near-{index}", [text]
    rnd = random.Random(20261207)
    for index in range(400):
        yield f"mix-{index}", [_mixture(rnd, rnd.randrange(20, 2000), _SEPARATORS)]
    for index in range(60):
        yield f"dense-{index}", [_mixture(rnd, rnd.randrange(2000, 6000), ["", "", ";", "&"])]
    for index in range(40):
        group = [_mixture(rnd, rnd.randrange(5, 300), _SEPARATORS) for _ in range(rnd.randrange(2, 8))]
        yield f"joined-{index}", group
    for index in range(40):  # secrets cut across events
        secret = rnd.choice(CASES).secret
        cuts = sorted(rnd.sample(range(1, len(secret)), k=min(len(secret) - 1, rnd.randrange(1, 4))))
        pieces = [secret[a:b] for a, b in zip([0, *cuts], [*cuts, len(secret)], strict=True)]
        pieces[0] = _assignment(rnd) + rnd.choice([" ", "\n", "password=", "token: "]) + pieces[0]
        yield f"split-{index}", pieces
    units = [
        "password=hunter2x9\n",
        "password: x\n",
        "password='",
        '"a" == password ',
        "passwd keys pass secretive keyboard ",
        "sk-/abc/",
        "password=x;",
        "--password ",
        "key",
        "token=abcdefghij0123456789xyz ",
        "https://user:pass@example.com/a ",
    ]
    for index, unit in enumerate(units):
        yield f"unit-{index}", [_repeated(unit, 9000)]
    # Longer than LONG_LINE and than the window (128 KiB + 2 * 16 KiB): windows and cuts.
    for index in range(3):
        yield f"long-line-{index}", [_mixture(rnd, 30_000, ["", " ", ";"])]
    for index in range(3):
        yield f"window-{index}", [_mixture(rnd, 200_000 + 70_000 * index, _SEPARATORS)]


def digest(texts: list[str]) -> str:
    """What the redactor makes of an item, hashed: the spans and redaction of each text,
    and, for several texts, their joined redaction."""
    result: list[object] = []
    for text in texts:
        redacted = redact(text)
        result.append([find_spans(text), redacted.text, redacted.count, redacted.kinds])
    if len(texts) > 1:
        joined, count = redact_joined(texts)
        result.append([[r.text, r.count, r.kinds] for r in joined])
        result.append(count)
    encoded = json.dumps(result, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return hashlib.sha256(encoded).hexdigest()


if __name__ == "__main__":
    for name, texts in items():
        print(name, digest(texts))

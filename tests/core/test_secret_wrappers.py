"""Secrets in URLs, paths, file names, JSON strings and Authorization headers, as the
redactor sees them: the provider formats, base64 of a text holding one (glued to a path
or a name, padded or not, either alphabet), high-entropy keys named as such, private
keys; and tokens cut by path separators. Nothing of the secret is left in any reading of
the result; ordinary text in the same places is untouched."""

from __future__ import annotations

import base64
import json
import urllib.parse
import uuid

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from makad.core.redaction import redact
from tests.secret_wrappers import Shape, leaked, shapes, split_tokens, wrapped


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_secrets_in_urls_paths_names_json_and_headers_are_redacted(data: st.DataObject) -> None:
    """Every secret shape in every place it can be recognised in is redacted: no piece of
    it is left, as is, URL- or JSON-unescaped, or base64-decoded at any alignment."""
    shape: Shape = data.draw(shapes())
    text = data.draw(wrapped(shape))
    result = redact(text)
    assert leaked(shape.secret, result.text) == [], (shape.label, text, result.text)
    assert result.count >= 1


@settings(max_examples=300, deadline=None)
@given(split_tokens())
@example(  # a middle piece that reads like a path's own word
    (
        "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",
        "open /tmp/cache/sk-bmxSp4DxB/euceiu/dt0CgT3BlbkFJAhmhOhrIg1DHLfN3DpK9/x",
    )
)
def test_a_token_cut_by_path_separators_is_redacted_whole(sample: tuple[str, str]) -> None:
    """A provider token cut in two to four by ``/`` or ``\\`` inside one path: no piece of
    it is left, the segments joined back together included."""
    secret, text = sample
    result = redact(text)
    assert leaked(secret, result.text) == [], (text, result.text)


@pytest.mark.parametrize(
    "text",
    [
        "GET https://api.example.com/v1/files/" + base64.b64encode(b"holiday photos from the lake").decode(),
        "~/.cache/app/blob-" + base64.urlsafe_b64encode(b"the quarterly report, final").decode() + ".bin",
        "https://example.com/search?" + urllib.parse.urlencode({"q": "tea & biscuits / scones", "page": 3}),
        json.dumps({"url": "https://example.com/a/b/c", "id": str(uuid.UUID(int=7))}).replace("/", "\\/"),
        "commit 3f2a9c1e8b7d6a5f4e3c2b1a0f9e8d7c6b5a4f3e in /repo/src/makad/core/redaction.py",
        "Authorization: Bearer tokens are sent by the client",
        "C:\\Users\\me\\AppData\\Local\\Temp\\pip-build-env-5kq2x\\overlay\\Lib\\site-packages",
        "/usr/lib/python3.11/site-packages/sk-learn/sklearn/utils/validation.py",
    ],
)
def test_ordinary_paths_urls_and_base64_stay(text: str) -> None:
    """Base64 of ordinary words in a path or a name, escaped query strings, escaped JSON
    slashes, SHAs, Windows paths and prose about headers are left exactly as they are."""
    assert redact(text).text == text


def test_a_whole_token_in_a_path_keeps_the_words_after_it() -> None:
    """A token that is one whole segment is redacted alone: the path's next word stays."""
    token = "ghp_" + "aB3" * 12
    result = redact(f"GET https://api.example.com/repos/{token}/details")
    assert result.text == "GET https://api.example.com/repos/[REDACTED:github_token]/details"

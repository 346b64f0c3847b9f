"""Answering LoCoMo questions from a pack with a main model, and scoring the answers.

The model is any OpenAI-compatible chat-completions endpoint (``--answer-url``,
the base before ``/chat/completions``; ``--answer-model``; a bearer key from
``--answer-key-file`` or ``MAKA_AB_ANSWER_API_KEY``; each also from
``MAKA_AB_ANSWER_URL`` / ``MAKA_AB_ANSWER_MODEL``). It gets the pack as the
agent would — the segments as the system prompt, the pack's history messages
(the question last) — and LoCoMo's short-answer instruction, at temperature 0.

Scoring is LoCoMo's (``task_eval/evaluation.py`` of the paper's code): token F1
between the answer and the reference after normalising both — lower case,
commas and punctuation removed, the words a/an/the/and dropped, whitespace
collapsed — and stemming each token with Porter's stemmer (nltk's, which the
paper's code uses; when nltk is missing the tokens are compared unstemmed and
``STEMMED`` says so). Per category, as the paper scores them:

- 1 (multi-hop): the reference is split on commas; each part scores the best F1
  of any comma-separated part of the answer; the mean over the parts;
- 2 (temporal), 4 (single-hop): plain F1;
- 3 (open-domain): F1 against the reference's first ``;``-separated part;
- 5 (adversarial): 1 when the answer says "not mentioned" or "no information
  available", else 0.
"""

from __future__ import annotations

import json
import os
import re
import string
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    from nltk.stem import PorterStemmer

    _stem: Callable[[str], str] = PorterStemmer().stem
    STEMMED = True
except ImportError:  # pragma: no cover - nltk is in the dev extra

    def _stem(word: str) -> str:
        return word

    STEMMED = False

INSTRUCTION = (
    "Based on the above context, write an answer in the form of a short phrase for the "
    "following question. Answer with exact words from the context whenever possible. If the "
    "context does not contain the answer, answer: not mentioned."
)
ADVERSARIAL_MARKERS = ("not mentioned", "no information available")
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    """LoCoMo's normalisation: lower case, no commas or punctuation, no a/an/the/and."""
    text = text.replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def tokens(text: str) -> list[str]:
    return [_stem(word) for word in normalize(text).split()]


def token_f1(answer: str, reference: str) -> float:
    """Token-level F1 of an answer against a reference (0.0 when they share no token)."""
    got, want = tokens(answer), tokens(reference)
    same = sum((Counter(got) & Counter(want)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(got), same / len(want)
    return 2 * precision * recall / (precision + recall)


def score(answer: str, reference: str, category: int) -> float:
    """The answer's score for a question of ``category`` (see module doc)."""
    if category == 5:
        lowered = answer.lower()
        return 1.0 if any(marker in lowered for marker in ADVERSARIAL_MARKERS) else 0.0
    if category == 1:
        parts = [p.strip() for p in answer.split(",")]
        wanted = [w.strip() for w in reference.split(",")]
        return sum(max(token_f1(p, w) for p in parts) for w in wanted) / len(wanted)
    if category == 3:
        reference = reference.split(";")[0].strip()
    return token_f1(answer, reference)


# ------------------------------------------------------------------ the model ---


@dataclass(frozen=True, slots=True)
class AnswerConfig:
    url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 60.0


@dataclass(frozen=True, slots=True)
class Answered:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    error: str | None = None


def config_from(
    url: str | None, model: str | None, key_file: Path | None, timeout_s: float
) -> AnswerConfig | None:
    """The answering model's settings from the options, then the environment; None when
    no endpoint is configured (the answer scores are then skipped)."""
    url = url or os.environ.get("MAKA_AB_ANSWER_URL") or None
    if not url:
        return None
    key = (
        key_file.read_text(encoding="utf-8").strip() if key_file else os.environ.get("MAKA_AB_ANSWER_API_KEY")
    )
    model = model or os.environ.get("MAKA_AB_ANSWER_MODEL") or ""
    return AnswerConfig(url.rstrip("/"), model, key or None, timeout_s)


def messages(pack: dict[str, Any]) -> list[dict[str, str]]:
    """The pack as chat messages: its segments as the system prompt, its history (the
    question last), and the instruction before the question."""
    system = "\n\n".join(segment["text"] for segment in pack["segments"])
    out = [{"role": "system", "content": f"{system}\n\n{INSTRUCTION}".strip()}]
    for message in pack["messages"]:
        role = message["role"] if message["role"] in ("user", "assistant") else "user"
        out.append({"role": role, "content": message["content"]})
    return out


def ask(config: AnswerConfig, chat: list[dict[str, str]]) -> Answered:
    """One chat completion (never raises: an error is the answer's ``error``, its text empty)."""
    body = json.dumps({"model": config.model, "messages": chat, "temperature": 0}).encode()
    headers = {"Content-Type": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    request = urllib.request.Request(f"{config.url}/chat/completions", data=body, headers=headers)
    started = time.perf_counter()

    def failed(reason: str) -> Answered:
        return Answered("", 0, 0, (time.perf_counter() - started) * 1000, reason)

    try:
        with urllib.request.urlopen(request, timeout=config.timeout_s) as response:
            reply = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return failed(f"http_{exc.code}")
    except (urllib.error.URLError, TimeoutError, OSError):
        return failed("unreachable")
    except ValueError:
        return failed("unparseable")
    try:
        text = reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return failed("unparseable")
    if not isinstance(text, str):
        return failed("unparseable")
    usage = reply.get("usage") if isinstance(reply, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    return Answered(
        text.strip(),
        _count(usage.get("prompt_tokens")),
        _count(usage.get("completion_tokens")),
        (time.perf_counter() - started) * 1000,
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0

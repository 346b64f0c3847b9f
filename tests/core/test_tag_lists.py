"""Tag lists as requests send them: each tag once, in order, in work linear in their number."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from makad.core import entries, episodes
from makad.core.redaction import Redacted


def _unredacted(text: str) -> Redacted:
    return Redacted(text, 0, [])


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "normalize", [entries.normalize_tags, episodes.episode_tags], ids=["entry", "episode"]
)
def test_a_hundred_thousand_tags_are_deduplicated_in_linear_work(
    monkeypatch: pytest.MonkeyPatch, normalize: Callable[[list[str]], list[str]]
) -> None:
    """Tags are kept once each, in the order first sent; 100,000 distinct ones (a request
    within the value cap) are read in well under a second, not the minutes a list's
    ``in`` took (propose and add_entry with 90,000 tags each held a worker thread 5 min)."""
    monkeypatch.setattr(entries, "redact", _unredacted)
    monkeypatch.setattr(episodes, "redact", _unredacted)
    assert normalize(["b", "a", "B", "b", "c"]) == ["b", "a", "c"]
    tags = [f"t{i}" for i in range(100_000)]
    try:
        assert normalize(tags) == tags
    except episodes.TooLarge as exc:  # episodes take 16: refused after reading them all
        assert exc.data()["count"] == 100_000

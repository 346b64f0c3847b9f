"""A scrubber for the pure proposal rules' tests: no client-chosen identifier holds a
secret there, so nothing is changed."""

from __future__ import annotations


class Plain:
    """The identity scrubber."""

    def scrub_optional(self, value: str | None) -> str | None:
        return value

    def scrub_refs(self, refs: list[str]) -> list[str]:
        return list(refs)

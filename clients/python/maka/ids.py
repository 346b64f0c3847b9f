"""Ids as people and agents type them: whole, or a unique prefix (like git's short hashes).

Lists show ids cut to their shortest unambiguous prefix of at least 12 characters
(``maka.cli.output.short_ids``), so whatever takes an id — a CLI command, an MCP tool —
takes such a prefix too. An entry typed by hand (id ``h-…``) is found by its hex part
alone as well.
"""

from __future__ import annotations

from collections.abc import Iterable

DERIVED_ID_PREFIX = "h-"


def id_matches(known: str, wanted: str) -> bool:
    """``wanted`` starts ``known``, or its hex part for an entry typed by hand (``h-…``)."""
    return known.startswith(wanted) or (
        known.startswith(DERIVED_ID_PREFIX) and known[len(DERIVED_ID_PREFIX) :].startswith(wanted)
    )


def matching_ids(known: Iterable[str], wanted: str) -> list[str]:
    """``[wanted]`` when it is a known id; else every known id it is a prefix of, in order
    (none: unknown; several: ambiguous). An empty ``wanted`` matches nothing."""
    pool = list(dict.fromkeys(known))
    if wanted in pool:
        return [wanted]
    if not wanted:
        return []
    return [k for k in pool if id_matches(k, wanted)]

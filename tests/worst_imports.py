"""The heaviest imports these tests build: what made the daemon's parsers and its
redactor do the most work per byte (before and after the regexes were made linear).
Shared by the responsiveness tests and ``scripts/bench import_ping``."""

from __future__ import annotations

import json


def worst_markdown(repeats: int = 30) -> str:
    """Bullets of 30,000 '[' (the title regex was quadratic on them: an item took
    seconds), of 'password ' and of 'eyJ' repeated (the redactor's heaviest texts), and
    headings with a long run of blanks (cubic for the heading regex). ``repeats`` of each
    kind: 30 make about 3.3 MiB."""
    items = [
        *("- " + "[" * 30_000 for _ in range(repeats)),
        *("- " + "password " * 3_000 for _ in range(repeats)),
        *("- " + "eyJ" * 9_000 for _ in range(repeats)),
        *("- # a" + " " * 25_000 + "b" for _ in range(repeats)),
    ]
    return "\n".join(items) + "\n"


def worst_json(records: int = 30_000) -> str:
    """A mem0 list of small records in one JSON document (30,000 make about 1.2 MiB):
    recognising it decodes the whole document, and every record becomes an item."""
    return json.dumps({"results": [{"memory": f"likes green tea, batch {i}"} for i in range(records)]})

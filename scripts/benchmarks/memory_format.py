"""The memory-file format in-process: parsing whole files, and preparing content for a write.

Figures are ratios against a baseline measured in the same run: parsing a
markdown-heavy file (every entry with an escaped ``## `` line and a code fence,
the case where the reader must parse content to unescape it) and a non-UTF-8
file, against a plain-text file of the same entry count; preparing 32 KiB of
content (closing blocks, escaping) against one markdown-it block parse of it;
read_state's metadata warnings on the plain file (nothing to warn about) and on one
whose every entry has a status typed wrong (``status=actve``), against parsing it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from makad.core import memory_format as fmt
from makad.core.entry_text import block_tokens, prepare
from makad.core.metadata_warnings import metadata
from makad.core.types import Entry


def _file(entries: int, content: Callable[[int], str]) -> str:
    doc = fmt.new_document()
    for i in range(entries):
        doc = fmt.upsert(
            doc,
            Entry(
                id=f"{i:016x}",
                title=f"Entry {i}",
                content=content(i),
                origin="manual",
                created_at=1_700_000_000_000 + i,
                updated_at=1_700_000_000_000 + i,
                tags=["bench"],
            ),
        )
    return fmt.render(doc)


def _best_ms(action: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        action()
        best = min(best, time.process_time() - start)
    return round(best * 1000, 3)


def run(quick: bool) -> dict[str, Any]:
    entries = 50 if quick else 500
    repeats = 2 if quick else 7
    plain = _file(entries, lambda i: f"Fact {i}: " + "lorem ipsum dolor sit amet " * 8)
    markdown = _file(entries, lambda i: f"## Step {i}\nrun `make`\n```sh\necho {i}\n```\n- [x](y)")
    latin = plain.encode("utf-8").replace(b"lorem", b"l\xf6rem").decode("utf-8", "surrogateescape")
    chunk = ("## Step\nrun `make`\n```sh\necho 1\n```\n- item [link](http://x)\n<b>x</b>\n\n" * 500)[
        : (4 if quick else 32) * 1024
    ]
    plain_ms = _best_ms(lambda: fmt.parse(plain), repeats)
    markdown_ms = _best_ms(lambda: fmt.parse(markdown), repeats)
    latin_ms = _best_ms(lambda: fmt.parse(latin), repeats)
    prepare_ms = _best_ms(lambda: prepare.__wrapped__(chunk), repeats)
    one_parse_ms = _best_ms(lambda: block_tokens(chunk.split("\n")), repeats)
    plain_doc = fmt.parse(plain)
    typos = plain.replace("status=active", "status=actve")
    typos_doc = fmt.parse(typos)
    typos_parse_ms = _best_ms(lambda: fmt.parse(typos), repeats)
    clean_warn_ms = _best_ms(lambda: metadata(plain_doc), repeats)
    typos_warn_ms = _best_ms(lambda: metadata(typos_doc), repeats)
    return {
        "memory_format": {
            "entries": entries,
            "parse_plain_ms": plain_ms,
            "parse_markdown_ms": markdown_ms,
            "parse_not_utf8_ms": latin_ms,
            "markdown_vs_plain": round(markdown_ms / plain_ms, 2) if plain_ms else 0,
            "not_utf8_vs_plain": round(latin_ms / plain_ms, 2) if plain_ms else 0,
            "content_bytes": len(chunk.encode()),
            "prepare_ms": prepare_ms,
            "prepare_vs_one_parse": round(prepare_ms / one_parse_ms, 2) if one_parse_ms else 0,
            "metadata_warnings_clean_ms": clean_warn_ms,
            "metadata_warnings_typos_ms": typos_warn_ms,
            "metadata_typos_vs_parse": round(typos_warn_ms / typos_parse_ms, 3) if typos_parse_ms else 0,
        }
    }

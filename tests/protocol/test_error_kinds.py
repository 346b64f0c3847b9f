"""PROTOCOL.md's error table lists exactly the `data.kind`s the daemon can send, with their codes,
and the Node client's generated table agrees with it."""

from __future__ import annotations

import re
from pathlib import Path

from makad.errors import ALL_ERRORS, MakadError

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = (ROOT / "protocol" / "PROTOCOL.md").read_text(encoding="utf-8")
GENERATED_TS = (ROOT / "clients" / "node" / "src" / "generated.ts").read_text(encoding="utf-8")


def documented() -> set[tuple[int, str]]:
    """The (code, kind) rows of PROTOCOL.md's "## Errors" table."""
    section = PROTOCOL.split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (-\d+) \| `([a-z_]+)` \|", section, flags=re.M)
    assert rows
    return {(int(code), kind) for code, kind in rows}


def sent_by_source() -> set[str]:
    """Every kind makad's code can put in an error: its exception classes, and the literals the
    JSON-RPC layer writes itself (``"kind": "…"`` and the framing errors)."""
    kinds = {error.kind for error in (MakadError, *ALL_ERRORS)}
    for path in (ROOT / "makad" / "rpc").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        kinds |= set(re.findall(r'"kind": "([a-z_]+)"', text))
        kinds |= set(re.findall(r'FrameError\([^)]*, "([a-z_]+)"\)', text))
    return kinds


def test_every_kind_sent_is_documented_and_every_documented_kind_is_sent() -> None:
    """The table's kinds are the kinds the code sends: none undocumented, none only on paper."""
    assert {kind for _, kind in documented()} == sent_by_source()


def test_each_error_class_has_its_documented_code() -> None:
    """Every domain error's (code, kind) is a row of the table."""
    missing = {(error.code, error.kind) for error in ALL_ERRORS} - documented()
    assert not missing


def test_the_node_client_knows_the_same_codes() -> None:
    """The Node client's generated DOMAIN_ERROR_CODES and PROTOCOL_ERROR_CODES are the table's rows."""
    pairs: set[tuple[int, str]] = set()
    for table in ("DOMAIN_ERROR_CODES", "PROTOCOL_ERROR_CODES"):
        body = GENERATED_TS.split(f"export const {table} = {{", 1)[1].split("}", 1)[0]
        pairs |= {(int(code), kind) for kind, code in re.findall(r"(\w+): (-\d+),", body)}
    assert pairs == documented()

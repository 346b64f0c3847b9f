"""Checks of what a daemon left on disk and in its ledger, made from the outside.

The hash chain is recomputed here from PROTOCOL.md's definition (not with the
daemon's code), so a bug shared by the writer and its own verifier still shows.
Memory files are parsed with the daemon's fail-open parser, then held to the
stricter standard a daemon-written file must meet: valid UTF-8, lossless
round trip, and a well-formed metadata comment on every section.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from maka import Client
from makad.core import memory_format as fmt

READ_PAGE = 10_000


@dataclass
class Problem:
    """One thing found wrong: ``category`` is lost, duplicated or corrupt."""

    category: str
    key: str
    detail: str


@dataclass
class MemoryFile:
    """One parsed memory file and what is wrong with its form."""

    path: Path
    doc: fmt.MemoryDocument | None = None
    problems: list[Problem] = field(default_factory=list)

    @property
    def sections(self) -> tuple[fmt.Section, ...]:
        return self.doc.sections if self.doc is not None else ()


def read_memory_file(path: Path) -> MemoryFile:
    """Parse a MEMORY.md or PENDING.md; a missing file is an empty one."""
    out = MemoryFile(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        out.doc = fmt.new_document()
        return out
    name = path.name
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        out.problems.append(Problem("corrupt", f"{name}:utf8", "not valid UTF-8"))
        text = data.decode("utf-8", "surrogateescape")
    doc = fmt.parse(text)
    out.doc = doc
    if fmt.render(doc) != text:
        out.problems.append(Problem("corrupt", f"{name}:roundtrip", "render(parse(text)) != text"))
    for section in doc.sections:
        if not section.has_comment or section.comment_malformed:
            out.problems.append(
                Problem(
                    "corrupt",
                    f"{name}:section:{section.entry.title[:40]}",
                    "section without a well-formed metadata comment",
                )
            )
    ids = Counter(s.declared_id for s in doc.sections if s.has_comment)
    for entry_id, count in ids.items():
        if count > 1:
            out.problems.append(
                Problem("duplicated", f"{name}:id:{entry_id}", f"entry id appears {count} times")
            )
    return out


def canonical_event(event: dict[str, Any]) -> bytes:
    """PROTOCOL.md: compact JSON without ``hash``, keys sorted, absent values null, UTF-8."""
    fields = ("meta", "seq", "sessionId", "text", "tokens", "toolCallId", "toolName", "ts", "type")
    body = {name: event.get(name) for name in fields}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def chain_hash(previous: str, event: dict[str, Any]) -> str:
    return hashlib.sha256(previous.encode() + canonical_event(event)).hexdigest()


def read_all_events(client: Client, workspace: str, session_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    after = 0
    while True:
        page = client.call(
            "read_events",
            {"workspace": workspace, "sessionId": session_id, "afterSeq": after, "limit": READ_PAGE},
        )
        events += page["events"]
        if not page["hasMore"] or not page["events"]:
            return events
        after = page["events"][-1]["seq"]


@dataclass
class SessionCheck:
    """A session's events as read back, and the problems found in them."""

    session_id: str
    events: list[dict[str, Any]]
    info: dict[str, Any]
    checkpoints: list[dict[str, Any]]
    problems: list[Problem]


def check_session(client: Client, workspace: str, info: dict[str, Any]) -> SessionCheck:
    """Gap-free seqs from 1, an intact hash chain (recomputed here and by ``retrieve``),
    and whole checkpoints."""
    sid = info["sessionId"]
    problems: list[Problem] = []
    events = read_all_events(client, workspace, sid)
    seqs = [e["seq"] for e in events]
    if seqs != list(range(1, len(events) + 1)):
        problems.append(Problem("corrupt", f"session:{sid}:seqs", "seqs are not 1..n without gaps"))
    if len(events) != info["lastSeq"]:
        problems.append(
            Problem(
                "corrupt", f"session:{sid}:count", f"{len(events)} events read, lastSeq {info['lastSeq']}"
            )
        )
    previous = ""
    for event in events:
        expected = chain_hash(previous, event)
        if event["hash"] != expected:
            problems.append(
                Problem(
                    "corrupt",
                    f"session:{sid}:hash:{event['seq']}",
                    "stored hash does not match the recomputed chain",
                )
            )
            break
        previous = event["hash"]
    if events and info["lastHash"] != events[-1]["hash"]:
        problems.append(Problem("corrupt", f"session:{sid}:head", "lastHash is not the last event's"))
    if events:
        ref = f"event:{sid}:1-{len(events)}"
        got = client.call("retrieve", {"workspace": workspace, "refs": [ref]})["results"][0]
        if not got["ok"] or not got["chainIntact"] or got["mismatchedSeqs"] or got["missingSeqs"]:
            problems.append(
                Problem(
                    "corrupt",
                    f"session:{sid}:retrieve",
                    f"retrieve reports ok={got['ok']} chainIntact={got['chainIntact']}",
                )
            )
    checkpoints = client.call("list_checkpoints", {"workspace": workspace, "sessionId": sid})["checkpoints"]
    problems += check_checkpoints(sid, events, checkpoints)
    return SessionCheck(sid, events, info, checkpoints, problems)


def check_checkpoints(
    sid: str, events: list[dict[str, Any]], checkpoints: list[dict[str, Any]]
) -> list[Problem]:
    """Each checkpoint lies within the session, commits to the hash of its last covered
    event, has a summary, and starts where the previous one ended."""
    problems: list[Problem] = []
    by_seq = {e["seq"]: e for e in events}
    previous_to = 0
    ids = Counter(c["checkpointId"] for c in checkpoints)
    for checkpoint_id, count in ids.items():
        if count > 1:
            problems.append(Problem("duplicated", f"checkpoint:{checkpoint_id}", f"listed {count} times"))
    for cp in checkpoints:
        key = f"checkpoint:{cp['checkpointId']}"
        first, last = cp["coverage"]["fromSeq"], cp["coverage"]["toSeq"]
        if not 1 <= first <= last <= len(events):
            problems.append(Problem("corrupt", key, "coverage outside the session"))
            continue
        if by_seq[last]["hash"] != cp["coveredHash"]:
            problems.append(Problem("corrupt", key, "coveredHash is not the last covered event's"))
        if first != previous_to + 1:
            problems.append(Problem("corrupt", key, "coverage does not follow the previous one"))
        if not cp["summary"].strip():
            problems.append(Problem("corrupt", key, "empty summary"))
        previous_to = last
    return problems


def stray_temp_files(memory_dir: Path) -> list[str]:
    """Temp files a killed write left behind in the memory directory."""
    if not memory_dir.is_dir():
        return []
    return sorted(p.name for p in memory_dir.iterdir() if p.name.endswith(".tmp"))

"""Letta agent files (``.af``): the agent's core memory blocks.

Schema v1 (the first agent-file release) is one agent object whose ``core_memory``
lists blocks (``label``, ``value``, ``limit``, ``description``, ``created_at``,
``updated_at``). Later exports hold ``{"agents": [...], "blocks": [...]}``: blocks
are top-level (``id``, ``label``, ``value``, ``limit``, ``description``) and each agent
names its own in ``block_ids``. Messages, tools and system prompts are not memories.
"""

from __future__ import annotations

from typing import Any

from makad.core.importers.collect import Collector, FileProblem, as_object, load_json
from makad.core.importers.records import ImportResult, ItemSkipped


def parse_letta(text: str) -> ImportResult:
    out = Collector("letta")
    ok, document = load_json(text)
    if not ok or not isinstance(document, dict):
        raise FileProblem("not a Letta agent file (expected a JSON object)")
    blocks: list[tuple[str, Any, str | None]] = []
    owners: dict[str, str] = {}
    for index, agent in enumerate(_list(document.get("agents"))):
        if not isinstance(agent, dict):
            out.error(f"agents[{index}]", "not a JSON object")
            continue
        name = agent.get("name") if isinstance(agent.get("name"), str) else None
        for block_id in _list(agent.get("block_ids")):
            if isinstance(block_id, str) and name:
                owners.setdefault(block_id, name)
        own = _list(agent.get("core_memory")) or _list(agent.get("memory_blocks"))
        for i, block in enumerate(own):
            blocks.append((f"agents[{index}].blocks[{i}]", block, name))
    for i, block in enumerate(_list(document.get("blocks"))):
        block_id = block.get("id") if isinstance(block, dict) else None
        owner = owners.get(block_id) if isinstance(block_id, str) else None
        blocks.append((f"blocks[{i}]", block, owner))
    agent_name = document.get("name") if isinstance(document.get("name"), str) else None
    for i, block in enumerate(_list(document.get("core_memory"))):
        blocks.append((f"core_memory[{i}]", block, agent_name))
    if not blocks and not out.errors:
        raise FileProblem("no memory blocks found")
    for locator, block, owner in blocks:
        out.read(locator, _block_item, out, locator, block, owner)
    return out.result()


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _block_item(out: Collector, locator: str, record: object, owner: str | None) -> None:
    block = as_object(record)
    label = block.get("label") if isinstance(block.get("label"), str) else None
    value = block.get("value")
    if isinstance(value, str) and not value.strip():
        raise ItemSkipped("empty memory block")
    title = label.replace("_", " ").strip().capitalize() if label else None
    scope = f"{owner}/" if owner else ""
    source_id = f"letta:{scope}{label}" if label else block.get("id")
    out.item(
        locator,
        value,
        title=title,
        tags=[label] if label else [],
        source_id=source_id,
        created=block.get("created_at"),
        updated=block.get("updated_at"),
    )

"""The MCP tools' arguments: one msgspec Struct per tool, described field by field.

Each Struct is both the validator of a tool call's arguments and the source of the tool's
``inputSchema`` (so every parameter an agent sees carries its description).
"""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

MAX_BUDGET_TOKENS = 16_000
MAX_HISTORY_HITS = 50
MAX_LIST = 200
MAX_REFS = 20
MAX_TURNS = 500


def _budget_meta(default: int) -> Meta:
    return Meta(
        description=f"Token budget of the answer (default {default}; values outside 50–"
        f"{MAX_BUDGET_TOKENS} are brought into that range).",
        extra_json_schema={"minimum": 50, "maximum": MAX_BUDGET_TOKENS},
    )


Query = Annotated[
    str, Meta(description="What to look for: the user's request, a question or keywords, in any language.")
]
ContextSession = Annotated[
    str | None,
    Meta(
        description="Build for this ledger session: its working state and summary come along, and "
        "entries already shown in it (since its last compaction) are not repeated. "
        "Default: none, every call stands alone."
    ),
]
ProposalSession = Annotated[
    str | None,
    Meta(
        description="The ledger session the memory comes from. Default: the session this MCP "
        "connection records into (session_record), if it has recorded anything."
    ),
]
Budget2000 = Annotated[int, _budget_meta(2000)]
Budget4000 = Annotated[int, _budget_meta(4000)]


class SearchArgs(msgspec.Struct):
    """Arguments of memory_search."""

    query: Query
    budget_tokens: Budget2000 = 2000


class ContextArgs(msgspec.Struct):
    """Arguments of memory_context."""

    query: Query
    budget_tokens: Budget4000 = 4000
    session_id: ContextSession = None


class AttentionArgs(msgspec.Struct):
    """Arguments of memory_attention."""

    section: Annotated[
        str | None,
        Meta(
            description="Only this section: Active threads, Recently abandoned, Currently focused, "
            "Waiting on the user, Do not re-propose or Rhythm (default: all of them)."
        ),
    ] = None


class SuggestionsArgs(msgspec.Struct):
    """Arguments of memory_suggestions."""

    explain: Annotated[
        bool,
        Meta(description="Also list the candidates that were not suggested, with their score and why."),
    ] = False


class DismissSuggestionArgs(msgspec.Struct):
    """Arguments of memory_dismiss_suggestion."""

    id: Annotated[
        str,
        Meta(description="The suggestion's id (sg_…), as memory_suggestions gave it."),
    ]


class ListArgs(msgspec.Struct):
    """Arguments of memory_list."""

    tag: Annotated[str | None, Meta(description="Only entries with this tag.")] = None
    include_archived: Annotated[bool, Meta(description="Also list archived entries (default false).")] = False
    limit: Annotated[
        int,
        Meta(
            description=f"At most this many entries, newest first (default 50, at most {MAX_LIST}).",
            extra_json_schema={"minimum": 1, "maximum": MAX_LIST},
        ),
    ] = 50


class ResolveArgs(msgspec.Struct):
    """Arguments of memory_resolve."""

    refs: Annotated[
        list[str],
        Meta(
            description=f"Refs as they were cited, at most {MAX_REFS}: memory:<id>, "
            "event:<session>:<seq>, event:<session>:<from>-<to>, checkpoint:<id>, "
            "episode:<id>.",
            extra_json_schema={"minItems": 1, "maxItems": MAX_REFS},
        ),
    ]


class HistoryArgs(msgspec.Struct):
    """Arguments of history_search."""

    query: Query
    limit: Annotated[
        int,
        Meta(
            description=f"At most this many events (default 10, at most {MAX_HISTORY_HITS}).",
            extra_json_schema={"minimum": 1, "maximum": MAX_HISTORY_HITS},
        ),
    ] = 10
    session_id: Annotated[
        str | None, Meta(description="Search only this session (default: every session).")
    ] = None


class Turn(msgspec.Struct):
    """One turn of the conversation."""

    role: Annotated[
        Literal["user", "assistant", "tool_call", "tool_result", "note", "system"],
        Meta(
            description="Who spoke: user, assistant, tool_call (the call and its arguments), "
            "tool_result, note or system."
        ),
    ]
    text: Annotated[
        str, Meta(description="The turn's text, as said (secrets are redacted before anything is stored).")
    ]
    tool_name: Annotated[str | None, Meta(description="For tool_call and tool_result: the tool's name.")] = (
        None
    )
    tool_call_id: Annotated[
        str | None, Meta(description="For tool_call and tool_result: the id pairing a call with its result.")
    ] = None


class RecordArgs(msgspec.Struct):
    """Arguments of session_record."""

    turns: Annotated[
        list[Turn],
        Meta(
            description=f"The turns since the last call, oldest first (1–{MAX_TURNS}).",
            extra_json_schema={"minItems": 1, "maxItems": MAX_TURNS},
        ),
    ]


class ProposeArgs(msgspec.Struct):
    """Arguments of memory_propose."""

    title: Annotated[str, Meta(description="A short title (at most 300 characters).")]
    content: Annotated[
        str,
        Meta(
            description="The memory itself: one stable fact, preference or decision, self-contained "
            "(it is read later without this conversation)."
        ),
    ]
    tags: Annotated[list[str] | None, Meta(description="A few topic tags.")] = None
    session_id: ProposalSession = None
    source_refs: Annotated[
        list[str] | None,
        Meta(
            description="Refs of the recorded events that support it (event:<session>:<seq>, "
            "as session_record returned them), so the user can check where it came from. "
            "A ref that names nothing recorded is refused."
        ),
    ] = None
    everywhere: Annotated[
        bool,
        Meta(
            description="True for what holds in every project the user works on (a personal "
            "preference, not this project's): queued for the user-level memory instead."
        ),
    ] = False
    supersedes: Annotated[
        str | None,
        Meta(
            description="When a fact in memory changed or was wrong: the ref of the entry this "
            "proposal corrects (memory:<id> as memory_search or memory_list cite it, or a unique "
            "prefix of its id; memory:@user/<id> for a user-level one). The user sees the old "
            "entry beside the new one, and approving archives the old one — propose the "
            "corrected fact whole, not a near-duplicate beside the old."
        ),
    ] = None


def input_schema(args: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON Schema of a Struct with every ``$ref`` inlined (some hosts do not follow refs)."""
    (root,), components = msgspec.json.schema_components([args], ref_template="#/$defs/{name}")

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(components[ref.removeprefix("#/$defs/")])
            # A schema's "title" annotation goes; a property named "title" stays.
            return {
                k: ({name: inline(prop) for name, prop in v.items()} if k == "properties" else inline(v))
                for k, v in node.items()
                if k != "title"
            }
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    schema: dict[str, Any] = inline(root)
    schema.pop("description", None)  # the tool's own description says it better
    return schema


_ENUM_VALUE = re.compile(r"Invalid enum value '(.*?)'")
_AT_PATH = re.compile(r"at `\$((?:\.\w+|\[\d+\])*)`")


def choices_at(message: str, schema: dict[str, Any]) -> str:
    """msgspec's validation ``message``, plus the allowed values when the field it names
    (``… - at `$.turns[0].role```) is a choice in ``schema``."""
    found = _AT_PATH.search(message)
    if found is None:
        return message
    node: Any = schema
    for step in re.findall(r"\.(\w+)|\[\d+\]", found.group(1)):
        node = (node.get("properties") or {}).get(step) if step else node.get("items")
        if not isinstance(node, dict):
            return message
    enum = node.get("enum")
    if not enum:
        return message
    typed = _ENUM_VALUE.search(message)
    close = difflib.get_close_matches(typed[1], [str(v) for v in enum], n=1) if typed else []
    guess = f"; did you mean {close[0]!r}?" if close else ""
    return f"{message} (one of: {', '.join(str(v) for v in enum)}{guess})"

"""Plain text the MCP tools and resources return to an agent (no terminal chrome)."""

from __future__ import annotations

from typing import Any

HIT_TEXT_CHARS = 400
EVENT_TEXT_CHARS = 2_000
EVENTS_PER_REF = 200
RESOLVE_MAX_CHARS = 40_000
# The most characters of one input (a name, query, id or URI the host sent) that a reply
# repeats; the same bound as makad's errors (``makad.errors.ECHO_LIMIT``).
ECHO_LIMIT = 200


def echoed(value: str, limit: int = ECHO_LIMIT) -> str:
    """``value`` as a reply may repeat it: whole up to ``limit`` characters, else its
    first ``limit`` characters, an ellipsis and its length (``… (100000 characters)``).
    A string it already cut is kept as it is."""
    tail = value[limit:]
    if not tail or (tail.startswith("… (") and tail.endswith(" characters)") and tail[3:-12].isdigit()):
        return value
    return f"{value[:limit]}… ({len(value)} characters)"


def one_line(text: Any, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def date_of(ms: Any) -> str:
    if not isinstance(ms, int) or ms <= 0:
        return "date unknown"
    # Here, not at the top: it loads the daemon's package, which `maka context` never needs.
    from makad.core.when import utc_moment

    return f"{utc_moment(ms):%Y-%m-%d}"  # any int64 of ms: the years 1 to 9999 hold it


def event_ref(session_id: str, first: int, last: int) -> str:
    return f"event:{session_id}:{first}" if first == last else f"event:{session_id}:{first}-{last}"


def render_hit(hit: dict[str, Any]) -> str:
    """One search_history hit: ``[ref] type: text``."""
    event = hit.get("event", hit)
    ref = hit.get("ref") or f"event:{event.get('sessionId')}:{event.get('seq')}"
    return f"[{ref}] {event.get('type', '?')}: {one_line(event.get('text', ''), HIT_TEXT_CHARS)}"


def omitted_hits(omitted: int | None) -> list[str]:
    """The note under search hits when the reply left some out (its 8 MiB budget)."""
    if not omitted:
        return []
    return [f"({omitted} more matching events left out: a reply holds at most 8 MiB; narrow the query)"]


def pack_text(pack: dict[str, Any]) -> str:
    """A build_context pack as an agent uses it: its segments' text, in order (each names
    the refs it quotes). History messages are left out: the host holds the conversation."""
    return "\n\n".join(
        str(s.get("text", "")).strip() for s in pack.get("segments") or [] if str(s.get("text", "")).strip()
    )


def entry_line(entry: dict[str, Any], level: str = "") -> str:
    """``memory:<id>  title [tags]  · updated <date>``; ``level`` ("@user/") prefixes the id."""
    tags = f" [{', '.join(entry['tags'])}]" if entry.get("tags") else ""
    archived = " (archived)" if entry.get("status") == "archived" else ""
    updated = entry.get("updatedAt") or entry.get("createdAt")
    return (
        f"memory:{level}{entry.get('id')}  {one_line(entry.get('title', ''), 120)}{tags}{archived}"
        f"  · updated {date_of(updated)}"
    )


def entry_block(entry: dict[str, Any], level: str = "") -> str:
    return f"{entry_line(entry, level)}\n{str(entry.get('content', '')).strip()}"


AMBIGUOUS_SHOWN = 10


def ambiguous(what: str, given: str, lines: list[str]) -> str:
    """An id prefix that starts several ids: each candidate, one a line."""
    shown = lines[:AMBIGUOUS_SHOWN]
    more = [f"… and {len(lines) - len(shown)} more"] if len(lines) > len(shown) else []
    return "\n".join(
        [
            f"Ambiguous: {len(lines)} {what} start with {echoed(given)!r}; resolve the one you mean by "
            "its full id (or a longer prefix):",
            *(f"  {line}" for line in shown),
            *more,
        ]
    )


def events_block(result: dict[str, Any], omitted: list[str] | None = None) -> str:
    """What one ``event:`` ref names, with the outcome of its hash-chain check;
    ``omitted``: retrieve's refs left out of its reply (the rest of a range too large)."""
    events = result.get("events") or []
    lines = []
    for event in events[:EVENTS_PER_REF]:
        who = event.get("type", "?")
        if event.get("toolName"):
            who += f" {event['toolName']}"
        lines.append(f"{event.get('seq')} {who}: {one_line(event.get('text', ''), EVENT_TEXT_CHARS)}")
    if len(events) > EVENTS_PER_REF:
        lines.append(f"… {len(events) - EVENTS_PER_REF} more events: resolve a narrower range")
    if omitted:
        lines.append(f"… the rest, {omitted[0]}, did not fit in one reply (8 MiB): resolve it next")
    if result.get("ok"):
        lines.append("(verified against the session's hash chain)")
    else:
        problems = [
            f"{label} {result[key]}"
            for key, label in (("missingSeqs", "missing seqs"), ("mismatchedSeqs", "altered seqs"))
            if result.get(key)
        ]
        if result.get("chainIntact") is False:
            problems.append("the chain after this range does not match")
        lines.append("(NOT verified: " + ("; ".join(problems) or "unknown problem") + ")")
    return "\n".join(lines)


def checkpoint_block(checkpoint: dict[str, Any]) -> str:
    cover = checkpoint.get("coverage") or {}
    span = event_ref(
        str(checkpoint.get("sessionId")), int(cover.get("fromSeq", 0)), int(cover.get("toSeq", 0))
    )
    return (
        f"Summary of {span} ({checkpoint.get('mode')} checkpoint):\n"
        f"{str(checkpoint.get('summary', '')).strip()}"
    )


def episode_block(episode: dict[str, Any]) -> str:
    tags = f" [{', '.join(episode['tags'])}]" if episode.get("tags") else ""
    refs = ", ".join(episode.get("sourceRefs") or [])
    return f"{episode.get('summary', '')}{tags}" + (f"\nfrom {refs}" if refs else "")


def join_blocks(blocks: list[tuple[str, str]]) -> str:
    """``[ref]`` then its text, for each ref, within RESOLVE_MAX_CHARS."""
    out: list[str] = []
    size = 0
    for ref, text in blocks:
        block = f"[{echoed(ref)}]\n{text}"
        if size + len(block) > RESOLVE_MAX_CHARS and out:
            out.append(f"… output cut at {RESOLVE_MAX_CHARS} characters: resolve fewer refs at once")
            break
        out.append(block)
        size += len(block)
    return "\n\n".join(out)


def pending_markdown(proposals: list[dict[str, Any]]) -> str:
    """PENDING.md as the agent may read it: every proposal waiting for the user."""
    if not proposals:
        return "# Pending proposals\n\nNothing is waiting for the user's review.\n"
    parts = [
        f"# Pending proposals ({len(proposals)})",
        "Waiting for the user's review: none of these is part of memory yet.",
    ]
    for view in proposals:
        p = view.get("proposal", view)
        meta = [f"id {p.get('id')}", f"origin {p.get('origin', 'unknown')}"]
        if p.get("tags"):
            meta.append("tags " + ", ".join(p["tags"]))
        if view.get("similarTo"):
            meta.append("similar to " + ", ".join(view["similarTo"]))
        parts += [
            f"## {one_line(p.get('title', ''), 200)}",
            " · ".join(meta),
            str(p.get("content", "")).strip(),
        ]
        old = view.get("replaces")
        if old:
            state = "" if old.get("status", "active") == "active" else f" ({old.get('status')})"
            parts.append(
                f"Replaces memory:{old.get('id')}{state} — now: {one_line(old.get('title', ''), 200)}: "
                f"{one_line(str(old.get('content', '')), 400)}"
            )
    return "\n\n".join(parts) + "\n"


def attention_markdown(result: dict[str, Any]) -> str:
    """get_attention's state as Markdown: each section with its lines and their refs."""
    if not result.get("enabled"):
        return (
            "# Attention\n\nNothing is derived for this workspace (attentionEnabled is off, "
            "or the workspace is incognito).\n"
        )
    parts = ["# Attention", "What this workspace is in the middle of, derived from past sessions."]
    for section in result.get("sections") or []:
        lines = section.get("lines") or []
        parts.append(f"## {section.get('name')}")
        if not lines:
            parts.append("(nothing)")
            continue
        parts.append(
            "\n".join(
                f"- {line.get('text')} ({', '.join(line.get('refs') or [])})"
                if line.get("refs")
                else f"- {line.get('text')}"
                for line in lines
            )
        )
    return "\n\n".join(parts) + "\n"


SILENCED = {
    "attention_off": "attentionEnabled is off for this workspace",
    "incognito": "the workspace is incognito",
    "session_incognito": "this session is incognito",
    "agent_reads_off": "agent read is off for this workspace",
    "not_derived": "nothing is derived yet; ask again in a moment",
}


def suggestions_markdown(result: dict[str, Any]) -> str:
    """suggest's reply as Markdown: each suggestion with its id, score, reason and refs."""
    silenced = result.get("silenced")
    if silenced and not result.get("suggestions"):
        return f"# Suggestions\n\nNothing is suggested: {SILENCED.get(str(silenced), silenced)}.\n"
    parts = ["# Suggestions"]
    items = result.get("suggestions") or []
    if not items:
        parts.append("Nothing worth suggesting now.")
    for item in items:
        parts.append(_suggestion_line(item))
    skipped = [c for c in result.get("candidates") or [] if c.get("id") not in {i.get("id") for i in items}]
    if skipped:
        parts.append(f"## Not suggested (threshold {result.get('threshold')})")
        parts.extend(_suggestion_line(c) for c in skipped)
    return "\n\n".join(parts) + "\n"


def _suggestion_line(item: dict[str, Any]) -> str:
    refs = ", ".join(item.get("refs") or [])
    return (
        f"- {item.get('text')} ({refs})\n  id {item.get('id')} · {item.get('kind')} · "
        f"score {float(item.get('score') or 0):.2f}: {item.get('reason')}"
    )

"""`maka context` (build_context), `maka attention` (get_attention), `maka suggest` (suggest,
dismiss_suggestion) and `maka compact` (compact)."""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from typing import Any

from maka.cli.common import (
    EXIT_OK,
    EXIT_REMOTE,
    USER_LEVEL,
    CliError,
    Parents,
    maka_command,
    read_text_arg,
    resolve_ids,
    resolve_session,
    user_path,
    with_workspace,
    workspace_of,
)
from maka.cli.output import print_json, table, terminal_width, timestamp
from maka.client import Client
from maka.errors import RemoteError
from maka.mcp_text import attention_markdown, suggestions_markdown

SEGMENT_KINDS = ("memory", "working_state", "summary", "attention", "recall")


# What trace.emptyReason means, and what to do about it (reads_off: reads_off_hint).
EMPTY_REASONS = {
    "incognito": "incognito is on (the workspace or the session): nothing is read",
    "memory_unavailable": "MEMORY.md could not be used (too large or unreadable); "
    "`maka memory list` says why",
    "nothing_yet": "there is nothing to show yet: no memory entries and no session history",
    "nothing_matched": "no memory entry was relevant to this call (no match for the query, "
    "or already shown in this session)",
    "budget_too_small": "the budget is too small for what there is; pass a larger --budget",
    "not_included": "memory was left out (--include) and the kinds asked for had nothing to show",
}


def reads_off_hint(settings: dict[str, Any] | None) -> str:
    """Why reads are off, naming only the switches ``settings`` (get_settings) shows off,
    with the command that turns those on; both when the settings are not known (or show
    both on: switched on since the pack was built)."""
    memory_off = settings is None or settings.get("enabled") is False
    agents_off = settings is None or settings.get("agentReadEnabled") is False
    if memory_off == agents_off:
        return (
            "memory is switched off in this workspace, and agents may not read it; turn both on "
            "with `maka settings enabled=on agentReadEnabled=on`"
        )
    if memory_off:
        return "memory is switched off in this workspace; turn it on with `maka settings enabled=on`"
    return "agents may not read this workspace's memory; let them with `maka settings agentReadEnabled=on`"


def render_pack(
    pack: dict[str, Any],
    trace: bool,
    args: argparse.Namespace | None = None,
    settings: dict[str, Any] | None = None,
) -> list[str]:
    """A build_context result for people: totals, each segment, the messages, the trace;
    ``args``: the command's, so that a hint names the workspace and session it was run for;
    ``settings``: the workspace's, so that an empty pack's hint names only the switches off."""
    hint = (lambda text: with_workspace(args, text)) if args is not None else (lambda text: text)
    t = pack.get("trace") or {}
    head = (
        f"Context pack: {pack.get('totalTokens', '?')} of {pack.get('budgetTokens', '?')} "
        f"tokens · {t.get('path', '?')} path · revision {pack.get('revision', '?')}"
    )
    if pack.get("callId"):
        head += f" · call {pack['callId']}"
    lines = [head]
    curator_note = _curator_note(t.get("curator"))
    if curator_note:
        lines.append(curator_note)
    if pack.get("compactRecommended"):
        session = f" -s {args.session}" if args is not None and args.session else ""
        lines.append(hint(f"Compaction recommended: run `maka compact{session}` for this session."))
    segments = pack.get("segments") or []
    if not segments and not pack.get("messages"):
        reason = str(t.get("emptyReason") or "")
        why = (
            reads_off_hint(settings)
            if reason == "reads_off"
            else EMPTY_REASONS.get(reason, "nothing relevant, or reading is turned off for this workspace")
        )
        lines.append(f"(empty: {hint(why)}{f' [{reason}]' if reason else ''})")
    for segment in segments:
        lines += ["", f"━━ {segment.get('kind')} · {segment.get('tokens', 0)} tokens", ""]
        lines += str(segment.get("text", "")).splitlines()
        if segment.get("sourceIds"):
            lines += ["", "   sources: " + ", ".join(segment["sourceIds"])]
    messages = pack.get("messages") or []
    if messages:
        lines += ["", f"━━ history · {len(messages)} messages", ""]
        for message in messages:
            lines += render_message(message)
    if trace and t:
        lines += ["", *render_trace(t)]
    return lines


def _curator_note(curator: Any) -> str | None:
    """Why the curator's pick is not what is shown, when it was needed and could not be
    asked or used: the header only says "fallback path"."""
    if not isinstance(curator, dict):
        return None
    status = curator.get("status")
    if status == "unconfigured":
        return (
            "Curator: not configured, so this is the deterministic pack: start makad with "
            "MAKAD_CURATOR_URL and MAKAD_CURATOR_MODEL (makad's docs/CONTEXT.md, The LLM curator)"
        )
    if status == "failed":
        return f"Curator: failed ({curator.get('reason')}), so this is the deterministic pack"
    return None


def render_message(message: dict[str, Any]) -> list[str]:
    role = str(message.get("role", "?"))
    if message.get("toolCallId"):
        role += f" ← {message['toolCallId']}"
    calls = message.get("toolCalls") or []
    text = str(message.get("content", ""))
    body = text.splitlines() or [""]
    lines = [f"{role}: {body[0]}", *("    " + line for line in body[1:])]
    for call in calls:
        lines.append(f"    → call {call.get('name')}({call.get('arguments', '')}) [{call.get('id')}]")
    return lines


def _title(candidate: dict[str, Any]) -> str:
    """A memory row's entry title (pinned ones say so); recall rows have none."""
    title = str(candidate.get("title") or "")
    if candidate.get("pinned"):
        title = f"[pinned] {title}"
    return title or "-"


def render_trace(trace: dict[str, Any]) -> list[str]:
    width = terminal_width()
    lines = ["━━ trace", ""]
    candidates = trace.get("candidates") or []
    if candidates:
        # The semantic channel's part, shown when it found something: a score it raised
        # cannot be read from the lexical parts alone.
        semantic = any((c.get("parts") or {}).get("semantic") for c in candidates)
        rows = []
        for c in candidates:
            parts = c.get("parts") or {}
            rows.append(
                [
                    c.get("kind", ""),
                    f"{c.get('score', 0):.3f}",
                    f"{parts.get('bm25', 0):.2f}",
                    f"{parts.get('recency', 0):.2f}",
                    f"{parts.get('tags', 0):.2f}",
                    *([f"{parts.get('semantic', 0):.2f}"] if semantic else []),
                    _tokens(c),
                    "yes" if c.get("included") else "no",
                    c.get("reason") or "-",
                    c.get("sourceId", ""),
                    _title(c),
                ]
            )
        parts_shown = ["BM25", "RECENCY", "TAGS", *(["SEMANTIC"] if semantic else [])]
        lines += table(
            ["KIND", "SCORE", *parts_shown, "TOKENS", "IN", "REASON", "SOURCE", "TITLE"],
            rows,
            width,
        ).splitlines()
    else:
        lines.append("No memory or recall candidates.")
    allocation = trace.get("allocation") or []
    if allocation:
        rows = [
            [
                a.get("kind", ""),
                str(a.get("cap", "")),
                str(a.get("used", "")),
                str(a.get("flowed", 0)),
                "yes" if a.get("truncated") else "no",
            ]
            for a in allocation
        ]
        lines += ["", *table(["KIND", "CAP", "USED", "FLOWED", "TRUNCATED"], rows).splitlines()]
    for skipped in trace.get("skipped") or []:
        lines += [
            "",
            f"{skipped.get('source', '')} skipped ({skipped.get('reason', '')}): "
            f"{skipped.get('message', '')}",
        ]
    dropped = trace.get("dropped") or {}
    if dropped:
        lines += ["", "dropped: " + ", ".join(f"{k} {v}" for k, v in dropped.items())]
    extra = [
        f"{label} {trace[key]}"
        for key, label in (
            ("minimumTokens", "minimum tokens"),
            ("historyDropped", "history messages dropped"),
            ("historyRepaired", "tool pairs repaired"),
        )
        if trace.get(key)
    ]
    if trace.get("placeholders"):
        extra.append(f"{len(trace['placeholders'])} tool results shown as placeholders")
    if extra:
        lines += ["", " · ".join(extra)]
    return lines


def token_budget(text: str) -> int:
    """An argparse type: a number of tokens, also written with a thousands separator (2,000)
    or in thousands (2k, 1.5K), as budgets are often spoken of."""
    cleaned = text.strip().replace(",", "").replace("_", "")
    scale = 1000 if cleaned[-1:] in ("k", "K") else 1
    try:
        value = float(cleaned[:-1] if scale > 1 else cleaned) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of tokens, such as 2000 or 2k: {text!r}") from None
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"not a whole number of tokens, such as 2000 or 2k: {text!r}")
    return int(value)


def cmd_context(client: Client, args: argparse.Namespace) -> int:
    if args.budget <= 0:
        raise CliError("--budget must be a positive number of tokens")
    ws = workspace_of(args)
    params: dict[str, Any] = {"workspace": ws, "budgetTokens": args.budget}
    if args.session:
        params["sessionId"] = resolve_session(client, ws, args.session)
    query = args.query
    if args.words:
        if query is not None:
            raise CliError(
                f"give the query once: -q {shlex.quote(query)} or the words "
                f"{shlex.quote(' '.join(args.words))}, not both"
            )
        query = " ".join(args.words)
    if query is not None:
        params["query"] = query
    if args.include:
        params["include"] = list(dict.fromkeys(args.include))
    pack = client.call("build_context", params)
    if args.json:
        print_json(pack)
    else:
        print("\n".join(render_pack(pack, args.trace, args, _settings_if_reads_off(client, ws, pack))))
        note = user_level_left_out(client, ws, pack)
        if note:
            print(f"\n({note})")
        print_warnings(pack)
    return EXIT_OK


def _settings_if_reads_off(client: Client, ws: str, pack: dict[str, Any]) -> dict[str, Any] | None:
    """The workspace's settings when the pack is empty because reads are off (the hint names
    the switches that are off), else None; None too when they cannot be read."""
    if (pack.get("trace") or {}).get("emptyReason") != "reads_off":
        return None
    try:
        settings = client.call("get_settings", {"workspace": ws})
    except RemoteError:
        return None
    return settings if isinstance(settings, dict) else None


def _tokens(candidate: dict[str, Any]) -> str:
    """A candidate's TOKENS cell: "-" for an entry left out before its block was rendered
    (surely too big for what was left, already shown …: its cost was never counted), which
    the trace carries as 0."""
    tokens = candidate.get("tokens", 0)
    if not tokens and not candidate.get("included") and candidate.get("kind") == "memory":
        return "-"
    return str(tokens)


def print_warnings(result: dict[str, Any]) -> None:
    """A reply's warnings (a pack not recorded for want of disk space …), on stderr."""
    for warning in result.get("warnings") or []:
        print(f"maka: warning: {warning.get('message', warning.get('kind'))}", file=sys.stderr)


def user_level_left_out(client: Client, ws: str, pack: dict[str, Any]) -> str | None:
    """A note when the user level has active entries the pack cannot show because agents
    may not read the user level (its switch is separate from the workspace's)."""
    if ws == USER_LEVEL or pack.get("trace", {}).get("emptyReason") in ("reads_off", "incognito"):
        return None
    try:
        if client.call("get_settings", {"workspace": USER_LEVEL}).get("agentReadEnabled"):
            return None
        state = client.call("read_state", {"workspace": USER_LEVEL, "includeEntries": True})
    except RemoteError:
        return None
    active = [e for e in state.get("entries") or [] if e.get("status") == "active"]
    if not active:
        return None
    count = "1 user-level entry is" if len(active) == 1 else f"{len(active)} user-level entries are"
    return (
        f"{count} left out: agents may not read the user level; "
        "`maka --user settings agentReadEnabled=on` lets them"
    )


def render_checkpoint(result: dict[str, Any]) -> list[str]:
    coverage = result.get("coverage") or {}
    return [
        f"Checkpoint {result.get('checkpointId')} ({result.get('mode')}, {result.get('reason')})",
        f"  covers events {coverage.get('fromSeq')}–{coverage.get('toSeq')} "
        f"(boundary seq {result.get('boundarySeq')}, hash {str(result.get('coveredHash', ''))[:12]})",
        f"  summary {result.get('summaryTokens')} tokens; live history from seq "
        f"{result.get('preservedFromSeq')}",
        "  Nothing was deleted: compacted events stay searchable and retrievable.",
    ]


def cmd_attention(client: Client, args: argparse.Namespace) -> int:
    ws = workspace_of(args)
    result = client.call("get_attention", {"workspace": ws})
    if args.json:
        print_json(result)
        return EXIT_OK
    print(attention_markdown(result), end="")
    print_warnings(result)
    if not result.get("enabled"):
        # The reply does not say which switch: the settings do, and name the command.
        settings = client.call("get_settings", {"workspace": ws})
        if settings.get("incognito"):
            why, lift = "The workspace is incognito", "incognito=off"
        else:
            why, lift = "attentionEnabled is off here", "attentionEnabled=on"
        print(f"\n{why}; to change that: `{maka_command(args, 'settings ' + lift)}`")
    return EXIT_OK


def cmd_suggest(client: Client, args: argparse.Namespace) -> int:
    ws = workspace_of(args)
    params: dict[str, Any] = {"workspace": ws, "explain": bool(args.all)}
    if args.session:
        params["sessionId"] = resolve_session(client, ws, args.session)
    result = client.call("suggest", params)
    if args.json:
        print_json(result)
    else:
        print(suggestions_markdown(result), end="")
        lift = SILENCE_LIFTED_BY.get(str(result.get("silenced")))
        if lift and not result.get("suggestions"):
            print(f"\nTo change that: `{maka_command(args, 'settings ' + lift)}`")
    return EXIT_OK


# The setting that lifts a silence of `suggest`, for the line after it.
SILENCE_LIFTED_BY = {
    "agent_reads_off": "agentReadEnabled=on",
    "attention_off": "attentionEnabled=on",
    "incognito": "incognito=off",
}


DURATION_UNITS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def duration_ms(text: str) -> int:
    """``3d``, ``12h``, ``30m``, ``10s``, ``500ms`` or a bare number of milliseconds."""
    raw = text.strip().lower()
    for unit in sorted(DURATION_UNITS, key=len, reverse=True):
        if raw.endswith(unit) and raw[: -len(unit)].strip().replace(".", "", 1).isdigit():
            return round(float(raw[: -len(unit)]) * DURATION_UNITS[unit])
    if raw.isdigit():
        return int(raw)
    raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 3d, 12h, 30m, 0)")


def cmd_dismiss_suggestion(client: Client, args: argparse.Namespace) -> int:
    ws = workspace_of(args)
    params: dict[str, Any] = {"workspace": ws, "id": suggestion_id(client, ws, args.id)}
    if args.for_ms is not None:
        params["forMs"] = args.for_ms
    result = client.call("dismiss_suggestion", params)
    if args.json:
        print_json(result)
    elif args.for_ms == 0:
        print(f"Suggestion {result['id']} may show again now.")
    else:
        print(f"Dismissed {result['id']} until {timestamp(int(result['until']))}.")
    return EXIT_OK


_FULL_SUGGESTION_ID = re.compile(r"sg_[0-9a-f]{16}")


def suggestion_id(client: Client, workspace: str, given: str) -> str:
    """The suggestion id given, or the one candidate (suggested, dismissed or under the
    threshold) whose id it is a unique prefix of, with or without its ``sg_``."""
    if _FULL_SUGGESTION_ID.fullmatch(given):
        return given
    try:
        listing = client.call("suggest", {"workspace": workspace, "explain": True})
    except RemoteError:
        return given  # the daemon says what is wrong when the dismissal itself is asked
    known = [str(c["id"]) for c in [*(listing.get("suggestions") or []), *(listing.get("candidates") or [])]]
    wanted = given if given.startswith("sg_") or not given else "sg_" + given
    (found,) = resolve_ids(known, [wanted])
    return found if found != wanted else given


def cmd_compact(client: Client, args: argparse.Namespace) -> int:
    summary = read_text_arg(args.summary_file) if args.summary_file == "-" else None
    if args.summary_file and args.summary_file != "-":
        try:
            with open(args.summary_file, encoding="utf-8") as f:
                summary = f.read()
        except OSError as exc:
            raise CliError(f"{args.summary_file}: {exc.strerror}") from None
    mode = args.mode or ("semantic" if summary is not None else "checkpoint")
    ws = workspace_of(args)
    params: dict[str, Any] = {
        "workspace": ws,
        "sessionId": resolve_session(client, ws, args.session),
        "mode": mode,
    }
    if summary is not None:
        params["summary"] = summary
    if args.keep_recent_tokens is not None:
        params["keepRecentTokens"] = args.keep_recent_tokens
    if args.reason:
        params["reason"] = args.reason
    try:
        result = client.call("compact", params)
    except RemoteError as exc:
        # A window the user chose keeps the daemon's invalid_params; the default one
        # falling short is no mistake of theirs, so it is said in one plain line.
        chose_window = args.keep_recent_tokens is not None
        if args.json or chose_window or exc.data.get("reason") != "nothing_to_compact":
            raise
        raise CliError(exc.message, code=EXIT_REMOTE) from None
    if args.json:
        print_json(result)
    else:
        print("\n".join(render_checkpoint(result)))
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: Parents) -> None:
    p = sub.add_parser(
        "context",
        parents=parents.scoped,
        help="show the context pack build_context gives an agent",
        description="What the agent would get for this query and budget: "
        "segments, history messages and, with --trace, why.",
    )
    p.add_argument("words", nargs="*", metavar="QUERY", help="the current user turn (the same as -q QUERY)")
    p.add_argument("-q", "--query", help="the current user turn, used to rank memory and recall")
    p.add_argument(
        "-b", "--budget", type=token_budget, default=4000, metavar="N", help="token budget (default 4000)"
    )
    p.add_argument("-s", "--session", metavar="SESSION_ID", help="the session to build for")
    p.add_argument(
        "--include",
        action="append",
        choices=SEGMENT_KINDS,
        metavar="KIND",
        help=f"only these segment kinds (repeatable: {', '.join(SEGMENT_KINDS)})",
    )
    p.add_argument(
        "--trace", action="store_true", help="also show every candidate's score, what was dropped and why"
    )
    p.set_defaults(func=cmd_context)

    p = sub.add_parser(
        "attention",
        parents=parents.scoped,
        help="show what the workspace is in the middle of (get_attention)",
        description="The attention state derived from past sessions: active and abandoned "
        "threads, focus, proposals waiting, rejections cooling down, rhythm (makad's docs/ATTENTION.md).",
    )
    p.set_defaults(func=cmd_attention)

    p = sub.add_parser(
        "suggest",
        parents=parents.scoped,
        help="show what is worth picking up again, if anything (suggest); `suggest dismiss ID` hides one",
        description="Suggestions derived from past sessions, with restraint: a thread left open, "
        "a failure still standing, proposals waiting for review — each with its score, the reason "
        "and its refs. Most of the time there is nothing (makad's docs/ATTENTION.md, Suggestions).",
    )
    p.add_argument(
        "-s", "--session", metavar="SESSION_ID", help="the session asking (its own work is left out)"
    )
    p.add_argument("-a", "--all", action="store_true", help="also list the candidates not suggested, and why")
    p.set_defaults(func=cmd_suggest)
    ssub = p.add_subparsers(dest="suggest_command", required=False, metavar="ACTION")
    d = ssub.add_parser(
        "dismiss",
        parents=parents.scoped,
        help="hide a suggestion for a while (dismiss_suggestion)",
        description="The suggestion is not shown again for the daemon's cooldown "
        "(MAKAD_SUGGESTION_COOLDOWN_MS, default 3 days), or for --for; --for 0 brings it back.",
    )
    d.add_argument("id", metavar="ID", help="the suggestion's id (sg_…), or a unique start of it")
    d.add_argument(
        "--for", dest="for_ms", type=duration_ms, metavar="DURATION", help="how long: 3d, 12h, 30m, 0"
    )
    d.set_defaults(func=cmd_dismiss_suggestion)

    p = sub.add_parser(
        "compact",
        parents=parents.scoped,
        help="compact a session's history into a checkpoint (compact)",
        description="Writes a checkpoint that covers older events; the events "
        "are kept. Mode defaults to semantic with --summary-file, "
        "else checkpoint (no model needed). A session still shorter than the kept window "
        "has nothing to compact yet: that is said in one line, with exit status 1.",
    )
    p.add_argument(
        "-s",
        "--session",
        required=True,
        metavar="SESSION_ID",
        help="the session (its id or a unique prefix, as `maka sessions` shows it)",
    )
    p.add_argument(
        "--summary-file",
        metavar="FILE",
        type=user_path,
        help="the summary to store, with # Current Goal, # Current State and # Next Step (- for stdin)",
    )
    p.add_argument(
        "--mode",
        choices=["semantic", "checkpoint"],
        help="semantic stores --summary-file; checkpoint has the daemon write the summary",
    )
    p.add_argument(
        "--keep-recent-tokens",
        type=int,
        metavar="N",
        help="tokens of recent history to keep live (default 10,000; held between 1,000 and "
        "40,000, and the last 5 messages always stay)",
    )
    p.add_argument(
        "--reason",
        choices=["manual", "budget", "overflow"],
        help="recorded with the checkpoint (default manual; overflow halves the keep window)",
    )
    p.set_defaults(func=cmd_compact)

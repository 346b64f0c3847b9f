"""`maka episodes` and `maka consolidate`: the evidence behind profile proposals."""

from __future__ import annotations

import argparse
from typing import Any

from maka.cli.common import (
    EXIT_OK,
    EXIT_REMOTE,
    CliError,
    Parents,
    maka_command,
    positive_int,
    resolve_session,
    workspace_of,
)
from maka.cli.memory import check_tags
from maka.cli.output import age, print_json, short_id, show_table
from maka.client import Client
from maka.errors import RemoteError


def cmd_episodes(client: Client, args: argparse.Namespace) -> int:
    ws = workspace_of(args)
    params: dict[str, Any] = {"workspace": ws}
    if args.tag:
        params["tag"] = args.tag
    if args.session:
        params["sessionId"] = resolve_session(client, ws, args.session)
        known = client.call("list_sessions", {"workspace": ws, "includeClosed": True})["sessions"]
        if params["sessionId"] not in {s["sessionId"] for s in known}:
            raise CliError(
                f"no session of this workspace has the id {args.session!r}; "
                f"`{maka_command(args, 'sessions')}` lists them",
                EXIT_REMOTE,
            )
    result = client.call("list_episodes", params)
    if args.json:
        print_json(result)
        return EXIT_OK
    episodes = result["episodes"]
    if not episodes and args.tag:
        check_tags([args.tag], episode_tags(client, ws), "episode")
    if not episodes:
        print("No episodes.")
        return EXIT_OK
    rows = [
        [
            short_id(e["episodeId"]),
            age(e.get("at")),
            short_id(e["sessionId"]),
            ",".join(e.get("tags", [])) or "-",
            e.get("summary", ""),
        ]
        for e in episodes
    ]
    show_table(["ID", "WHEN", "SESSION", "TAGS", "SUMMARY"], rows)
    return EXIT_OK


def cmd_consolidate(client: Client, args: argparse.Namespace) -> int:
    ws = workspace_of(args)
    if args.tag:
        return _queue(client, args, ws, [args.tag])
    listing = client.call(
        "consolidation_candidates",
        {"workspace": ws, "minEpisodes": args.min_episodes, "minSessions": args.min_sessions},
    )
    if args.all:
        tags = [c["tag"] for c in listing["candidates"] if c["eligible"]]
        if not tags:
            raise CliError("no tag has enough evidence to consolidate", EXIT_OK)
        return _queue(client, args, ws, tags)
    if args.json:
        print_json(listing)
        return EXIT_OK
    candidates = listing["candidates"]
    if not candidates:
        print(
            f"No tag has {listing['minEpisodes']}+ episodes from "
            f"{listing['minSessions']}+ sessions since its last consolidation."
        )
        return EXIT_OK
    rows = [
        [c["tag"], str(c["episodeCount"]), str(c["sessionCount"]), "yes" if c["eligible"] else "no"]
        for c in candidates
    ]
    show_table(["TAG", "EPISODES", "SESSIONS", "ELIGIBLE"], rows)
    print(f"\n`{maka_command(args, 'consolidate TAG')}` queues a digest proposal for your approval.")
    return EXIT_OK


def episode_tags(client: Client, ws: str) -> set[str]:
    """Every tag the workspace's episodes carry."""
    listing = client.call("list_episodes", {"workspace": ws, "limit": 10_000})
    return {t for e in listing["episodes"] for t in e.get("tags", [])}


def _consolidate(client: Client, ws: str, tag: str) -> Any:
    try:
        return client.call("consolidate", {"workspace": ws, "tag": tag})
    except RemoteError as exc:
        if exc.kind == "insufficient_evidence" and exc.data.get("episodes") == 0:
            check_tags([tag], episode_tags(client, ws), "episode")  # a typo: a usage error
        raise


def _queue(client: Client, args: argparse.Namespace, ws: str, tags: list[str]) -> int:
    results = [_consolidate(client, ws, tag) for tag in tags]
    if args.json:
        print_json(results[0] if len(results) == 1 else results)
        return EXIT_OK
    for tag, result in zip(tags, results, strict=True):
        proposal = result.get("proposal") or {}
        if result.get("queued"):
            first_line = proposal.get("content", "").split("\n", 1)[0]
            print(f"Queued {short_id(proposal['id'])}: {first_line}")
        elif result.get("duplicateOf"):
            print(f"{tag}: already proposed as {short_id(result['duplicateOf'])}")
        elif result.get("previouslyRejected"):
            print(f"{tag}: this digest was rejected before; not queued")
    if any(r.get("queued") for r in results):
        print(
            f"Nothing is active until approved: run `{maka_command(args, 'review')}` or "
            f"`{maka_command(args, 'approve --all')}`."
        )
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: Parents) -> None:
    p = sub.add_parser(
        "episodes",
        parents=parents.scoped,
        help="list recorded episodes (list_episodes)",
        description="Lists the episodes agents recorded in the workspace (what was tried and "
        "how it went); --tag and --session narrow the list. `maka consolidate` "
        "turns a tag's evidence into a proposal.",
    )
    p.add_argument("--tag", help="only episodes with this tag")
    p.add_argument("--session", metavar="SESSION_ID", help="only this session's episodes")
    p.set_defaults(func=cmd_episodes)

    p = sub.add_parser(
        "consolidate",
        parents=parents.scoped,
        help="list tags with enough evidence, or queue a tag's digest proposal "
        "(consolidation_candidates, consolidate)",
        description="Without TAG: the tags whose episodes since their last "
        "consolidation reach the threshold. With TAG (or --all): "
        "queue the digest of that evidence as a proposal.",
    )
    p.add_argument("tag", nargs="?", metavar="TAG", help="the tag whose evidence to queue as a proposal")
    p.add_argument("--all", action="store_true", help="queue a digest for every eligible tag")
    p.add_argument("--min-episodes", type=positive_int, default=5, help="listing threshold (default 5)")
    p.add_argument("--min-sessions", type=positive_int, default=2, help="listing threshold (default 2)")
    p.set_defaults(func=cmd_consolidate)

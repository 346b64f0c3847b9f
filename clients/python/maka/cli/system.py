"""`maka status`, `ping`, `call` and `settings`."""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import sys
import time
import typing
from collections import Counter
from pathlib import Path
from typing import Any

from maka import autostart, generated_methods
from maka.cli.common import (
    EXIT_OK,
    EXIT_PROTOCOL,
    CliError,
    Parents,
    Parser,
    did_you_mean,
    maka_command,
    sendable_workspace,
    with_workspace,
    workspace_of,
)
from maka.cli.output import print_json, show_table
from maka.client import Client
from maka.errors import DaemonUnavailable, ProtocolError, RemoteError, ShuttingDown
from maka.workspace import MEMORY_FILES, WORKSPACE_ENV, find_workspace


def cmd_status(client: Client, args: argparse.Namespace) -> int:
    status = client.call("status")
    ws = _status_workspace(args)
    if ws is not None:
        status["workspace"] = _workspace_files(client, ws)
    if args.json:
        print_json(status)
        return EXIT_OK
    daemon = for_people(status)
    lines = status_lines(daemon)
    if ws is not None:
        width = max(len(k) for k in [*daemon, "fileWarnings"])
        lines.extend(workspace_lines(args, status["workspace"], daemon.get("warnings") or [], width))
    else:
        # Nothing read there: only where `maka` would work, so that a new project is not a guess.
        width = max(len(k) for k in daemon)
        start = maka_command(args, "memory add TITLE TEXT")
        lines.append(f"{'workspace':<{width}}  {find_workspace()} (no memory yet: `{start}` starts it)")
    print("\n".join(lines))
    return EXIT_OK


# The caps a daemon enforces when started without --max-message-bytes or --max-reply-bytes:
# x-limits, and --max-reply-bytes' default (makad.settings.DEFAULT_MAX_REPLY_BYTES).
DEFAULT_LIMITS = {**generated_methods.LIMITS, "maxReplyBytes": 16 * 1024 * 1024}


def for_people(status: dict[str, Any]) -> dict[str, Any]:
    """The daemon's ``status`` as ``maka status`` shows it (--json shows all of it):
    ``contextPaths`` only when a workspace has built a pack, ``limits`` only the caps that
    differ from the defaults (started with --max-message-bytes …), with the default."""
    shown = {k: v for k, v in status.items() if k not in ("workspace", "contextPaths", "limits")}
    if status.get("contextPaths"):
        shown["contextPaths"] = status["contextPaths"]
    limits = status.get("limits")
    if isinstance(limits, dict):
        changed = {
            key: f"{value} (default {DEFAULT_LIMITS[key]})" if key in DEFAULT_LIMITS else value
            for key, value in limits.items()
            if DEFAULT_LIMITS.get(key) != value
        }
        if changed:
            shown["limits"] = changed
    return shown


# Warnings about the workspace's files that `maka status` shows in full; the rest are counted.
STATUS_WARNINGS_SHOWN = 5


def _status_workspace(args: argparse.Namespace) -> str | None:
    """The workspace whose files `maka status` reports on: the one named (-w, --user,
    $MAKA_WORKSPACE), else the one found like git when it holds a memory file (at the top
    too: a misplaced one). None elsewhere, so that status run in any folder reads nothing."""
    named = getattr(args, "workspace", None) or os.environ.get(WORKSPACE_ENV)
    if named:
        return workspace_of(args)
    found = Path(find_workspace())
    if any((found / where / name).is_file() for where in ("memory", ".") for name in MEMORY_FILES):
        return sendable_workspace(str(found))
    return None


def _workspace_files(client: Client, ws: str) -> dict[str, Any]:
    """The workspace, its memory's status and read_state's warnings (or why it could not be read)."""
    try:
        state = client.call("read_state", {"workspace": ws})
    except RemoteError as exc:
        return {"path": ws, "error": {"kind": exc.kind, "message": exc.message}}
    return {"path": ws, "status": state.get("status"), "warnings": state.get("warnings") or []}


def workspace_lines(
    args: argparse.Namespace, files: dict[str, Any], daemon_warnings: list[dict[str, Any]], width: int
) -> list[str]:
    """The workspace and its file warnings for people: their count by kind, the first few
    messages, and where to see them all with their fixes. A warning the daemon's own
    ``warnings`` already list (ledger_read_only …) is not repeated."""
    lines = [f"{'workspace':<{width}}  {files['path']}"]
    if "error" in files:
        lines.append(f"{'fileWarnings':<{width}}  cannot read: {files['error']['message']}")
        return lines
    if files.get("status") not in ("ok", None):
        lines.append(f"{'memoryStatus':<{width}}  {files['status']}")
    seen = {(w.get("kind"), w.get("message")) for w in daemon_warnings}
    warnings = [w for w in files["warnings"] if (w.get("kind"), w.get("message")) not in seen]
    if not warnings:
        lines.append(f"{'fileWarnings':<{width}}  none")
        return lines
    kinds: Counter[str] = Counter()
    for warning in warnings:
        kinds[str(warning.get("kind"))] += _counted(warning)
    total = sum(kinds.values())
    lines.append(f"{'fileWarnings':<{width}}  {total} ({', '.join(f'{k} {n}' for k, n in kinds.items())})")
    shown = [w for w in warnings if _counted(w) == 1][:STATUS_WARNINGS_SHOWN]
    lines.extend(f"  {w.get('kind')}: {w.get('message')}" for w in shown)
    more = total - len(shown)
    listing = maka_command(args, "memory list")
    lines.append(
        f"  … {more} more: `{listing}` shows them all with their fixes"
        if more > 0
        else f"  `{listing}` shows them with their fixes"
    )
    return lines


def status_lines(status: dict[str, Any]) -> list[str]:
    """``status`` for people: one ``key  value`` line each (true/false/null as in JSON, the
    uptime also in words); a list of per-workspace records or an object below its key, one
    indented line per item."""
    width = max(len(k) for k in status)
    lines: list[str] = []
    for key, value in status.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines.append(f"{key:<{width}}  {len(value)}")
            lines.extend(f"  {_record(item)}" for item in value)
        elif isinstance(value, dict):
            lines.append(key)
            lines.extend(f"  {k}: {_scalar(v)}" for k, v in value.items())
        elif key == "uptimeMs" and isinstance(value, int):
            lines.append(f"{key:<{width}}  {value} ({_duration(value)})")
        else:
            lines.append(f"{key:<{width}}  {'none' if value == [] else _scalar(value)}")
    return lines


# read_state gives ten warnings of a kind at most, then one without a line: "<file> has N more …".
_MORE_OF_A_KIND = re.compile(r" has ([0-9]+) more ")


def _counted(warning: dict[str, Any]) -> int:
    """How many warnings ``warning`` stands for: N for read_state's "has N more" one, else 1."""
    found = None if "line" in warning else _MORE_OF_A_KIND.search(str(warning.get("message", "")))
    return int(found[1]) if found else 1


def _scalar(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _record(item: dict[str, Any]) -> str:
    """One per-workspace record: the workspace, then its kind and message (a warning) or
    its other fields."""
    rest = {k: v for k, v in item.items() if k != "workspace"}
    head = f"{item['workspace']}: " if "workspace" in item else ""
    if "kind" in rest and "message" in rest:
        return f"{head}{rest['kind']}: {rest['message']}"
    return head + ", ".join(f"{k} {_scalar(v)}" for k, v in rest.items())


def _duration(ms: int) -> str:
    import humanize

    return str(humanize.naturaldelta(ms / 1000))


def cmd_ping(client: Client, args: argparse.Namespace) -> int:
    result = client.call("ping")
    print_json(result) if args.json else print(result)
    return EXIT_OK


def cmd_stop(client: Client, args: argparse.Namespace) -> int:
    """``shutdown``, then wait until the daemon's process has exited (so a command run right
    after starts a fresh one instead of racing the old one's exit). Never starts a daemon."""
    client.autostart = False
    try:
        status = client.call("status")
    except DaemonUnavailable:
        print(f"makad is not running on {client.socket_path}")
        return EXIT_OK
    pid = int(status["pid"])
    try:
        client.call("shutdown")
    except ShuttingDown:
        pass  # already stopping: wait for it all the same
    except ProtocolError:
        pass  # it closed the connection before the reply: stopping too
    deadline = time.monotonic() + args.timeout
    gone = client.wait_closed(args.timeout)
    while gone and not autostart.process_gone(pid):
        if time.monotonic() > deadline:
            gone = False
            break
        time.sleep(0.02)
    if not gone:
        raise CliError(f"makad (pid {pid}) is still stopping after {args.timeout:g} s", EXIT_PROTOCOL)
    print(f"makad (pid {pid}) stopped")
    if status.get("socketActivated"):
        print(
            "note: systemd starts it again on the next connection; to keep it stopped: "
            "systemctl --user stop makad.socket makad.service",
            file=sys.stderr,
        )
    return EXIT_OK


def param_names(method: str) -> tuple[str, ...]:
    """The by-name params ``method`` takes (from the generated catalogue); () if unknown."""
    hint = getattr(getattr(generated_methods.Methods, method.replace(".", "_"), None), "__annotations__", {})
    found = re.fullmatch(r"Unpack\[(\w+)\]", str(hint.get("params", "")))
    if not found:
        return ()
    from maka import generated  # its TypedDicts: only for a method that takes params

    return tuple(getattr(generated, found[1], dict).__annotations__)


def takes_workspace(method: str) -> bool:
    """Whether ``method``'s params (in the generated catalogue) have a ``workspace``."""
    return "workspace" in param_names(method)


def cmd_call(client: Client, args: argparse.Namespace) -> int:
    params: Any = None
    if args.params is not None:
        raw = sys.stdin.read() if args.params == "-" else args.params
        try:
            params = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CliError(
                f"PARAMS is not valid JSON ({exc}): give one JSON object, its names in double "
                "quotes and the whole in single quotes for the shell, e.g. "
                """maka call propose '{"title": "T", "content": "C"}'"""
            ) from None
        except RecursionError:
            raise CliError("PARAMS is nested too deep to read: give a JSON object of a few levels") from None
    if (params is None or isinstance(params, dict)) and takes_workspace(args.method):
        # As every other command: -w, else $MAKA_WORKSPACE, else found like git.
        params = {"workspace": workspace_of(args), **(params or {})}
    print_json(client.call(args.method, params))
    return EXIT_OK


@functools.cache
def setting_types() -> dict[str, Any]:
    """The keys set_settings takes and their types (from the generated types, so a new
    setting is known at once). Read when first needed: building the generated TypedDicts
    is a large part of a command's start-up, and only the settings command uses them."""
    from maka.generated import SetSettingsParams

    return {k: v for k, v in typing.get_type_hints(SetSettingsParams).items() if k != "workspace"}


def settings_description() -> str:
    return (
        "Without KEY=VALUE: get_settings. With them: set_settings (a patch). "
        f"Keys: {', '.join(setting_keys())}. Values: on/off, a number or null"
        + "".join(f"; {key}: {' | '.join(names)}" for key, names in setting_names().items())
        + "."
    )


def setting_keys() -> tuple[str, ...]:
    return tuple(setting_types())


@functools.cache
def setting_names() -> dict[str, tuple[str, ...]]:
    """The settings whose value is one of a few names (contextStrategy), with the names."""
    return {
        key: tuple(str(name) for name in typing.get_args(hint))
        for key, hint in setting_types().items()
        if typing.get_origin(hint) is typing.Literal
    }


def _value_forms(key: str) -> str:
    """How a value of ``key`` is written, for a key typed without one."""
    names = setting_names().get(key)
    if names is not None:
        form = f"{key}=NAME, NAME one of {', '.join(names)}"
    elif setting_types()[key] is bool:
        form = f"{key}=on or {key}=off"
    else:
        form = f"{key}=N (a number) or {key}=null"
    return f"write {form} (`maka settings` alone shows every setting)"


def parse_setting(pair: str) -> tuple[str, Any]:
    """``agentReadEnabled=true`` → ("agentReadEnabled", True); values are JSON, or on/off,
    or for a setting that takes a name (``contextStrategy=curator``) the name itself."""
    key, sep, raw = pair.partition("=")
    keys = setting_keys()
    if not sep and key in keys:
        raise CliError(f"expected KEY=VALUE, got {pair!r}: {_value_forms(key)}")
    if not sep and ":" in pair and pair.partition(":")[0] in keys:
        key, _, raw = pair.partition(":")
        raise CliError(f"expected KEY=VALUE, got {pair!r}: did you mean {key}={raw}?")
    if not sep or not key:
        raise CliError(f"expected KEY=VALUE, got {pair!r}")
    if key not in keys:
        close = did_you_mean(key, keys, casefold=True)
        hint = f"did you mean {close!r}?" if close else f"the keys are {', '.join(keys)}"
        raise CliError(f"unknown setting {key!r}: {hint}")
    names = setting_names().get(key)
    if names is not None:
        if raw in names:
            return key, raw
        try:
            value = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):  # not JSON, or nested too deep to read
            value = raw
        if isinstance(value, str) and value not in names:
            close = did_you_mean(value, names, casefold=True)
            hint = f" (did you mean {close!r}?)" if close else ""
            raise CliError(f"{key}: {raw!r} is not one of {', '.join(names)}{hint}")
        return key, value
    if setting_types()[key] is bool:
        return key, _switch(key, raw)
    return key, _number_or_null(key, raw)


SWITCH_WORDS = {"on": True, "off": False, "true": True, "false": False, "yes": True, "no": False}


def _switch(key: str, raw: str) -> bool:
    """on/off (or true/false, yes/no, any case) for a setting that is a switch."""
    if raw.lower() in SWITCH_WORDS:
        return SWITCH_WORDS[raw.lower()]
    close = did_you_mean(raw.lower(), SWITCH_WORDS)
    hint = f" (did you mean {close!r}?)" if close else ""
    raise CliError(f"{key}: {raw!r} is not on or off{hint}")


def _number_or_null(key: str, raw: str) -> float | None:
    """A number, or null (also none/off) for a setting such as defaultDecayDays."""
    if raw.lower() in ("null", "none", "off"):
        return None
    try:
        value = float(raw)
        if not math.isfinite(value):
            raise ValueError(raw)
    except ValueError:
        days = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?) ?d(?:ays?)?", raw.strip().lower())
        hint = f"did you mean {key}={days[1]}?" if days and key.endswith("Days") else _value_forms(key)
        raise CliError(f"{key}: {raw!r} is not a number or null: {hint}") from None
    return int(value) if value.is_integer() and "." not in raw else value


def cmd_settings(client: Client, args: argparse.Namespace) -> int:
    ws = workspace_of(args)
    try:
        changes = dict(parse_setting(p) for p in args.set)
    except CliError as exc:
        raise CliError(with_workspace(args, str(exc)), exc.code) from None
    if changes:
        result = client.call("set_settings", {"workspace": ws, **changes})
    else:
        result = client.call("get_settings", {"workspace": ws})
    if args.json:
        print_json(result)
    else:
        rows = [[key, json.dumps(value)] for key, value in result.items()]
        show_table(["SETTING", "VALUE"], rows)
        print(f"\nWorkspace: {'the user level (@user)' if ws == '@user' else ws}")
        if result.get("incognito"):
            print(
                "Incognito is on: agents read and propose nothing here, whatever the switches "
                f"above say; `{maka_command(args, 'settings incognito=off')}` ends it."
            )
        elif result.get("enabled") is False:
            print(
                "Memory is off here: agents read and propose nothing, whatever the switches above "
                f"say; `{maka_command(args, 'settings enabled=on')}` turns it back on."
            )
        elif not result.get("agentReadEnabled"):
            print(
                "Agents cannot read this memory yet: "
                f"`{maka_command(args, 'settings agentReadEnabled=on')}` lets them "
                "(extractToolEnabled=on: propose entries; historyRecallEnabled=on: recall sessions)."
            )
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], parents: Parents) -> None:
    p = sub.add_parser(
        "status",
        parents=parents.scoped,
        help="show the daemon's status",
        description="Prints the daemon's status (the status method): version, pid, uptime, "
        "socket, data dir, connections, workspace warnings and, with a model configured, how "
        "far semantic indexing has got or why it fails. In a workspace (named with -w, --user "
        "or $MAKA_WORKSPACE, or found holding a memory file) also what its files hold that makad "
        "cannot use (read_state's warnings: their count by kind and the first five; --json adds "
        "workspace: {path, status, warnings}); elsewhere, the folder maka would use as the "
        "workspace (nothing read). Starts makad when none answers, unless --no-autostart.",
    )
    p.set_defaults(func=cmd_status)
    p = sub.add_parser(
        "ping",
        parents=[parents.json],
        help="check the daemon answers",
        description="Calls ping and prints its reply (pong). Exit 0 when the daemon answers, "
        "3 when none runs (with --no-autostart), 5 when it runs as another user.",
    )
    p.set_defaults(func=cmd_ping)
    p = sub.add_parser(
        "stop",
        help="stop the daemon (shutdown) and wait until it has exited; never starts one",
        description="Stops makad the way the shutdown method does (in-flight requests finish) "
        "and waits, at most --timeout seconds, until its process has exited. Clients that were "
        "connected (maka watch, maka mcp) do not start it again. Exit 0 also when none runs.",
    )
    p.set_defaults(func=cmd_stop)
    p = sub.add_parser(
        "call",
        parents=parents.scoped,
        help='call any method: maka call METHOD [\'{"json": "params"}\']',
        description="Calls METHOD with PARAMS (a JSON object of by-name params, or - for stdin) "
        "and prints the result as JSON. A method that takes a workspace gets the command's "
        "(-w, else $MAKA_WORKSPACE, else found like git) when PARAMS leave it out.",
    )
    p.add_argument(
        "method",
        metavar="METHOD",
        help="the method's name, e.g. ping, read_state or propose (a name that is no method "
        "lists them; makad's protocol/PROTOCOL.md describes each)",
    )
    p.add_argument(
        "params",
        metavar="PARAMS",
        nargs="?",
        help="""by-name params as a JSON object ('{"title": "T", "content": "C"}'), or - for stdin""",
    )
    p.set_defaults(func=cmd_call)
    p = sub.add_parser(
        "settings",
        parents=parents.scoped,
        help="show or change a workspace's settings",
    )
    typing.cast(Parser, p).describe = settings_description
    p.add_argument(
        "set",
        nargs="*",
        metavar="KEY=VALUE",
        help="e.g. agentReadEnabled=on incognito=off defaultDecayDays=30 contextStrategy=curator",
    )
    p.set_defaults(func=cmd_settings)

"""What to do about a daemon error, for people: the command that lifts a closed gate, the
command that lists the ids an unknown one was meant to be."""

from __future__ import annotations

import argparse
import os
import re
import shlex

from maka.cli.common import default_workspace, did_you_mean, maka_command
from maka.cli.system import param_names
from maka.errors import RemoteError
from maka.generated_methods import METHOD_NAMES
from maka.workspace import WORKSPACE_ENV

# The switches a gate_closed error names in its data, in the order `maka settings` takes them.
_GATE_SWITCHES = ("agentReadEnabled", "extractToolEnabled", "historyRecallEnabled")


# The command listing the ids a command takes, by command (and `memory` action).
_LISTINGS = {
    "approve": "pending",
    "reject": "pending",
    "memory": "memory list -a",
    "undo": "backups",
    "compact": "sessions",
    "context": "sessions",
    "episodes": "sessions",
    "search": "sessions",
}


def _settings_command(args: argparse.Namespace, *pairs: str) -> str:
    return maka_command(args, f"settings {' '.join(pairs)}")


_ENUM_VALUE = re.compile(r"Invalid enum value '(.*)'")
_UNKNOWN_FIELD = re.compile(r"unknown field `(.*)`")


def _closest_param(exc: RemoteError, args: argparse.Namespace) -> str | None:
    """The allowed value closest to a mistyped one, or (`maka call`) the param name closest
    to one the method does not take."""
    reason = str(exc.data.get("reason", ""))
    value, field = _ENUM_VALUE.search(reason), _UNKNOWN_FIELD.search(reason)
    if value and isinstance(exc.data.get("allowed"), list):
        close = did_you_mean(value[1], [str(a) for a in exc.data["allowed"]], casefold=True)
    elif field and exc.data.get("path") == "$" and getattr(args, "command", None) == "call":
        close = did_you_mean(field[1], param_names(str(args.method)), casefold=True)
    else:
        return None
    return f"did you mean {close!r}?" if close else None


def remedy(exc: RemoteError, args: argparse.Namespace) -> str | None:
    """One line naming the command that lifts the switch the error is about, or None."""
    if exc.kind == "gate_closed":
        off = [key for key in _GATE_SWITCHES if exc.data.get(key) is False]
        if off:
            return "turn on with: " + _settings_command(args, *(f"{key}=on" for key in off))
    elif exc.kind == "incognito_blocked":
        return (
            "incognito is on here: "
            + _settings_command(args, "incognito=off")
            + " ends it (an incognito session stays incognito until it is closed)"
        )
    elif exc.kind == "disabled":
        return "memory is switched off here: " + _settings_command(args, "enabled=on") + " turns it on"
    elif exc.kind == "method_not_found" and getattr(args, "command", None) == "call":
        close = did_you_mean(str(args.method), METHOD_NAMES, casefold=True)
        if close is None:
            folded = {name.replace("_", "").casefold(): name for name in METHOD_NAMES}
            close = folded.get(str(args.method).replace("_", "").casefold())
        if close:
            return f"did you mean {close}? `maka call rpc.discover` describes every method"
        # rpc.discover prints the whole OpenRPC document: the names fit on a line or two.
        return f"the methods: {', '.join(METHOD_NAMES)} (`maka call rpc.discover` describes each)"
    elif exc.kind == "invalid_params":
        return _closest_param(exc, args)
    elif exc.kind == "invalid_workspace" and exc.data.get("reason") == "reserved":
        return _found_reserved(args)
    elif exc.kind == "not_found":
        listing = _LISTINGS.get(str(getattr(args, "command", "")))
        if listing:
            return "existing ids are listed by: " + maka_command(args, listing)
    return None


def found_by_walking_up(args: argparse.Namespace) -> tuple[str, str] | None:
    """(the workspace found, the current folder) when the workspace was found by walking up
    from a folder holding none of its own (no -w, no $MAKA_WORKSPACE); None otherwise."""
    if getattr(args, "workspace", None) or os.environ.get(WORKSPACE_ENV):
        return None
    here = os.path.abspath(os.getcwd())
    found = default_workspace()
    return None if found == here else (found, here)


def _found_reserved(args: argparse.Namespace) -> str | None:
    """When the refused folder was found by walking up — say the home folder holding the
    user level's memory/ — how to name what was meant."""
    walked = found_by_walking_up(args)
    if walked is None:
        return None
    found, here = walked
    return (
        f"maka found {found} by walking up from the current folder, which holds no workspace "
        f"of its own: `maka --user …` works on the user level, `maka -w {shlex.quote(here)} …` "
        "makes this folder a workspace"
    )

"""`maka`: the command-line client of makad.

One module per command group; each has ``register(sub, parents)``. Commands take a
connected-on-demand ``Client`` and the parsed args and return an exit code:

0 success; 1 the daemon answered with an error; 2 usage error; 3 no daemon is running;
4 the connection broke or the reply was malformed; 5 the server runs as another user;
130 interrupted.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from typing import Any

from maka import autostart
from maka.cli import backups, completion, context, episodes, mcp, memory, proposals, review, system, watch
from maka.cli.common import (
    EXIT_CODES_HELP,
    EXIT_INTERRUPTED,
    EXIT_NO_DAEMON,
    EXIT_OK,
    EXIT_PROTOCOL,
    EXIT_REMOTE,
    EXIT_UNTRUSTED,
    EXIT_USAGE,
    GIT_NOTE,
    WORKSPACE_HELP,
    CliError,
    Parents,
    Parser,
    absolute,
    add_user_flag,
    announce_autostart,
    parse_arguments,
    positive_seconds,
    unmade_id_file,
)
from maka.cli.output import controls_shown, holds_unicode
from maka.cli.remedies import remedy
from maka.client import Client
from maka.errors import DaemonUnavailable, ProtocolError, RemoteError, UntrustedServer
from maka.server_check import expected_server_uid

__all__ = [
    "EXIT_NO_DAEMON",
    "EXIT_OK",
    "EXIT_PROTOCOL",
    "EXIT_REMOTE",
    "EXIT_UNTRUSTED",
    "EXIT_USAGE",
    "build_parser",
    "main",
]

GROUPS = (system, memory, proposals, review, backups, episodes, watch, context, completion, mcp)


class VersionAction(argparse.Action):
    """``--version``: argparse's version action, reading the version only when asked (it
    lives in the daemon's package, whose import loads structlog)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        kwargs.setdefault("help", "show program's version number and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from makad import __version__

        parser._print_message(f"maka {__version__}\n", sys.stdout)
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="maka",
        description="Talk to the makad memory daemon.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--socket", metavar="SOCKET", help="daemon socket (env MAKAD_SOCKET; default: runtime dir)"
    )
    parser.add_argument("--version", action=VersionAction)
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.add_argument("-w", "--workspace", metavar="DIR", type=absolute, default=None, help=WORKSPACE_HELP)
    add_user_flag(parser, default=None)
    parser.add_argument(
        "--timeout", type=positive_seconds, default=30.0, help="seconds to wait for a reply (default 30)"
    )
    parser.add_argument(
        "--server-uid",
        metavar="UID|any",
        default=None,
        help="the uid the daemon may run as instead of yours, or 'any' to skip the check "
        "(env MAKA_SERVER_UID; default: your own)",
    )
    parser.add_argument(
        "--no-autostart",
        action="store_true",
        help="do not start makad when none answers (env MAKA_NO_AUTOSTART=1)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parents = Parents()
    for group in GROUPS:
        group.register(sub, parents)
    return parser


def usable_streams() -> None:
    """A standard stream the launcher closed (``<&-``; Python makes it None) reads as empty
    or writes to nowhere, as /dev/null does, instead of failing on the first use; output in
    an encoding that cannot hold every character (PYTHONIOENCODING=ascii, a Latin-1
    locale) shows ``?`` for those instead of a traceback (--json escapes them instead)."""
    # Open for the whole run, as the standard streams are: no context manager.
    if sys.stdin is None:
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    for stream in (sys.stdout, sys.stderr):
        if not holds_unicode(stream) and isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="replace")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    usable_streams()
    if argv[:1] == ["__complete"]:
        return completion.complete_ids(argv[1:])
    args = parse_arguments(build_parser(), argv)
    if args.func is mcp.cmd_mcp:  # stdout carries the MCP protocol, for a host, not a terminal
        return _run(args)
    with controls_shown(args.json):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    announce_autostart()
    try:
        expected_server_uid(args.server_uid)
    except ValueError as exc:
        print(f"maka: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        with Client(
            args.socket, timeout=args.timeout, autostart=not args.no_autostart, server_uid=args.server_uid
        ) as client:
            id_file = unmade_id_file(args)
            code: int = args.func(client, args)
            if id_file is not None and id_file.exists() and not args.json:
                print(f"note: {GIT_NOTE}", file=sys.stderr)
            return code
    except CliError as exc:
        print(f"maka: {exc}", file=sys.stderr)
        return exc.code
    except DaemonUnavailable as exc:
        print(f"maka: {exc}", file=sys.stderr)
        if args.no_autostart and not autostart.refused():  # the environment's refusal is in exc
            print("  autostart is off (--no-autostart): without it, maka starts makad", file=sys.stderr)
        return EXIT_NO_DAEMON
    except UntrustedServer as exc:
        print(f"maka: {exc}", file=sys.stderr)
        return EXIT_UNTRUSTED
    except RemoteError as exc:
        if args.json:
            print(
                json.dumps({"error": {"code": exc.code, "message": exc.message, "data": exc.data}}),
                file=sys.stderr,
            )
        else:
            said = str(exc)
            print(f"maka: {said}", file=sys.stderr)
            # The text says the reason of params that do not fit (and their path) already.
            reason = exc.data.get("reason")
            told = (
                ("kind", "reason", "path")
                if isinstance(reason, str) and f": {reason} (" in said
                else ("kind",)
            )
            detail = {k: v for k, v in exc.data.items() if k not in told}
            if detail:
                print(f"  {json.dumps(detail, ensure_ascii=False)}", file=sys.stderr)
            fix = remedy(exc, args)
            if fix:
                print(f"  {fix}", file=sys.stderr)
        return EXIT_REMOTE
    except (ProtocolError, TimeoutError) as exc:
        print(f"maka: {exc or 'timed out'}", file=sys.stderr)
        return EXIT_PROTOCOL
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `maka … | head`: the reader went away, which is not a failure. Point stdout at
        # /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())

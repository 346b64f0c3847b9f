"""`maka`: the command-line client of makad.

Exit codes: 0 success; 1 the daemon answered with an error; 2 usage error;
3 no daemon is running; 4 the connection broke or the reply was malformed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from maka.client import Client
from maka.errors import DaemonUnavailable, ProtocolError, RemoteError

EXIT_OK, EXIT_REMOTE, EXIT_USAGE, EXIT_NO_DAEMON, EXIT_PROTOCOL = 0, 1, 2, 3, 4

Command = Callable[[Client, argparse.Namespace], Any]


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False))


def cmd_status(client: Client, args: argparse.Namespace) -> int:
    status = client.call("status")
    if args.json:
        _print_json(status)
    else:
        width = max(len(k) for k in status)
        for key, value in status.items():
            print(f"{key:<{width}}  {value}")
    return EXIT_OK


def cmd_call(client: Client, args: argparse.Namespace) -> int:
    params: Any = None
    if args.params is not None:
        raw = sys.stdin.read() if args.params == "-" else args.params
        try:
            params = json.loads(raw)
        except json.JSONDecodeError as exc:
            print(f"maka: PARAMS is not valid JSON: {exc}", file=sys.stderr)
            return EXIT_USAGE
    result = client.call(args.method, params)
    _print_json(result)
    return EXIT_OK


def cmd_ping(client: Client, args: argparse.Namespace) -> int:
    result = client.call("ping")
    _print_json(result) if args.json else print(result)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="maka", description="Talk to the makad memory daemon.")
    parser.add_argument("--socket", help="daemon socket (env MAKAD_SOCKET; default: runtime dir)")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for a reply")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("status", help="show the daemon's status")
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("ping", help="check the daemon answers")
    p.set_defaults(func=cmd_ping)
    p = sub.add_parser("call", help="call any method: maka call METHOD ['{\"json\": \"params\"}']")
    p.add_argument("method")
    p.add_argument("params", nargs="?", help="by-name params as a JSON object, or - for stdin")
    p.set_defaults(func=cmd_call)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with Client(args.socket, timeout=args.timeout) as client:
            code: int = args.func(client, args)
            return code
    except DaemonUnavailable as exc:
        print(f"maka: {exc}", file=sys.stderr)
        return EXIT_NO_DAEMON
    except RemoteError as exc:
        if args.json:
            print(json.dumps({"error": {"code": exc.code, "message": exc.message,
                                        "data": exc.data}}), file=sys.stderr)
        else:
            print(f"maka: {exc}", file=sys.stderr)
            detail = {k: v for k, v in exc.data.items() if k != "kind"}
            if detail:
                print(f"  {json.dumps(detail, ensure_ascii=False)}", file=sys.stderr)
        return EXIT_REMOTE
    except (ProtocolError, TimeoutError) as exc:
        print(f"maka: {exc or 'timed out'}", file=sys.stderr)
        return EXIT_PROTOCOL


if __name__ == "__main__":
    sys.exit(main())

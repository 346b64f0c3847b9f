"""scripts/soak: --crash N (kill -9 loop), --minutes M --clients C (load), --editor-races N; prints JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/soak", description=__doc__)
    parser.add_argument("--crash", type=int, metavar="N", help="kill -9 the daemon N times")
    parser.add_argument("--minutes", type=float, metavar="M", help="run the load for M minutes")
    parser.add_argument(
        "--clients", type=int, default=32, metavar="C", help="concurrent clients of the load run (default 32)"
    )
    parser.add_argument(
        "--editor-races", type=int, metavar="N", help="race N editor saves against approve (soaklib.races)"
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument(
        "--daemon-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for the daemon (repeatable), e.g. MALLOC_ARENA_MAX=2",
    )
    parser.add_argument(
        "--probe",
        metavar="FILE",
        help="load run: sample the daemon's memory into FILE (JSON lines, see soaklib.memprobe)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp dir for inspection")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    if args.crash is None and args.minutes is None and args.editor_races is None:
        parser.error("give --crash N, --minutes M and/or --editor-races N")
    if any("=" not in pair for pair in args.daemon_env):
        parser.error("--daemon-env takes KEY=VALUE")
    env = dict(pair.split("=", 1) for pair in args.daemon_env)
    module = "makad"
    if args.probe:
        env["MAKAD_PROBE_OUT"] = str(Path(args.probe).resolve())
        module = "soaklib.memprobe"

    def progress(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    result: dict[str, Any] = {}
    ok = True
    if args.crash is not None:
        from soaklib.crash import run_crash

        crash = run_crash(args.crash, args.seed, progress=progress, keep=args.keep, env=env)
        result.update(crash)
        c = crash["crash"]
        ok &= c["lost"] == c["duplicated"] == c["corrupt"] == c["unexpected_errors"] == 0
    if args.minutes is not None:
        from soaklib.load import run_load

        load = run_load(
            args.minutes * 60,
            args.clients,
            args.seed,
            progress=progress,
            keep=args.keep,
            env=env,
            module=module,
        )
        result.update(load)
        ok &= load["load"]["passed"]
    if args.editor_races is not None:
        from soaklib.races import run_editor_races

        races = run_editor_races(args.editor_races, args.seed, progress=progress, keep=args.keep, env=env)
        result.update(races)
        ok &= races["editor_races"]["passed"]
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

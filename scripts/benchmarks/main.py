"""scripts/bench entry point: run the named benchmarks (default all), print one JSON object."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

ALL = [
    "startup",
    "rpc",
    "read_state",
    "watch",
    "ledger",
    "appends",
    "build_context",
    "build_context_user",
    "memory_format",
    "normal_form",
    "imports",
    "import_ping",
    "data_dir",
    "suggestions",
]
# Run only when named: they need tools CI does not have (valgrind), or a long time
# (build_context_scale ingests 1.1 million events), or an optional extra and a model
# (build_context_semantic), or megabytes of pathological requests or texts (big_requests,
# pathological_inputs, redaction_cost), or files of 16,000 entries made and read per case
# (approval_cost), or a few hundred folders served and a few seconds' wait (many_workspaces),
# or a thousand folders subscribed to, watched and not (subscriptions).
OPTIONAL = [
    "appends_instructions",
    "approval_cost",
    "big_requests",
    "build_context_instructions",
    "build_context_scale",
    "build_context_semantic",
    "many_workspaces",
    "pathological_inputs",
    "read_state_instructions",
    "redaction_cost",
    "rpc_instructions",
    "subscriptions",
]


def main() -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench")
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {ALL})")
    parser.add_argument("--quick", action="store_true", help="short CI smoke run: shape only")
    args = parser.parse_args()
    names = args.names or ALL
    unknown = [n for n in names if n not in ALL + OPTIONAL]
    if unknown:
        parser.error(f"unknown benchmark(s): {unknown}")
    report: dict[str, object] = {"quick": args.quick}
    for name in names:
        try:
            module = importlib.import_module(f"benchmarks.{name}")
        except ModuleNotFoundError:
            report[name] = {"skipped": "not implemented yet"}
            continue
        report.update(module.run(args.quick))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

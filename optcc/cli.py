"""The `optcc` command line: parse, call the packages, print (a table, or --json).

Each subcommand lives in its own module under optcc/commands/ and defines
`register(subparsers)`; modules are discovered automatically, so adding a command touches
no other file. Exit codes: 0 proved/correct, 1 refuted/wrong (returned by the handler),
2 bad input (OptccError, printed as `optcc: error: FIELD: message`; argparse usage errors),
3 a run that could not finish (RunFailed: a rank died or hung) or an internal error (any
other exception is a bug, printed as one line `optcc: internal error: ...`;
OPTCC_TRACEBACK=1 adds the traceback), so that a crash never looks like a refutation.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import os
import sys
import traceback

from optcc.errors import OptccError, RunFailed

EXIT_INTERNAL = 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="optcc",
        description="AllReduce under network failures: bounds, optimal schedules, proofs, runs.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    import optcc.commands as commands
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"optcc.commands.{info.name}")
        module.register(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.handler(args)
    except OptccError as e:
        print(f"optcc: error: {e}", file=sys.stderr)
        return 2
    except RunFailed as e:
        print(f"optcc: error: {e}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        print("optcc: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - a bug: one line, exit 3, never exit 1 ("refuted")
        first = (str(e).strip().splitlines() or [""])[0][:300]
        print(f"optcc: internal error: {type(e).__name__}: {first} (please report; "
              f"OPTCC_TRACEBACK=1 shows the traceback)", file=sys.stderr)
        if os.environ.get("OPTCC_TRACEBACK"):
            traceback.print_exc()
        return EXIT_INTERNAL
    return 0 if code is None else code


if __name__ == "__main__":
    sys.exit(main())

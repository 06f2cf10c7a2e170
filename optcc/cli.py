"""The `optcc` command line: parse, call the packages, print (a table, or --json).

Each subcommand lives in its own module under optcc/commands/ and defines
`register(subparsers)`; modules are discovered automatically, so adding a command touches
no other file. Bad input (OptccError) prints `optcc: error: FIELD: message` and exits 2, where
FIELD is the flag that sets the model field the library named (optcc/commands/_fields.py).
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from optcc.errors import OptccError


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
        sys.stdout.flush()                   # a closed pipe shows here, not at interpreter exit
    except BrokenPipeError:
        return _reader_went_away()
    except OptccError as e:
        from optcc.commands._fields import flag_for
        print(f"optcc: error: {flag_for(e.field)}: {e.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("optcc: interrupted", file=sys.stderr)
        return 130
    return 0 if code is None else code


def _reader_went_away() -> int:
    """`optcc … | head`: the reader closed the pipe. Stop quietly (no traceback) and exit as a
    process killed by SIGPIPE would (128 + 13); stdout goes to devnull so that the interpreter's
    final flush does not fail again."""
    import os
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


if __name__ == "__main__":
    sys.exit(main())

"""The `optcc` command line: parse, call the packages, print (a table, or --json).

Each subcommand lives in its own module under optcc/commands/ and defines
`register(subparsers)`; modules are discovered automatically, so adding a command touches
no other file. Exit codes: 0 proved/correct, 1 refuted/wrong (returned by the handler),
2 bad input (OptccError, printed as `optcc: error: FIELD: message`, where FIELD is the flag
that sets the model field the library named, optcc/commands/_fields.py; argparse usage errors),
3 a run that could not finish (RunFailed: a rank died or hung) or an internal error (any
other exception is a bug, printed as one line `optcc: internal error: ...`;
OPTCC_TRACEBACK=1 adds the traceback), so that a crash never looks like a refutation.
Argparse's usage errors are one line too (`optcc: error: --flag: message`, exit 2).
A reader closing the pipe (`optcc ... | head`) exits 141 quietly. SIGTERM and SIGHUP unwind like
Ctrl-C (workers stopped, temporary folders removed) and exit 128 + the signal number.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import os
import re
import signal
import sys
import threading
import traceback

from optcc.errors import OptccError, RunFailed

EXIT_INTERNAL = 3


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line like every other error (subparsers inherit it)."""

    def error(self, message):
        print(f"optcc: error: {usage_error(message)} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def usage_error(message: str) -> str:
    """argparse's message as `FLAG: message` ("argument --size: invalid int value: 'x'" → "--size: …")."""
    if message.startswith("argument ") and ": " in message:
        name, rest = message[len("argument "):].split(": ", 1)
        return f"{name}: {rest}"
    m = re.fullmatch(r"the following arguments are required: (.+)", message)
    if m:
        return f"{m.group(1)}: required"
    m = re.fullmatch(r"unrecognized arguments: (\S+)(.*)", message)
    if m:
        return f"{m.group(1)}: unrecognized argument" + (f" (all unrecognized: {m.group(1)}{m.group(2)})"
                                                        if m.group(2).strip() else "")
    m = re.fullmatch(r"one of the arguments (.+) is required", message)
    if m:
        return f"{m.group(1).split()[0]}: one of {', '.join(m.group(1).split())} is required"
    m = re.fullmatch(r"ambiguous option: (\S+) (.+)", message)
    if m:
        return f"{m.group(1)}: ambiguous option, {m.group(2)}"
    return f"usage: {message}"


class Terminated(BaseException):
    """SIGTERM/SIGHUP, raised in the main thread so that every `finally` and `with` runs."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _terminate(signum, frame):
    for s in (signal.SIGTERM, signal.SIGHUP):   # a second signal must not interrupt the clean-up
        signal.signal(s, lambda *a: None)
    raise Terminated(signum)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
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
    main_thread = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, _terminate) for s in (signal.SIGTERM, signal.SIGHUP)} if main_thread else {}
    try:
        code = args.handler(args)
        sys.stdout.flush()                   # a closed pipe shows here, not at interpreter exit
    except BrokenPipeError:
        return _reader_went_away()
    except OptccError as e:
        from optcc.commands._fields import flag_for
        print(f"optcc: error: {flag_for(e.field)}: {e.message}", file=sys.stderr)
        return 2
    except RunFailed as e:
        from optcc.commands._fields import flag_for
        print(f"optcc: error: {flag_for(e.field)}: {e.message}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        print("optcc: interrupted", file=sys.stderr)
        return 130
    except Terminated as e:
        print(f"optcc: terminated by {signal.Signals(e.signum).name}", file=sys.stderr)
        return 128 + e.signum
    except Exception as e:  # noqa: BLE001 - a bug: one line, exit 3, never exit 1 ("refuted")
        first = (str(e).strip().splitlines() or [""])[0][:300]
        print(f"optcc: internal error: {type(e).__name__}: {first} (please report; "
              f"OPTCC_TRACEBACK=1 shows the traceback)", file=sys.stderr)
        if os.environ.get("OPTCC_TRACEBACK"):
            traceback.print_exc()
        return EXIT_INTERNAL
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 0 if code is None else code


def _reader_went_away() -> int:
    """`optcc … | head`: the reader closed the pipe. Stop quietly (no traceback) and exit as a
    process killed by SIGPIPE would (128 + 13); stdout goes to devnull so that the interpreter's
    final flush does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


if __name__ == "__main__":
    sys.exit(main())

"""The `optcc` command line: parse, call the packages, print (a table, or --json).

Each subcommand lives in its own module under optcc_app/commands/ and defines
`register(subparsers)`; modules are discovered automatically, so adding a command touches
no other file. Exit codes: 0 proved/correct, 1 refuted/wrong (returned by the handler),
2 bad input (OptccError, printed as `optcc: error: FIELD: message`, where FIELD is the flag
that sets the model field the library named, optcc_app/commands/_fields.py; argparse usage errors),
3 a run that could not finish (RunFailed: a rank died or hung) or an internal error (any
other exception is a bug, printed as one line `optcc: internal error: ...`;
OPTCC_TRACEBACK=1 adds the traceback), so that a crash never looks like a refutation.
A reader closing the pipe (`optcc ... | head`) exits 141 quietly. SIGTERM and SIGHUP unwind like
Ctrl-C (workers stopped, temporary folders removed) and exit 128 + the signal number.
"""
from __future__ import annotations

import argparse
import difflib
import importlib
import os
import pkgutil
import re
import signal
import sys
import threading
import traceback

from optcc.errors import OptccError, RunFailed

EXIT_INTERNAL = 3
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line like every other error of ours
    (`optcc: error: --flag: message`, exit 2), with a suggestion for a mistyped flag, command or
    choice, else a pointer to --help (subparsers inherit it)."""

    def error(self, message: str):
        text, suggested = _one_line_usage_error(self, message)
        print(f"optcc: error: {text}" + ("" if suggested else f" (see {self.prog} --help)"), file=sys.stderr)
        sys.exit(EXIT_USAGE)


def _one_line_usage_error(parser: argparse.ArgumentParser, message: str) -> tuple[str, bool]:
    """argparse's message as `FLAG: message`, and whether it carries a "did you mean"."""
    m = re.fullmatch(r"unrecognized arguments: (\S+)(.*)", message)
    if m:
        flag = m.group(1).split("=", 1)[0]
        more = any(w.startswith("-") for w in m.group(2).split())      # not just the flag's value
        others = f" (all unrecognized: {m.group(1)}{m.group(2)})" if more else ""
        close = difflib.get_close_matches(flag, _all_flags(parser), n=1, cutoff=0.75) if flag.startswith("-") else []
        if close:
            return f"{flag}: unrecognized argument; did you mean {close[0]}?{others}", True
        return f"{flag}: unrecognized argument{others}", False
    if message.startswith("argument ") and ": " in message:    # "argument --p: invalid int value: 'x'"
        name, rest = message[len("argument "):].split(": ", 1)
        name = name.split("/")[0]
        if rest.startswith("invalid choice:"):                 # "invalid choice: 'x' (choose from 'a', 'b')"
            given = rest.split("'")[1] if rest.count("'") >= 2 else ""
            choices = rest.partition("(choose from ")[2].rstrip(")").replace("'", "").split(", ")
            close = difflib.get_close_matches(given, choices, n=1)
            if close:
                return f"{name}: {rest.partition(' (')[0]}; did you mean {close[0]}?", True
        return f"{name}: {rest}", False
    m = re.fullmatch(r"the following arguments are required: (.+)", message)
    if m:
        return f"{m.group(1).split(',')[0].split('/')[0]}: required", False
    m = re.fullmatch(r"one of the arguments (.+) is required", message)
    if m:
        return f"{m.group(1).split()[0]}: one of {', '.join(m.group(1).split())} is required", False
    m = re.fullmatch(r"ambiguous option: (\S+) (.+)", message)
    if m:
        return f"{m.group(1)}: ambiguous option, {m.group(2)}", False
    return f"usage: {message}", False


class Terminated(BaseException):
    """SIGTERM/SIGHUP, raised in the main thread so that every `finally` and `with` runs
    (workers stopped, temporary folders removed)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _terminate(signum, frame):
    for s in (signal.SIGTERM, signal.SIGHUP):   # a second signal must not interrupt the clean-up
        signal.signal(s, lambda *a: None)
    raise Terminated(signum)


def _all_flags(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string of the parser and of its subcommands' parsers."""
    flags = []
    for action in parser._actions:
        flags += [o for o in action.option_strings if o.startswith("--")]
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                flags += _all_flags(sub)
    return flags


def command_names() -> list[str]:
    """The subcommands: one module each under optcc_app/commands/ (found without importing them)."""
    import optcc_app.commands as commands
    return sorted(m.name.replace("_", "-") for m in pkgutil.iter_modules(commands.__path__)
                  if not m.name.startswith("_"))


def _chosen_command(argv: list[str], names: list[str]) -> str | None:
    """The subcommand named in argv (its first word that is not a flag), if it is one of ours."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in names else None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser. Only the command that argv names is imported and registered in full,
    so a command pays for its own layers only; without one (help, a typo) every command is."""
    from optcc import __version__
    parser = _Parser(prog="optcc",
                     description="AllReduce under network failures: bounds, optimal schedules, proofs, runs.")
    parser.add_argument("--version", action="version", version=f"optcc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)
    names = command_names()
    argv = sys.argv[1:] if argv is None else argv
    chosen = _chosen_command(argv, names)
    wanted = [chosen] if chosen else [] if "--version" in argv else names
    for name in wanted:
        module = importlib.import_module(f"optcc_app.commands.{name.replace('-', '_')}")
        module.register(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:           # --help, --version, a usage error: a code, as for every command
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    main_thread = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, _terminate) for s in (signal.SIGTERM, signal.SIGHUP)} if main_thread else {}
    try:
        code = args.handler(args)
        sys.stdout.flush()                   # a closed pipe shows here, not at interpreter exit
    except BrokenPipeError:
        return _reader_went_away()
    except OptccError as e:
        from optcc_app.commands._fields import flag_for
        print(f"optcc: error: {flag_for(e.field)}: {e.message}", file=sys.stderr)
        return 2
    except RunFailed as e:
        from optcc_app.commands._fields import flag_for
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

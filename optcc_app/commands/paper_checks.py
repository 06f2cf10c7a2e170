"""`optcc paper-checks`: every claim of the paper beside our number, with a PASS/FAIL/OPEN verdict."""
from __future__ import annotations

import os
import sys

from optcc_app.commands._common import print_json
from optcc.errors import OptccError, RunFailed
from optcc.needs import require


def register(sub) -> None:
    parser = sub.add_parser("paper-checks", help="check the paper's claims against our bounds, schedules and models")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--figures", metavar="DIR", help="also write PNG redraws of Figures 8, 9 and 10 into DIR")
    parser.add_argument("--full-fit", action="store_true",
                        help="decide the O(1/p) OptCC rows: time every p of their simai fit (to p = 1024) by a "
                             "complete event search (about 20 minutes more and 10 GB of memory on 2 cores)")
    parser.set_defaults(handler=run)


def run(args) -> int:
    from paper_checks.report import render_text, run_paper_checks
    if args.figures is not None:
        require("paper-checks", "matplotlib", because="--figures draws PNGs")
        if os.path.exists(args.figures) and not os.path.isdir(args.figures):
            raise OptccError("--figures", f"{args.figures!r} exists and is not a directory")
        try:
            os.makedirs(args.figures, exist_ok=True)
        except OSError as e:
            raise OptccError("--figures", f"cannot create {args.figures!r}: {e.strerror or e}") from None
        from optcc.files import check_writable
        from paper_checks.figures import figure_names
        for name in figure_names():          # a symlink or a folder in the way: refused before the checks run
            check_writable(os.path.join(args.figures, name), "--figures")

    def progress(i, n, row_id, seconds, verdict):
        print(f"paper-checks: [{i}/{n}] {row_id}: {verdict} ({seconds:.1f} s CPU)", file=sys.stderr, flush=True)
    if args.full_fit:                  # minutes per row: a line per point of the fits too
        import logging
        fit_log = logging.getLogger("paper_checks")
        for old in [h for h in fit_log.handlers if h.get_name() == "optcc paper-checks"]:
            fit_log.removeHandler(old)             # one handler, on this call's stderr
        handler = logging.StreamHandler(sys.stderr)
        handler.set_name("optcc paper-checks")
        handler.setFormatter(logging.Formatter("paper-checks:   %(message)s"))
        fit_log.addHandler(handler)
        fit_log.setLevel(logging.INFO)
    report = run_paper_checks(None, progress, full_fit=args.full_fit)
    if args.figures is None:
        print_json(report) if args.json else print(render_text(report))
        return 0
    if not args.json:                  # the table first: a drawing error never loses the checks
        print(render_text(report), flush=True)
    from paper_checks.figures import draw_figures
    try:
        report["figures"] = draw_figures(args.figures)
    except Exception as e:  # noqa: BLE001 - any plotting failure: the checks are already out
        if args.json:
            print_json({**report, "figures_error": f"{type(e).__name__}: {e}"})
        raise RunFailed("--figures", f"the checks are above, but drawing into {args.figures!r} failed: "
                                   f"{type(e).__name__}: {e}") from None
    if args.json:
        print_json(report)
    else:
        print("\n".join(f"wrote {path}" for path in report["figures"]))
    return 0

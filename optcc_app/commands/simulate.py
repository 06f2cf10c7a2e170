"""`optcc simulate FILE`: run the schedule on random integers; does every rank hold the exact sum?"""
from __future__ import annotations

from optcc_app.commands._common import print_json
from optcc.errors import OptccError
from optcc.generated import load_flows
from optcc.simulate import simulate


def register(sub) -> None:
    parser = sub.add_parser("simulate", help="run a schedule on random integers and check the sums (test oracle)")
    parser.add_argument("file", metavar="FILE")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=run)


def run(args) -> int:
    if not 0 <= args.seed < 2**63:
        raise OptccError("--seed", f"expected an integer in 0..2**63-1, got {args.seed}")
    schedule = load_flows(args.file)
    result = simulate(schedule, seed=args.seed)
    if args.json:
        print_json(result.to_json())
    elif result.correct:
        print(f"correct: every one of {schedule.cluster.p} ranks holds the exact sum of all "
              f"{len(schedule.pieces)} pieces (random integers, seed {args.seed})")
    else:
        w = result.first_wrong
        print(f"WRONG: rank {w['rank']} piece {w['piece']}: expected {w['expected']}, got {w['actual']}")
    return 0 if result.correct else 1

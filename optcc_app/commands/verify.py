"""`optcc verify FILE`: prove a schedule is a correct AllReduce (Z3), or print a counterexample.

Exit 0 proved, 1 refuted, 2 bad input (OptccError, handled by optcc_app.cli).
"""
from __future__ import annotations

from optcc_app.commands._common import print_json, print_table
from optcc.exact import show
from optcc.errors import OptccError


def register(sub) -> None:
    parser = sub.add_parser("verify", help="prove a schedule computes the AllReduce (Z3), or show a counterexample")
    parser.add_argument("file", metavar="FILE")
    parser.add_argument("--certificate", metavar="OUT", help="on success write a proof certificate (JSON) here")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16", "float64", "int32", "int64"),
                        default="float32", help="dtype for the reported 'numerics' property (default float32)")
    parser.add_argument("--by-rails", action="store_true",
                        help="prove a rails schedule (g > 1) from one proof per distinct rail plus the NVLink "
                             "bracket check (docs/parametric.md \"Rails by composition\"); --certificate then writes a rails "
                             "certificate (one witness per distinct rail, re-checked in linear time)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=run)


def run(args) -> int:
    from optcc.generated import load_any
    schedule = load_any(args.file, args.file)
    return _BY_FORM[schedule.form](args, schedule)


def _run_flows(args, schedule) -> int:
    """A flow list: proved as an instance (or by rails)."""
    from optcc_app.compose.verification import verify_schedule
    from verifier import write_certificate
    from verifier.time_property import NOT_STATED

    proof, lp, runnable = verify_schedule(schedule, args.dtype, by_rails=args.by_rails)
    if proof.proved and (runnable is None or runnable[0]) and args.certificate:
        if args.by_rails:
            from verifier.rails_certificate import write_rails_certificate
            write_rails_certificate(proof, schedule, args.certificate, field="--certificate")
        else:
            write_certificate(proof, schedule, args.certificate, field="--certificate")
    from verifier.step_check import add_runnable
    add_runnable(proof, runnable)
    if args.json:
        out = proof.to_json()
        out = {"proved": out["proved"], "properties": out["properties"],
               "counterexample": out["counterexample"], "seconds": out["seconds"],
               "facts": out["facts"], "z3_version": out["z3_version"],
               "reported_properties": out["reported"],
               "reported_counterexamples": out["reported_counterexamples"],
               "not_stated": [] if "time" in proof.properties else ["time"]}
        print_json(out)
    else:
        f = proof.facts
        print(f"# {schedule.meta.get('algorithm', 'schedule')} on {schedule.cluster.describe()}, "
              f"{len(schedule.pieces)} pieces, {len(schedule.flows)} flows")
        print_table(["property", "result"],
                    [[name, "proved" if ok else "REFUTED"] for name, ok in proof.properties.items()]
                    + ([] if "time" in proof.properties else [["time", "not stated (reported, never proved)"]])
                    + [[name, ("holds" if ok else "DOES NOT HOLD") + " (reported, not required)"]
                       for name, ok in proof.reported.items()])
        if "distinct_rail_proofs" in f:
            print(f"by composition: {f['rails']} rails, {f['distinct_rail_proofs']} distinct rail proof(s), "
                  "NVLink brackets checked")
            th = f["composition_theorem"]
            print(f"composition theorem: {th['status']}: {th['obligations']} obligations, "
                  f"{th['controls_refuted']} false controls refuted; argued: {'; '.join(th['argued'])}")
        if "piece_groups" in f:
            print(f"sum: {f['pieces']} pieces in {f['piece_groups']} group(s) up to rank permutation, "
                  f"{f['expressions']} distinct expressions, {f['z3_queries']} Z3 quer"
                  f"{'y' if f['z3_queries'] == 1 else 'ies'}")
        if "finish" in f:
            lb = f.get("lower_bound")
            stated = f.get("stated_slot_time")
            print(f"time: ends at {show(f['finish'])} n/B"
                  + ("; the schedule states no slot time" if stated == NOT_STATED else f", states {show(stated)} n/B")
                  + ("" if lb is None else f", lower bound {show(lb)} n/B"))
        if "numerics" in f:
            print("numerics: " + f["numerics"]["message"])
        print("bound: " + lp["message"])
        if "runnable" in f:
            print("runnable: " + f["runnable"])
        if f.get("note"):
            print("note: " + f["note"])
        if proof.counterexample:
            cx = proof.counterexample
            print(f"COUNTEREXAMPLE ({cx['property']}): {cx['message']}")
            if cx["property"] == "sum":
                print("  inputs: " + ", ".join(f"{k.split(' ')[0]}={v}" for k, v in list(cx["inputs"].items())[:16]))
                print("  wrong coefficients (rank: expected -> actual): " + ", ".join(
                    f"{r}: {d['expected']} -> {d['actual']}" for r, d in list(cx["wrong_coefficients"].items())[:16]))
            for name in cx.get("also_failed", []):
                print(f"also refuted ({name}): {proof.counterexamples[name]['message']}")
        for name, cx in proof.reported_counterexamples.items():
            print(f"{name}: {cx['message']}")
        print(f"{'PROVED' if proof.proved else 'REFUTED'} in {proof.seconds:.3f} s"
              + (f"; certificate written to {args.certificate}" if proof.proved and args.certificate else ""))
    return 0 if proof.proved else 1


def _run_generated(args, gen) -> int:
    """A generated schedule is proved by its generator's proof (every size), re-proved here, and
    its parameters lying in the proof's range (checked on loading); not by rails."""
    if args.by_rails:
        raise OptccError("--by-rails", "a generated schedule is proved by its generator's proof, not by rails")
    from optcc_app.compose.verification import verify_generated
    out = verify_generated(gen, args.certificate)
    if args.json:
        print_json(out)
    else:
        print(f"# {gen.algo} generated schedule on {gen.cluster.describe()}, k={gen.segments} "
              f"(its parameters; the generator is proved {out['for_all']})")
        print_table(["property", "result"], [[name, v + (" (every size)" if v == "proved" else "")]
                                            for name, v in out["properties"].items()])
        print(f"sources_sha256: {gen.sources_sha256[:16]}… (the sources as they are now)")
        for f in out["failures"]:
            print(f"REFUTED ({f['property']}): {f['obligation']}: {f.get('why', '')}")
        print(f"{'PROVED' if out['proved'] else 'REFUTED'} in {out['seconds']:.3f} s"
              + (f"; generator certificate written to {args.certificate}" if out["proved"] and args.certificate else ""))
    return 0 if out["proved"] else 1


_BY_FORM = {"flows": _run_flows, "generated": _run_generated}    # optcc.schedule.ScheduleForm.form

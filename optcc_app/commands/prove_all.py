"""`optcc prove-all --algo ring|optcc|servers`: prove a generator's flow families for every size (Z3).

Exit 0 proved, 1 refuted or unknown (a counterexample names p, k, ℓ, s and the flows), 2 bad input.
"""
from __future__ import annotations

from optcc_app.commands._common import print_json, print_table
from optcc.files import check_writable
from verifier.parametric.obligations import TIMEOUT_MS


def register(sub) -> None:
    parser = sub.add_parser("prove-all", help="prove a generator correct for all p, k, ℓ and straggler ranks (Z3)")
    parser.add_argument("--algo", required=True, choices=("ring", "optcc", "servers"), help="the construction to prove")
    parser.add_argument("--certificate", metavar="OUT",
                        help="on success write a generator certificate (JSON) here; `optcc run --certificate` accepts it")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--recheck", choices=("cvc5",),
                        help="re-check every obligation with a second solver (SMT-LIB2 exported as discharged; "
                             "pip install cvc5); a disagreement fails the run")
    parser.add_argument("--recheck-timeout", type=float, default=TIMEOUT_MS / 1000, metavar="SECONDS",
                        help=f"per query, for --recheck (default {TIMEOUT_MS / 1000:g}, Z3's own per obligation)")
    parser.add_argument("--proofs", metavar="DIR",
                        help="with --recheck cvc5: write cvc5's proof of every claim (Alethe, checked by cvc5's "
                             "proof checker) into DIR, one file per obligation")
    parser.add_argument("--verbose", action="store_true",
                        help="list the obligations proved vacuously (their premise never holds) by name")
    parser.set_defaults(handler=run)


def _flow(f: dict) -> str:
    if "error" in f:
        return f"{f['family']} {f['index']}: {f['error']}"
    idx = ", ".join(f"{k}={v}" for k, v in f["index"].items())
    return (f"{f['family']}({idx}): {f['src']} -> {f['dst']} piece {tuple(f['piece'])} {f['op']} "
            f"at slot {f['start_slots']} for {f['duration_slots']}")


def _with_bounds(res: dict, algo: str) -> dict:
    """Add near-optimality (optcc: verifier.parametric.near_optimal; servers:
    verifier.parametric.near_optimal_servers) and the fluid-LP certificates of the bounds
    (lp_models.duals) as the properties near_optimal, lower_bound_lp."""
    from lp_models.duals import prove_lp_bounds
    from verifier.parametric import near_optimal, near_optimal_servers

    extend = {"optcc": near_optimal.extend_prove_all, "servers": near_optimal_servers.extend_prove_all}.get(algo)
    if extend is not None:
        res = extend(res)
    lp = prove_lp_bounds()
    res = {**res, "lower_bound_lp": lp, "proved": res["proved"] and lp["proved"],
           "properties": {**res["properties"], "lower_bound_lp": "proved" if lp["proved"] else "refuted"},
           "obligations": res["obligations"] + lp["claims"], "seconds": round(res["seconds"] + lp["seconds"], 3)}
    res["failures"] = res["failures"] + [{"property": "lower_bound_lp", "status": "refuted", "obligation": f["claim"],
                                          "why": f"Z3: {f['z3']}", "counterexample": f["counterexample"]}
                                         for c in lp["certificates"] for f in c["failures"]]
    return res


def _print_bounds(res: dict) -> None:
    no = res.get("near_optimal")
    if no:
        print(f"near-optimal, for {no['for_all']}:")
        for r in no["obligations"]:
            print(f"  {r['status']:8} {r['obligation']}")
        c = no["control"]
        pt = c.get("point") or {}
        at = ", ".join(f"{'ℓ' if k == 'ell' else k}={v}" for k, v in pt.items() if k in ("q", "g", "p", "k", "ell", "s_nv"))
        bound = next((v for k, v in pt.items() if k.startswith("bound_")), "")
        print(f"  {c['status']:8} {c['obligation']}" + (
            f" (as expected: {at}: T = {pt['T']} > {bound})" if c["as_expected"] else " (NOT as expected)"))
        for t in no.get("tightness", ()):
            print(f"  {t['status']:8} {t['obligation']}" + (" (as expected: the constant is attained)"
                                                            if t["as_expected"] else " (NOT as expected)"))
    for c in res["lower_bound_lp"]["certificates"]:
        print(f"lower bound: {c['lp']}: {c['statement']} for {c['for_all']}: "
              f"{'proved' if c['proved'] else 'NOT PROVED'} ({c['claims']} claims)")


def lp_obligations() -> list:
    """The LP certificates' claims (lp_models.duals), as obligations for the re-check."""
    from lp_models.duals import CERTIFICATES, all_claims
    from verifier.parametric.recheck import claim_obligation
    return [claim_obligation(c) for make in CERTIFICATES for c in all_claims(make())]


def recheck_obligations(algo: str) -> list:
    """What `--recheck` decides again: prove-all's obligations, the near-optimality statements
    and the LP certificates' claims."""
    from verifier.parametric.prove import obligations
    from verifier.parametric import near_optimal, near_optimal_servers
    obs = obligations(algo)[1]
    extra = {"optcc": near_optimal, "servers": near_optimal_servers}.get(algo)
    if extra is not None:
        obs = obs + extra.obligations()
    return obs + lp_obligations()


def _recheck(res: dict, args) -> dict:
    """recheck_obligations(algo) re-checked by cvc5."""
    import sys

    from verifier.parametric.recheck import recheck
    if not args.recheck_timeout > 0:
        from optcc.errors import OptccError
        raise OptccError("--recheck-timeout", f"expected a positive number of seconds, got {args.recheck_timeout}")
    obs = recheck_obligations(args.algo)

    def progress(n, total):
        if n % 50 == 0 or n == total:
            print(f"optcc prove-all: re-checked {n}/{total} obligations with cvc5", file=sys.stderr, flush=True)
    rc = recheck(obs, int(args.recheck_timeout * 1000), progress, proofs_dir=args.proofs)
    return {**res, "recheck": rc, "proved": res["proved"] and not rc["disagree"]}


def _check_proofs_dir(args) -> None:
    """--proofs needs --recheck cvc5 and a directory it can create or an empty one."""
    import os

    from optcc.errors import OptccError
    if not args.recheck:
        raise OptccError("--proofs", "proof objects come from the second solver: add --recheck cvc5")
    if os.path.exists(args.proofs) and (not os.path.isdir(args.proofs) or os.listdir(args.proofs)):
        raise OptccError("--proofs", f"{args.proofs} exists and is not an empty directory")
    try:
        os.makedirs(args.proofs, exist_ok=True)
    except OSError as e:
        raise OptccError("--proofs", f"cannot create {args.proofs}: {e.strerror}") from e


def run(args) -> int:
    from verifier.parametric import prove_all
    from verifier.parametric.certificate import check_certifiable, write_generator_certificate

    if args.proofs is not None:
        _check_proofs_dir(args)
    if args.certificate:
        check_certifiable(args.algo)
        check_writable(args.certificate, "--certificate")     # before the proof, not after it
    from optcc_app.compose.statements import statements_sha256
    res = _with_bounds(prove_all(args.algo), args.algo)
    res["statements_sha256"] = {"obligations": res["obligations_sha256"],      # prove_all hashed them already
                                **statements_sha256(args.algo, ("near_optimal", "lower_bound_lp"))}
    if args.recheck:
        res = _recheck(res, args)
    if res["proved"] and args.certificate:
        write_generator_certificate(res, args.certificate)
    if args.json:
        print_json({k: res[k] for k in ("algo", "proved", "for_all", "properties", "obligations",
                                        "premise_never_holds", "seconds", "failures", "z3_version", "near_optimal",
                                        "lower_bound_lp", "statements_sha256", "recheck") if k in res})
    else:
        print(f"# {args.algo}: for {res['for_all']}")
        print_table(["property", "result"], [[k, v] for k, v in res["properties"].items()])
        _print_bounds(res)
        vac = res["premise_never_holds"]
        if vac:
            print(f"{len(vac)} obligations hold because their premise never holds (the relation — same port, "
                  f"same value, a later chain flow — never arises; docs/parametric.md, \"Vacuous premises\")"
                  + ("" if args.verbose else "; --verbose lists them"))
            if args.verbose:
                for v in vac:
                    print(f"  {v['property']}: {v['obligation']}")
        rc = res.get("recheck")
        if rc:
            print(f"re-checked by {rc['solver']}: {rc['agree']} of {rc['queries']} queries agree with Z3, "
                  f"{len(rc['disagree'])} disagree, {len(rc['unknown'])} undecided within {args.recheck_timeout:g} s "
                  f"({rc['seconds']:.1f} s; {rc['obligations']} obligations, {rc['split']} of them through their "
                  f"polynomial split, {rc['parts_proved_by_z3']} parts proved by Z3 too)")
            for x in rc["disagree"] + rc["unknown"]:
                print(f"  {'DISAGREE' if x in rc['disagree'] else 'undecided'}: {x['property']}: {x['obligation']} "
                      f"({x['query']}: cvc5 {x['cvc5']})")
            pr = rc.get("proofs")
            if pr:
                print(f"proofs: {pr['written']} {pr['format']} proofs in {pr['dir']} ({pr['bytes'] / 1e6:.1f} MB), each "
                      f"accepted by {pr['checker']}; {len(pr['with_holes'])} with steps left as holes")
        for r in res["failures"]:
            print(f"{r['status'].upper()} ({r['property']}): {r['obligation']}: {r.get('why', '')}")
            cx = r.get("counterexample")
            if cx and "p" in cx:
                print(f"  counterexample: p={cx['p']}, k={cx['k']}, ℓ={cx['ell']}, s={cx['s']}")
            elif cx:
                print("  counterexample: " + ", ".join(f"{k}={v}" for k, v in cx.items() if k not in ("obligation", "flows")))
            for f in (cx or {}).get("flows", []):
                print("  flow " + _flow(f))
        print(f"{'PROVED' if res['proved'] else 'NOT PROVED'}: {res['obligations']} obligations in "
              f"{res['seconds']:.2f} s" + (f"; certificate written to {args.certificate}"
                                           if res["proved"] and args.certificate else ""))
    return 0 if res["proved"] else 1

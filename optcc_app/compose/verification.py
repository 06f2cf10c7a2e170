"""What `optcc verify` establishes about a schedule, from three layers: the verifier's proof,
the LP bound (lp_models.schedule_point, reported as `bound`) and `runnable`, checked on the
runner's own per-rank plans (verifier.step_check)."""
from __future__ import annotations

from optcc.schedule import Schedule


def verify_schedule(schedule: Schedule, dtype: str = "float32", by_rails: bool = False):
    """(proof, lp, runnable): the Proof with `bound` among its reported properties, the LP check's
    result, and runnable_result's (ok, message) or None (verifier.step_check.add_runnable puts it
    into the proof, after any certificate of the verifier's own properties is written).
    `by_rails`: prove by the rails composition theorem (verifier.rails_composition: one proof per
    distinct rail plus the bracket check; deterministic and numerics are then not reported)."""
    from verifier.step_check import runnable_result
    from lp_models.schedule_point import check_lp_bound
    from verifier import prove_allreduce
    if by_rails:
        from verifier.rails_composition import prove_rails_composition
        proof = prove_rails_composition(schedule)
    else:
        proof = prove_allreduce(schedule, dtype=dtype)
    lp = check_lp_bound(schedule)
    proof.reported["bound"] = lp["holds"]
    proof.facts["lp_bound"] = lp
    if not lp["holds"]:
        proof.reported_counterexamples["bound"] = {"message": lp["message"], **lp.get("counterexample", {})}
    runnable = runnable_result(schedule)
    return proof, lp, runnable


def verify_generated(gen, certificate: str | None = None) -> dict:
    """`optcc verify` of a generated schedule (optcc.generated): the generator's obligations
    re-proved by Z3 (prove_all), for the sources the file names (checked when it was loaded).
    No flow is enumerated: the proof covers every size in its range, these parameters among them.
    With `certificate`, the generator certificate is written there on success."""
    from verifier.parametric.certificate import write_generator_certificate
    from verifier.parametric.prove import prove_all
    result = prove_all(gen.algo)
    out = {"proved": result["proved"], "form": "generated", "algo": gen.algo, "segments": gen.segments,
           "cluster": gen.cluster.to_json(), "sha256": gen.sha256(), "sources_sha256": gen.sources_sha256,
           "for_all": result["for_all"], "properties": result["properties"],
           "obligations": result["obligations"], "failures": result["failures"],
           "obligations_sha256": result["obligations_sha256"], "seconds": result["seconds"],
           "z3_version": result["z3_version"]}
    if result["proved"] and certificate:
        write_generator_certificate(result, certificate)
    return out

"""The summation-tree lemma (verifier.numerics.summation_tree_numerics), which decides numerics for
generated schedules accepted without an instance: on every instance small enough to analyse, the
exact analysis agrees with what the lemma claims (partial sums only, depth ≤ p − 1, error within
the ring's bound), and the lemma is refused for families that are not plain adds and copies."""
import dataclasses
from fractions import Fraction

import pytest

from optcc.algorithms import build_schedule
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.generated import GeneratedSchedule
from verifier.numerics import DTYPES, INT_DTYPES, analyze_numerics, summation_tree_numerics

CASES = [("ring", 3, None, 2), ("ring", 6, None, 3), ("optcc", 3, {0: 2}, 2), ("optcc", 5, {2: Fraction(3, 2)}, 3),
         ("optcc", 7, {6: 3}, 2), ("optcc", 8, {1: Fraction(8, 7)}, 4), ("optcc", 6, None, 2)]


@pytest.mark.parametrize("algo,p,stragglers,k", CASES)
def test_the_exact_analysis_of_generator_instances_is_within_what_the_lemma_claims(algo, p, stragglers, k):
    sched = build_schedule(algo, Cluster.build(p, stragglers=stragglers), k)
    for dtype in DTYPES:
        exact = analyze_numerics(sched, dtype)
        lemma = summation_tree_numerics(p, dtype, "test")
        assert exact.ok and lemma.ok
        assert exact.max_intermediate_coef <= lemma.max_intermediate_coef == p
        if dtype in INT_DTYPES:
            continue
        assert exact.summation_tree and exact.depth <= p - 1
        assert exact.bound_eps <= lemma.bound_eps == exact.ring_bound_eps


def test_the_lemma_is_tight_on_the_ring():
    """The ring's chain reaches depth p − 1: the lemma's bound is the ring's own, not looser."""
    exact = analyze_numerics(build_schedule("ring", Cluster.build(6), 1), "float32")
    assert exact.depth == 5 and exact.bound_eps == pytest.approx(summation_tree_numerics(6, "float32", "").bound_eps)


def test_a_generated_schedule_gets_numerics_without_an_instance(monkeypatch):
    import verifier.numerics
    from gpu_runner.proof import generated_numerics

    def forbidden(*a, **k):
        raise AssertionError("the instance was analysed")
    monkeypatch.setattr(verifier.numerics, "analyze_numerics", forbidden)
    monkeypatch.setattr(GeneratedSchedule, "materialize", forbidden)
    gen = GeneratedSchedule.of("optcc", Cluster.build(4096, stragglers={0: 2}), 25)
    assert generated_numerics(gen, "bfloat16").startswith("bfloat16: summation trees of depth ≤ p − 1 = 4095")
    assert generated_numerics(gen, "int32").startswith("int32: exact; every intermediate is a partial sum")


def test_families_that_are_not_plain_adds_and_copies_are_refused(monkeypatch):
    import optcc.algorithms.families.local as L
    from gpu_runner.proof import generated_numerics
    real = L.local_form("optcc")
    fams = list(real.families)
    fams[1] = dataclasses.replace(fams[1], op="axpy")
    monkeypatch.setattr(L, "local_form", lambda algo: dataclasses.replace(real, families=tuple(fams)))
    gen = GeneratedSchedule.of("optcc", Cluster.build(8, stragglers={0: 2}), 2)
    with pytest.raises(OptccError, match="optcc.rs_hop are not plain adds or copies.*allow-worse-numerics"):
        generated_numerics(gen, "float32")
    assert "allowed explicitly" in generated_numerics(gen, "float32", allow_worse=True)


def test_an_unknown_dtype_is_refused_naming_the_field():
    with pytest.raises(OptccError) as e:
        summation_tree_numerics(8, "float8", "")
    assert e.value.field == "dtype"


def test_the_ring_passes_its_own_float64_check():
    """The ring's float64 bound was computed as (1 + u)^(p−1) − 1 in float64, where 1 + 2⁻⁵³ is 1:
    a bound of 0, so the ring itself (and every schedule) failed numerics for float64."""
    for p in (3, 8, 64):
        r = analyze_numerics(build_schedule("ring", Cluster.build(p), 1), "float64")
        assert r.ok and r.ring_bound_eps == pytest.approx((p - 1) / 2, rel=1e-12), r.message


def test_optcc_verify_reports_float64_numerics_holding_on_the_ring(tmp_path, run_optcc):
    path = tmp_path / "r8.json"
    assert run_optcc("schedule", "--algo", "ring", "--p", 8, "-o", path).returncode == 0
    out = run_optcc("verify", path, "--dtype", "float64")
    assert out.returncode == 0
    assert "numerics       holds" in out.stdout and "the ring's is 3.5·eps·Σ|x|" in out.stdout


@pytest.mark.slow
def test_the_documented_per_rank_int64_run_needs_no_numerics_flag(tmp_path, run_optcc):
    """docs/gpu_runner.md's example, as written there (no --allow-worse-numerics)."""
    pytest.importorskip("torch")
    made = run_optcc("schedule", "--algo", "optcc", "--p", 8, "--straggler", "1:3/2", "--segments", 3,
                     "--form", "generated", "-o", "g8.json", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    out = run_optcc("run", "--schedule", "g8.json", "--nproc", 8, "--size", "64K", "--dtype", "int64",
                    "--generated-check", "per-rank", cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    assert ("int64: exact; every intermediate is a partial sum of distinct inputs (Σ|c| ≤ p = 8), prove-all's "
            "optcc sum invariant holds for every p") in out.stdout
    assert "8 ranks (gloo), 65536 bytes int64: correct (0 wrong elements, max |error| 0)" in out.stdout

"""Property "numerics": cancellation and overflow are caught; the bound is rigorous and real."""
from fractions import Fraction as F

import pytest

from optcc.algorithms import build_schedule
from optcc.algorithms.ring.build import ring_allreduce
from optcc_app.cli import main
from optcc.cluster import Cluster
from optcc.schedule import Flow, Schedule
from verifier import prove_allreduce
from verifier.numerics import UNIT_ROUNDOFF, analyze_numerics, ring_bound_eps

from verifier_cases import local_op_p2, signed_p3  # noqa: E402

SERVER = {0: 2, 1: 2, 2: 2, 3: 2}


def cancel(c: int) -> Schedule:
    """p = 2: rank 1 adds C·x0, then (1−C)·x0: exactly x0 + x1, but x0's low bits are lost."""
    flows = [Flow(0, 1, 0, "add", F(0), coef=c), Flow(0, 1, 0, "add", F(1), coef=1 - c), Flow(1, 0, 0, "copy", F(2))]
    return Schedule(Cluster.build(2), [F(1)], flows, meta={"algorithm": f"hand-cancel-{c}"})


def pm_chain(n: int) -> Schedule:
    """p = 2: rank 1 adds x0, then n times (−x0, +x0): a long ±1 chain, exactly x0 + x1."""
    flows = [Flow(0, 1, 0, "add", F(0))]
    for j in range(n):
        flows += [Flow(0, 1, 0, "add", F(2 * j + 1), coef=-1), Flow(0, 1, 0, "add", F(2 * j + 2))]
    flows.append(Flow(1, 0, 0, "copy", F(2 * n + 1)))
    return Schedule(Cluster.build(2), [F(1)], flows, meta={"algorithm": f"hand-pm-chain-{n}"})


@pytest.mark.parametrize("algo,cluster,k", [
    ("ring", Cluster.build(8, stragglers={0: 2}), 3), ("optcc", Cluster.build(5, stragglers={4: 2}), 2),
    ("optcc", Cluster.build(6, stragglers={0: 2, 1: F(3, 2)}), 2),
    ("optcc", Cluster.build(12, stragglers={0: 2, 5: F(3, 2), 7: 4}), 4),
    ("optcc", Cluster.build(8, g=4, stragglers=SERVER), 2), ("ring", Cluster.build(8, g=4, stragglers=SERVER), 1)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_our_schedules_are_summation_trees_within_the_ring_bound(algo, cluster, k, dtype):
    r = analyze_numerics(build_schedule(algo, cluster, k), dtype)
    assert r.ok and r.summation_tree and r.max_intermediate_coef == cluster.p
    assert r.depth <= cluster.p - 1
    if dtype != "int32":
        assert r.bound_eps <= r.ring_bound_eps * (1 + 1e-9)


@pytest.mark.parametrize("p", [2, 3, 5, 9])
def test_ring_closed_form_matches_the_analysis(p):
    r = analyze_numerics(ring_allreduce(Cluster.build(p), 1), "float32")
    assert r.depth == p - 1
    assert abs(r.bound_eps - ring_bound_eps(p, "float32")) <= 1e-9 * r.bound_eps
    assert abs(r.bound_eps - (p - 1) / 2) < 1e-5 * p            # ≈ (p−1)·u / eps


@pytest.mark.parametrize("make,int_ok", [(lambda: cancel(2**20), False), (lambda: pm_chain(20), True),
                                         (signed_p3, False), (local_op_p2, False)])
def test_signed_schedules_are_proved_exactly_but_fail_numerics(make, int_ok):
    s = make()
    proof = prove_allreduce(s)
    assert proof.proved and proof.reported["numerics"] is False
    r = analyze_numerics(s, "float32")
    assert not r.summation_tree and r.bound_eps > r.ring_bound_eps
    # integers: refused iff an intermediate's Σ|c| exceeds p (a ±1 chain stays within partial sums)
    assert analyze_numerics(s, "int32").ok is int_ok


@pytest.mark.parametrize("make,dtype,beyond_ring", [
    (lambda: cancel(2**20), "float32", True), (lambda: cancel(2**10), "bfloat16", True),
    (lambda: pm_chain(30), "bfloat16", None), (lambda: pm_chain(30), "float32", None)])
def test_the_bound_is_rigorous_and_the_cancellation_real(make, dtype, beyond_ring):
    """Measured with the runner's own kernels (run_virtual): the error stays within the computed
    bound (so the bound is rigorous) and, for C·x − (C−1)·x, far exceeds the ring's (so refusing
    was right). A ±1 chain's worst case is not reached by random inputs: only the bound is checked."""
    torch = pytest.importorskip("torch")
    from gpu_runner.executor import SUPPORTED_DTYPES, run_virtual
    s = make()
    r = analyze_numerics(s, dtype)
    gen = torch.Generator().manual_seed(3)
    xs = [torch.randn(20000, generator=gen, dtype=torch.float64) for _ in range(2)]
    ins = [x.to(SUPPORTED_DTYPES[dtype]) for x in xs]
    exact = ins[0].double() + ins[1].double()
    scale = ins[0].double().abs() + ins[1].double().abs()
    out = run_virtual(s, [t.clone() for t in ins])
    err = ((out[0].double() - exact).abs() / scale).max().item() / (2 * UNIT_ROUNDOFF[dtype])
    assert err <= r.bound_eps
    if beyond_ring:
        assert err > 100 * r.ring_bound_eps


def test_int_overflow_is_refused():
    r = analyze_numerics(cancel(2**40), "int64")
    assert not r.ok and r.max_intermediate_coef >= 2**40 and "overflow" in r.message
    assert analyze_numerics(ring_allreduce(Cluster.build(4), 1), "int32").ok


def test_optcc_run_refuses_worse_numerics_before_starting(tmp_path, capsys):
    pytest.importorskip("torch")
    path = str(tmp_path / "s.json")
    cancel(2**20).save(path)
    assert main(["run", "--nproc", "2", "--schedule", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith("optcc: error: schedule: numerics: float32: not a summation tree") and "--allow-worse-numerics" in err


def test_verify_prints_numerics_for_the_dtype(tmp_path, capsys):
    path = str(tmp_path / "s.json")
    ring_allreduce(Cluster.build(4), 1).save(path)
    assert main(["verify", path, "--dtype", "bfloat16"]) == 0
    out = capsys.readouterr().out
    assert "numerics: bfloat16: a summation tree of depth 3 (no cancellation)" in out


def test_a_coefficient_the_dtype_cannot_hold_is_refused_even_when_worse_numerics_are_allowed(tmp_path, capsys):
    """int32 cannot hold 2³¹: --allow-worse-numerics allows imprecise sums, not impossible ones;
    refused before any rank starts (exit 2), where it once crashed a rank (exit 3)."""
    pytest.importorskip("torch")
    path = str(tmp_path / "s.json")
    cancel(2**31).save(path)
    assert main(["run", "--nproc", "2", "--schedule", path, "--dtype", "int32", "--allow-worse-numerics"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("optcc: error: schedule: flows[0] has coefficient 2147483648, beyond what int32 holds "
                          "(|c| ≤ 2147483647)"), err
    assert main(["run", "--nproc", "2", "--schedule", path, "--dtype", "int64", "--allow-worse-numerics",
                 "--size", "4K"]) == 0                        # int64 holds it: allowed explicitly, and exact

"""OptCC single-straggler schedule: correctness, port rule, closed-form time, targets (slot model)."""
from fractions import Fraction as F

import pytest

from bounds.closed_form import exclusive_single_straggler_optimum as exclusive_fluid_optimum
from bounds.closed_form import fault_free_optimum, lower_bound_single_straggler
from optcc.algorithms import build_schedule
from optcc.algorithms.single import build as mod
from optcc.algorithms.single.build import optcc_allreduce, optcc_slot_time, slot_table
from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Schedule
from optcc.simulate import simulate
from optcc.timing import IntegerTimes, check_capacity, durations, slot_time

ELLS = [F(1), F(8, 7), F(3, 2), F(19, 10), F(2), F(5, 2), F(3)]


def cluster(p, ell, rank=0):
    return Cluster.build(p, stragglers={rank: ell} if ell != 1 else None)


@pytest.mark.parametrize("p", range(2, 10))
def test_correct_exclusive_and_closed_form_small(p):
    for ell in ELLS:
        for k in (1, 2, 3, 5):
            for rank in sorted({0, p // 2, p - 1}):
                c = cluster(p, ell, rank)
                s = optcc_allreduce(c, k).validate()
                assert simulate(s, seed=k).correct, (p, ell, k, rank)
                grid = IntegerTimes(s)
                assert check_capacity(s, grid=grid) is None, (p, ell, k, rank)
                assert slot_time(s, grid) == optcc_slot_time(c, k), (p, ell, k, rank)


def test_closed_form_matches_generated_up_to_p64():
    for p in (10, 11, 16, 17, 23, 32, 33, 48, 64):
        for ell in (F(8, 7), F(3, 2), F(2), F(3)):
            for k in (1, 2, 4):
                c = cluster(p, ell, rank=p // 3)
                s = optcc_allreduce(c, k)
                grid = IntegerTimes(s)
                assert slot_time(s, grid) == optcc_slot_time(c, k), (p, ell, k)
                assert check_capacity(s, grid=grid) is None, (p, ell, k)


def test_straggler_flows_run_at_straggler_speed_and_ports_are_exclusive():
    c = cluster(7, F(3, 2), rank=3)
    s = optcc_allreduce(c, 4)
    assert s.meta["capacity"] == "exclusive"
    assert all(f.rate == 1 and f.link == "nic" for f in s.flows)
    for f, d in zip(s.flows, durations(s)):
        factor = F(3, 2) if 3 in (f.src, f.dst) else 1
        assert d == s.pieces[f.piece] * factor


def test_round_trip_and_build_schedule():
    c = cluster(6, F(2), rank=1)
    s = build_schedule("optcc", c, 3)
    again = Schedule.from_json(s.to_json())
    assert again.sha256() == s.sha256()
    assert simulate(again).correct


def test_ring_offsets_tile_every_link_period():
    """The per-link claim of the docstring: RS and AG hops and the link's window cover Z_2H once
    (τ_RS, τ_AG as the generator's families state them)."""
    from optcc.algorithms.families import INT, Params
    from optcc.algorithms.single import families as FO
    for H in list(range(2, 130)) + [999, 1000, 9999]:
        P = Params(H + 1, 1, 1, 0)
        rs = [0] + [FO._tau_rs(INT, P, j) for j in range(1, H)]
        ag = [FO._tau_ag(INT, P, j) for j in range(H - 1)]
        q = [(2 * j + rs[j]) % (2 * H) for j in range(1, H)] + [(2 * j + ag[j]) % (2 * H) for j in range(H - 1)]
        assert sorted(q + [0, 1]) == list(range(2 * H)), H
        assert all(rs[j + 1] > rs[j] for j in range(1, H - 1)) and (H == 1 or rs[H - 1] <= -1)
        assert all(ag[j + 1] > ag[j] for j in range(H - 2)) and ag[0] >= 4


def test_docstring_slot_table_is_the_generated_one():
    table = slot_table(optcc_allreduce(cluster(5, F(2)), 2))
    doc_lines = [line.strip() for line in mod.__doc__.splitlines()]
    for line in table.splitlines():
        assert line.strip() in doc_lines
    assert table.splitlines()[1] == "0   .....4433221144332211..."


def test_p5_l2_hand_computed_times():
    # ℓ = 2: T = (2(H−1) + (Hk+1)ℓ)/(kH); p = 5, k = 2: (6 + 18)/8 = 3 = ℓ(1 + 1/k).
    assert slot_time(optcc_allreduce(cluster(5, F(2)), 2)) == 3
    assert optcc_slot_time(cluster(5, F(2)), 64) == 2 * (1 + F(1, 64))
    assert optcc_slot_time(cluster(2, F(3)), 7) == 3


def test_exclusive_fluid_optimum():
    assert exclusive_fluid_optimum(8, F(3, 2)) == F(21, 11)
    ratio = exclusive_fluid_optimum(8, F(3, 2)) / lower_bound_single_straggler(8, F(3, 2))
    assert abs(float(ratio) - 1.045) < 0.001
    for p in (3, 5, 16, 64):
        assert exclusive_fluid_optimum(p, 1) == fault_free_optimum(p)
        assert exclusive_fluid_optimum(p, 2) == 2 and exclusive_fluid_optimum(p, 3) == 3
        for ell in ELLS:
            assert exclusive_fluid_optimum(p, ell) >= lower_bound_single_straggler(p, ell)
    assert exclusive_fluid_optimum(2, F(3, 2)) == F(3, 2)


def test_reaches_fluid_optimum_as_k_grows():
    for p in (3, 5, 8, 64, 10000):
        for ell in ELLS:
            c = cluster(p, ell)
            big = optcc_slot_time(c, 10**6) / exclusive_fluid_optimum(p, ell)
            assert 1 <= big < 1 + F(3, 10**6), (p, ell)


def test_targets_at_k64():
    """Issue 2 targets (slot model, α = 0): ℓ ≥ 2: ≤ 1.03 of the bound, falling with k;
    ℓ < 2: within 3% of the exclusive-model optimum."""
    for p in (5, 8, 16, 64, 1000):
        for ell in ELLS:
            c = cluster(p, ell)
            t = optcc_slot_time(c, 64)
            if ell >= 2:
                lb = lower_bound_single_straggler(p, ell)
                assert t / lb <= F(103, 100), (p, ell)
                assert optcc_slot_time(c, 128) < t and optcc_slot_time(c, 16) > t
            else:
                assert t / exclusive_fluid_optimum(p, ell) <= F(103, 100), (p, ell)


def test_scope_errors_name_the_field():
    with pytest.raises(OptccError) as e:
        optcc_allreduce(Cluster.build(8, g=2, stragglers={0: 2}), 2)
    assert e.value.field == "g"
    with pytest.raises(OptccError) as e:
        optcc_allreduce(Cluster.build(8, stragglers={0: 2, 3: F(3, 2)}), 2)
    assert e.value.field == "stragglers"
    with pytest.raises(OptccError) as e:
        optcc_slot_time(Cluster.build(8, stragglers={0: 2, 3: F(3, 2)}), 2)
    assert e.value.field == "stragglers"
    with pytest.raises(OptccError) as e:
        optcc_allreduce(Cluster.build(8), 0)
    assert e.value.field == "segments"

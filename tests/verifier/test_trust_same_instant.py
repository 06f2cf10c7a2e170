"""Same-instant landings: every property walks the schedule in the runners' order (posting order).

The class: two copies of one value land at one instant on one (rank, piece); one of them read
a rank where an add and a copy had landed together. In flow-index order the copy lands last
there, so both copies carry the sum and the later one in index order is clean; in posting
order (start, src, dst, piece, index) the add lands last, the copy read from that rank lands
last on the destination, and it ends with one input twice. The verifier once walked such
ties in index order (sum, the "copies of one value" test, the dead-traffic taint) and proved
every schedule of this class (run these tests on the parent of the commit that added them:
test_the_verifier_refutes_it_naming_rank_and_piece fails there with proof.proved True);
gloo computes the wrong value under both runners.
"""
import itertools
import sys
from fractions import Fraction as F

import pytest

from optcc.cluster import Cluster
from optcc.errors import OptccError
from optcc.schedule import Flow, Schedule, posting_order
from optcc.simulate import simulate
from optcc.timing import durations
from verifier import prove_allreduce

HALF = F(1, 2)
# role ranks: 0 reduces, 1 holds a copy of the sum, 2 gets an add and a copy at once, 3 is the victim
ROLE_FLOWS = [(1, 0, "add", 0, 1), (2, 0, "add", 1, 1), (3, 0, "add", 2, 1), (0, 1, "copy", 3, 1),
              (3, 2, "add", 4, HALF),       # X: lands at 6 on rank 2 with C, before C in index order
              (0, 2, "copy", 4, HALF),      # C: the sum; after X in index order, before it in posting order
              (2, 3, "copy", 6, HALF),      # A: reads rank 2 at 6; before B in index order
              (1, 3, "copy", 6, HALF),      # B: the sum from rank 1; before A in posting order
              (0, 2, "copy", 6, 1)]         # rank 2 itself is repaired: the tie there is dead traffic


def copies_around_an_add(sigma) -> Schedule:
    flows = [Flow(sigma[a], sigma[b], 0, op, F(t), rate=F(rate)) for a, b, op, t, rate in ROLE_FLOWS]
    return Schedule(Cluster.build(4), [F(1)], flows, meta={"algorithm": "hand-copies-around-an-add-p4"})


def _reordered(sigma) -> bool:
    """Posting order puts C before X (src 0 < src 3) and B before A (src 1 < src 2)."""
    return sigma[0] < sigma[3] and sigma[1] < sigma[2]


SIGMAS = [s for s in itertools.permutations(range(4)) if _reordered(s)]


def finals(schedule, order: str) -> dict[int, dict[int, int]]:
    """Direct exact run (coefficients per rank), same-instant landings in `order`: "index" or "posting"."""
    flows, durs = schedule.flows, durations(schedule)
    pos = {i: n for n, i in enumerate(posting_order(schedule))}
    events = []
    for i, f in enumerate(flows):
        events.append((f.start, 1, i, i))
        events.append((f.start + durs[i], 0, i if order == "index" else pos[i], i))
    values = {r: {r: 1} for r in range(schedule.cluster.p)}
    carried = {}
    for _, phase, _, i in sorted(events):
        f = flows[i]
        if phase == 1:
            carried[i] = dict(values[f.src])
        elif f.op == "copy":
            values[f.dst] = carried.pop(i)
        else:
            v = dict(values[f.dst])
            for r, c in carried.pop(i).items():
                v[r] = v.get(r, 0) + c
            values[f.dst] = v
    return values


def test_the_class_is_wrong_in_posting_order_only():
    assert len(SIGMAS) == 6
    for sigma in SIGMAS:
        s = copies_around_an_add(sigma).validate()
        ones = {r: 1 for r in range(4)}
        assert all(v == ones for v in finals(s, "index").values())
        wrong = finals(s, "posting")
        victim = sigma[3]
        assert wrong[victim] == {**ones, victim: 2}
        assert all(wrong[r] == ones for r in range(4) if r != victim)
        assert simulate(s).first_wrong["rank"] == victim        # the core oracle walks posting order too


@pytest.mark.parametrize("sigma", SIGMAS, ids=lambda s: "".join(map(str, s)))
def test_the_verifier_refutes_it_naming_rank_and_piece(sigma):
    s = copies_around_an_add(sigma)
    proof = prove_allreduce(s)
    assert not proof.proved
    assert proof.properties == {"sum": False, "causality": False, "capacity": True}   # its time: not stated
    cx = proof.counterexample
    assert (cx["property"], cx["rank"], cx["piece"]) == ("sum", sigma[3], 0)
    assert cx["wrong_coefficients"] == {str(sigma[3]): {"expected": 1, "actual": 2}}
    assert f"rank {sigma[3]} ends with a wrong value of piece 0" in cx["message"]
    tie = proof.counterexamples["causality"]                # the add and the copy landing together
    assert (tie["rank"], tie["piece"]) == (sigma[2], 0) and {f["flow"] for f in tie["flows"]} == {4, 5}


def test_a_certificate_of_the_index_order_is_refused(tmp_path):
    """The certificate check re-executes in the runners' order too: a witness of the old walk fails."""
    import json

    from verifier import check_certificate
    from verifier.certificate import FORMAT, VERIFIER_VERSION
    s = copies_around_an_add(SIGMAS[0])
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"format": FORMAT, "verifier_version": VERIFIER_VERSION,
                                "schedule_sha256": s.sha256(), "proved": True,
                                "properties": {k: True for k in ("sum", "causality", "capacity", "time", "runnable")},
                                "witness": {"final_table_sha256": "0" * 64}}))
    ok, why = check_certificate(s, str(path))
    assert not ok and f"rank {SIGMAS[0][3]}'s final piece 0 is not the sum" in why


def test_the_runners_refuse_it_without_unsafe():
    torch = pytest.importorskip("torch")
    from gpu_runner.executor import Executor, run_virtual
    s = copies_around_an_add(SIGMAS[0])
    with pytest.raises(OptccError) as e:
        Executor(s, 0)
    assert e.value.field == "schedule" and "sum: rank 3 ends with a wrong value of piece 0" in e.value.message
    with pytest.raises(OptccError):
        run_virtual(s, [torch.zeros(3, dtype=torch.int64) for _ in range(4)])


@pytest.mark.parametrize("runner", ["step", "streaming"])
def test_gloo_computes_the_posting_order_value(tmp_path, runner):
    """Real gloo processes, int64, with unsafe=True: rank 3 ends with x3 counted twice, exactly
    what the posting-order run says, under both runners."""
    pytest.importorskip("torch")
    sys.path.insert(0, __file__.rsplit("/", 2)[0])          # tests/: the shared helpers
    from unsafe_gloo import NUMEL, inputs, run_unsafe_on_gloo
    s = copies_around_an_add((0, 1, 2, 3))
    out = run_unsafe_on_gloo(s, runner, tmp_path)
    xs = [inputs(r) for r in range(4)]
    total = [sum(x[e] for x in xs) for e in range(NUMEL)]
    want = finals(s, "posting")
    for r in range(4):
        assert out[r] == [sum(c * xs[q][e] for q, c in want[r].items()) for e in range(NUMEL)]
    assert out[3] == [total[e] + xs[3][e] for e in range(NUMEL)] and out[3] != total
    assert out[0] == out[1] == out[2] == total

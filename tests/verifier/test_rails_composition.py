"""verifier.rails_composition: rails schedules (and optcc_servers schedules, whose instances are
rails) proved from one proof per distinct rail plus the linear bracket check; every condition of
the theorem, broken on a real schedule, is refused, and the whole-schedule verifier agrees where
the broken schedule is wrong."""
from __future__ import annotations

from fractions import Fraction as F

import pytest

from optcc.algorithms.rails import build as optcc_rails
from optcc.algorithms.servers.build import optcc_server_allreduce
from optcc.cluster import Cluster
from optcc.schedule import Schedule
from verifier import prove_allreduce
from verifier.rails_composition import prove_rails_composition

B = 50 * 10**9


def cluster(p, g, slow, nvlink=450 * 10**9):
    return Cluster.build(p, g, slow or None, bandwidth=B, nvlink_bandwidth=nvlink)


CASES = [(12, 4, {1: F(2)}, 2), (16, 4, {r: F(3, 2) for r in range(4, 8)}, 2), (24, 4, {0: F(3), 9: F(2)}, 2),
         (8, 4, {}, 1), (6, 2, {2: F(2), 3: F(2)}, 3), (40, 8, {3: F(2)}, 2)]


@pytest.mark.parametrize("p,g,slow,k", CASES)
def test_rails_schedules_proved_by_composition_and_whole(p, g, slow, k):
    s = optcc_rails.build(cluster(p, g, slow), k)
    pr = prove_rails_composition(s)
    assert pr.proved, pr.counterexample
    assert pr.properties == {"sum": True, "causality": True, "capacity": True, "time": True}
    assert pr.facts["rails"] == g
    assert prove_allreduce(s, reported=()).proved


def test_identical_rails_are_proved_once():
    s = optcc_rails.build(cluster(40, 8, {3: F(2)}), 2)     # rail 3 has the slow GPU, 7 rails are healthy
    assert prove_rails_composition(s).facts["distinct_rail_proofs"] == 2
    s = optcc_rails.build(cluster(16, 4, {r: F(3, 2) for r in range(4, 8)}), 2)   # one straggler server
    assert prove_rails_composition(s).facts["distinct_rail_proofs"] == 1


@pytest.mark.parametrize("q,g,ell,k", [(3, 4, F(3, 2), 2), (2, 3, F(2), 2), (4, 2, F(3), 1)])
def test_servers_schedules_are_rails_too(q, g, ell, k):
    c = cluster(q * g, g, {r: ell for r in range(g)})
    pr = prove_rails_composition(optcc_server_allreduce(c, k))
    assert pr.proved and pr.facts["distinct_rail_proofs"] == 1


def test_invalid_schedules_are_refused_before_the_theorem():
    from optcc.errors import OptccError
    with pytest.raises(OptccError, match="NVLink joins GPUs of one server"):
        prove_rails_composition(_mutant(_set(_rs, dst=lambda f: (f.dst + g) % BASE.cluster.p)))


def test_one_server_is_outside_the_theorem():
    s = optcc_rails.build(cluster(4, 4, {}), 1)
    pr = prove_rails_composition(s)
    assert not pr.proved and "q ≥ 2" in pr.counterexample["message"]


BASE = optcc_rails.build(cluster(12, 4, {1: F(2)}), 2)


def _index(pred):
    return next(i for i, f in enumerate(BASE.flows) if pred(f))


def _mutant(change):
    flows = list(BASE.flows)
    change(flows)
    return Schedule(BASE.cluster, BASE.pieces, flows, BASE.local_ops, BASE.meta, BASE.stated_slot_time)


def _rs(f):
    return f.link == "nvlink" and f.op == "add"


def _ag(f):
    return f.link == "nvlink" and f.op == "copy"


def _set(pred, **change):
    def run(flows):
        i = _index(pred)
        flows[i] = flows[i]._replace(**{k: v(flows[i]) for k, v in change.items()})
    return run


def _drop(pred):
    def run(flows):
        del flows[_index(pred)]
    return run


def _dup(pred):
    def run(flows):
        flows.append(flows[_index(pred)])
    return run


g = BASE.cluster.g
MUTANTS = {   # name: (change, message of the refusal, the whole schedule is wrong too)
    "a reduce-scatter add dropped": (_drop(_rs), "misses a GPU", True),
    "a reduce-scatter add lands late": (_set(_rs, start=lambda f: f.start + 10), "lands after", True),
    "a reduce-scatter add with coefficient 2": (_set(_rs, coef=lambda f: 2), "neither", True),
    "an all-gather copy dropped": (_drop(_ag), "misses a GPU", True),
    "an all-gather copy at time 0": (_set(_ag, start=lambda f: F(0)), "before the rail's last landing", True),
    "an all-gather adds": (_set(_ag, op=lambda f: "add"), "neither", True),
    "a reduce-scatter add into the wrong GPU of the server": (
        _set(_rs, dst=lambda f: f.dst // g * g + next(j for j in range(g) if f.dst // g * g + j not in (f.src, f.dst))),
        "neither", True),
    "a NIC flow to another rail": (_set(lambda f: f.link == "nic", dst=lambda f: f.dst // g * g + (f.dst + 1) % g),
                                   "joins two rails", True),
    "a rail flow copies instead of adding": (_set(lambda f: f.link == "nic" and f.op == "add", op=lambda f: "copy"),
                                             "not an AllReduce", True),
    "an NVLink flow at twice its rate": (_set(_rs, rate=lambda f: min(1, 2 * f.rate)), "capacity", True),
    "an all-gather copy sent twice at once": (_dup(_ag), "two all-gather copies", True),
    "a reduce-scatter add sent twice": (_dup(_rs), "two reduce-scatter adds from one GPU", True),
    "a piece carried on two rails": (_set(lambda f: f.link == "nic", src=lambda f: f.src // g * g + (f.src + 1) % g,
                                          dst=lambda f: f.dst // g * g + (f.dst + 1) % g), "carried by two rails", True),
    "a piece carried by no rail": (lambda flows: flows.__setitem__(slice(None), [
        f for f in flows if not (f.link == "nic" and f.piece == 0)]), "carried by no rail", True),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_broken_condition_is_refused(name):
    change, message, wrong = MUTANTS[name]
    s = _mutant(change)
    pr = prove_rails_composition(s)
    assert not pr.proved
    assert message in pr.counterexample.get("message", "") + str(pr.counterexample)
    assert prove_allreduce(s, reported=()).proved is (not wrong)


def test_unmutated_base_is_proved():
    assert prove_rails_composition(_mutant(lambda flows: None)).proved


def test_borrowing_sub_rails_are_outside_the_theorem():
    """Borrowing carries a rail's traffic on other NICs of its server (rails_borrow): refused by
    (R1), naming it; the whole-schedule verifier still proves it."""
    s = optcc_rails.build(Cluster.build(8, 2, {0: F(3)}), 8)
    assert "borrowing" in s.meta["construction"]
    pr = prove_rails_composition(s)
    assert not pr.proved and pr.counterexample["message"] == "a NIC flow joins two rails (local indices differ)"
    assert prove_allreduce(s, reported=()).proved


def test_cli_verify_by_rails(tmp_path, capsys):
    import json

    from optcc_app.cli import main
    path = tmp_path / "r.json"
    BASE.save(str(path))
    assert main(["verify", str(path), "--by-rails"]) == 0
    out = capsys.readouterr().out
    assert "by composition: 4 rails, 2 distinct rail proof(s), NVLink brackets checked" in out and "PROVED" in out
    assert "composition theorem: proved (Z3, all q, g): 11 obligations, 4 false controls refuted; argued: " in out
    assert main(["verify", str(path), "--by-rails", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["proved"] and data["facts"]["method"].startswith("rails composition")
    assert data["facts"]["composition_theorem"]["status"] == "proved (Z3, all q, g)"
    assert main(["verify", str(path), "--by-rails", "--certificate", str(tmp_path / "c.json")]) == 0
    assert f"certificate written to {tmp_path / 'c.json'}" in capsys.readouterr().out
    assert json.loads((tmp_path / "c.json").read_text())["format"] == "optcc-rails-certificate/1"
    borrow = tmp_path / "b.json"
    optcc_rails.build(Cluster.build(8, 2, {0: F(3)}), 8).save(str(borrow))
    assert main(["verify", str(borrow), "--by-rails"]) == 1
    assert "COUNTEREXAMPLE (composition): a NIC flow joins two rails" in capsys.readouterr().out


def _straddling_add():
    """GPU 1's NVLink reduce-scatter add of piece 5 into GPU 0 at an eighth of its rate: it starts
    before the rail's first touch of (0, 5), where the rail reads the piece, and lands after it."""
    from optcc.timing import durations
    from verifier import rails_composition as RC
    i = _index(lambda f: _rs(f) and (f.src, f.dst, f.piece) == (1, 0, 5))
    flows = list(BASE.flows)
    flows[i] = flows[i]._replace(rate=flows[i].rate / 8)
    s = Schedule(BASE.cluster, BASE.pieces, flows, BASE.local_ops, BASE.meta, BASE.stated_slot_time)
    durs = durations(s)
    _, nic, ops, _ = RC._split(s)
    first = RC._touches(s, durs, nic, ops)[0][(0, 5)]
    assert flows[i].start < first < flows[i].start + durs[i]
    return s


def test_an_add_that_starts_before_the_first_touch_but_lands_after_it_is_refused(monkeypatch):
    """(R3) is about the landing: a check that compared the add's start with the first touch
    would prove this schedule, which leaves a partial sum on the rail (the whole-schedule proof
    refutes it). The weakened check is run here too, to show the case tells them apart."""
    s = _straddling_add()
    pr = prove_rails_composition(s)
    assert not pr.proved and "lands after the rail's first touch" in pr.counterexample["message"]
    assert not prove_allreduce(s, reported=()).proved
    import inspect
    import types
    from verifier import rails_composition as RC
    src = inspect.getsource(RC)
    assert src.count("f.start + durs[i] > first") == 1
    weak = types.ModuleType("weak_rails_composition")
    exec(compile(src.replace("f.start + durs[i] > first", "f.start > first"), RC.__file__, "exec"), weak.__dict__)
    assert weak.prove_rails_composition(s).proved        # the weakened check would have passed it

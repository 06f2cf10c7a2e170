"""Paper checks per latency preset (paper_checks.per_model): verdicts, bound-limited points."""
from fractions import Fraction as F

import pytest

from optcc.algorithms.optcc_single import optcc_slot_time
from optcc.cluster import Cluster
from paper_checks import claims as C
from paper_checks import per_model as P
from paper_checks import settings as S

N = S.MESSAGE_BYTES


def lam_units(model):
    """(o, Li + L) of a preset in units of n/B at 8 GiB, written out from the preset values."""
    us = F(1, 10**6)
    o, lam = {"alpha": (5 * us, 0), "simai": (0, 5 * us), "nccl": (0, 14 * us)}[model]
    scale = S.NIC_BANDWIDTH / N
    return o * scale, lam * scale


@pytest.fixture(scope="module")
def fig8():
    return C.check_within_6_percent_g1().to_json()


def test_fig8_row_has_three_verdicts_and_the_simai_one_rules(fig8):
    assert set(fig8["verdicts"]) == {"alpha", "simai", "nccl"}
    assert fig8["verdict"] == fig8["verdicts"]["simai"]
    models = fig8["details"]["latency_models"]
    for m, r in models.items():
        counted = {k: v for k, v in r["optcc_overhead_and_k"].items() if k not in r["bound_limited"]}
        worst = max(v[0] for v in counted.values())
        assert r["verdict"] == (C.PASS if 100 * worst <= 6 + C.PERCENT_ROUNDING_PP else C.FAIL)
    assert fig8["our_value"] == pytest.approx(100 * models["simai"]["worst"])


@pytest.mark.parametrize("model", ["alpha", "simai", "nccl"])
def test_fig8_points_recomputed_by_hand(fig8, model):
    r = fig8["details"]["latency_models"][model]
    o, lam = lam_units(model)
    for key in ("2@16", "8/7@256", "2@800"):
        ell, p = F(key.split("@")[0]), int(key.split("@")[1])
        ring = 2 * (p - 1) * (F(1, p) + o + lam)                      # fault-free ring, every step pays o + λ
        value, k = r["optcc_overhead_and_k"][key]
        t = optcc_slot_time(Cluster.build(p, stragglers={0: ell}), k) + 2 * (p - 1) * (k + 1) * o \
            + (2 * (p - 1) + 4 * k) * lam
        assert value == pytest.approx(float(t / ring - 1))
        bound = max(ell, 2 * ell * (p - 1) / (ell * (p - 1) + 1)) + o + lam   # Theorem 1 + one o + Li + L
        assert r["bound_overhead_vs_nccl"][key] == pytest.approx(float(bound / ring - 1))
        assert (key in r["bound_limited"]) == (float(bound / ring - 1) > 0.065)
    # p = 16, ℓ = 2: Theorem 1 alone is 16/15 of T0, over the tolerance under every preset.
    assert "2@16" in r["bound_limited"]


def test_gap_and_fit_rows_carry_verdicts():
    gap = C.check_gap_at_p16().to_json()
    assert gap["verdict"] == gap["verdicts"]["simai"]
    for m, r in gap["details"]["latency_models"].items():
        assert r["verdict"] == (C.PASS if abs(r["difference_pp"]) <= C.PERCENT_ROUNDING_PP else C.FAIL)
    fit = C.check_o1p_optcc(F(2)).to_json()
    assert set(fit["verdicts"]) == {"alpha", "simai", "nccl"} and fit["verdict"] == fit["verdicts"]["simai"]
    simai = fit["details"]["latency_models"]["simai"]
    c0, _, r2 = C.fit_inverse_p(S.P_FIT, simai["overhead"])
    assert simai["c0"] == pytest.approx(c0) and fit["our_value"] == pytest.approx(c0)
    assert simai["verdict"] == (C.PASS if abs(c0) <= C.FIT_INTERCEPT_MAX and r2 >= C.FIT_R2_MIN else C.FAIL)


def test_per_model_bound_is_below_optcc_everywhere():
    for model in ("alpha", "simai", "nccl"):
        for p, g, ells in [(16, 1, F(2)), (128, 1, (F(2), F(4, 3))), (64, 4, F(8, 7))]:
            assert P.bound_time(p, g, ells, model, N) <= P.optcc_time(p, g, ells, model, N)[0]

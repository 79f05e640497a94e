"""The knob rule's claims (issue 36): BH q-values, probabilities, and the rule on known truth."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scalerl.harness.analysis.fit.curve import sigmoid_curve
from scalerl.harness.analysis.groups import VariantCurves
from scalerl.harness.analysis.verdicts.inference import Contrast, bh_adjusted
from scalerl.harness.analysis.verdicts.pipeline import classify
from scalerl.harness.analysis.verdicts.rule import Claim, Evidence, claims, decide
from scalerl.harness.analysis.verdicts.types import VerdictOptions

THR = math.log1p(0.1)


def _ev(
    a: Contrast | None, b: Contrast | None = None, c: Contrast | None = None, lower: bool = False
) -> Evidence:
    return Evidence(a, b, c, 0.02, THR, 0.95, lower_bound=lower)


def test_bh_adjusted_p_values_are_the_step_up_rates() -> None:
    # p (sorted) 0.001, 0.01, 0.03, 0.04, 0.5 over m = 5: p * 5 / rank = 0.005, 0.025, 0.05, 0.05,
    # 0.5, made monotone from the top.
    q = bh_adjusted([0.04, 0.001, 0.5, 0.03, 0.01])
    assert q == pytest.approx([0.05, 0.005, 0.5, 0.05, 0.025])
    assert bh_adjusted([]) == [] and bh_adjusted([1.0, 1.0]) == [1.0, 1.0]


def test_claims_need_no_equal_ceilings_and_a_knob_can_be_both() -> None:
    clear_a = Contrast(0.08, 0.01, 20.0)  # dA well beyond the 0.02 margin
    unsure_a = Contrast(0.01, 0.03, 20.0)  # dA interval straddles the margin: not shown either way
    steep_b = Contrast(math.log(2.0), 0.1, 20.0)
    same_c = Contrast(0.0, 0.02, 20.0)
    knobs = {
        "shaper": _ev(unsure_a, steep_b, same_c),
        "both": _ev(clear_a, steep_b, same_c),
        "mover": _ev(clear_a, Contrast(0.0, 0.02, 20.0), same_c),
        "null": _ev(Contrast(0.0, 0.004, 20.0), Contrast(0.0, 0.02, 20.0), same_c),
    }
    rulings = {k: decide(e) for k, e in knobs.items()} | {"unmeasured": None}
    got = claims(rulings, 0.95)
    assert {k: v.verdict for k, v in got.items()} == {
        "shaper": "efficiency-shaper",
        "both": "asymptote-mover",
        "mover": "asymptote-mover",
        "null": "no-effect",
        "unmeasured": "undecided",
    }
    assert got["both"].both and not got["mover"].both
    # The probability is 1 - the claim's BH q-value: high for what is shown, low for what is not.
    assert got["both"].probability(Claim.MOVER) > 0.99 and got["shaper"].probability(Claim.MOVER) < 0.5
    assert math.isnan(got["unmeasured"].probability(Claim.MOVER)) and math.isnan(got["unmeasured"].p)
    # A lower bound on dA can only show the ceiling rising; its efficiency is still compared.
    lb = decide(_ev(Contrast(0.1, 0.01, 20.0), steep_b, same_c, lower=True))
    assert lb.shown(Claim.MOVER) and lb.shown(Claim.SHAPER) and lb.p[Claim.NO_EFFECT] == 1.0
    assert decide(_ev(Contrast(-0.1, 0.01, 20.0), lower=True)).p[Claim.MOVER] == 1.0


# Known truth: exact sigmoids, Binomial(500) points, 41 evaluations from the budget's 1/41 (no
# step-0 point, so R0 is fitted), curves plateaued at 98% of the baseline's gain, seed sd of A 0.02.
X = np.linspace(13_390 / 41, 13_390, 41)
N = 500


def _group(
    rng: np.random.Generator, name: str, a: float, b: float, c_mid: float, seeds: int
) -> VariantCurves:
    ys = []
    for _ in range(seeds):
        p = sigmoid_curve(X, 0.25, a + 0.02 * rng.standard_normal(), b, c_mid)
        ys.append(rng.binomial(N, np.clip(p, 0, 1)) / N)
    return VariantCurves(
        name,
        tuple((X, y) for y in ys),
        knob=None if name == "baseline" else name,
        run_ids=tuple(f"{name}/s{s}" for s in range(seeds)),
        n=tuple(np.full(X.size, float(N)) for _ in range(seeds)),
        seeds=tuple(range(seeds)),
    )


def test_on_known_truth_intervals_hold_shapers_are_found_and_nulls_are_not_called() -> None:
    # 40 sweeps x (2 nulls, a +0.08 mover, a B x2 shaper): 160 dA intervals. Binomial sampling of
    # coverage: 95% of 160 has sd 1.7 points, so the band is 90-99%.
    rng = np.random.default_rng(2026)
    covered, shapers, movers, nulls_called = [], [], [], 0
    for _ in range(40):
        truth = {"null-a": (0.65, 1.5, 1000.0), "null-b": (0.65, 1.5, 1000.0)}
        truth |= {"mover": (0.73, 1.5, 1000.0), "steeper": (0.65, 3.0, 1000.0)}
        base = _group(rng, "baseline", 0.65, 1.5, 1000.0, 3)
        groups = [_group(rng, n, *t, 3) for n, t in truth.items()]
        res = classify(base, groups, verdict_options=VerdictOptions(n_boot=5))
        for v in res.verdicts:
            d_true = truth[v.variant][0] - 0.65
            covered.append(v.d_a_lo <= d_true <= v.d_a_hi)
            if v.variant.startswith("null"):
                nulls_called += v.verdict in ("asymptote-mover", "efficiency-shaper")
        by = {v.variant: v for v in res.verdicts}
        shapers.append(by["steeper"].verdict == "efficiency-shaper")
        movers.append(by["mover"].verdict == "asymptote-mover" and by["mover"].d_a > 0)
    assert 0.90 <= float(np.mean(covered)) <= 0.99
    # 80 nulls, each claim's false-discovery rate at most 5%: at most 4 called (this draw: 1, a
    # shaper whose three baseline seeds all came out flatter than their truth).
    assert nulls_called <= 4
    # Powers measured on this draw: shapers 100%, +0.08 movers 58% (5 groups: 8 degrees of freedom).
    assert np.mean(shapers) >= 0.8 and np.mean(movers) >= 0.5

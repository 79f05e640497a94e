"""The noise model: binomial and residual standard errors, and collapse judged against them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from scalerl.harness.analysis.fit.curve import FitOptions, sigmoid_curve
from scalerl.harness.analysis.groups import VariantCurves
from scalerl.harness.analysis.noise.point import binomial_se, point_se, residual_se, window_se
from scalerl.harness.analysis.verdicts.collapse import judge
from scalerl.harness.analysis.verdicts.pipeline import classify
from scalerl.harness.analysis.verdicts.service import analyze_frame
from scalerl.harness.analysis.verdicts.types import VerdictOptions

# The demo's shape: 300 steps evaluated every 10 (30 points), pass rate rising from ~0.36 to a
# plateau near 0.6, each point a pass rate over n = 128 samples (about +/-0.043 of noise).
STEPS = np.arange(10, 310, 10, dtype=np.float64)
TRUE = sigmoid_curve(STEPS, 0.36, 0.60, 2.0, 60.0)
N = 128


def _draw(rng: np.random.Generator, truth: np.ndarray = TRUE, n: int = N) -> np.ndarray:
    return np.asarray(rng.binomial(n, truth) / n, dtype=np.float64)


def test_binomial_se_values_and_the_edge_floor() -> None:
    se = binomial_se([0.5, 0.0, 1.0, 0.25, 0.5, 0.5], [128, 128, 128, 512, math.nan, 0])
    # p~ = (p n + 0.5)/(n + 1): 0.5 -> 0.5, so sqrt(0.25/128) = 0.0442; 0/128 -> p~ = 0.5/129.
    assert se[0] == pytest.approx(math.sqrt(0.25 / 128), rel=1e-12)
    p0 = 0.5 / 129
    assert se[1] == pytest.approx(math.sqrt(p0 * (1 - p0) / 128), rel=1e-12)
    assert se[1] == pytest.approx(0.00549, abs=1e-5) and se[2] == pytest.approx(se[1], rel=1e-12)  # never 0
    pt = (0.25 * 512 + 0.5) / 513
    assert se[3] == pytest.approx(math.sqrt(pt * (1 - pt) / 512), rel=1e-12)
    assert math.isnan(se[4]) and math.isnan(se[5])  # unknown n, n < 1


def test_residual_se_recovers_the_noise_of_a_curving_curve() -> None:
    rng = np.random.default_rng(0)
    x = np.geomspace(200, 40_000, 40)
    truth = sigmoid_curve(x, 0.2, 0.7, 1.5, 5000.0)
    est = [residual_se(x, truth + rng.normal(0, 0.03, x.size)) for _ in range(300)]
    # Unbiased to within 5% on average (the curve's bend adds little), ~20% spread per curve.
    assert np.mean(est) == pytest.approx(0.03, rel=0.05)
    assert np.std(est) / 0.03 < 0.25
    # A collapse step in the middle does not inflate it (median of pseudo-residuals).
    stepped = truth + rng.normal(0, 0.03, x.size)
    stepped[25:] -= 0.3
    assert residual_se(x, stepped) < 0.045
    assert math.isnan(residual_se([1.0, 2.0], [0.1, 0.2]))


def test_point_se_uses_n_where_known_and_the_residual_elsewhere() -> None:
    rng = np.random.default_rng(1)
    y = _draw(rng)
    se, src = point_se(STEPS, y, np.full(y.size, 128.0))
    assert src == "binomial" and np.allclose(se, binomial_se(y, 128))
    counts = np.full(y.size, 128.0)
    counts[:5] = np.nan
    se, src = point_se(STEPS, y, counts)
    assert (
        src == "mixed"
        and np.all(se[:5] == residual_se(STEPS, y))
        and np.allclose(se[5:], binomial_se(y[5:], 128))
    )
    se, src = point_se(STEPS, y)
    assert src == "residual" and np.all(se == residual_se(STEPS, y))
    assert window_se(np.array([0.04, 0.04, 0.04, 0.04])) == pytest.approx(0.02)


def test_binomial_noise_on_a_smooth_curve_is_never_called_a_collapse() -> None:
    # 200 seeded draws of the demo's curve (n=128 per point): the bound the test asserts is a
    # false-positive rate of at most 1% (2 of 200); the design rate is far lower (p < 0.001 per
    # curve after the correction for the candidate peaks), and these draws give 0.
    rng = np.random.default_rng(2026)
    kinds = []
    drops = []
    for _ in range(200):
        y = _draw(rng)
        h = judge(STEPS, y, binomial_se(y, N))
        kinds.append(h.kind)
        drops.append(h.drop)
    assert kinds.count("collapsed") <= 2
    assert kinds.count("healthy") == 200
    # A fixed rule (a window's fall of more than 0.05 from its peak) would have fired on these.
    assert max(drops) > 0.05


def test_the_demo_baseline_dip_is_noise_and_a_real_collapse_is_caught() -> None:
    # The case: a plateau near 0.59 whose smoothed tail dips to ~0.53 by chance.
    y = np.asarray(TRUE, dtype=np.float64).copy()
    y[-6:] = [0.55, 0.52, 0.50, 0.56, 0.52, 0.53]  # a 0.06 dip over the last 6 points
    h = judge(STEPS, y, binomial_se(y, N))
    assert h.kind == "healthy" and "SE" in h.how and h.drop == pytest.approx(0.052, abs=1e-3)
    # A real collapse: 0.15 lost over the last 30% of the points, about half the gain. Measured
    # 174 of 200 draws collapsed (87%, the module's documented power at n = 640 is 88%), the rest
    # settled or healthy; asserted >= 80%.
    rng = np.random.default_rng(5)
    truth = TRUE.copy()
    truth[-9:] -= 0.15
    caught = 0
    for _ in range(200):
        yc = _draw(rng, truth)
        h = judge(STEPS, yc, binomial_se(yc, N))
        caught += h.kind == "collapsed"
    assert caught >= 160
    assert h.how.startswith("peak ") and "last 6 of 30 points" in h.how


def test_a_drop_that_recovers_at_the_end_is_not_a_collapse() -> None:
    # Low noise (n = 100,000), a 0.2 dip over 3 points whose last 3 are back at the plateau:
    # the last window's mean is 0.093 low, but its trend ends back up, so nothing is falling.
    y = np.asarray(TRUE, dtype=np.float64).copy()
    y[-6:-3] -= 0.2
    h = judge(STEPS, y, binomial_se(y, 100_000))
    assert h.kind == "healthy" and h.drop == pytest.approx(0.093, abs=1e-3)


def test_one_noisy_dip_in_the_baseline_does_not_make_every_verdict_unfit() -> None:
    rng = np.random.default_rng(9)
    base_y = _draw(rng)
    base_y[-3] = 0.42  # one bad evaluation
    base = VariantCurves("baseline", ((STEPS, base_y),), run_ids=("b0",), n=(np.full(30, 128.0),))
    var_y = _draw(rng)
    var = VariantCurves("loo-x", ((STEPS, var_y),), knob="x", run_ids=("v0",), n=(np.full(30, 128.0),))
    result = classify(base, [var], options=FitOptions(), verdict_options=VerdictOptions(n_boot=100))
    (v,) = result.verdicts
    assert v.verdict not in ("unstable", "unfit"), v.reason
    assert result.noise_sources == {"baseline": "binomial", "loo-x": "binomial"}


def test_the_store_frames_n_column_reaches_the_noise_model() -> None:
    rows = []
    rng = np.random.default_rng(4)
    for variant, knob in (("baseline", None), ("loo-x", "x")):
        for seed in (0, 1):
            y = _draw(rng)
            for step, val in zip(STEPS, y, strict=True):
                rows.append(
                    (f"{variant}-{seed}", variant, knob, None, seed, int(step), "m", val, 128.0, step)
                )
    frame = pd.DataFrame(
        rows,
        columns=["run_id", "variant", "knob", "alternative", "seed", "step", "metric", "value", "n", "flops"],
    )
    spec = {"power": {"detect_d_a": 0.5, "detect_d_b": 0.01}}
    res = analyze_frame(
        frame, sweep="s", metric="m", axis="flops", options=FitOptions(), margin=0.02, spec=spec, n_boot=50
    )
    assert res.analysis is not None and set(res.analysis.noise_sources.values()) == {"binomial"}
    assert res.notes[0].startswith("point noise: binomial (binomial where points carry n)")
    (row,) = res.verdict_rows
    assert row["mde_a"] > 0.02 and math.isfinite(row["mde_b"])
    (v,) = res.analysis.verdicts
    if v.verdict in ("no-effect", "efficiency-shaper", "asymptote-mover"):
        assert v.seeds_for_a == 1  # 0.5 is far above what two seeds already detect
        assert v.seeds_for_b is None and "is not above 10% of B" in v.power_note
        assert "power targets at 2 seed(s): loo-x: |dA| 0.5 needs 1 seed(s)" in res.notes[1]

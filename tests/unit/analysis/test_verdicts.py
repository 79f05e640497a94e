"""Verdicts on synthetic sweeps with known movers, shapers, a null variant and broken variants."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from scalerl.harness.analysis.curve import FitOptions, sigmoid_curve
from scalerl.harness.analysis.verdicts import VariantCurves, VerdictOptions, classify
from tests.unit.analysis.sweeps import COMPUTE, synthetic_sweep

FAST = VerdictOptions(n_boot=100)


def test_known_movers_shapers_and_null() -> None:
    sweep = synthetic_sweep()
    result = classify(
        sweep["baseline"], [v for k, v in sweep.items() if k != "baseline"], verdict_options=FAST
    )
    got = {v.variant: v for v in result.verdicts}
    assert {k: v.verdict for k, v in got.items()} == {
        "loo-dapo": "asymptote-mover",
        "loo-savg": "efficiency-shaper",
        "loo-lp": "efficiency-shaper",
        "loo-fp32": "no-effect",
    }
    mover = got["loo-dapo"]
    assert mover.d_a == pytest.approx(-0.08, abs=0.02) and mover.d_a_lo < mover.d_a < mover.d_a_hi < 0
    assert mover.knob == "loss" and "ceiling drops" in mover.reason
    steep = got["loo-lp"]
    assert steep.d_b == pytest.approx(1.0, abs=0.3) and steep.d_b_lo > 0
    assert abs(steep.d_a) < 0.02
    sooner = got["loo-savg"]
    assert sooner.d_log_c_mid == pytest.approx(math.log(2000 / 5000), abs=0.25) and sooner.d_log_c_mid_hi < 0
    null = got["loo-fp32"]
    assert null.d_a_lo < 0 < null.d_a_hi or abs(null.d_a) < 0.01
    # Seed noise measured from the 3 seeds per variant (true sd of A ~0.005-0.01) stays under
    # the configured 0.02, so the margin is the configured one.
    assert 0.0 < result.seed_noise < 0.02 and result.margin == 0.02
    assert len(result.run_fits) == 15 and len(result.variant_fits) == 5
    row = mover.row("val/pass_rate", "flops")
    assert row["verdict"] == "asymptote-mover" and row["metric"] == "val/pass_rate" and row["axis"] == "flops"


def test_margin_grows_with_the_noise_and_says_which_component_set_it() -> None:
    # 5% noise per point: both the seed-to-seed spread of A (0.024 over these 6 seeds) and the SE
    # of one run's A implied by the point noise (0.032) exceed 0.02; the larger is the margin.
    sweep = synthetic_sweep(noise=0.05, seed=3)
    result = classify(sweep["baseline"], [sweep["loo-fp32"]], verdict_options=FAST)
    assert result.seed_noise == pytest.approx(0.0243, abs=0.001)
    assert result.noise_a == pytest.approx(0.0316, abs=0.002)
    assert result.margin == result.noise_a and result.margin_source == "measurement noise"
    assert "(measurement noise)" in result.verdicts[0].reason
    assert result.noise_sources == {"baseline": "residual", "loo-fp32": "residual"}


def test_margin_is_the_seed_noise_when_seeds_disagree_more_than_their_points() -> None:
    # Each seed's true ceiling is drawn with sd 0.04; points carry 0.5% noise: seed noise wins.
    rng = np.random.default_rng(11)

    def variant(name: str, knob: str | None) -> VariantCurves:
        curves = tuple(
            (
                COMPUTE,
                sigmoid_curve(COMPUTE, 0.2, 0.70 + rng.normal(0, 0.04), 1.5, 5000.0)
                + rng.normal(0, 0.005, 50),
            )
            for _ in range(4)
        )
        return VariantCurves(name, curves, knob=knob, run_ids=tuple(f"{name}-s{i}" for i in range(4)))

    result = classify(variant("baseline", None), [variant("loo-x", "loss")], verdict_options=FAST)
    assert result.seed_noise > 0.03 and result.noise_a < 0.005
    assert (result.margin, result.margin_source) == (result.seed_noise, "seed noise")
    # Low noise, one seed each: nothing beats the configured 0.02.
    quiet = synthetic_sweep(seeds=1, noise=0.005)
    result = classify(quiet["baseline"], [quiet["loo-fp32"]], verdict_options=FAST)
    assert math.isnan(result.seed_noise) and result.noise_a < 0.005
    assert (result.margin, result.margin_source) == (0.02, "configured")


def test_unstable_and_unfit_variants_say_why() -> None:
    sweep = synthetic_sweep(seeds=2)
    base = sweep["baseline"]
    (c, y), second = sweep["loo-fp32"].curves
    collapsed = y.copy()
    collapsed[-12:] = 0.05
    diverged = y.copy()
    diverged[30] = np.nan
    short = (COMPUTE[:3], y[:3])
    variants = [
        replace(sweep["loo-fp32"], variant="collapse", curves=((c, collapsed), second)),
        replace(sweep["loo-fp32"], variant="diverge", curves=((c, diverged), second)),
        replace(sweep["loo-fp32"], variant="short", curves=(short,), run_ids=("short-s0",)),
        VariantCurves("falling", ((c, 0.7 - 0.04 * np.linspace(0, 1, c.size)),), knob="x"),  # slow decline
        VariantCurves("single-seed", (sweep["loo-dapo"].curves[0],), knob="loss"),
    ]
    got = {v.variant: v for v in classify(base, variants, verdict_options=FAST).verdicts}
    assert got["collapse"].verdict == "unstable" and "collapsed" in got["collapse"].reason
    assert (
        got["diverge"].verdict == "unstable"
        and "diverged: 1 non-finite value(s) in loo-fp32-s0" in got["diverge"].reason
    )
    assert got["short"].verdict == "unfit" and "too-few-points" in got["short"].reason
    # A noise-free decline of 0.04: its last 10 points sit 0.033 below its first 10, far beyond
    # a zero noise and above the 0.02 floor: a sustained, significant drop.
    assert got["falling"].verdict == "unstable" and "a drop of 0.033" in got["falling"].reason
    assert got["single-seed"].verdict == "asymptote-mover"  # one seed is enough for a clear mover
    assert all(math.isnan(got[k].d_a) for k in ("collapse", "diverge", "short", "falling"))


def test_unfit_baseline_makes_every_verdict_unfit() -> None:
    sweep = synthetic_sweep(seeds=1)
    flat = VariantCurves("baseline", ((COMPUTE, np.full(COMPUTE.size, 0.3)),))
    (v,) = classify(flat, [sweep["loo-dapo"]], verdict_options=FAST).verdicts
    assert v.verdict == "unfit" and v.reason.startswith("baseline fit is flat")
    c, y = sweep["baseline"].curves[0]
    crashed = y.copy()
    crashed[-12:] = 0.05
    broken = VariantCurves("baseline", ((c, crashed),), run_ids=("base-s0",))
    (v,) = classify(broken, [sweep["loo-dapo"]], verdict_options=FAST).verdicts
    assert v.verdict == "unfit" and v.reason.startswith("baseline is unstable (collapsed: base-s0 fell")


def test_seed_noise_on_real_replicate_runs() -> None:
    # verl-fork-parsed: 7 repeat PPO runs of one configuration (5 with plain data parallelism, 2
    # with Ulysses sequence parallelism). Measured: per-run A spread 0.0236 (pooled sd), above
    # the configured 0.02, so it becomes the margin; none of these noisy train-reward curves
    # (sd ~0.04 per step) is mistaken for a collapse, and the ceilings agree within the margin.
    from pathlib import Path

    from scalerl.harness.importers import read_curves

    files = sorted(Path("/work/shared/data/real-rl-curves/verl-fork-parsed").glob("*.csv"))
    curves = [read_curves(f, metric="critic/rewards/mean")[0] for f in files]
    dp = VariantCurves(
        "dp2", tuple((c.x, c.values) for c in curves[:5]), run_ids=tuple(c.run for c in curves[:5])
    )
    sp = VariantCurves(
        "ulysses",
        tuple((c.x, c.values) for c in curves[5:]),
        knob="parallelism",
        run_ids=tuple(c.run for c in curves[5:]),
    )
    result = classify(dp, [sp], verdict_options=FAST)
    assert result.seed_noise == pytest.approx(0.0236, abs=0.002)
    assert result.margin == result.seed_noise
    (v,) = result.verdicts
    assert v.verdict not in ("unstable", "unfit", "asymptote-mover")
    assert abs(v.d_a) < result.margin and v.d_a_lo < 0 < v.d_a_hi
    assert all(f.status == "ok" for f in result.run_fits.values())


@pytest.mark.parametrize("draw", [2, 3, 4, 5])
def test_a_single_noisy_seed_does_not_make_a_mover_out_of_noise(draw: int) -> None:
    # Baseline and variant share the truth (A=0.70); one seed each, 4% noise, 30 points. These
    # draws put |dA| above the 0.02 margin by chance (0.029-0.054) while the bootstrap interval of
    # dA straddles zero: without the interval condition each was called an asymptote-mover.
    rng = np.random.default_rng(draw)
    compute = np.geomspace(200, 40_000, 30)

    def variant(name: str, knob: str | None) -> VariantCurves:
        y = sigmoid_curve(compute, 0.2, 0.70, 1.5, 5000.0) + rng.normal(0, 0.04, compute.size)
        alt = None if knob is None else name
        return VariantCurves(name, ((compute, y),), knob=knob, alternative=alt, run_ids=(f"{name}-s0",))

    base, var = variant("baseline", None), variant("loo-x", "loss")
    (v,) = classify(base, [var], verdict_options=FAST).verdicts
    assert abs(v.d_a) > 0.02 and v.d_a_lo < 0 < v.d_a_hi
    assert v.verdict != "asymptote-mover"
    # Either guard holds it back: the measurement-noise margin, or the interval through zero.
    assert "includes 0 (no detected ceiling shift)" in v.reason or "<= margin" in v.reason
    assert v.verdict != "no-effect" or v.mde_a > abs(v.d_a)  # "no effect larger than" an honest X


def _cut_off(c_mid: float, name: str = "loo-late") -> tuple[VariantCurves, float]:
    """Three seeds of a sigmoid with A=0.95 cut off at 40,000 compute, before its plateau."""
    rng = np.random.default_rng(7)
    y = [sigmoid_curve(COMPUTE, 0.2, 0.95, 1.5, c_mid) + rng.normal(0, 0.005, COMPUTE.size) for _ in range(3)]
    vc = VariantCurves(name, tuple((COMPUTE, v) for v in y), knob="pipeline", alternative=name)
    return vc, max(float(v.max()) for v in y)


def test_an_extrapolated_ceiling_is_undecided_not_a_verdict() -> None:
    # C_mid=20,000: at 40,000 the curve has only reached ~0.75 of its 0.95. The fit's A is a
    # guess about compute nobody spent, and its late level (~0.69) does not clear the baseline's
    # 0.70: the knob is undecided, and the reason says why and what to do.
    sweep = synthetic_sweep(noise=0.005)
    late, observed = _cut_off(20_000.0)
    result = classify(sweep["baseline"], [late, sweep["loo-fp32"]], verdict_options=FAST)
    got = {v.variant: v for v in result.verdicts}
    v = got["loo-late"]
    assert v.verdict == "undecided" and v.a_variant > observed + 0.1
    assert (
        f"loo-late's A={v.a_variant:.3f} is an extrapolation (highest observed value {observed:.3f})"
        in v.reason
    )
    assert "train further" in v.reason and math.isnan(v.d_a)
    # Fully observed plateaus (the baseline, the null variant) are judged as before.
    assert got["loo-fp32"].verdict == "no-effect" and "extrapolat" not in got["loo-fp32"].reason


def test_a_rising_curve_already_above_the_baseline_ceiling_is_a_mover_by_its_lower_bound() -> None:
    # C_mid=10,000: still rising at 40,000 (A extrapolated), but its late level (~0.78) is a lower
    # bound on its ceiling that already clears the baseline's A (0.70) plus the margin.
    sweep = synthetic_sweep(noise=0.005)
    late, observed = _cut_off(10_000.0)
    v = classify(sweep["baseline"], [late], verdict_options=FAST).verdicts[0]
    assert v.verdict == "asymptote-mover"
    assert "is an extrapolation" in v.reason and "is a lower bound on A" in v.reason
    assert 0.05 < v.d_a_lo < v.d_a < observed - 0.70 and math.isnan(v.d_a_hi)


def test_seed_noise_counts_only_seeds_that_pin_their_ceiling() -> None:
    """An extrapolated per-seed A (at the bound, or far above the run's highest value) is not a
    measured ceiling: it must not inflate the seed noise that sets the margin (issue 11)."""
    from scalerl.harness.analysis.curve import SigmoidFit
    from scalerl.harness.analysis.verdicts import PINNED_A_TOLERANCE, _pins_ceiling

    curve = (np.arange(1.0, 11.0), np.linspace(0.3, 0.6, 10))  # highest value 0.6

    def fit(a: float, status: str = "ok") -> SigmoidFit:
        return SigmoidFit(0.3, a, 1.0, 5.0, 0.01, 10, status, "", "fast")  # type: ignore[arg-type]

    opts = FitOptions()
    assert _pins_ceiling(fit(0.62), curve, opts)
    assert _pins_ceiling(fit(0.6 + PINNED_A_TOLERANCE - 1e-6), curve, opts)
    assert not _pins_ceiling(fit(0.6 + PINNED_A_TOLERANCE + 1e-6), curve, opts)
    assert not _pins_ceiling(fit(1.0), curve, opts)  # at the upper bound
    assert not _pins_ceiling(fit(0.62, "pre-inflection"), curve, opts)


def test_an_extrapolating_seed_does_not_set_the_margin() -> None:
    # Three seeds of the same saturating truth, one of them cut while still rising (its A is an
    # extrapolation); the margin must come from the two measured ceilings and the point noise.
    rng = np.random.default_rng(3)
    c = np.geomspace(1e3, 1e6, 40)
    n = 640

    def draw(a: float, c_mid: float) -> tuple[np.ndarray, np.ndarray]:
        p = sigmoid_curve(c, 0.3, a, 1.5, c_mid)
        return c, rng.binomial(n, p) / n

    counts = (np.full(c.size, n),) * 3
    base = VariantCurves("baseline", (draw(0.6, 3e4), draw(0.6, 3e4), draw(0.9, 8e5)), n=counts)
    other = VariantCurves("v", (draw(0.6, 3e4), draw(0.6, 3e4), draw(0.6, 3e4)), knob="k", n=counts)
    res = classify(base, [other], options=FitOptions())
    # The third baseline seed is still rising at its last point: its A is not a measured ceiling.
    third = res.run_fits["baseline#2"]
    assert third.ok and third.a > float(base.curves[2][1].max()) + 0.05
    assert res.seed_noise < 0.03
    assert res.margin < 0.05

"""Verdicts on synthetic sweeps with known movers, shapers, a null variant and broken variants."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from scalerl.harness.analysis.fit.curve import FitOptions, sigmoid_curve
from scalerl.harness.analysis.groups import VariantCurves
from scalerl.harness.analysis.verdicts.explain import seeds_phrase
from scalerl.harness.analysis.verdicts.pipeline import classify
from scalerl.harness.analysis.verdicts.power import seeds_to_decide
from scalerl.harness.analysis.verdicts.types import Verdict, VerdictOptions
from tests.unit.analysis.sweeps import COMPUTE, Truth, synthetic_sweep

FAST = VerdictOptions(n_boot=100)


def _plateau_sweep(
    truths: Truth, seeds: int = 3, noise: float = 0.005, seed: int = 0
) -> tuple[VariantCurves, list[VariantCurves]]:
    """Curves that reach their plateau: compute 0 (R0 = 0.2) and 40 points up to 30 x C_mid."""
    compute = np.concatenate([[0.0], np.linspace(3_000, 150_000, 40)])
    out = synthetic_sweep(seeds=seeds, seed=seed, noise=noise, truth=truths, compute=compute)
    base = out.pop("baseline")
    return base, list(out.values())


def test_intervals_decide_movers_and_shapers_on_plateaued_curves() -> None:
    base, variants = _plateau_sweep(
        {
            "baseline": (None, 0.70, 1.5, 5000.0),
            "loo-dapo": ("loss", 0.62, 1.5, 5000.0),
            "loo-lp": ("precision", 0.70, 3.0, 5000.0),
            "loo-savg": ("loss_agg", 0.70, 1.5, 2000.0),
        }
    )
    result = classify(base, variants, verdict_options=FAST)
    got = {v.variant: v for v in result.verdicts}
    assert {k: v.verdict for k, v in got.items()} == {
        "loo-dapo": "asymptote-mover",
        "loo-lp": "efficiency-shaper",
        "loo-savg": "efficiency-shaper",
    }
    mover = got["loo-dapo"]
    # Decided only because its whole interval lies beyond the margin.
    assert mover.d_a == pytest.approx(-0.08, abs=0.01) and mover.d_a_hi < -result.margin
    assert "ceiling drops" in mover.reason and "false-discovery control over 3 knobs" in mover.reason
    steep, sooner = got["loo-lp"], got["loo-savg"]
    for v in (steep, sooner):  # ceilings shown equal: the dA interval inside +/- margin
        assert -result.margin < v.d_a_lo < v.d_a_hi < result.margin
    assert steep.d_b_lo > 0.1 * steep.b_base  # B rises beyond 10% of B
    assert sooner.d_log_c_mid == pytest.approx(math.log(2000 / 5000), abs=0.1)
    assert sooner.d_log_c_mid_hi < -math.log1p(0.1)
    # One R0 for the sweep (the compute-0 points), 4 groups x 3 seeds: 8 degrees of freedom.
    assert result.r0 == pytest.approx(0.2, abs=0.005) and result.df == 8
    assert result.margin == 0.02 and result.margin_source == "configured"
    row = mover.row("val/pass_rate", "flops")
    assert row["verdict"] == "asymptote-mover" and row["metric"] == "val/pass_rate" and row["axis"] == "flops"


def test_no_effect_needs_equivalence_and_a_wide_interval_is_undecided() -> None:
    truths: Truth = {
        "baseline": (None, 0.70, 1.5, 5000.0),
        "loo-fp32": ("precision", 0.70, 1.5, 5000.0),
    }
    quiet = classify(*_plateau_sweep(truths, noise=0.002), verdict_options=FAST).verdicts[0]
    assert quiet.verdict == "no-effect" and -0.02 < quiet.d_a_lo < quiet.d_a_hi < 0.02
    assert "equivalent" in quiet.reason
    # Noisy points and one seed each: the interval leaves the margin, so never no-effect.
    noisy = classify(*_plateau_sweep(truths, seeds=2, noise=0.05, seed=4), verdict_options=FAST).verdicts[0]
    assert noisy.d_a_lo < -0.02 or noisy.d_a_hi > 0.02
    assert noisy.verdict == "undecided" and noisy.pending == "seeds"
    # The seeds it would take: the one number (seeds_to_decide on its evidence), in the one phrase.
    assert noisy.evidence is not None and noisy.seeds_needed == seeds_to_decide(noisy.evidence, 2)
    assert seeds_phrase(noisy.seeds_needed, 2, 0.8) in noisy.reason


def test_one_collapsed_seed_is_a_finding_not_a_veto() -> None:
    base, (var,) = _plateau_sweep({"baseline": (None, 0.70, 1.5, 5000.0), "loo-x": ("k", 0.60, 1.5, 5000.0)})
    (c, y), *rest = var.curves
    crashed = y.copy()
    crashed[-10:] = 0.1
    one = replace(var, curves=((c, crashed), *rest))
    (v,) = classify(base, [one], verdict_options=FAST).verdicts
    assert v.verdict == "asymptote-mover"
    assert "loo-x-s0 collapsed" in v.reason and "judged on 2 seed(s) (loo-x-s1, loo-x-s2)" in v.reason
    # Two of three collapsed: the variant itself is unstable.
    (c2, y2) = rest[0]
    crashed2 = y2.copy()
    crashed2[-10:] = 0.1
    two = replace(var, curves=((c, crashed), (c2, crashed2), rest[1]))
    (v,) = classify(base, [two], verdict_options=FAST).verdicts
    assert v.verdict == "unstable" and v.reason.startswith("2 of 3 seeds failed")


def test_unstable_and_unfit_variants_say_why() -> None:
    sweep = synthetic_sweep(seeds=2)
    base = sweep["baseline"]
    (c, y), (c2, y2) = sweep["loo-fp32"].curves
    collapsed, collapsed2 = y.copy(), y2.copy()
    collapsed[-12:] = 0.05
    collapsed2[-12:] = 0.05
    diverged = y.copy()
    diverged[30] = np.nan
    short = (COMPUTE[:3], y[:3])
    variants = [
        replace(sweep["loo-fp32"], variant="collapse", curves=((c, collapsed), (c2, collapsed2))),
        replace(sweep["loo-fp32"], variant="diverge", curves=((c, diverged),), run_ids=("loo-fp32-s0",)),
        replace(sweep["loo-fp32"], variant="short", curves=(short,), run_ids=("short-s0",)),
        VariantCurves("falling", ((c, 0.7 - 0.04 * np.linspace(0, 1, c.size)),), knob="x"),  # slow decline
    ]
    got = {v.variant: v for v in classify(base, variants, verdict_options=FAST).verdicts}
    assert got["collapse"].verdict == "unstable" and "collapsed: loo-fp32-s0" in got["collapse"].reason
    assert (
        got["diverge"].verdict == "unstable"
        and "diverged: 1 non-finite value(s) in loo-fp32-s0" in got["diverge"].reason
    )
    assert got["short"].verdict == "unfit" and "too-few-points" in got["short"].reason
    # A noise-free decline of 0.04 that is still falling at the end: a collapse, not a settle.
    assert got["falling"].verdict == "unstable" and "still falling" in got["falling"].reason
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
    assert v.verdict == "unfit"
    assert v.reason.startswith("baseline is unstable (1 of 1 seeds failed: collapsed: base-s0 peak")


def test_seed_noise_on_real_replicate_runs() -> None:
    # verl-fork-parsed: 7 repeat PPO runs of one configuration (5 with plain data parallelism, 2
    # with Ulysses sequence parallelism): the same truth, so no decided effect; none of these
    # noisy train-reward curves (sd ~0.04 per step) is mistaken for a collapse.
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
    (v,) = result.verdicts
    assert v.verdict not in ("unstable", "unfit", "asymptote-mover", "efficiency-shaper")
    assert all(f.status == "ok" for f in result.run_fits.values())
    assert v.verdict == "undecided"


@pytest.mark.parametrize("draw", [2, 3, 4, 5])
def test_a_single_noisy_seed_does_not_make_a_mover_out_of_noise(draw: int) -> None:
    # Baseline and variant share the truth (A=0.70); one seed each, 4% noise: no seed spread can
    # be measured (0 degrees of freedom), so nothing is decided, whatever |dA| came out.
    rng = np.random.default_rng(draw)
    compute = np.geomspace(200, 40_000, 30)

    def variant(name: str, knob: str | None) -> VariantCurves:
        y = sigmoid_curve(compute, 0.2, 0.70, 1.5, 5000.0) + rng.normal(0, 0.04, compute.size)
        alt = None if knob is None else name
        return VariantCurves(name, ((compute, y),), knob=knob, alternative=alt, run_ids=(f"{name}-s0",))

    base, var = variant("baseline", None), variant("loo-x", "loss")
    (v,) = classify(base, [var], verdict_options=FAST).verdicts
    assert v.verdict == "undecided"


def _cut_off(c_mid: float, name: str = "loo-late") -> tuple[VariantCurves, float]:
    """Three seeds of a sigmoid with A=0.95 cut off at 40,000 compute, before its plateau."""
    rng = np.random.default_rng(7)
    cut = np.geomspace(200, 40_000, 50)
    y = [sigmoid_curve(cut, 0.2, 0.95, 1.5, c_mid) + rng.normal(0, 0.005, cut.size) for _ in range(3)]
    vc = VariantCurves(name, tuple((cut, v) for v in y), knob="pipeline", alternative=name)
    return vc, max(float(v.max()) for v in y)


def test_a_ceiling_past_the_inflection_is_judged_by_its_extrapolation() -> None:
    # C_mid=20,000: at 40,000 the curve has made 74% of its gain (0.95 - 0.2). Past its inflection,
    # its fit pins the ceiling by extrapolation (the paper's use), with what the extrapolation
    # leaves open in each seed's interval: a +0.25 mover, noted as an extrapolated ceiling.
    base, _ = _plateau_sweep({"baseline": (None, 0.70, 1.5, 5000.0)})
    late, observed = _cut_off(20_000.0)
    (v,) = classify(base, [late], verdict_options=FAST).verdicts
    assert v.verdict == "asymptote-mover" and v.d_a_lo < 0.25 < v.d_a_hi and v.d_a_lo > 0.02
    assert f"loo-late A={late_a(v):.3f} vs observed max {observed:.3f}" in v.reason
    assert v.p_ceiling > 0.99


def late_a(v: Verdict) -> float:
    return v.a_variant


def test_a_curve_before_its_inflection_is_undecided_and_says_what_would_pin_it() -> None:
    # C_mid=80,000: at 40,000 the curve has not turned, so neither its ceiling nor its efficiency
    # is measured (its C_mid lies beyond the data); its late level (~0.4) is below the baseline's
    # ceiling, so nothing is shown, and what would decide it is compute, read off its fit.
    base, _ = _plateau_sweep({"baseline": (None, 0.70, 1.5, 5000.0)})
    late, _ = _cut_off(80_000.0)
    result = classify(base, [late], verdict_options=FAST)
    (v,) = result.verdicts
    assert v.verdict == "undecided" and v.pending == "compute" and math.isnan(v.d_log_c_mid)
    assert "loo-late has not passed its inflection" in v.reason and "train further" in v.reason
    from scalerl.harness.analysis.verdicts.next_steps import what_decides

    (step,) = what_decides(result, "baseline", {"baseline": 150_000.0, "loo-late": 40_000.0})
    # Its fit (C_mid ~80,000, B ~1.5) reaches 75% of its gain at ~80,000 x 3^(1/1.5) = 166,000.
    assert 3.0 < step.factor < 6.0 and "loo-late's ceiling is measured at" in step.note


def test_a_rising_curve_already_above_the_baseline_ceiling_is_a_mover_by_its_lower_bound() -> None:
    # C_mid=60,000: before its inflection at 40,000 (A not pinned), but its late level (~0.36) is
    # a lower bound on its ceiling that already clears a baseline ceiling of 0.30 plus the margin.
    base, _ = _plateau_sweep({"baseline": (None, 0.30, 1.5, 5000.0)})
    late, observed = _cut_off(60_000.0)
    v = classify(base, [late], verdict_options=FAST).verdicts[0]
    assert v.verdict == "asymptote-mover"
    assert "its ceiling is only bounded" in v.reason and "a lower bound on A" in v.reason
    assert 0.02 < v.d_a_lo < v.d_a < observed - 0.30 and math.isnan(v.d_a_hi)


def test_an_extrapolating_seed_gets_little_weight() -> None:
    # Three seeds of the same saturating truth in both groups, one baseline seed cut while still
    # rising (its A is an extrapolation, weighted by how far it reaches beyond its data): no
    # ceiling shift is called.
    rng = np.random.default_rng(3)
    c = np.concatenate([[0.0], np.geomspace(1e3, 1e6, 40)])
    n = 640

    def draw(a: float, c_mid: float) -> tuple[np.ndarray, np.ndarray]:
        p = sigmoid_curve(c, 0.3, a, 1.5, c_mid)
        return c, rng.binomial(n, p) / n

    counts = (np.full(c.size, n),) * 3
    base = VariantCurves("baseline", (draw(0.6, 3e4), draw(0.6, 3e4), draw(0.9, 8e5)), n=counts)
    other = VariantCurves("v", (draw(0.6, 3e4), draw(0.6, 3e4), draw(0.6, 3e4)), knob="k", n=counts)
    res = classify(base, [other], options=FitOptions())
    third = res.run_fits["baseline#2"]
    assert third.ok and third.a > float(base.curves[2][1].max()) + 0.05
    assert res.verdicts[0].verdict != "asymptote-mover" and res.margin == 0.02


def test_a_sweep_with_only_a_baseline_has_no_verdicts_and_no_error() -> None:
    # One imported run is a sweep of one variant: fit and report must not divide by zero knobs.
    sw = synthetic_sweep(seeds=1, truth={"baseline": (None, 0.7, 1.5, 5000.0)})
    analysis = classify(sw["baseline"], [], verdict_options=FAST)
    assert analysis.verdicts == [] and analysis.variant_fits["baseline"].fit.ok


def test_a_barely_identified_b_interval_reads_as_unbounded_not_an_overflow() -> None:
    # stop_sim's looks at 25% of a budget gave a log-B interval end past 709 (math.exp's limit).
    from scalerl.harness.analysis.verdicts.pipeline import _exp, _expm1

    assert _expm1(800.0) == math.inf and _exp(1e4) == math.inf
    assert _expm1(0.5) == pytest.approx(math.expm1(0.5)) and _exp(-1e4) == 0.0


def test_the_verdicts_do_not_depend_on_the_bootstrap_size() -> None:
    # The bootstrap draws the report's bands; the rule uses the point fits and the seeds' own fits
    # (bench/verdict_sim2.py runs with few replicates for speed on that ground).
    base, variants = _plateau_sweep(
        {
            "baseline": (None, 0.70, 1.5, 5000.0),
            "loo-lp": ("k", 0.70, 3.0, 5000.0),
            "loo-x": ("k", 0.62, 1.5, 5000.0),
        }
    )
    small = classify(base, variants, verdict_options=VerdictOptions(n_boot=5)).verdicts
    large = classify(base, variants, verdict_options=VerdictOptions(n_boot=60, seed=3)).verdicts
    assert [(v.verdict, v.d_a, v.d_a_lo, v.p_ceiling, v.p_efficiency) for v in small] == [
        (v.verdict, v.d_a, v.d_a_lo, v.p_ceiling, v.p_efficiency) for v in large
    ]

"""Knob verdicts: does a LOO variant move the ceiling, shape the efficiency, or do nothing?

For each variant against the baseline (same metric, same compute axis), DESIGN.md §5:

- ``unstable``: a seed diverged (non-finite values) or collapsed (its smoothed curve fell from
  its peak by more than ``collapse_drop``), or the pooled curve decreases.
- ``unfit``: the pooled baseline or variant curve cannot be fitted (too few points, flat,
  pre-inflection, optimiser failure), or the baseline itself is unstable; the reason says which.
- ``asymptote-mover``: ``|A_variant - A_base| > margin``, where margin is the larger of the
  configured margin (default 0.02) and the measured seed noise on A, AND the bootstrap interval
  of dA excludes zero. The second condition matters when the seed noise cannot be measured (one
  seed): a 0.023 gap whose interval is [-0.085, +0.041] is not a detected ceiling shift, so such a
  variant goes on to the efficiency test and its reason says why it was not called a mover.
- ``efficiency-shaper``: A not shown to move, and after refitting both pooled curves with A fixed
  at their mean (the paper's rule) ``B_variant - B_base`` or ``log C_mid_variant - log C_mid_base``
  is beyond its bootstrap uncertainty: the interval (Bonferroni-adjusted for the two tests, so
  97.5% each at the default level) excludes zero, and the change is at least ``min_rel_effect``
  (10% of B, or C_mid moving by a factor of 1.1), so that a tight interval on a trivial change
  does not make a shaper.
- ``no-effect``: neither.

A mover's or shaper's reason ends with ``note: extrapolated ceiling (...)`` when a fitted A lies
far above the highest value its curves reached: the verdict stands, but that A is a forecast.

Every verdict carries dA with its 95% CI (from the free fits), dB with its CI (for non-movers
from the fixed-A refits, at the Bonferroni 97.5% level of the test; for movers from the free
fits, 95%), and the margin, so a reader can disagree. The seed noise is measured only on
variants that are not unstable (a collapsed seed says nothing about healthy seed-to-seed spread).
All fits of a sweep (per-seed, pooled, bootstraps, fixed-A refits) run as a few batched calls.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from harness.analysis.curve import FitOptions, SigmoidFit
from harness.analysis.fitters import Curve, Fitter, fit_sigmoid_many
from harness.analysis.uncertainty import DEFAULT_BOOT, BootstrapResult, bootstrap_fits, diff_ci, seed_noise

VerdictKind = Literal["asymptote-mover", "efficiency-shaper", "no-effect", "unstable", "unfit"]
_NAN = math.nan


@dataclass(frozen=True)
class VerdictOptions:
    margin: float = 0.02
    n_boot: int = DEFAULT_BOOT
    level: float = 0.95
    seed: int = 0
    # Smallest efficiency change worth a verdict: 10% in B, or C_mid moving by a factor of 1.1.
    min_rel_effect: float = 0.1
    collapse_drop: float = 0.05  # fall from the smoothed peak that counts as a collapse
    smooth: int = 5  # moving-average width for the collapse check


@dataclass(frozen=True)
class VariantCurves:
    """One variant's curves, one per seed (``run_ids`` in the same order)."""

    variant: str
    curves: tuple[Curve, ...]
    knob: str | None = None
    alternative: str | None = None
    run_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    knob: str | None
    variant: str
    alternative: str | None
    verdict: VerdictKind
    a_base: float
    a_variant: float
    d_a: float
    d_a_lo: float
    d_a_hi: float
    b_base: float
    b_variant: float
    d_b: float
    d_b_lo: float
    d_b_hi: float
    margin: float
    reason: str
    d_log_c_mid: float = _NAN
    d_log_c_mid_lo: float = _NAN
    d_log_c_mid_hi: float = _NAN

    def row(self, metric: str, axis: str) -> dict[str, Any]:
        """The ``store.replace_verdicts`` row (the verdict table's columns)."""
        keys = (
            "knob",
            "variant",
            "alternative",
            "verdict",
            "a_base",
            "a_variant",
            "d_a",
            "d_a_lo",
            "d_a_hi",
            "b_base",
            "b_variant",
            "d_b",
            "d_b_lo",
            "d_b_hi",
            "margin",
            "reason",
        )
        return {k: getattr(self, k) for k in keys} | {"metric": metric, "axis": axis}


@dataclass(frozen=True)
class SweepAnalysis:
    run_fits: dict[str, SigmoidFit]
    variant_fits: dict[str, BootstrapResult]
    seed_noise: float
    margin: float
    verdicts: list[Verdict] = field(default_factory=list)


def _instability(vc: VariantCurves, opts: VerdictOptions) -> str:
    """Why a variant's seeds look diverged or collapsed, or '' if they do not."""
    for i, (c, v) in enumerate(vc.curves):
        seed = vc.run_ids[i] if i < len(vc.run_ids) else f"curve {i}"
        vals = np.asarray(v, dtype=np.float64)
        bad = int((~np.isfinite(vals)).sum())
        if bad:
            return f"diverged: {bad} non-finite value(s) in {seed}"
        order = np.argsort(np.asarray(c, dtype=np.float64), kind="stable")
        vals = vals[order]
        width = max(opts.smooth, vals.size // 10)
        if vals.size >= 2 * width:
            ma = np.convolve(vals, np.ones(width) / width, mode="valid")
            peak, last = float(ma.max()), float(ma[-1])
            # Point noise from successive differences (robust: median absolute difference / 0.954
            # estimates sigma for Gaussian noise); the peak of many noisy averages sits a few of
            # their sigmas high, so a drop counts only beyond 5 of them.
            sigma = float(np.median(np.abs(np.diff(vals)))) / 0.954
            threshold = max(opts.collapse_drop, 5.0 * sigma / math.sqrt(width))
            if peak - last > threshold:
                return (
                    f"collapsed: {seed} fell from a smoothed peak of {peak:.3f} to {last:.3f} "
                    f"(more than {threshold:.3f})"
                )
    return ""


def _blank(
    base: BootstrapResult,
    vc: VariantCurves,
    kind: VerdictKind,
    margin: float,
    reason: str,
    var: BootstrapResult | None = None,
) -> Verdict:
    a_var = var.fit.a if var is not None else _NAN
    b_var = var.fit.b if var is not None else _NAN
    return Verdict(
        vc.knob,
        vc.variant,
        vc.alternative,
        kind,
        base.fit.a,
        a_var,
        _NAN,
        _NAN,
        _NAN,
        base.fit.b,
        b_var,
        _NAN,
        _NAN,
        _NAN,
        margin,
        reason,
    )


def _excludes_zero(lo: float, hi: float) -> bool:
    return math.isfinite(lo) and math.isfinite(hi) and (lo > 0 or hi < 0)


def _extrapolation_note(fits: Sequence[tuple[VariantCurves, float]], margin: float) -> str:
    """A note for each fitted ceiling far above anything its curves reached.

    Such an A is past the inflection (else the fit would be pre-inflection) but still an
    extrapolation: the curve was rising slowly at the end, and A is where the sigmoid says it
    would go. The verdict stands on the numbers; the note tells the reader which ones are
    forecasts rather than observations. "Far" = more than max(0.05, 2 x margin) above the highest
    observed value (the observed maximum itself sits above the plateau by the point noise).
    """
    parts = []
    for vc, a in fits:
        values = [np.asarray(v, dtype=np.float64) for _, v in vc.curves]
        finite = [v[np.isfinite(v)] for v in values]
        observed = max((float(v.max()) for v in finite if v.size), default=math.nan)
        if math.isfinite(a) and math.isfinite(observed) and a - observed > max(0.05, 2.0 * margin):
            parts.append(f"{vc.variant} A={a:.3f} vs observed max {observed:.3f}")
    return f"; note: extrapolated ceiling ({', '.join(parts)})" if parts else ""


def classify(
    baseline: VariantCurves,
    variants: Sequence[VariantCurves],
    *,
    options: FitOptions | None = None,
    verdict_options: VerdictOptions | None = None,
    method: str | Fitter = "fast",
) -> SweepAnalysis:
    """Fit every run and every pooled variant, measure the seed noise, and judge each variant."""
    opts = options or FitOptions()
    vopts = verdict_options or VerdictOptions()
    everyone = [baseline, *variants]
    # 1. Per-seed fits (one batch): the seed-noise floor on A.
    flat_curves = [c for vc in everyone for c in vc.curves]
    flat_fits = fit_sigmoid_many(flat_curves, options=opts, method=method)
    run_fits: dict[str, SigmoidFit] = {}
    by_variant: dict[str, list[SigmoidFit]] = {}
    k = 0
    for vc in everyone:
        fits = flat_fits[k : k + len(vc.curves)]
        k += len(vc.curves)
        by_variant[vc.variant] = list(fits)
        for i, f in enumerate(fits):
            run_fits[vc.run_ids[i] if i < len(vc.run_ids) else f"{vc.variant}#{i}"] = f
    # Seeds of a diverged or collapsed variant say nothing about the noise of healthy runs.
    unstable = {vc.variant: _instability(vc, vopts) for vc in everyone}
    noise = seed_noise({v: f for v, f in by_variant.items() if not unstable[v]})
    margin = max(vopts.margin, noise) if math.isfinite(noise) else vopts.margin
    # 2. Pooled fits with bootstrap CIs (one batch for all variants).
    boots = bootstrap_fits(
        [vc.curves for vc in everyone],
        options=opts,
        n_boot=vopts.n_boot,
        seed=vopts.seed,
        level=vopts.level,
        method=method,
    )
    pooled = {vc.variant: b for vc, b in zip(everyone, boots, strict=True)}
    base = pooled[baseline.variant]
    verdicts: dict[str, Verdict] = {}
    shaper_candidates: list[tuple[VariantCurves, BootstrapResult, float, float, float, float]] = []
    for vc in variants:
        var = pooled[vc.variant]
        if unstable[vc.variant] or var.fit.status == "decreasing":
            why = unstable[vc.variant] or f"pooled curve is decreasing: {var.fit.reason}"
            verdicts[vc.variant] = _blank(base, vc, "unstable", margin, why, var)
            continue
        if unstable[baseline.variant]:
            why = f"baseline is unstable ({unstable[baseline.variant]}); nothing sound to compare with"
            verdicts[vc.variant] = _blank(base, vc, "unfit", margin, why, var)
            continue
        if not base.fit.ok:
            verdicts[vc.variant] = _blank(
                base, vc, "unfit", margin, f"baseline fit is {base.fit.status}: {base.fit.reason}", var
            )
            continue
        if not var.fit.ok:
            verdicts[vc.variant] = _blank(
                base, vc, "unfit", margin, f"variant fit is {var.fit.status}: {var.fit.reason}", var
            )
            continue
        d_a, d_a_lo, d_a_hi = diff_ci(base, var, 1, vopts.level)
        if abs(d_a) > margin and _excludes_zero(d_a_lo, d_a_hi):
            d_b, d_b_lo, d_b_hi = diff_ci(base, var, 2, vopts.level)
            verdicts[vc.variant] = Verdict(
                vc.knob,
                vc.variant,
                vc.alternative,
                "asymptote-mover",
                base.fit.a,
                var.fit.a,
                d_a,
                d_a_lo,
                d_a_hi,
                base.fit.b,
                var.fit.b,
                d_b,
                d_b_lo,
                d_b_hi,
                margin,
                f"|dA|={abs(d_a):.3f} > margin {margin:.3f}: the ceiling "
                f"{'rises' if d_a > 0 else 'drops'} (B from the free fits)"
                + _extrapolation_note([(baseline, base.fit.a), (vc, var.fit.a)], margin),
            )
            continue
        shaper_candidates.append((vc, var, d_a, d_a_lo, d_a_hi, 0.5 * (base.fit.a + var.fit.a)))
    # 3. Efficiency: refit baseline and variant with A fixed at their mean (one batch for all).
    if shaper_candidates:
        groups: list[tuple[Curve, ...]] = []
        fixed: list[float] = []
        for vc, _, _, _, _, a_mean in shaper_candidates:
            groups += [baseline.curves, vc.curves]
            fixed += [a_mean, a_mean]
        refits = bootstrap_fits(
            groups,
            options=opts,
            n_boot=vopts.n_boot,
            seed=vopts.seed + 1,
            level=vopts.level,
            fixed_a=fixed,
            method=method,
        )
        for j, (vc, _var, d_a, d_a_lo, d_a_hi, a_mean) in enumerate(shaper_candidates):
            rb, rv = refits[2 * j], refits[2 * j + 1]
            if not (rb.fit.ok and rv.fit.ok):
                bad = rb if not rb.fit.ok else rv
                why = f"refit at A={a_mean:.3f} is {bad.fit.status}: {bad.fit.reason}"
                verdicts[vc.variant] = _blank(base, vc, "unfit", margin, why)
                continue
            # Two tests (B and C_mid): Bonferroni keeps the family's false-positive rate at 1-level.
            level2 = 1.0 - (1.0 - vopts.level) / 2.0
            d_b, d_b_lo, d_b_hi = diff_ci(rb, rv, 2, level2)
            d_c, d_c_lo, d_c_hi = diff_ci(rb, rv, 3, level2, transform="log")
            b_moves = _excludes_zero(d_b_lo, d_b_hi) and abs(d_b) > vopts.min_rel_effect * rb.fit.b
            c_moves = _excludes_zero(d_c_lo, d_c_hi) and abs(d_c) > math.log1p(vopts.min_rel_effect)
            kind: VerdictKind = "efficiency-shaper" if (b_moves or c_moves) else "no-effect"
            detail = (
                f"at common A={a_mean:.3f}: dB={d_b:+.3f} [{d_b_lo:+.3f}, {d_b_hi:+.3f}], "
                f"dlogC_mid={d_c:+.3f} [{d_c_lo:+.3f}, {d_c_hi:+.3f}]"
            )
            if abs(d_a) > margin:
                a_part = (
                    f"|dA|={abs(d_a):.3f} > margin {margin:.3f} but its CI "
                    f"[{d_a_lo:+.3f}, {d_a_hi:+.3f}] includes 0 (no detected ceiling shift); "
                )
            else:
                a_part = f"|dA|={abs(d_a):.3f} <= margin {margin:.3f}; "
            head = a_part + (
                "efficiency differs beyond bootstrap uncertainty, "
                if kind != "no-effect"
                else "no efficiency difference beyond bootstrap uncertainty, "
            )
            verdicts[vc.variant] = Verdict(
                vc.knob,
                vc.variant,
                vc.alternative,
                kind,
                base.fit.a,
                pooled[vc.variant].fit.a,
                d_a,
                d_a_lo,
                d_a_hi,
                rb.fit.b,
                rv.fit.b,
                d_b,
                d_b_lo,
                d_b_hi,
                margin,
                head
                + detail
                + _extrapolation_note([(baseline, base.fit.a), (vc, pooled[vc.variant].fit.a)], margin),
                d_c,
                d_c_lo,
                d_c_hi,
            )
    ordered = [verdicts[vc.variant] for vc in variants]
    return SweepAnalysis(run_fits, pooled, noise, margin, ordered)

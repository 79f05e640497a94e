"""Is a variant's ceiling pinned, and what does each seed's own fit say?

The helpers of :func:`scalerl.harness.analysis.verdicts.pipeline.classify` (see its module
docstring): the sweep's shared R0 (:func:`shared_r0`), each seed's parameters and their sampling
variances (:func:`seed_estimates`; A's from the seed's profile likelihood, :func:`profile_a_var`),
whether a variant's pooled fit pins its ceiling (:func:`why_unpinned`: past 60% of its gain) or
has a bend to measure efficiency on (:func:`why_unshaped`), and the late level that bounds a
rising curve's A from below (:func:`late_level`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.curve import (
    FitOptions,
    FloatArray,
    PreparedCurve,
    SigmoidFit,
    prepare,
    sigmoid_curve,
)
from scalerl.harness.analysis.fit.fitters import Curve, Fitter, fit_sigmoid_many
from scalerl.harness.analysis.groups import VariantCurves
from scalerl.harness.analysis.verdicts.seeds import SeedGroup

_NAN = math.nan


def typical_a_se(a_ses: Sequence[float]) -> float:
    """The mean of the seeds' SEs of A (profile likelihood; the fit notes' "measurement-noise SE of
    one run's A"), the largest 10% left out when there are 10 or more (one seed whose A is barely
    pinned should not speak for the sweep)."""
    finite = np.sort(np.array([x for x in a_ses if math.isfinite(x)], dtype=np.float64))
    if not finite.size:
        return _NAN
    keep = finite[: math.ceil(0.9 * finite.size)] if finite.size >= 10 else finite
    return float(keep.mean())


# The share of each run's points (by compute, at least 3) whose mean is its late level.
LATE_SHARE = 0.2


def late_level(vc: VariantCurves, sigma: Sequence[FloatArray]) -> tuple[float, float]:
    """(mean, standard error) of the variant's late level: each seed's mean over its last
    ``LATE_SHARE`` of points, averaged over seeds. The SE combines the points' measurement noise
    with the seed-to-seed spread of those means (the larger of the two). For a curve still rising
    toward its ceiling the late level is a lower bound on A."""
    means, noise_vars = [], []
    for (c, v), se in zip(vc.curves, sigma, strict=True):
        cc, vv = np.asarray(c, dtype=np.float64), np.asarray(v, dtype=np.float64)
        ss = np.broadcast_to(np.asarray(se, dtype=np.float64), vv.shape)
        keep = np.isfinite(cc) & np.isfinite(vv)
        order = np.argsort(cc[keep], kind="stable")
        vv, ss = vv[keep][order], ss[keep][order]
        k = max(3, round(LATE_SHARE * vv.size))
        if vv.size < k:
            continue
        means.append(float(vv[-k:].mean()))
        tail = ss[-k:]
        noise_vars.append(float(np.nansum(tail**2)) / k**2)
    if not means:
        return math.nan, math.nan
    m = np.array(means)
    se_noise = math.sqrt(sum(noise_vars)) / m.size
    se_seed = float(np.std(m, ddof=1)) / math.sqrt(m.size) if m.size > 1 else 0.0
    return float(m.mean()), max(se_noise, se_seed)


def shared_r0(
    curves: Sequence[Curve], opts: FitOptions, sigma: Sequence[ArrayLike | None] | None = None
) -> tuple[float | None, str]:
    """One R0 for the whole sweep and where it came from, or (None, '') to leave each fit its own.

    A LOO sweep's runs start from one checkpoint, so their starts measure one number; estimating
    it per variant from a few noisy points and holding it fixed turned R0 noise into efficiency
    "effects" (with no seed noise at all, 49% of null knobs were shapers; with R0 shared, none).
    Under the default rule (:data:`scalerl.harness.analysis.curve.R0Rule`) that number is the
    mean of every run's step-0 evaluations (points at compute <= 0) when every run has one, else
    the median over the runs of each one's fitted R0 (fitted with A, B and C_mid; the median,
    because a run that starts late pins its own start only roughly). Never the runs' first logged
    values: a curve logged from its first training step has already risen there, and an R0
    biased up bends every fit's A and B. None when the options fix R0 or take each run's first
    values (``r0_rule="first"``, the paper's procedure).
    """
    if opts.r0 is not None or opts.rule == "first" or not curves:
        return None, ""
    starts = []
    for c, v in curves:
        cc, vv = np.asarray(c, dtype=np.float64), np.asarray(v, dtype=np.float64)
        at0 = vv[np.isfinite(cc) & np.isfinite(vv) & (cc <= 0)]
        starts.append(float(at0.mean()) if at0.size else _NAN)
    if opts.rule == "auto" and all(math.isfinite(x) for x in starts):
        return float(np.mean(starts)), "the runs' step-0 evaluations"
    fits = fit_sigmoid_many(list(curves), options=replace(opts, r0_rule="fit"), sigma=sigma)
    r0s = [f.r0 for f in fits if f.status in ("ok", "pre-inflection") and math.isfinite(f.r0)]
    if not r0s:
        return None, ""
    return float(np.median(r0s)), f"fitted: the median of {len(r0s)} runs' own fits"


def seed_cov(fit: SigmoidFit, curve: Curve, sigma: FloatArray, opts: FitOptions) -> FloatArray:
    """One seed's linearised sampling variances of (A, log B, log C_mid): the diagonal of the
    weighted-least-squares covariance ``(J^T W J)^-1`` at its fitted parameters (A raw where the
    fit is pre-inflection), on its windowed points, R0 held at its value. NaN where unknown."""
    nan3 = np.full(3, np.nan)
    a = fit.a if fit.ok else fit.a_raw
    if not all(math.isfinite(p) for p in (a, fit.b, fit.c_mid, fit.r0)) or fit.b <= 0 or fit.c_mid <= 0:
        return nan3
    prep = prepare(curve[0], curve[1], opts, r0_override=fit.r0, sigma=sigma)
    if prep.sigma is None or prep.x.size < 4:
        return nan3
    x, sd = prep.x, prep.sigma
    with np.errstate(over="ignore", invalid="ignore"):
        u = (fit.c_mid / x) ** fit.b
        g = 1.0 / (1.0 + u)
        gain = a - fit.r0
        jac = np.column_stack(
            [
                g,  # dR/dA
                gain * fit.b * u * np.log(x / fit.c_mid) * g**2,  # dR/dlog B
                -gain * fit.b * u * g**2,  # dR/dlog C_mid
            ]
        )
    if not np.all(np.isfinite(jac)):
        return nan3
    info = (jac / sd[:, None] ** 2).T @ jac
    try:
        cov = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        return nan3
    var = np.diag(cov).astype(np.float64)
    return np.where(np.isfinite(var) & (var > 0), var, np.nan)


@dataclass(frozen=True)
class SeedEstimates:
    """One variant's per-seed parameters for the pooled contrasts: values and their sampling
    variances (linearised; A's replaced by its profile-likelihood variance in :func:`classify`),
    one entry per usable seed (``used``: their indices in the variant's curves), for A, log B and
    log C_mid."""

    a: list[float]
    a_var: list[float]
    log_b: list[float]
    log_b_var: list[float]
    log_c_mid: list[float]
    log_c_mid_var: list[float]
    used: list[int]


# Where each seed's profile likelihood is evaluated: A at these multiples of its linearised SE
# from the estimate (clipped to A's bounds). The upper steps run far: a seed whose curve is still
# rising leaves its ceiling open upward by many linearised SEs.
_PROFILE_STEPS = np.array([-4.0, -2.5, -1.5, -0.75, 0.75, 1.5, 2.5, 4.0, 6.0, 9.0, 14.0, 20.0])
# ... and at these absolute offsets, so that a seed whose linearised SE is tiny still has its
# profile followed as far as its data leave the ceiling open (a grid that stops short of the
# crossing would cut the interval there).
_PROFILE_REACH = np.array([-0.2, -0.1, -0.05, 0.05, 0.1, 0.2, 0.4])
_PROFILE_Z = 1.959963984540054  # the profile interval's level: 95%, chi-square(1) = z^2
_PROFILE_CHI2 = _PROFILE_Z**2


def profile_a_var(
    items: Sequence[tuple[SigmoidFit, Curve, FloatArray, float, float]],
    opts: FitOptions,
    method: str | Fitter,
) -> list[float]:
    """Each seed's sampling variance of A from its profile likelihood.

    ``items``: (fit, curve, point SEs, A, linearised variance of A) per seed. The 95% profile
    interval is where refits with A held (B and C_mid free, R0 at the fit's) stay within
    chi-square(1) of the best fit; the variance is (its width / 3.92)^2. The linearised variance
    sees only the curvature at the estimate: on curves stopped at 74% of their gain it was a
    fraction of the spread of A over seeds, while the profile runs as far as the data leave the
    ceiling open (to A's bound). One batch of refits for the whole sweep."""
    lo_b, hi_b = opts.a_bounds
    batch: list[Curve] = []
    fixed: list[float] = []
    sig: list[ArrayLike | None] = []
    grids: list[FloatArray] = []
    for _, c, se, a, var in items:
        step = min(max(math.sqrt(var) if math.isfinite(var) and var > 0 else 0.02, 2e-3), 0.1)
        grid = np.unique(
            np.clip(np.concatenate([a + step * _PROFILE_STEPS, a + _PROFILE_REACH]), lo_b + 1e-6, hi_b)
        )
        grids.append(grid)
        batch += [c] * grid.size
        fixed += [float(g) for g in grid]
        sig += [se] * grid.size
    refits = fit_sigmoid_many(batch, options=opts, method=method, fixed_a=fixed, sigma=sig)
    out = []
    k = 0
    for (f, c, se, a, var), grid in zip(items, grids, strict=True):
        held = refits[k : k + grid.size]
        k += grid.size
        prep = prepare(c[0], c[1], opts, r0_override=f.r0, sigma=se)
        if prep.sigma is None:
            out.append(var)
            continue
        best = _chi2(prep, f.r0, a, f.b, f.c_mid)
        prof = np.array(
            [_chi2(prep, g.r0, float(gv), g.b, g.c_mid) for g, gv in zip(held, grid, strict=True)]
        )
        dev = prof - min(best, float(np.min(prof)))
        below, above = grid < a, grid > a
        lo = _crossing(grid[below][::-1], dev[below][::-1], a, float(grid.min()))
        hi = _crossing(grid[above], dev[above], a, float(grid.max()))
        out.append(((hi - lo) / (2.0 * _PROFILE_Z)) ** 2)
    return out


def _chi2(prep: PreparedCurve, r0: float, a: float, b: float, c_mid: float) -> float:
    """Sum of squared standardised residuals of one curve's windowed points (inf: no fit)."""
    if not all(math.isfinite(p) for p in (r0, a, b, c_mid)) or prep.sigma is None:
        return math.inf
    return float(np.sum(((prep.y - sigmoid_curve(prep.x, r0, a, b, c_mid)) / prep.sigma) ** 2))


def _crossing(g: FloatArray, dev: FloatArray, a: float, end: float) -> float:
    """Where the profile deviance first reaches the chi-square cut moving away from ``a`` along
    ``g`` (linear interpolation), else the grid's end."""
    prev_g, prev_d = a, 0.0
    for gi, di in zip(g, dev, strict=True):
        if di >= _PROFILE_CHI2:
            if not math.isfinite(di) or di == prev_d:
                return float(gi)
            return float(prev_g + (gi - prev_g) * (_PROFILE_CHI2 - prev_d) / (di - prev_d))
        prev_g, prev_d = float(gi), float(max(di, 0.0))
    return end


def seed_estimates(s: SeedGroup, opts: FitOptions) -> SeedEstimates:
    """Each healthy seed's own fit: A (the raw A of a seed whose own fit has not passed its
    inflection while its variant's pooled fit has: its extrapolation is the seed's, and dropping
    the slow seeds would bias the variant's A down), log B, log C_mid and their variances."""
    cols: list[list[float]] = [[] for _ in range(6)]
    used: list[int] = []
    for i in s.healthy:
        f = s.fits[i]
        if f.status not in ("ok", "pre-inflection"):
            continue
        a = f.a if f.ok else f.a_raw
        if not all(math.isfinite(p) for p in (a, f.b, f.c_mid)) or f.b <= 0 or f.c_mid <= 0:
            continue
        var = seed_cov(f, s.vc.curves[i], s.sigma[i], opts)
        for k, v in enumerate((a, math.log(f.b), math.log(f.c_mid))):
            cols[2 * k].append(float(v))
            cols[2 * k + 1].append(float(var[k]))
        used.append(i)
    return SeedEstimates(cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], used)


def a_items(s: SeedGroup, e: SeedEstimates) -> list[tuple[SigmoidFit, Curve, FloatArray, float, float]]:
    """(fit, curve, point SEs, A, linearised variance of A) of each seed in ``e``."""
    return [(s.fits[i], s.vc.curves[i], s.sigma[i], e.a[k], e.a_var[k]) for k, i in enumerate(e.used)]


# The flattest pooled fit whose ceiling and efficiency count as measured. B = 0.3 spreads the rise
# from 10% to 90% of the gain over 81^(1/0.3), about 2e6 x the compute: no sweep sees that bend, so
# a flatter fit is a straight line in log compute whose A and C_mid are not identified. Seen on
# known truth (bench/verdict_sim.py, a fit window that starts at 90% of the gain): pooled fits with
# B 0.05-0.15 put A at 0.9-1.0 for a curve whose ceiling was 0.72, and C_mid 400x too low.
MIN_SHAPE_B = 0.3
# The share of its gain a variant's pooled fit must say it has made for its ceiling to count as
# pinned. Below it a fitted A is an extrapolation whose error the seeds' scatter does not show:
# on known truth (bench/verdict_sim2.py, tuning seeds) curves stopped at 50-63% of their gain came
# out with ceilings biased low together, and their dA intervals missed; with this floor every
# cell held 93-99% and the probabilities of "the ceiling moves" held their calibration.
PIN_GAIN = 0.6


def why_unshaped(vc: VariantCurves, fit: SigmoidFit) -> str:
    """Why a variant's pooled fit gives no efficiency to compare ('' when it does).

    A fit that has not passed its inflection puts C_mid beyond the data: its half-gain compute is
    an extrapolation, and which variants' fits stop short of it is itself noise. On known truth
    (bench/verdict_sim.py, a seed used for the final table before this rule, then set aside) 3 of
    15 decided knobs at 3 seeds and 60% of the gain were false efficiency claims between a
    pre-inflection fit and a past-inflection one (two nulls among them)."""
    if fit.status == "pre-inflection":
        return (
            f"{vc.variant} has not passed its inflection (C_mid={fit.c_mid:.3g} beyond its last compute), "
            "so neither its ceiling nor its efficiency is measured"
        )
    if fit.status != "ok" or not math.isfinite(fit.b):
        return f"{vc.variant}'s fit is {fit.status}"
    if fit.window_start > 0 and fit.c_mid < fit.window_start:
        # A fit window that starts past the inflection leaves only the tail of the rise, where A
        # and B trade off: on known truth (bench/verdict_sim.py --window 0.1, the 99% budget) such
        # fits held their ceilings' intervals 82-88% of the time at 8 seeds.
        return (
            f"{vc.variant}'s fit window starts at {fit.window_start:.3g}, past its inflection "
            f"(C_mid={fit.c_mid:.3g}): the fitted points hold only the tail of its rise, which pins "
            "neither its ceiling nor its efficiency (fit more of the curve: a smaller window)"
        )
    if fit.b < MIN_SHAPE_B:
        return (
            f"{vc.variant}'s fit has no bend (B={fit.b:.3g}: a rise spread over more than six decades of "
            "compute), so neither its ceiling nor its efficiency is measured: the fitted points hold no "
            "rise to fit (a fit window that starts on the plateau?)"
        )
    return ""


def why_unpinned(vc: VariantCurves, fit: SigmoidFit, opts: FitOptions) -> str:
    """Why a variant's pooled fit does not measure its ceiling ('' when it does)."""
    if fit.status == "pre-inflection":
        return (
            f"{vc.variant} has not passed its inflection (C_mid={fit.c_mid:.3g} beyond its last compute), "
            "so its ceiling is not pinned"
        )
    if fit.ok and fit.a >= opts.a_bounds[1] - 1e-9:
        return f"{vc.variant}'s fitted ceiling sits at its upper bound {opts.a_bounds[1]:g}"
    if fit.ok:
        top = max(float(np.nanmax(np.asarray(c, dtype=np.float64))) for c, _ in vc.curves)
        gain = 1.0 / (1.0 + (fit.c_mid / top) ** fit.b)
        if gain < PIN_GAIN:
            return (
                f"{vc.variant} has made {gain:.0%} of its gain by its fit (under {PIN_GAIN:.0%}), so its "
                "ceiling is not pinned"
            )
    return ""

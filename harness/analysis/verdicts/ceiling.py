"""Is a variant's ceiling measured, and what is each seed's ceiling?

The helpers of :func:`scalerl.harness.analysis.verdicts.pipeline.classify`'s steps 1-3 (see its
module docstring): the sweep's shared R0, whether a pooled fit pins its ceiling or a curve is
still rising at the end (:func:`still_rising`, fit-free), each seed's plateau level and what its
fit still climbs past it, the late level that bounds a rising curve's A from below, and the SE of
A that the points' measurement noise implies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import t as student_t

from scalerl.harness.analysis.fit.curve import FitOptions, FloatArray, SigmoidFit, prepare
from scalerl.harness.analysis.fit.fitters import Curve
from scalerl.harness.analysis.groups import VariantCurves

_NAN = math.nan
_NORMAL = NormalDist()


def a_se_from_noise(fit: SigmoidFit, curve: Curve, sigma: FloatArray, opts: FitOptions) -> float:
    """The SE of A that the points' measurement noise implies for one fit: the A entry of the
    linearised weighted-least-squares covariance ``(J^T W J)^-1`` over (A, B, log C_mid) at the
    fitted parameters, on the fit's windowed points (R0 held at its value). NaN if not ok."""
    if not fit.ok or not all(math.isfinite(p) for p in (fit.a, fit.b, fit.c_mid, fit.r0)):
        return math.nan
    prep = prepare(curve[0], curve[1], opts, r0_override=fit.r0, sigma=sigma)
    if prep.sigma is None or prep.x.size < 4:
        return math.nan
    x, sd = prep.x, prep.sigma
    u = (fit.c_mid / x) ** fit.b
    g = 1.0 / (1.0 + u)
    gain = fit.a - fit.r0
    jac = np.column_stack(
        [
            g,  # dR/dA
            gain * u * np.log(x / fit.c_mid) * g**2,  # dR/dB
            -gain * fit.b * u * g**2,  # dR/dlog C_mid
        ]
    )
    info = (jac / sd[:, None] ** 2).T @ jac
    try:
        cov = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        return math.nan
    var_a = float(cov[0, 0])
    return math.sqrt(var_a) if math.isfinite(var_a) and var_a > 0 else math.nan


def typical_a_se(a_ses: Sequence[float]) -> float:
    """The mean of the runs' linearised SEs of A, the largest 10% left out when there are 10 or
    more (one run whose A is barely pinned should not set every knob's margin).

    The mean, not the median: the linearisation misses the sigmoid's curvature, so a typical run
    understates the spread of A; on the demo's shape (30 points, n=128, A=0.6) 300 draws gave a
    measured sd of A of 0.0273, a mean SE of 0.0277 and a median SE of 0.0195.
    """
    finite = np.sort(np.array([x for x in a_ses if math.isfinite(x)], dtype=np.float64))
    if not finite.size:
        return _NAN
    keep = finite[: math.ceil(0.9 * finite.size)] if finite.size >= 10 else finite
    return float(keep.mean())


# How far above a run's highest observed value its fitted A may sit and still count as a measured
# ceiling (the observed maximum sits above the plateau by the point noise; the same floor as the
# extrapolated-ceiling note).
PINNED_A_TOLERANCE = 0.05


def pins_ceiling(fit: SigmoidFit, curve: Curve, opts: FitOptions) -> bool:
    """Whether one run's fit measures its ceiling rather than extrapolating it.

    The seed noise is the spread of *measured* ceilings. A per-seed A at the upper bound, or far
    above anything the run reached, is where a still-rising sigmoid says the run would go: on the
    demo's 300-step curves two such seeds (A = 1.0 and 0.74 against observed maxima of 0.75 and
    0.62) tripled the pooled sd, set a 0.089 margin and hid every knob. Those seeds still enter the
    pooled fits and their bootstrap intervals; they are only kept out of the noise floor.
    """
    if not fit.ok or not math.isfinite(fit.a):
        return False
    values = np.asarray(curve[1], dtype=np.float64)
    values = values[np.isfinite(values)]
    if not values.size:
        return False
    at_bound = fit.a >= opts.a_bounds[1] - 1e-9
    return not at_bound and fit.a - float(values.max()) <= PINNED_A_TOLERANCE


def unpinned_reason(vc: VariantCurves, fit: SigmoidFit, margin: float) -> str:
    """Why a pooled fit does not measure its ceiling ('' when it does): it never passed its
    inflection, or its A lies far above anything its curves reached (the extrapolated-ceiling rule:
    more than max(0.05, 2 x margin) above the highest observed value)."""
    if fit.status == "pre-inflection":
        return f"{vc.variant} has not passed its inflection (C_mid={fit.c_mid:.3g} beyond its last compute)"
    values = np.concatenate([np.asarray(v, dtype=np.float64) for _, v in vc.curves] or [np.zeros(0)])
    values = values[np.isfinite(values)]
    observed = float(values.max()) if values.size else math.nan
    if fit.ok and math.isfinite(observed) and fit.a - observed > max(0.05, 2.0 * margin):
        return f"{vc.variant}'s A={fit.a:.3f} is an extrapolation (highest observed value {observed:.3f})"
    return ""


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


def shared_r0(curves: Sequence[Curve], opts: FitOptions) -> float | None:
    """One R0 for the whole sweep, or None to leave each fit its own.

    A LOO sweep's runs start from one checkpoint, so their compute-0 evaluations measure one
    number; estimating it per variant from three noisy points and holding it fixed turned R0
    noise into efficiency "effects" (with no seed noise at all, 49% of null knobs were shapers;
    with R0 shared, none). Shared only when every run starts at the same compute (a curve
    imported from its 10th evaluation on has its own start), and never when the options fix or
    fit R0 themselves: the mean over runs of each run's *first* value. Only the first: later
    evaluations have already risen (at a budget that reaches the plateau, the second evaluation
    of a fast curve can be 3/4 up its gain), and an R0 biased up bends every fit's A and B.
    """
    if opts.r0 is not None or opts.fit_r0 or not curves:
        return None
    starts, firsts = [], []
    for c, v in curves:
        cc, vv = np.asarray(c, dtype=np.float64), np.asarray(v, dtype=np.float64)
        keep = np.isfinite(cc) & np.isfinite(vv)
        if not keep.any():
            return None
        order = np.argsort(cc[keep], kind="stable")
        starts.append(float(cc[keep][order][0]))
        firsts.append(float(vv[keep][order][0]))
    lo, hi = min(starts), max(starts)
    if hi - lo > 1e-9 * max(1.0, abs(hi)):
        return None
    return float(np.mean(firsts))


def seed_a_var(fit: SigmoidFit, curve: Curve, se: float) -> float:
    """One seed's sampling variance of A for the pooled weights: the linearised SE squared, or,
    for a seed whose A is an extrapolation (at its bound, or above anything it reached), at
    least the square of that extrapolation: a ceiling guessed 0.08 above the data is uncertain
    by about that much, and the weights should say so rather than drop the seed (dropping the
    slow seeds would bias the variant's A down)."""
    values = np.asarray(curve[1], dtype=np.float64)
    values = values[np.isfinite(values)]
    reach = fit.a - float(values.max()) if values.size else math.nan
    var = se * se if math.isfinite(se) else 0.0
    if math.isfinite(reach) and reach > 0:
        var = max(var, reach * reach)
    return var


# The late share of each run's points (by compute) in which a plateau is checked, and the one-sided
# level at which a rise there means the ceiling is not reached.
RISE_SHARE = 0.4
RISE_LEVEL = 0.95
# A rise smaller than this share of the margin over the last 40% of compute is a plateau creeping
# up: what remains of a sigmoid past such a window is about twice that rise, under the margin.
RISE_MATERIAL = 0.5


def group_top(vc: VariantCurves) -> float:
    """The most compute any of the variant's runs reached: the late windows are placed against it,
    so a run still going (a live sweep) that has not reached them is left out, not judged on its
    own, earlier "end"."""
    tops = [float(np.nanmax(np.asarray(c, dtype=np.float64))) for c, _ in vc.curves if np.size(c)]
    return max(tops) if tops else math.nan


def late_rises(vc: VariantCurves, sigma: Sequence[FloatArray]) -> tuple[list[float], list[float]]:
    """Per seed: the mean of its points in the last half of the variant's late compute (the last
    ``RISE_SHARE`` = 40% of the most compute any of its runs reached) less the mean in the first
    half, and that difference's variance from the points' SEs. One number per seed, so a run's
    autocorrelated wander shows up in the seeds' spread rather than being averaged away."""
    top = group_top(vc)
    diffs, noise = [], []
    for (c, v), point_se_ in zip(vc.curves, sigma, strict=True):
        cc, vv = np.asarray(c, dtype=np.float64), np.asarray(v, dtype=np.float64)
        ss = np.broadcast_to(np.asarray(point_se_, dtype=np.float64), vv.shape)
        keep = np.isfinite(cc) & np.isfinite(vv)
        cc, vv, ss = cc[keep], vv[keep], ss[keep]
        if cc.size < 6:
            continue
        lo, mid = top * (1.0 - RISE_SHARE), top * (1.0 - RISE_SHARE / 2.0)
        early, late = (cc >= lo) & (cc < mid), cc >= mid
        if early.sum() < 2 or late.sum() < 2:
            continue
        diffs.append(float(vv[late].mean() - vv[early].mean()))
        noise.append(
            float(np.nansum(ss[early] ** 2)) / float(early.sum()) ** 2
            + float(np.nansum(ss[late] ** 2)) / float(late.sum()) ** 2
        )
    return diffs, noise


def still_rising(
    name: str, diffs: Sequence[float], noise: Sequence[float], pooled_sd: float, df: int, margin: float
) -> str:
    """Why a variant's curves are still rising at the end ('' when they are not shown to be).

    A sigmoid fit can "find" a plateau in a curve that has not reached one (AR(1) wander, a
    slow curve cut at 60% of its gain): on simulated sweeps those fits made slower shapers look
    like ceiling drops. This check uses no fit: the seeds' :func:`late_rises`. Their spread is
    pooled over the sweep (``pooled_sd`` with ``df`` degrees of freedom; three seeds alone would
    need t(2) and give one false alarm in ten groups, and a falsely rising baseline voids the
    whole sweep), the SE at least what the points' own noise implies. Rising = the mean rise is
    positive at one-sided ``RISE_LEVEL`` and at least ``RISE_MATERIAL`` (half) of the margin (a
    plateau creeping up by less cannot move a verdict).
    """
    if not diffs:
        return ""
    d = np.asarray(diffs, dtype=np.float64)
    mean = float(d.mean())
    se_points = math.sqrt(float(np.mean(noise)) / d.size)
    if df > 0 and math.isfinite(pooled_sd):
        se = max(pooled_sd / math.sqrt(d.size), se_points)
        crit = float(student_t.ppf(RISE_LEVEL, df))
    else:
        se, crit = se_points, _NORMAL.inv_cdf(RISE_LEVEL)
    if mean > max(RISE_MATERIAL * margin, crit * se) and se > 0:
        return (
            f"{name} is still rising at the end of its compute (its last points are {mean:+.3f} "
            f"above the ones before, {mean / se:.1f} SE)"
        )
    return ""


def plateau_level(curve: Curve, se: ArrayLike, top: float) -> tuple[float, float]:
    """(mean, its variance from the points' SEs) of one run's points in the last half of its
    variant's late compute (the last ``RISE_SHARE / 2`` = 20% of ``top``, the most compute any run
    of the variant reached; NaN when the run has under 2 points there): its ceiling, once
    :func:`still_rising` has found no rise there. Needs no fit, so it cannot degenerate: on
    simulated sweeps whose budget ends on the plateau, per-seed sigmoid fits with the rise
    windowed away scattered A by 0.06-0.10 across seeds whose true spread was 0.02."""
    cc, vv = np.asarray(curve[0], dtype=np.float64), np.asarray(curve[1], dtype=np.float64)
    ss = np.broadcast_to(np.asarray(se, dtype=np.float64), vv.shape)
    keep = np.isfinite(cc) & np.isfinite(vv)
    cc, vv, ss = cc[keep], vv[keep], ss[keep]
    late = cc >= top * (1.0 - RISE_SHARE / 2.0)
    k = int(late.sum())
    if k < 2:
        return _NAN, _NAN
    return float(vv[late].mean()), float(np.nansum(ss[late] ** 2)) / (k * k)


def remaining_climb(fit: SigmoidFit, curve: Curve, top: float) -> float:
    """What the fitted sigmoid still climbs past one run's plateau window (:func:`plateau_level`):
    the fit's A less the fit's mean over the run's points in the window; 0 where the fit is not
    usable, never negative (a fitted rise ends at A). Near 0 once a budget reaches the plateau;
    a few hundredths on a curve cut at 90% of its gain."""
    if not fit.ok:
        return 0.0
    cc = np.asarray(curve[0], dtype=np.float64)
    cc = cc[np.isfinite(cc)]
    late = cc[cc >= top * (1.0 - RISE_SHARE / 2.0)]
    if late.size == 0:
        return 0.0
    r = float(fit.a - np.mean(fit.predict(late)))
    return max(r, 0.0) if math.isfinite(r) else 0.0

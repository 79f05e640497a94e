"""One curve's health: ``healthy``, ``collapsed``, ``settled``, ``diverged`` or ``short``.

Issue 23 item 4 ("one bad seed is a finding, not a veto"). :func:`judge` reads one run's curve
(compute, values, per-point standard errors) and says how it ends. The rule, in order:

1. ``diverged``: a value is not finite (NaN or inf).
2. ``short``: fewer than two windows of points (a window is the last ``tail_fraction`` = 20% of the
   points, at least ``smooth`` = 5), or no noise scale at all (no SEs and under 3 usable points).
3. **The drop.** K candidate peak windows (every window of ``w`` points that ends before the last
   window starts); the peak is the highest mean. Two levels of the last window are tested against
   it: its mean, and its least-squares line's value at the last point (where a still-falling curve
   has got to). A level is significantly low when it is below the peak by at least ``drop`` (0.02,
   the paper's margin) and by more than ``z`` combined SEs, ``z`` the one-sided normal quantile at
   ``alpha / (2K)`` (0.001 per curve, Bonferroni over the K peaks, since the peak is the largest
   of K noisy means, and over the two levels); the mean's drop must also persist (the last
   half-window alone below the peak at one-sided 5%, today's rule). Neither level low: ``healthy``.
4. ``collapsed`` if the curve is still falling (the slope of that line over the last window is
   below zero by more than 1.645 SEs, one-sided 5%) OR the drop (the larger of the two levels')
   is at least ``LARGE_SHARE`` = half the gain the curve made (peak less its first point; a curve
   that never rose above its start has lost all of it).
5. ``settled`` otherwise: overshoot and settle, a curve that peaked, stepped down and sits flat.

**The noise.** A point's SE is the one given (binomial, from its sample count), replaced by the
curve's residual scatter (:func:`~scalerl.harness.analysis.noise.point.residual_se`) where that is over
1.5x larger (today's rule). Real eval curves also wander: residuals about the trend are serially
correlated (W&B GSM8K, :mod:`~scalerl.harness.analysis.sim.noise_fit`: lag-1 0.51), so a mean of ``w``
points varies more than ``sigma^2 / w``. The residuals are modelled as AR(1) with lag-1 ``rho``:
a window mean has variance ``sum(se^2) / w^2 * F``, ``F = 1 + 2 sum_{k=1}^{w-1} (1 - k/w) rho^k``
(exact for equal SEs), and the line's slope and end value use the full covariance
``se_i se_j rho^|i-j|``. ``rho`` (:func:`lag1_rho`) is measured on the points *before* the last
window (a late drop must not inflate its own yardstick, as in noise_fit's dip rule): the lag-1
autocorrelation ``r`` of the residuals about a local-quadratic trend (15 points, in evaluation
order) is mapped to the ``rho`` whose expected ``r`` it is (computed exactly from the smoother's
hat matrix: the trend absorbs part of a wander, and makes white residuals negatively correlated),
clipped to [0, 0.9], and read as 0 unless ``r`` is 2 white-noise SDs above its white-noise mean.

**Error rates against known truth** (tests/unit/analysis/test_collapse.py, 400 draws per row, the
bench's curves: sigmoids with R0 ~ U(0.2, 0.35), A ~ U(0.6, 0.8), B ~ U(1, 2.5), 31 points to
budgets at 60/90/99% of the gain, binomial at n = 640 plus the bench's AR(1) wander, sd 0.0066,
lag-1 0.71; ``.venv/bin/python tests/unit/analysis/test_collapse.py`` prints the table)::

    truth                                          collapsed  settled   old rule: collapsed
    healthy, bench wander                            0.0%       0.2%      0.2%
    healthy, 3x wander (sd 0.02, lag-1 0.8)          0.5%       0.5%      1.8%
    collapse: falls 0.10 over the last 25%          88.0%       3.2%     78.5%
    overshoot: 0.03 step, flat last 40%              1.2%       7.5%     13.2%
    same at n = 5000, no wander                      2.8%      31.2%     80.0%

Limits, measured: a collapse of 0.10 over the last 25% at n = 640 is found 88% of the time (91%
with rho forced to 0: the threshold at alpha/(2K) is the binding limit, not the AR(1) term). On
~30 points rho is weakly identified: pure AR(1) at lag-1 0.8 reads as nonzero in 78% of 31-point
curves (mean 0.64), at 0.5 in 45%; at 120 points in 99.7% and 94% (means 0.74, 0.50); white noise
reads nonzero in 2-3%. A step inside the points before the last window reads as wander (the
smoother cannot follow it), which widens the SEs: the n = 5000 overshoot is then ``healthy``
rather than ``settled`` (66% of those draws), never ``collapsed``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.curve import FloatArray
from scalerl.harness.analysis.noise.ar1 import ar1_variance_factor
from scalerl.harness.analysis.noise.point import residual_se
from scalerl.harness.analysis.verdicts.rule import MARGIN

HealthKind = Literal["healthy", "collapsed", "settled", "diverged", "short"]

# A curve's residual scatter replaces the given SEs only above 1.5x them: the estimate from ~30
# points has a ~20% relative spread, so a smaller ratio is as likely noise in the estimate.
OVERDISPERSED = 1.5
# rho is clipped here: with ~30 points a larger estimate is mostly the trend's misfit, and the
# variance factor grows without bound as rho -> 1 (F(0.9, 7) = 5.6 already).
RHO_MAX = 0.9
# The trend rho is measured about: a parabola through 15 points. Measured on the simulated curves
# (31 points): a local line (through 11 or 15) misreads a sigmoid's bend as wander (rho ~0.3 on
# white noise before the pretest) and cost a true collapse 15-40 points of power; a parabola through
# 11 points follows the curve but also absorbs most of a wander (pure AR(1) at 0.8 read ~0.4).
TREND_HALF_WIDTH = 7
TREND_DEGREE = 2
_NORMAL = NormalDist()
# One-sided 5%: "still falling" and "the drop persists" are checks on a drop already significant
# at alpha / K, so they need not be strict; at 5% a flat plateau reads as falling 1 time in 20.
DECLINE_Z = _NORMAL.inv_cdf(0.95)
PERSIST_Z = DECLINE_Z
# A drop of half the gain is a collapse even if the curve has stopped falling: no plateau that far
# below the peak is an overshoot.
LARGE_SHARE = 0.5
# rho reads as 0 unless the residuals' lag-1 autocorrelation is 2 of its white-noise SDs above
# what white noise gives (noise_fit's pooled rule, 2/sqrt(points), applied per curve): on ~30
# points one curve's estimate has an SD of ~0.2-0.4, and taking every noisy positive one cost the
# simulated true collapse ~10 points of power while buying nothing where the wander is small.
WHITE_Z = 2.0
_RHO_GRID = np.linspace(0.0, RHO_MAX, 91)


@dataclass(frozen=True)
class CollapseOptions:
    """The knobs of :func:`judge`; the same meaning as VerdictOptions' ``collapse_alpha``,
    ``collapse_drop``, ``tail_fraction`` and ``smooth``."""

    alpha: float = 0.001  # false-alarm rate per curve before Bonferroni over the peak windows
    drop: float = MARGIN  # the smallest drop that counts (the paper's margin)
    tail_fraction: float = 0.2  # the last window's share of the points
    smooth: int = 5  # the last window's minimum width


@dataclass(frozen=True)
class CurveHealth:
    """What :func:`judge` found. ``drop`` = ``peak`` - ``last`` (window means; NaN when
    diverged or short), ``rho`` the residuals' estimated lag-1 autocorrelation."""

    kind: HealthKind
    how: str
    drop: float
    peak: float
    last: float
    rho: float


@lru_cache(maxsize=64)
def _trend_residuals(n: int) -> FloatArray:
    """``I - H`` for the local-quadratic smoother of ``n`` points in index order: each point's
    trend is the least-squares parabola through the ``2 * TREND_HALF_WIDTH + 1`` points around it
    (the window slides inward at the ends)."""
    m = min(2 * TREND_HALF_WIDTH + 1, n)
    hat = np.zeros((n, n))
    for i in range(n):
        lo = min(max(i - TREND_HALF_WIDTH, 0), n - m)
        t = np.arange(lo, lo + m, dtype=np.float64) - i
        # The fitted value at t = 0 is the intercept: row 0 of the design's pseudo-inverse.
        hat[i, lo : lo + m] = np.linalg.pinv(np.vander(t, min(TREND_DEGREE + 1, m), increasing=True))[0]
    out = np.eye(n) - hat
    out.setflags(write=False)
    return out


@lru_cache(maxsize=64)
def _expected_lag1(n: int) -> tuple[FloatArray, float]:
    """(E[r] at each rho of ``_RHO_GRID``, made non-decreasing; the white-noise threshold on r),
    for r the lag-1 autocorrelation of the trend residuals ``e = M y``.

    E[r] is the ratio of expectations ``tr(M'LM S) / tr(M'M S)``, ``S_ij = rho^|i-j|``. The
    threshold is E[r | white] + ``WHITE_Z`` sd(r | white), the sd by the delta method:
    ``Var(y'Ay / y'By) ~ 2 tr(C^2) / tr(B)^2``, ``C`` the symmetric part of ``A - E[r] B``."""
    m = _trend_residuals(n)
    pair = m[:-1].T @ m[1:]  # y' pair y = sum e_i e_{i+1}
    square = m.T @ m  # y' square y = sum e_i^2
    lag = np.abs(np.subtract.outer(np.arange(n), np.arange(n))).ravel()
    num = np.bincount(lag, weights=pair.ravel(), minlength=n)
    den = np.bincount(lag, weights=square.ravel(), minlength=n)
    powers = _RHO_GRID[:, None] ** np.arange(n)[None, :]
    expected = np.maximum.accumulate((powers @ num) / (powers @ den))
    expected.setflags(write=False)
    c = (pair + pair.T) / 2.0 - expected[0] * square
    sd_white = math.sqrt(2.0 * float(np.sum(c * c))) / float(np.trace(square))
    return expected, float(expected[0]) + WHITE_Z * sd_white


def lag1_rho(values: ArrayLike) -> float:
    """The lag-1 autocorrelation of a curve's noise, for points in evaluation order: 0 unless the
    residuals' r is clearly above what white noise gives, else the bias-corrected estimate clipped
    to [0, RHO_MAX]; see the module docstring. 0 for fewer than 4 points or a curve its trend fits
    exactly."""
    y = np.asarray(values, dtype=np.float64).ravel()
    if y.size < 4:
        return 0.0
    e = _trend_residuals(y.size) @ y
    ss = float(e @ e)
    # Residuals at rounding level (a curve the trend fits exactly) carry no correlation to read.
    if not ss > 1e-20 * float(y @ y):
        return 0.0
    r = float(e[:-1] @ e[1:]) / ss
    expected, white = _expected_lag1(y.size)
    if r <= white:
        return 0.0
    return float(np.interp(r, expected, _RHO_GRID))


def _mean_se(sd: FloatArray, rho: float) -> float:
    """SE of the mean of consecutive points with SEs ``sd`` under AR(1) correlation ``rho``."""
    return math.sqrt(float(np.sum(sd**2)) * ar1_variance_factor(rho, sd.size)) / sd.size


def _line_end(y: FloatArray, sd: FloatArray, rho: float) -> tuple[float, float, float, float]:
    """(slope per point, its SE, the line's value at the last point, its SE) of the least-squares
    line of ``y`` against its index, under the AR(1) covariance ``sd_i sd_j rho^|i-j|``."""
    t = np.arange(y.size, dtype=np.float64)
    t -= t.mean()
    slope_w = t / float(t @ t)
    end_w = 1.0 / y.size + t[-1] * slope_w  # mean + slope * (distance of the last point)
    lag = np.abs(np.subtract.outer(np.arange(y.size), np.arange(y.size)))
    cov = np.outer(sd, sd) * rho**lag
    return (
        float(slope_w @ y),
        math.sqrt(float(slope_w @ cov @ slope_w)),
        float(end_w @ y),
        math.sqrt(float(end_w @ cov @ end_w)),
    )


def judge(
    compute: ArrayLike, values: ArrayLike, se: ArrayLike, opts: CollapseOptions = CollapseOptions()
) -> CurveHealth:
    """How one curve ends: see the module docstring for the kinds and the exact rule.

    ``compute``, ``values`` and ``se`` are aligned, any order (sorted here by compute); ``se`` may be
    NaN where unknown (the curve's residual scatter stands in). Pure and cheap: a few small numpy
    operations per curve (the smoother's matrices are cached per point count).
    """
    x = np.asarray(compute, dtype=np.float64).ravel()
    y = np.asarray(values, dtype=np.float64).ravel()
    s = np.broadcast_to(np.asarray(se, dtype=np.float64), y.shape).ravel()
    if x.shape != y.shape:
        raise ValueError(f"compute has {x.size} points but values has {y.size}")
    nan = math.nan
    bad = int((~np.isfinite(y)).sum())
    if bad:
        return CurveHealth("diverged", f"{bad} non-finite value(s) of {y.size}", nan, nan, nan, nan)
    order = np.argsort(x, kind="stable")
    x, y, s = x[order], y[order], s[order]
    size = y.size
    width = max(opts.smooth, math.ceil(opts.tail_fraction * size))
    if size < 2 * width:
        how = f"{size} points: under two windows of {width}, too few to judge"
        return CurveHealth("short", how, nan, nan, nan, nan)

    # rho from the points before the last window: a late drop must not inflate its own yardstick
    # (noise_fit's rule for dips), and a still-falling curve's kink would read as wander.
    rho = lag1_rho(y[:-width])
    resid = residual_se(x, y)
    known = s[np.isfinite(s)]
    if math.isfinite(resid) and (not known.size or resid > OVERDISPERSED * float(np.median(known))):
        s = np.where(np.isfinite(s), np.maximum(s, resid), resid)
    if not np.isfinite(s).all():
        return CurveHealth(
            "short", "no noise scale: no SEs and too few points to estimate one", nan, nan, nan, rho
        )

    # The drop: highest window mean that ends before the last window, against the last window's
    # mean and against its trend line's end (the level a still-falling curve has reached).
    factor = ar1_variance_factor(rho, width)
    kernel = np.ones(width) / width
    means = np.convolve(y[:-width], kernel, mode="valid")
    variances = np.convolve(s[:-width] ** 2, kernel / width, mode="valid") * factor
    k = means.size
    j = int(np.argmax(means))
    peak, peak_se = float(means[j]), math.sqrt(float(variances[j]))
    last = float(y[-width:].mean())
    drop = peak - last
    z = _ratio(drop, math.hypot(peak_se, _mean_se(s[-width:], rho)))
    slope, slope_se, end, end_se = _line_end(y[-width:], s[-width:], rho)
    slope_z = _ratio(slope, slope_se)
    end_z = _ratio(peak - end, math.hypot(peak_se, end_se))
    # Two levels tested against K peaks: Bonferroni over 2K.
    z_k = _NORMAL.inv_cdf(1.0 - opts.alpha / (2 * k))
    half = max(1, width // 2)
    half_z = _ratio(peak - float(y[-half:].mean()), math.hypot(peak_se, _mean_se(s[-half:], rho)))
    at = float(np.median(x[j : j + width]))
    head = (
        f"peak {peak:.3f} at compute {at:.3g} (points {j + 1}-{j + width}), last {width} of {size} "
        f"points {last:.3f}, drop {drop:.3f} = {z:.1f} SE, to the end of their trend {peak - end:.3f} "
        f"= {end_z:.1f} SE (threshold {z_k:.2f}: p < {opts.alpha:g} over {k} peak windows x 2 levels; "
        f"point SE ~{float(np.median(s)):.2g}, AR(1) rho {rho:.2f})"
    )
    by_mean = z > z_k and drop >= opts.drop and half_z > PERSIST_Z
    by_end = end_z > z_k and peak - end >= opts.drop
    if not (by_mean or by_end):
        return CurveHealth("healthy", head, drop, peak, last, rho)

    gain = peak - float(y[0])
    share = max(drop, peak - end) / gain if gain > 0 else math.inf
    trend = f"slope over the last {width} points {slope:+.4f} per point = {slope_z:+.1f} SE"
    lost = f"lost {share:.0%} of its gain" if math.isfinite(share) else "never rose above its start"
    if -slope_z > DECLINE_Z:
        return CurveHealth("collapsed", f"{head}; still falling: {trend}; {lost}", drop, peak, last, rho)
    if share >= LARGE_SHARE:
        return CurveHealth(
            "collapsed", f"{head}; {lost} (>= {LARGE_SHARE:.0%}); {trend}", drop, peak, last, rho
        )
    return CurveHealth("settled", f"{head}; flat since: {trend}; {lost}", drop, peak, last, rho)


def _ratio(num: float, den: float) -> float:
    """num / den, with a zero SE giving +-inf (or 0 for a zero numerator)."""
    if den > 0:
        return num / den
    return math.copysign(math.inf, num) if num else 0.0

"""The noise model: the standard error of every point of a curve (DESIGN.md §10).

Two sources, per point:

- **binomial**, when the point says how many Bernoulli samples ``n`` stand behind its pass rate
  ``p`` (``PointWriter.add(..., n=)``; the curves frame's ``n`` column): ``sqrt(p~(1-p~)/n)``
  with ``p~ = (p*n + 0.5) / (n + 1)``. The shrinkage toward 1/2 (half a success added, one trial)
  only matters at the edges: a pass rate of exactly 0 or 1 would otherwise claim zero noise and
  infinite weight; with it, 0/128 has SE 0.0055 (about what one success would mean).
- **residual**, when ``n`` is unknown (imported curves, metrics that are not rates): one value
  per curve, estimated from the curve's own scatter around a local smoother. The smoother is the
  straight line through each point's two neighbours (Gasser, Sroka & Jennen-Steinmetz 1986,
  "Residual variance and residual pattern in nonlinear regression", Biometrika 73:625): the
  pseudo-residual ``e_i = y_i - (w y_{i-1} + (1-w) y_{i+1})``, ``w = (x_{i+1}-x_i)/(x_{i+1}-x_{i-1})``,
  has variance ``sigma^2 (1 + w^2 + (1-w)^2)`` wherever the curve is locally linear, whatever its
  level or slope. The scale is a trimmed root mean square: the largest 10% of the standardised
  pseudo-residuals are dropped (a collapse step or an outlier touches only two or three of them)
  and the rest corrected for the trimming (``E[Z^2 | |Z| < 1.645] = 0.6230`` for a normal). It
  is more efficient than the median absolute deviation: on the demo's 30-point curve (n=128)
  2,000 draws gave a mean of 1.006x the true SE and a relative spread of 20% (the MAD: 26%).

Both are *measurement* noise: how far a point may sit from the curve the policy really has. Seed
noise (how far two runs of the same config land apart) is measured separately, over seeds.

**Which estimator for what.** :func:`point_se` (binomial, else :func:`residual_se`) is the one
per-point standard error of every fit's weights and every verdict's intervals. The forecasts use
:func:`noise_scale` instead (the robust sd of a curve's first differences): it is the noise unit
of every forecast interval (:mod:`scalerl.harness.analysis.forecast.intervals`), of the sweep
prior's MAP fit and of the search pruner's margins, and the shipped interval calibrations
(:mod:`scalerl.harness.analysis.forecast.calibrations`) were fitted with it, so it stays until
they are fitted again with :func:`point_se` (bench/forecast.py, bench/forecast_sweep.py);
:func:`noise_scale` ignores the compute spacing and the sample counts. The simulator's noise
model (white plus AR(1) about a sigmoid, late dips) is fitted by
:mod:`scalerl.harness.analysis.sim.noise_fit`; AR(1) window variances are :mod:`.ar1`'s.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.curve import FloatArray

NoiseSource = Literal["binomial", "residual", "mixed", "unknown"]
TRIM = 0.9  # share of the standardised pseudo-residuals kept (the smallest in magnitude)
_Q = NormalDist().inv_cdf(0.5 + TRIM / 2.0)  # 1.645: |Z| below it with probability TRIM
# E[Z^2 | |Z| < q] for a standard normal: the variance the trimmed mean square estimates.
TRIMMED_VARIANCE = 1.0 - 2.0 * _Q * math.exp(-0.5 * _Q * _Q) / math.sqrt(2.0 * math.pi) / TRIM


def binomial_se(p: ArrayLike, n: ArrayLike) -> FloatArray:
    """Per-point binomial standard error of pass rates ``p`` measured on ``n`` samples each.

    ``sqrt(p~(1-p~)/n)`` with ``p~ = (p n + 0.5)/(n + 1)`` (see the module docstring); NaN where
    ``n`` is missing (NaN), below 1, or ``p`` is not finite. ``p`` outside [0, 1] is clipped.
    """
    pa = np.asarray(p, dtype=np.float64)
    na = np.asarray(n, dtype=np.float64)
    pa, na = np.broadcast_arrays(pa, na)
    ok = np.isfinite(pa) & np.isfinite(na) & (na >= 1)
    out = np.full(pa.shape, np.nan)
    nn = na[ok]
    pt = (np.clip(pa[ok], 0.0, 1.0) * nn + 0.5) / (nn + 1.0)
    out[ok] = np.sqrt(pt * (1.0 - pt) / nn)
    return out


def residual_se(compute: ArrayLike, values: ArrayLike) -> float:
    """One standard error for a curve's points, from its scatter around a local smoother.

    Points are ordered by compute and non-finite ones dropped; a triple whose outer neighbours
    share one compute value (``w`` would be 0/0) is skipped. NaN with fewer than 3 usable points.
    See the module docstring for the estimator and its reference.
    """
    x = np.asarray(compute, dtype=np.float64).ravel()
    y = np.asarray(values, dtype=np.float64).ravel()
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if x.size < 3:
        return math.nan
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    span = x[2:] - x[:-2]
    good = span > 0
    if not good.any():
        return math.nan
    w = (x[2:][good] - x[1:-1][good]) / span[good]
    e = y[1:-1][good] - (w * y[:-2][good] + (1.0 - w) * y[2:][good])
    scaled = np.sort(np.abs(e) / np.sqrt(1.0 + w**2 + (1.0 - w) ** 2))
    kept = scaled[: max(1, math.floor(TRIM * scaled.size + 1e-9))] if scaled.size >= 10 else scaled
    # Fewer than 10 pseudo-residuals: nothing is trimmed (and no correction applies).
    factor = TRIMMED_VARIANCE if kept.size < scaled.size else 1.0
    return float(math.sqrt(float(np.mean(kept**2)) / factor))


def point_se(
    compute: ArrayLike, values: ArrayLike, n: ArrayLike | None = None
) -> tuple[FloatArray, NoiseSource]:
    """(standard error per point, aligned with ``values``; where it came from).

    Points with a known ``n`` get their binomial SE; the others get the curve's residual SE
    (:func:`residual_se`, estimated from all its points). The source is ``binomial`` (every
    point had ``n``), ``residual`` (none had), ``mixed``, or ``unknown`` (no ``n`` and too few
    points to estimate: the entries are NaN, and a fit treats the curve as unweighted).
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    counts = np.full(v.shape, np.nan) if n is None else np.asarray(n, dtype=np.float64).ravel()
    se = binomial_se(v, counts)
    missing = ~np.isfinite(se) & np.isfinite(v)
    if not missing.any():
        return se, "binomial"
    resid = residual_se(compute, v)
    se = np.where(missing, resid, se)
    if not math.isfinite(resid):
        return se, "unknown" if missing.all() else "binomial"
    return se, "residual" if missing.sum() == np.isfinite(v).sum() else "mixed"


def window_se(se: FloatArray) -> float:
    """Standard error of the mean of independent points with standard errors ``se``."""
    return float(math.sqrt(float(np.sum(se**2)))) / se.size if se.size else math.nan


# A perfectly smooth curve still gets a non-degenerate forecast interval.
_SCALE_FLOOR = 1e-3


def noise_scale(values: FloatArray) -> float:
    """Robust per-point noise sd of a curve for its forecasts (see the module docstring): the
    median absolute deviation of its first differences x 1.4826 / sqrt(2), at least 1e-3."""
    if values.size < 3:
        return _SCALE_FLOOR
    d = np.diff(values)
    mad = float(np.median(np.abs(d - np.median(d))))
    return max(1.4826 * mad / math.sqrt(2.0), _SCALE_FLOOR)

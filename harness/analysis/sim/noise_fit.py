"""Fit the simulator's noise (:class:`scalerl.harness.analysis.sim.simulate.NoiseModel`) to real curves.

A real curve departs from a smooth sigmoid in three ways this module measures:

- **residual noise around a smooth reference**, the product's own sigmoid fit with R0 free
  (``fit_sigmoid(..., fit_r0=True)`` on the points at compute > 0; the raw parameters of a
  pre-inflection fit; a straight line in log compute when no sigmoid fits). Real curves are not
  sigmoids and the verdicts meet them as they are, so the misfit counts as noise. The residuals
  are modelled as white noise plus a stationary AR(1) process (the policy wandering around its
  curve): autocorrelation ``rho_k = w phi^k`` at lag k, where ``w`` is the AR part's share of the
  residual variance. ``w`` and ``phi`` are fitted by least squares to the residual
  autocorrelations at lags 1..``ACF_LAGS``, pooled over a source's curves (sums of lagged products
  over sums of squares, so long curves weigh more); a pooled lag-1 autocorrelation below
  2 / sqrt(residuals), about twice its standard error under white noise, reads as white (w = 0).
  No assumption about the sampling noise is needed: on a fixed evaluation set decoded
  near-greedily the white part is *below* the binomial SE of its size (``dispersion`` < 1), which
  is what the W&B, TensorBoard and SPEED-RL validation curves show.
- **a late dip**: the mean of the last window (``DIP_WINDOW`` = 10% of the points, at least 5) below
  the highest earlier window mean by more than ``DIP_MIN`` (0.02, the paper's margin) and by
  more than ``DIP_Z`` (3) standard errors of the difference of two window means, under the
  residual scale and lag-1 correlation of the points up to the end of that peak window (so a
  dip does not inflate its own yardstick). A dipped curve's residuals are those points' only,
  so the dip is not counted as noise too.
- **seed spread** (replicate groups, runs of one config): the between-run variance of the late
  levels (each run's mean over its last ``LATE_SHARE`` = 20% of points) less the variance that the
  white and AR(1) noise give such a mean.

Residuals around a *fitted* curve lose their slowest wander to the fit, so on short curves
``phi`` and ``sigma_extra`` read low and the white/AR split is weakly identified (the share ``w``
and ``phi`` trade off when only a lag or two is clearly positive). Measured on sigmoid curves
with binomial white noise (n = 1000) plus AR(1) noise of sd 0.02, ten curves each: at 600 points
a curve an ``ar1`` of 0.60 reads 0.65 and 0.85 reads 0.85 (sd 0.018 and 0.019); at 120 points
they read 0.39 and 0.64; an ``ar1`` of 0.3 reads 0.14 below 300 points. Treat a short source's
``ar1`` as a lower bound.

``phi`` is per evaluation of the source. :meth:`NoiseEstimate.model` carries it to a design with
another evaluation schedule in one of two ways, and the sources do not say which is right: the
correlation length fixed as a share of the run (:meth:`NoiseEstimate.ar1_at`,
``phi ** (points_source / points_design)``), or fixed on the source's own axis, in steps say
(:meth:`NoiseEstimate.ar1_every`, ``phi ** (spacing_design / spacing_source)``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.curve import FloatArray, sigmoid_curve
from scalerl.harness.analysis.fit.fitters import fit_sigmoid
from scalerl.harness.analysis.noise.ar1 import ar1_mean_variance
from scalerl.harness.analysis.sim.simulate import NoiseModel
from scalerl.harness.analysis.verdicts.rule import MARGIN

ACF_LAGS = 8
DIP_WINDOW = 0.1
DIP_MIN_POINTS = 5
DIP_MIN = MARGIN
DIP_Z = 3.0
LATE_SHARE = 0.2
_PARAMS = 4  # r0, a, b, c_mid: the reference's degrees of freedom
_PHI_GRID = np.linspace(0.0, 0.98, 99)


@dataclass(frozen=True)
class CurveNoise:
    """One curve's measurements. ``ss`` / ``lagged`` (lags 1..ACF_LAGS) / ``dof`` are the sums the
    source pools; ``dip`` is the late dip's depth (0: none) and ``dip_at`` where its peak window
    ends as a share of the points; ``late`` the mean of its last LATE_SHARE of points."""

    points: int
    sigma_resid: float
    sigma_binomial: float  # root mean p(1-p)/n over the reference (0 when n is unknown)
    spacing: float
    lag1: float
    dip: float
    dip_at: float
    late: float
    ss: float = 0.0
    lagged: tuple[float, ...] = ()
    dof: int = 0


@dataclass(frozen=True)
class NoiseEstimate:
    """A source's noise, pooled over its curves (NaN where it could not be measured)."""

    curves: int
    points_median: float
    spacing_median: float  # compute (the x axis given, e.g. steps) between evaluations
    sigma_resid: float  # residual sd around the reference
    sigma_white: float  # its white part
    sigma_extra: float  # its AR(1) part
    ar1: float  # lag-1 coefficient of the AR(1) part, per evaluation of the source
    ar_share: float  # w: the AR part's share of the residual variance
    sigma_binomial: float  # binomial SE at the source's n, for comparison (NaN: n unknown)
    acf: tuple[float, ...]  # pooled residual autocorrelation at lags 1..ACF_LAGS
    seed_sd_a: float  # between-run sd of the late level, noise removed (NaN: no replicates)
    seed_sd_a_raw: float  # the plain sd of the late levels across replicates
    replicate_groups: int
    dip_rate: float  # share of curves with a late dip
    dip_depth: float  # mean depth of those dips (NaN: none)

    @property
    def dispersion(self) -> float:
        """White noise / binomial SE: below 1 when the evaluations vary less than fresh samples."""
        return self.sigma_white / self.sigma_binomial if self.sigma_binomial > 0 else math.nan

    def ar1_at(self, points: int) -> float:
        """``ar1`` for a run evaluated ``points`` times (the same correlation length as a share of
        the run)."""
        if not (math.isfinite(self.ar1) and self.ar1 > 0):
            return 0.0
        return float(min(0.99, self.ar1 ** (self.points_median / points)))

    def ar1_every(self, spacing: float) -> float:
        """``ar1`` for evaluations ``spacing`` apart on the source's own axis (the same
        correlation length in steps, say, rather than as a share of the run)."""
        if not (math.isfinite(self.ar1) and self.ar1 > 0 and self.spacing_median > 0):
            return 0.0
        return float(min(0.99, self.ar1 ** (spacing / self.spacing_median)))

    def model(
        self, *, n: int | None, points: int, spacing: float | None = None, **overrides: float
    ) -> NoiseModel:
        """A :class:`NoiseModel` for a design with ``points`` evaluations a run and ``n`` samples a
        point (its binomial noise replaces the source's white noise): this source's AR(1) part
        (:meth:`ar1_at`, or :meth:`ar1_every` when ``spacing`` is given), seed spread and dips,
        NaN read as 0; ``overrides`` set fields."""
        fields: dict[str, float] = {
            "sigma_extra": _or0(self.sigma_extra),
            "ar1": self.ar1_at(points) if spacing is None else self.ar1_every(spacing),
            "seed_sd_a": _or0(self.seed_sd_a),
            "dip_prob": _or0(self.dip_rate),
            "dip_depth": _or0(self.dip_depth) or 0.06,
        } | dict(overrides)
        return NoiseModel(n=n, **fields)  # type: ignore[arg-type]


def _or0(x: float) -> float:
    return x if math.isfinite(x) else 0.0


def _reference(x: FloatArray, y: FloatArray) -> FloatArray:
    """The smooth curve the residuals are taken around (module docstring)."""
    fit = fit_sigmoid(x, y, fit_r0=True)
    a = fit.a if fit.ok else fit.a_raw
    if all(math.isfinite(p) for p in (fit.r0, a, fit.b, fit.c_mid)):
        return sigmoid_curve(x, fit.r0, a, fit.b, fit.c_mid)
    lx = np.log(x)
    slope, icpt = np.polyfit(lx, y, 1)
    return np.asarray(icpt + slope * lx, dtype=np.float64)


def _lagged(r: FloatArray) -> tuple[float, ...]:
    return tuple(float(r[k:] @ r[:-k]) if r.size > k else 0.0 for k in range(1, ACF_LAGS + 1))


def _clean(compute: ArrayLike, values: ArrayLike, n: ArrayLike | float | None) -> tuple[FloatArray, ...]:
    c = np.asarray(compute, dtype=np.float64).ravel()
    v = np.asarray(values, dtype=np.float64).ravel()
    counts = np.broadcast_to(np.asarray(np.nan if n is None else n, dtype=np.float64), v.shape)
    keep = np.isfinite(c) & np.isfinite(v) & (c > 0)
    order = np.argsort(c[keep], kind="stable")
    return c[keep][order], v[keep][order], counts[keep][order]


def _measure(x: FloatArray, y: FloatArray, nn: FloatArray) -> CurveNoise:
    """The measurements of one clean curve (sorted, finite, compute > 0)."""
    m = int(y.size)
    nan = math.nan
    if m < 2 * DIP_MIN_POINTS:
        return CurveNoise(m, nan, nan, nan, nan, 0.0, nan, nan)
    late = float(y[-max(3, round(LATE_SHARE * m)) :].mean())
    # The candidate dip: the highest window mean before the last window, against the last one.
    # The noise it is judged against comes from the points up to that peak window's end, so a
    # real dip does not inflate the yardstick that measures it.
    w = max(DIP_MIN_POINTS, math.ceil(DIP_WINDOW * m))
    means = np.convolve(y[:-w], np.ones(w) / w, mode="valid")
    j = int(np.argmax(means))
    drop = float(means[j] - y[-w:].mean())
    upto = j + w if j + w >= 2 * DIP_MIN_POINTS else m
    ref = _reference(x[:upto], y[:upto])
    r = y[:upto] - ref
    ss = float(r @ r)
    lag1 = float(r[1:] @ r[:-1]) / ss if ss > 0 else 0.0
    se = math.sqrt(2.0 * ar1_mean_variance(ss / max(1, upto - _PARAMS), max(lag1, 0.0), w))
    dip, dip_at = 0.0, nan
    if drop > DIP_MIN and drop > DIP_Z * se:
        dip, dip_at = drop, (j + w) / m
        x, y, nn = x[:upto], y[:upto], nn[:upto]
    else:  # no dip: the residuals of every point
        ref = _reference(x, y)
        r = y - ref
        ss = float(r @ r)
    dof = max(1, int(y.size) - _PARAMS)
    p = np.clip(ref, 0.0, 1.0)
    var_bin = float(np.mean(p * (1.0 - p) / nn)) if np.isfinite(nn).all() and (nn >= 1).all() else 0.0
    lagged = _lagged(r)
    lag1 = lagged[0] / ss if ss > 0 else 0.0
    spacing = float(np.median(np.diff(x)))
    return CurveNoise(
        m, math.sqrt(ss / dof), math.sqrt(var_bin), spacing, lag1, dip, dip_at, late, ss, lagged, dof
    )


def curve_noise(compute: ArrayLike, values: ArrayLike, n: ArrayLike | float | None = None) -> CurveNoise:
    """One curve's residual scale, lag-1 autocorrelation, binomial SE (``n``: a number, an array
    aligned with ``values``, or None when unknown), late level and late dip."""
    return _measure(*_clean(compute, values, n))


def _fit_acf(rho: FloatArray, points: int) -> tuple[float, float]:
    """(w, phi) minimising sum_k (rho_k - w phi^k)^2 with 0 <= w <= 1; (0, NaN), white noise,
    unless the lag-1 autocorrelation is significant: above 2 / sqrt(points), about twice its
    standard error under white noise (``points`` pooled residuals)."""
    if not np.isfinite(rho).all() or rho[0] <= 2.0 / math.sqrt(max(points, 1)):
        return 0.0, math.nan
    k = np.arange(1, rho.size + 1)
    g = _PHI_GRID[1:, None] ** k[None, :]
    w = np.clip((g @ rho) / np.einsum("ij,ij->i", g, g), 0.0, 1.0)
    sse = ((rho[None, :] - w[:, None] * g) ** 2).sum(axis=1)
    i = int(np.argmin(sse))
    return float(w[i]), float(_PHI_GRID[1 + i])


def _pool(per: Sequence[CurveNoise]) -> tuple[float, float, float, FloatArray]:
    """(residual variance, w, phi, pooled autocorrelations) over the curves."""
    good = [p for p in per if p.dof > 0 and p.ss > 0]
    ss = sum(p.ss for p in good)
    dof = sum(p.dof for p in good)
    if not good or ss <= 0:
        return math.nan, math.nan, math.nan, np.full(ACF_LAGS, np.nan)
    rho = np.array([sum(p.lagged[k] for p in good) / ss for k in range(ACF_LAGS)])
    w, phi = _fit_acf(rho, dof + _PARAMS * len(good))
    return ss / dof, w, phi, rho


def estimate_noise(
    curves: Sequence[tuple[ArrayLike, ArrayLike]],
    n: Sequence[ArrayLike | float | None] | float | None = None,
    *,
    replicates: Sequence[Sequence[int]] = (),
) -> NoiseEstimate:
    """A source's noise (module docstring). ``n``: the sample count behind the values, one entry
    per curve or one for all (None: unknown); ``replicates``: groups of indices into ``curves``
    that are runs of one configuration."""
    counts: list[ArrayLike | float | None]
    counts = list(n) if isinstance(n, Sequence) else [n] * len(curves)
    per = [_measure(*_clean(c, v, k)) for (c, v), k in zip(curves, counts, strict=True)]
    var, w, phi, rho = _pool(per)
    nan = math.nan
    if not math.isfinite(phi):
        w = 0.0
    good = [p for p in per if p.dof > 0]
    with_n = [p for p in good if p.sigma_binomial > 0]
    var_bin = sum(p.sigma_binomial**2 * p.dof for p in with_n) / sum(p.dof for p in with_n) if with_n else nan
    extra2 = var * w if math.isfinite(var) else nan
    white2 = var * (1.0 - w) if math.isfinite(var) else nan
    phi_w = phi if math.isfinite(phi) else 0.0
    between: list[float] = []
    raw: list[float] = []
    for group in replicates:
        runs = [per[i] for i in group if math.isfinite(per[i].late)]
        if len(runs) < 2 or not math.isfinite(var):
            continue
        levels = np.array([p.late for p in runs])
        within = [
            white2 / k + ar1_mean_variance(extra2, phi_w, k)
            for k in (max(3, round(LATE_SHARE * p.points)) for p in runs)
        ]
        spread = float(np.var(levels, ddof=1))
        raw.append(spread)
        between.append(spread - float(np.mean(within)))
    dips = [p.dip for p in good if p.dip > 0]
    return NoiseEstimate(
        curves=len(good),
        points_median=float(np.median([p.points for p in good])) if good else nan,
        spacing_median=float(np.median([p.spacing for p in good])) if good else nan,
        sigma_resid=math.sqrt(var) if math.isfinite(var) else nan,
        sigma_white=math.sqrt(white2) if math.isfinite(white2) else nan,
        sigma_extra=math.sqrt(extra2) if math.isfinite(extra2) else nan,
        ar1=phi,
        ar_share=w,
        sigma_binomial=math.sqrt(var_bin) if math.isfinite(var_bin) else nan,
        acf=tuple(float(r) for r in rho),
        seed_sd_a=math.sqrt(max(0.0, float(np.mean(between)))) if between else nan,
        seed_sd_a_raw=math.sqrt(float(np.mean(raw))) if raw else nan,
        replicate_groups=len(between),
        dip_rate=len(dips) / len(good) if good else nan,
        dip_depth=float(np.mean(dips)) if dips else nan,
    )

"""Uncertainty: bootstrap CIs over seeds and points, pooled fits.

A *group* is what one fit describes: a single run (one curve) or a variant pooled over its seeds
(several curves whose points are fitted together). A bootstrap replicate of a group resamples its
seeds with replacement (when it has more than one), pools them, then resamples the pooled points
with replacement. Every replicate of every group is fitted in one batched call, so a report's
whole bootstrap costs one pass of the fast fitter. R0 stays at the point estimate's value in
every replicate so that the intervals describe A, B and C_mid rather than the start noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.curve import FitOptions, FloatArray, SigmoidFit
from scalerl.harness.analysis.fit.fitters import Curve, Fitter, fit_sigmoid_many
from scalerl.harness.errors import ConfigError

DEFAULT_BOOT = 200


@dataclass(frozen=True)
class BootstrapResult:
    """A group's fit with its CIs filled in, and the replicates behind them.

    ``samples`` has one row per replicate: (r0, a, b, c_mid); a replicate whose fit was not
    ``ok`` has NaN in the columns it could not pin (all of them, or only A if pre-inflection).
    """

    fit: SigmoidFit
    samples: FloatArray

    @property
    def ok_fraction(self) -> float:
        return float(np.mean(np.isfinite(self.samples[:, 1]))) if self.samples.size else 0.0


def pool(curves: Sequence[Curve]) -> tuple[FloatArray, FloatArray]:
    """Concatenate seed curves into one point cloud (duplicate compute values are fine)."""
    if not curves:
        return np.zeros(0), np.zeros(0)
    cs = [np.asarray(c, dtype=np.float64).ravel() for c, _ in curves]
    vs = [np.asarray(v, dtype=np.float64).ravel() for _, v in curves]
    return np.concatenate(cs), np.concatenate(vs)


def _percentile_ci(col: FloatArray, level: float) -> tuple[float, float]:
    finite = col[np.isfinite(col)]
    if finite.size < 2:
        return math.nan, math.nan
    q = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(finite, [q, 100.0 - q])
    return float(lo), float(hi)


def _pool_sigma(group: Sequence[Curve], sigma: Sequence[ArrayLike | None] | None) -> FloatArray | None:
    """The group's per-point standard errors concatenated like :func:`pool`; None when no curve
    has any. A curve without sigma gets NaN entries, which the fit replaces by the median."""
    if sigma is None or all(s is None for s in sigma):
        return None
    parts = []
    for (_, v), s in zip(group, sigma, strict=True):
        n = np.asarray(v).size
        parts.append(np.full(n, np.nan) if s is None else np.asarray(s, dtype=np.float64).ravel())
    return np.concatenate(parts) if parts else np.zeros(0)


def _replicate(
    group: Sequence[Curve], rng: np.random.Generator, sigma: Sequence[ArrayLike | None] | None = None
) -> tuple[FloatArray, FloatArray, FloatArray | None]:
    sub_sigma: Sequence[ArrayLike | None] | None = sigma
    if len(group) > 1:
        picks = rng.integers(0, len(group), len(group))
        sub = [group[i] for i in picks]
        sub_sigma = None if sigma is None else [sigma[i] for i in picks]
    else:
        sub = list(group)
    c, v = pool(sub)
    s = _pool_sigma(sub, sub_sigma)
    idx = rng.integers(0, c.size, c.size) if c.size else np.zeros(0, dtype=int)
    return c[idx], v[idx], None if s is None else s[idx]


def bootstrap_fits(
    groups: Sequence[Sequence[Curve]],
    *,
    options: FitOptions | None = None,
    n_boot: int = DEFAULT_BOOT,
    seed: int = 0,
    level: float = 0.95,
    fixed_a: Sequence[float] | None = None,
    method: str | Fitter = "fast",
    sigma: Sequence[Sequence[ArrayLike | None]] | None = None,
) -> list[BootstrapResult]:
    """Fit each group (pooled over its curves) and attach bootstrap CIs for A, B and C_mid.

    Replicates are drawn with ``numpy.random.default_rng(seed)``, so results are reproducible.
    ``sigma`` (one entry per group holding one array or None per curve of that group: the
    standard error of each point, aligned with that curve's values) makes the point fit and
    every replicate weighted least squares with weights 1/sigma^2, sigma floored at 1e-3 (see
    :func:`scalerl.harness.analysis.fit.fitters.fit_sigmoid_many`); points keep their sigma when resampled.
    None (the default) fits unweighted. A fit that is not ``ok`` keeps NaN CIs for what it
    cannot pin.
    """
    opts = options or FitOptions()
    if sigma is not None and (
        len(sigma) != len(groups) or any(len(s) != len(g) for s, g in zip(sigma, groups, strict=False))
    ):
        raise ConfigError(
            "sigma must have one entry per group and one array (or None) per curve of the group",
            field="sigma",
            value=[len(s) for s in sigma],
            fix=f"match the groups' sizes {[len(g) for g in groups]}",
        )
    pooled = [pool(g) for g in groups]
    pooled_sigma = None if sigma is None else [_pool_sigma(g, s) for g, s in zip(groups, sigma, strict=True)]
    points = fit_sigmoid_many(pooled, options=opts, method=method, fixed_a=fixed_a, sigma=pooled_sigma)
    rng = np.random.default_rng(seed)
    reps: list[tuple[FloatArray, FloatArray]] = []
    rep_sigma: list[FloatArray | None] = []
    rep_r0: list[float] = []
    rep_a: list[float] = []
    for gi, g in enumerate(groups):
        for _ in range(n_boot):
            c, v, s = _replicate(g, rng, None if sigma is None else sigma[gi])
            reps.append((c, v))
            rep_sigma.append(s)
            rep_r0.append(points[gi].r0)
            if fixed_a is not None:
                rep_a.append(fixed_a[gi])
    rep_fits = fit_sigmoid_many(
        reps,
        options=opts,
        method=method,
        r0=rep_r0,
        fixed_a=rep_a if fixed_a is not None else None,
        sigma=None if sigma is None else rep_sigma,
    )
    out: list[BootstrapResult] = []
    for gi, fit in enumerate(points):
        chunk = rep_fits[gi * n_boot : (gi + 1) * n_boot]
        samples = np.array(
            [
                [f.r0, f.a, f.b, f.c_mid] if f.status in ("ok", "pre-inflection") else [np.nan] * 4
                for f in chunk
            ],
            dtype=np.float64,
        ).reshape(-1, 4)
        if fit.ok:
            a_lo, a_hi = _percentile_ci(samples[:, 1], level)
            if fixed_a is not None:
                a_lo = a_hi = fit.a
            b_lo, b_hi = _percentile_ci(samples[:, 2], level)
            c_lo, c_hi = _percentile_ci(samples[:, 3], level)
            fit = replace(fit, a_lo=a_lo, a_hi=a_hi, b_lo=b_lo, b_hi=b_hi, c_mid_lo=c_lo, c_mid_hi=c_hi)
        out.append(BootstrapResult(fit=fit, samples=samples))
    return out

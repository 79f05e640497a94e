"""The power law ``R(C) = A - D / C^B`` that the sigmoid is compared against.

For a fixed B the model is linear in (A, D), so the fit is a closed-form least squares for every
B on a log-spaced grid (vectorised), followed by a bounded scalar refinement of B around the best
cell. A is deliberately left unbounded: the paper's point is that power laws overshoot ceilings,
and clipping A would hide exactly that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.curve import FitOptions, FitStatus, FloatArray, prepare

B_GRID = np.geomspace(1e-3, 5.0, 240)


@dataclass(frozen=True)
class PowerLawFit:
    a: float
    d: float
    b: float
    rmse: float
    n_points: int
    status: FitStatus
    reason: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def predict(self, c: ArrayLike) -> FloatArray:
        c_arr = np.asarray(c, dtype=np.float64)
        if not self.ok:
            return np.full(c_arr.shape, np.nan)
        with np.errstate(divide="ignore"):
            return np.asarray(self.a - self.d / c_arr**self.b, dtype=np.float64)


def solve_grid(xn: FloatArray, y: FloatArray, b: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Closed-form (A, D') and squared error for every B in ``b``; ``xn`` is compute / scale."""
    g = -(xn[None, :] ** -b[:, None])  # basis for D'
    n = xn.size
    sg, sy = g.sum(1), y.sum()
    sgg, sgy = (g * g).sum(1), (g * y[None, :]).sum(1)
    den = n * sgg - sg * sg
    safe = np.where(np.abs(den) > 1e-300, den, 1.0)
    d = (n * sgy - sg * sy) / safe
    a = (sy - d * sg) / n
    resid = y[None, :] - (a[:, None] + d[:, None] * g)
    return a, d, (resid**2).sum(1)


def fit_power_law(compute: ArrayLike, values: ArrayLike, options: FitOptions | None = None) -> PowerLawFit:
    """Fit ``A - D / C^B`` on the same cleaned, windowed points the sigmoid would use."""
    from scipy.optimize import minimize_scalar

    opts = options or FitOptions()
    prep = prepare(compute, values, opts)
    n = int(prep.x.size)
    if prep.status is not None:
        return PowerLawFit(math.nan, math.nan, math.nan, math.nan, n, prep.status, prep.reason)
    scale = float(prep.x[-1])
    xn = prep.x / scale
    _, _, sse = solve_grid(xn, prep.y, B_GRID)
    k = int(np.nanargmin(np.where(np.isfinite(sse), sse, np.inf)))
    lo = B_GRID[max(k - 1, 0)]
    hi = B_GRID[min(k + 1, B_GRID.size - 1)]
    res = minimize_scalar(
        lambda bb: float(solve_grid(xn, prep.y, np.array([bb]))[2][0]), bounds=(lo, hi), method="bounded"
    )
    b = float(res.x) if res.fun <= sse[k] else float(B_GRID[k])
    a1, d1, s1 = solve_grid(xn, prep.y, np.array([b]))
    d_orig = float(d1[0]) * scale**b  # undo the compute scaling: D'/ (C/s)^B = D' s^B / C^B
    status: FitStatus = "ok" if np.isfinite(a1[0]) and d_orig > 0 else "failed"
    reason = "" if status == "ok" else "best power law is not increasing (D <= 0)"
    return PowerLawFit(float(a1[0]), d_orig, b, float(math.sqrt(s1[0] / n)), n, status, reason)

"""When does a curve reach a fraction of its ceiling? The compute read off its forecast.

:func:`forecast_reach` fits the curve's sigmoid for its ceiling A, then searches the single-curve
forecast (:func:`.ensemble.forecast_curve`) and its interval edges on a log grid for the compute
at which they reach ``fraction`` x A.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.curve import FloatArray, clean_sigma
from scalerl.harness.analysis.fit.fitters import fit_sigmoid_many
from scalerl.harness.analysis.forecast.bounds import Bounds, check_bounds
from scalerl.harness.analysis.forecast.ensemble import forecast_curve
from scalerl.harness.errors import ConfigError


@dataclass(frozen=True)
class Reach:
    """Compute at which the forecast reaches ``fraction`` x the fitted A (``a``), with the
    compute at which the interval's upper / lower edge gets there (``lo`` / ``hi``; NaN when
    that edge never does within the horizon searched). NaN ``compute`` and a reason otherwise."""

    fraction: float
    a: float
    compute: float
    lo: float
    hi: float
    reason: str = ""


def _first_crossing(grid: FloatArray, values: FloatArray, target: float) -> float:
    hit = np.flatnonzero(values >= target)
    if hit.size == 0:
        return math.nan
    k = int(hit[0])
    if k == 0:
        return float(grid[0])
    # Interpolate in log compute between the last grid point below and the first at or above.
    v0, v1 = float(values[k - 1]), float(values[k])
    t = (target - v0) / (v1 - v0) if v1 > v0 else 1.0
    return float(np.exp(np.log(grid[k - 1]) + t * (np.log(grid[k]) - np.log(grid[k - 1]))))


def forecast_reach(
    compute: ArrayLike,
    values: ArrayLike,
    fraction: float,
    *,
    level: float = 0.9,
    r0: float | None = None,
    sigma: ArrayLike | None = None,
    horizon: float = 1000.0,
    bounds: Bounds | None = None,
) -> Reach:
    """The compute at which a curve reaches ``fraction`` x its fitted ceiling A.

    A is the sigmoid fit's (R0 = the first point, as in the ensemble); if the fitted curve gets
    there inside the data, that compute is returned (the data already covers it); otherwise the
    forecast of :func:`forecast_curve` is searched on a log grid up to ``horizon`` (default
    1000) x the last compute, and so are its interval edges at ``level``. No fitted A (a curve
    that has not passed its inflection, a flat or decreasing one) or a forecast that never gets
    there gives NaN and the reason. ``bounds`` clips the forecast searched (:func:`forecast_curve`).
    """
    bounds = check_bounds(bounds)
    if not 0.0 < fraction < 1.0:
        raise ConfigError("must be in (0, 1)", field="fraction", value=fraction, fix="use e.g. 0.95")
    c = np.asarray(compute, dtype=np.float64).ravel()
    v = np.asarray(values, dtype=np.float64).ravel()
    k = min(c.size, v.size)
    good = np.isfinite(c[:k]) & np.isfinite(v[:k])
    order = np.argsort(c[:k][good], kind="stable")
    x, y = c[:k][good][order], v[:k][good][order]
    if x.size == 0 or not (x > 0).any():
        return Reach(fraction, math.nan, math.nan, math.nan, math.nan, "no points at compute > 0")
    start = float(y[0]) if r0 is None else float(r0)
    s_clean = clean_sigma(sigma, v.size)
    s = None if s_clean is None else s_clean[:k][good][order]
    fit = fit_sigmoid_many([(x, y)], r0=[start], sigma=None if s is None else [s])[0]
    nan = math.nan
    if not fit.ok:
        return Reach(fraction, nan, nan, nan, nan, f"no fitted ceiling: fit is {fit.status} ({fit.reason})")
    target = fraction * fit.a
    inside = fit.compute_to_reach(fraction)
    if math.isfinite(inside) and inside <= float(x[-1]):
        return Reach(fraction, fit.a, inside, inside, inside, "reached inside the data (fitted curve)")
    grid = np.geomspace(float(x[-1]), float(x[-1]) * horizon, 400)
    fc = forecast_curve(x, y, grid, level=level, r0=start, sigma=s, bounds=bounds)
    if not fc.ok:
        return Reach(fraction, fit.a, nan, nan, nan, f"no forecast: {fc.status} ({fc.reason})")
    at = _first_crossing(grid, fc.value, target)
    early = _first_crossing(grid, fc.hi, target)
    late = _first_crossing(grid, fc.lo, target)
    reason = ""
    if not math.isfinite(at):
        weights = ", ".join(f"{k}={w:.2f}" for k, w in fc.weights.items())
        reason = (
            f"the forecast levels off at {float(fc.value[-1]):.4f} < {fraction:g} x A = {target:.4f} "
            f"within {horizon:g}x the last compute (member weights {weights})"
        )
    return Reach(fraction, fit.a, at, early, late, reason)

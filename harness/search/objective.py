"""A finished trial's objective, read from its curve (the fit section's metric on its axis).

- ``forecast``: :func:`scalerl.harness.analysis.forecast_curve` at ``objective.at`` (the ensemble and its
  calibrated interval, chosen by ``bench/forecast.py``); the interval is recorded beside the value.
  A rate metric's forecast is clipped to [0, 1] by the rule ``scalerl forecast`` uses
  (:func:`scalerl.harness.analysis.forecast.bounds.resolve_bounds`), so no trial scores above a perfect run.
- ``fitted_a``: the sigmoid's ceiling (:func:`scalerl.harness.analysis.fit_sigmoid`, the sweep's window);
  a fit that cannot pin its ceiling (``pre-inflection``, flat) has no objective.
- ``final``: the mean of the last three points (what a lab reads off a finished run).

No sound objective -> :class:`NoObjective` with the reason; the worker fails the trial with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from scalerl.harness.errors import AnalysisError
from scalerl.harness.recipe.search import ObjectiveSpec
from scalerl.harness.recipe.sweep import FitSpec


class NoObjective(AnalysisError):
    """The curve gives no sound objective value (too few points, an unpinned ceiling)."""


@dataclass(frozen=True)
class Objective:
    value: float
    detail: dict[str, Any]


def objective(spec: ObjectiveSpec, fit: FitSpec, compute: np.ndarray, values: np.ndarray) -> Objective:
    x = np.asarray(compute, dtype=float)
    y = np.asarray(values, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(y) == 0:
        raise NoObjective(f"no finite {fit.metric} points on {fit.axis}")
    if spec.kind == "final":
        return Objective(float(np.mean(y[-3:])), {"kind": "final", "points": int(min(3, len(y)))})
    if spec.kind == "forecast":
        from scalerl.harness.analysis import forecast_curve
        from scalerl.harness.analysis.forecast.bounds import resolve_bounds

        assert spec.at is not None  # ObjectiveSpec requires it
        bounds = resolve_bounds(fit.metric, y)
        fc = forecast_curve(x, y, [spec.at], level=spec.level, bounds=bounds.bounds)
        if fc.status != "ok":
            raise NoObjective(f"no forecast at {spec.at:g}: {fc.reason}")
        return Objective(
            float(fc.value[0]),
            {
                "kind": "forecast",
                "at": spec.at,
                "lo": float(fc.lo[0]),
                "hi": float(fc.hi[0]),
                "level": spec.level,
                "bounds": list(bounds.bounds) if bounds.bounds is not None else None,
            },
        )
    from scalerl.harness.analysis import fit_sigmoid

    window = fit.window
    fitted = fit_sigmoid(x, y, window=window.start, window_fraction=window.fraction)
    if fitted.status != "ok" or not np.isfinite(fitted.a):
        raise NoObjective(f"the sigmoid fit does not pin A ({fitted.status}: {fitted.reason})")
    return Objective(
        float(fitted.a), {"kind": "fitted_a", "b": fitted.b, "c_mid": fitted.c_mid, "status": fitted.status}
    )

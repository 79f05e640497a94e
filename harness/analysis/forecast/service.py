"""The forecast of a stored sweep, one for every caller: ``scalerl forecast``, ``scalerl fit``'s
forecast lines, ``Sweep.forecast`` and the HTML report's extrapolations all call this module, so
they print one number.

Each variant's seeds are pooled into one point cloud and forecast at ``at`` (default: 2x the
variant's largest compute). With ``siblings`` (the default) a variant borrows strength from the
sweep's other variants (:func:`.sweep_prior.forecast_sweep`); without, or when fewer than 2 other
variants have a fitted ceiling, it gets the single-curve :func:`.ensemble.forecast_curve` itself,
so its numbers match that function exactly. Values and intervals are clipped to the metric's range
(:func:`metric_bounds`, the rule of :mod:`.bounds`). A sweep's curves come from
:func:`scalerl.harness.analysis.groups.load_groups`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.bootstrap import pool
from scalerl.harness.analysis.fit.curve import FloatArray, SigmoidFit
from scalerl.harness.analysis.fit.fitters import fit_sigmoid
from scalerl.harness.analysis.forecast.bounds import Bounds, MetricBounds, resolve_bounds
from scalerl.harness.analysis.forecast.ensemble import CurveForecast, forecast_curve
from scalerl.harness.analysis.forecast.intervals import HORIZON_EDGES
from scalerl.harness.analysis.forecast.reach import forecast_reach
from scalerl.harness.analysis.forecast.sweep_prior import forecast_sweep
from scalerl.harness.analysis.groups import VariantCurves

Method = Literal["sweep", "single"]
Phase = Literal["past", "before", "no rise"]


def inflection_phase(x: ArrayLike, y: ArrayLike) -> Phase:
    """Where a (pooled) curve stands against its sigmoid's inflection, as bench.forecast_targets
    scores forecasts by it (R0 the first point): ``past`` (the fit pins a ceiling), ``before``
    (the fit is pre-inflection: the ceiling is an extrapolation, so the interval is wide) or
    ``no rise`` (no sigmoid fits at all: the flat and power members carry the forecast)."""
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[keep], ys[keep]
    if xs.size < 4:
        return "no rise"
    order = np.argsort(xs, kind="stable")
    xs, ys = xs[order], ys[order]
    return phase_of(fit_sigmoid(xs, ys, r0=float(ys[0])))


def phase_of(fit: SigmoidFit) -> Phase:
    """The :data:`Phase` a sigmoid fit's status says (bench.forecast_targets buckets coverage by it)."""
    return "past" if fit.status == "ok" else "before" if fit.status == "pre-inflection" else "no rise"


def metric_bounds(
    metric: str,
    groups: Mapping[str, VariantCurves],
    given: Bounds | Literal["auto"] | None = "auto",
    *,
    field: str = "--bounds",
) -> MetricBounds:
    """The bounds forecasts of ``metric`` are clipped to: ``given`` (``--bounds``), None
    (``--no-bounds``) or ``"auto"``, the rule of :mod:`scalerl.harness.analysis.forecast.bounds`
    on the metric's name and every value in ``groups``; bad ``given`` bounds raise ConfigError
    naming ``field``. The CLI, ``Sweep.forecast`` and the report apply the same rule."""
    values = [np.asarray(y, dtype=np.float64).ravel() for vc in groups.values() for _, y in vc.curves]
    flat = np.concatenate(values) if values else np.zeros(0)
    return resolve_bounds(metric, flat, given, field=field)


@dataclass(frozen=True)
class VariantForecast:
    """One variant's forecast: its seeds pooled (``cloud``; ``last``, the largest compute),
    forecast at ``at``; ``method`` ``sweep`` (a prior from its sibling variants) or ``single``,
    ``note`` saying which and why; ``finished``: the siblings ran on past it (the
    finished-sweep interval)."""

    variant: str
    cloud: tuple[FloatArray, FloatArray]
    last: float
    at: FloatArray
    forecast: CurveForecast
    method: Method
    note: str
    finished: bool = False


def forecast_variants(
    groups: Mapping[str, VariantCurves],
    at: ArrayLike | None = None,
    *,
    level: float = 0.9,
    siblings: bool = True,
    bounds: Bounds | None = None,
) -> dict[str, VariantForecast]:
    """Every variant's forecast at ``at`` (default: 2x its largest compute), in ``groups``' order
    (see the module docstring)."""
    pooled = {variant: pool(list(vc.curves)) for variant, vc in groups.items()}
    lasts = {v: float(np.nanmax(x)) if x.size else math.nan for v, (x, _) in pooled.items()}
    wheres = {v: np.asarray(at if at is not None else [2.0 * lasts[v]], dtype=np.float64) for v in pooled}
    names = list(pooled)
    # variant -> (forecast, method, siblings used, note, finished sweep)
    made: dict[str, tuple[CurveForecast, str, int, str, bool]] = {}
    if siblings and len(names) > 1:
        sf = forecast_sweep(
            [pooled[v] for v in names], [wheres[v] for v in names], level=level, bounds=bounds
        )
        made = {
            v: (f.forecast, f.method, f.siblings, f.note, f.finished) for v, f in zip(names, sf, strict=True)
        }
    out: dict[str, VariantForecast] = {}
    for variant in groups:
        x, y = pooled[variant]
        if variant in made and made[variant][1] == "sweep":
            fc, _, n_sib, _, finished = made[variant]
            note = f"prior from {n_sib} sibling variant(s)"
            if finished:
                note += ", which ran on past it (finished-sweep interval)"
            out[variant] = VariantForecast(
                variant, (x, y), lasts[variant], wheres[variant], fc, "sweep", note, finished
            )
            continue
        # The single-curve path is forecast_curve itself, so its numbers match it exactly.
        fc = forecast_curve(x, y, wheres[variant], level=level, bounds=bounds)
        note = made[variant][3] if variant in made else ("no siblings" if siblings else "siblings turned off")
        out[variant] = VariantForecast(variant, (x, y), lasts[variant], wheres[variant], fc, "single", note)
    return out


def _clean(v: float) -> float | None:
    return v if math.isfinite(v) else None


def forecast_rows(
    groups: Mapping[str, VariantCurves],
    at: ArrayLike | None = None,
    *,
    level: float = 0.9,
    reach: float | None = None,
    siblings: bool = True,
    bounds: Bounds | None = None,
) -> list[dict[str, Any]]:
    """One row per variant (what ``scalerl forecast --json`` prints and ``Sweep.forecast``
    frames): :func:`forecast_variants` with its numbers (NaN as None), the row's ``method``
    (``sweep`` / ``single``) and ``method_note`` saying which and why, and ``phase``
    (:func:`inflection_phase` of the pooled seeds). ``reach`` adds
    :func:`.reach.forecast_reach` (single-curve)."""
    out: list[dict[str, Any]] = []
    for variant, f in forecast_variants(groups, at, level=level, siblings=siblings, bounds=bounds).items():
        x, y = f.cloud
        fc = f.forecast
        row: dict[str, Any] = {
            "variant": variant,
            "knob": groups[variant].knob,
            "runs": len(groups[variant].curves),
            "points": int(np.isfinite(y).sum()),
            "last_compute": _clean(f.last),
            "status": fc.status,
            "reason": fc.reason,
            "level": level,
            "weights": fc.weights,
            "method": f.method,
            "method_note": f.note,
            # Before the inflection an interval is the wide kind (issue 37, target 3): say so.
            "phase": inflection_phase(x, y),
            # At least 2 siblings ran to 2x this variant's last compute: the interval is
            # FINISHED_SWEEP_CALIBRATION's (held out, far narrower; bench/README.md).
            "finished_siblings": f.finished,
            "forecasts": [
                {
                    "compute": float(c),
                    "value": _clean(float(v)),
                    "lo": _clean(float(lo)),
                    "hi": _clean(float(hi)),
                    # The intervals were checked on real curves up to this ratio; past it the
                    # coverage is extrapolated (bench/README.md, "Forecasts from the whole sweep").
                    "beyond_checked": bool(float(c) > HORIZON_EDGES[-1] * f.last),
                }
                for c, v, lo, hi in zip(f.at, fc.value, fc.lo, fc.hi, strict=True)
            ],
        }
        if reach is not None:
            r = forecast_reach(x, y, reach, level=level, bounds=bounds)
            row["reach"] = {
                "fraction": r.fraction,
                "a": _clean(r.a),
                "compute": _clean(r.compute),
                "lo": _clean(r.lo),
                "hi": _clean(r.hi),
                "reason": r.reason,
            }
        out.append(row)
    return out

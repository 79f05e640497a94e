"""``scalerl forecast``: where each variant of a sweep is heading, with calibrated intervals."""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from scalerl.harness.cli.args import BoundsPair, fraction_open, positive_float

if TYPE_CHECKING:
    from scalerl.harness.analysis.bounds import Bounds, MetricBounds
    from scalerl.harness.analysis.verdicts import VariantCurves


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "forecast",
        help="forecast each variant's metric at a larger compute (calibrated prediction intervals)",
        description="Forecast every variant of a sweep (its seeds pooled) with "
        "scalerl.harness.analysis.forecast_curve: an ensemble of the sigmoid, a flat line and a power law "
        "weighted by rolling-origin validation, with prediction intervals calibrated on real RL "
        "curves (bench/forecast.py; see bench/README.md, 'Forecasts'). Metric and axis default to "
        "the sweep's fit section, like `scalerl fit`.",
    )
    p.add_argument("sweep", metavar="SWEEP", nargs="?", help="sweep name (default: $SCALERL_SWEEP)")
    p.add_argument(
        "--at",
        type=positive_float,
        nargs="+",
        metavar="COMPUTE",
        help="compute value(s) to forecast at (default: 2x each variant's largest compute)",
    )
    p.add_argument(
        "--reach",
        type=fraction_open,
        metavar="FRACTION",
        help="also report the compute at which the forecast reaches FRACTION x the fitted A (e.g. 0.95)",
    )
    p.add_argument("--level", type=fraction_open, default=0.9, help="prediction-interval level (default 0.9)")
    p.add_argument("--metric", help="point metric (default: the sweep's fit.metric, else val/pass_rate)")
    p.add_argument(
        "--axis",
        choices=("gpu_hours", "flops", "tokens", "samples", "step"),
        help="compute axis (default: the sweep's fit.axis, else flops)",
    )
    p.add_argument(
        "--no-siblings",
        dest="siblings",
        action="store_false",
        help="forecast each variant from its own points only (default: borrow strength from the "
        "sweep's other variants when at least 2 of them have a fitted ceiling; "
        "scalerl.harness.analysis.hierarchical)",
    )
    clip = p.add_mutually_exclusive_group()
    clip.add_argument(
        "--bounds",
        nargs=2,
        action=BoundsPair,
        default="auto",
        metavar=("LO", "HI"),
        help="clip values and intervals to [LO, HI], the range the metric can take (default: [0, 1] "
        "for a rate: a name part pass_rate, success_rate, solve_rate, accuracy, acc or pass@N, with "
        "every value in [0, 1]; no clipping for other metrics)",
    )
    clip.add_argument(
        "--no-bounds",
        dest="bounds",
        action="store_const",
        const=None,
        help="never clip (the raw calibrated intervals)",
    )
    p.add_argument("--json", action="store_true", help="print the forecasts as JSON")
    p.add_argument(
        "--db", metavar="URL", help="store URL (default: $SCALERL_DB_URL, else sqlite:///./scalerl.db)"
    )
    p.set_defaults(func=_forecast)


def _clean(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _num(v: float, fmt: str = ".4f") -> str:
    return format(v, fmt) if math.isfinite(v) else "-"


def load_groups(store: Any, sweep: str, metric: str, axis: str) -> dict[str, VariantCurves]:
    """Variant -> its seed curves of ``metric`` on ``axis`` from an open store (points without an
    ``axis`` value dropped); an empty sweep or an unfilled axis raises AnalysisError with a fix."""
    from scalerl import db
    from scalerl.harness.analysis.sweep import group_curves
    from scalerl.harness.errors import AnalysisError

    frame = db.queries.curves(store, sweep, metric)
    if frame.empty:
        raise AnalysisError(f"sweep {sweep!r} has no points for metric {metric!r} (fix: pass --metric)")
    if frame[axis].isna().all():
        filled = [
            a
            for a in ("gpu_hours", "flops", "tokens", "samples", "step")
            if a in frame and frame[a].notna().any()
        ]
        raise AnalysisError(
            f"no point has a {axis!r} value (fix: use --axis {' or '.join(filled) or 'step'})"
        )
    return group_curves(frame[frame[axis].notna()], axis)


def metric_bounds(
    metric: str,
    groups: Mapping[str, VariantCurves],
    given: Bounds | Literal["auto"] | None = "auto",
    *,
    field: str = "--bounds",
) -> MetricBounds:
    """The bounds forecasts of ``metric`` are clipped to: ``given`` (``--bounds``), None
    (``--no-bounds``) or ``"auto"``, the rule of :mod:`scalerl.harness.analysis.bounds` on the
    metric's name and every value in ``groups``; bad ``given`` bounds raise ConfigError naming
    ``field``. The CLI, ``Sweep.forecast`` and the report apply the same rule."""
    import numpy as np

    from scalerl.harness.analysis.bounds import resolve_bounds

    values = [np.asarray(y, dtype=np.float64).ravel() for vc in groups.values() for _, y in vc.curves]
    flat = np.concatenate(values) if values else np.zeros(0)
    return resolve_bounds(metric, flat, given, field=field)


def forecast_rows(
    groups: Mapping[str, VariantCurves],
    at: Sequence[float] | None = None,
    *,
    level: float = 0.9,
    reach: float | None = None,
    siblings: bool = True,
    bounds: Bounds | None = None,
) -> list[dict[str, Any]]:
    """One row per variant: its seeds pooled, forecast at ``at`` (default: 2x the variant's
    largest compute) with ``level`` intervals, clipped to ``bounds`` (:func:`metric_bounds`;
    None: unclipped). With ``siblings`` (the default) a variant borrows
    strength from the sweep's other variants
    (:func:`scalerl.harness.analysis.hierarchical.forecast_sweep`); without, or when fewer
    than 2 other variants have a fitted ceiling, it gets
    :func:`scalerl.harness.analysis.forecast_curve`; the row's ``method`` (``sweep`` / ``single``)
    and ``method_note`` say which and why. ``reach`` adds
    :func:`scalerl.harness.analysis.forecaster.forecast_reach` (single-curve). Shared by
    ``scalerl forecast`` and ``scalerl fit`` so that both print the same numbers."""
    import numpy as np

    from scalerl.harness.analysis.calibration import HORIZON_EDGES
    from scalerl.harness.analysis.forecaster import CurveForecast, forecast_curve, forecast_reach
    from scalerl.harness.analysis.hierarchical import forecast_sweep
    from scalerl.harness.analysis.uncertainty import pool

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
    out: list[dict[str, Any]] = []
    for variant, vc in groups.items():
        x, y = pooled[variant]
        last = lasts[variant]
        where = wheres[variant]
        finished = False
        if variant in made and made[variant][1] == "sweep":
            fc, method, n_sib, note, finished = made[variant]
            note = f"prior from {n_sib} sibling variant(s)"
            if finished:
                note += ", which ran on past it (finished-sweep interval)"
        else:
            # The single-curve path is forecast_curve itself, so its numbers match it exactly.
            fc = forecast_curve(x, y, where, level=level, bounds=bounds)
            method = "single"
            note = (
                made[variant][3]
                if variant in made
                else ("no siblings" if siblings else "siblings turned off")
            )
        row: dict[str, Any] = {
            "variant": variant,
            "knob": vc.knob,
            "runs": len(vc.curves),
            "points": int(np.isfinite(y).sum()),
            "last_compute": _clean(last),
            "status": fc.status,
            "reason": fc.reason,
            "level": level,
            "weights": fc.weights,
            "method": method,
            "method_note": note,
            # At least 2 siblings ran to 2x this variant's last compute: the interval is
            # hierarchical.FINISHED_SWEEP_CALIBRATION's (held out, far narrower; bench/README.md).
            "finished_siblings": finished,
            "forecasts": [
                {
                    "compute": float(c),
                    "value": _clean(float(v)),
                    "lo": _clean(float(lo)),
                    "hi": _clean(float(hi)),
                    # The intervals were checked on real curves up to this ratio; past it the
                    # coverage is extrapolated (bench/README.md, "Forecasts from the whole sweep").
                    "beyond_checked": bool(float(c) > HORIZON_EDGES[-1] * last),
                }
                for c, v, lo, hi in zip(where, fc.value, fc.lo, fc.hi, strict=True)
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


def print_rows(rows: Sequence[Mapping[str, Any]], axis: str, indent: str = "  ") -> None:
    """The text form of :func:`forecast_rows`: one header line per variant, one line per compute."""
    from scalerl.harness.analysis.calibration import HORIZON_EDGES

    for row in rows:
        last_c = _num(row["last_compute"] or math.nan, ".4g")
        head = f"{row['variant']} ({row['runs']} run(s), {row['points']} points, last {axis} {last_c})"
        if row["status"] != "ok":
            print(f"{indent}{head}: no forecast: {row['status']} ({row['reason']})")
            continue
        if "method" in row:
            how = "sweep prior" if row["method"] == "sweep" else "single curve"
            head = f"{head} [{how}: {row['method_note']}]"
        print(f"{indent}{head}")
        for f in row["forecasts"]:
            v, lo, hi = (math.nan if f[k] is None else f[k] for k in ("value", "lo", "hi"))
            past = (
                f" (past {HORIZON_EDGES[-1]:g}x the last compute: the interval was never checked that far)"
                if f.get("beyond_checked")
                else ""
            )
            print(f"{indent}  at {f['compute']:.4g}: {_num(v)} [{_num(lo)}, {_num(hi)}]{past}")
        if "reach" in row:
            r = row["reach"]
            c, lo, hi = (math.nan if r[k] is None else r[k] for k in ("compute", "lo", "hi"))
            a = math.nan if r["a"] is None else r["a"]
            if math.isfinite(c):
                span = "" if lo == hi == c else f" [{_num(lo, '.4g')}, {_num(hi, '.4g')}]"
                note = f" ({r['reason']})" if r["reason"] else ""
                print(
                    f"{indent}  reaches {r['fraction']:g} x A (A={_num(a)}) at {_num(c, '.4g')}{span}{note}"
                )
            else:
                print(f"{indent}  never reaches {r['fraction']:g} x A: {r['reason']}")


def _forecast(args: argparse.Namespace) -> int:
    from scalerl import db
    from scalerl.harness.analysis.forecaster import DEFAULT_CALIBRATION
    from scalerl.harness.analysis.sweep import FitRequest, resolve_request
    from scalerl.harness.lookup import require_metric, require_sweep

    # --at, --reach and --level were checked by their argparse types (finite, in range); the
    # level must also lie in the calibrated range, before the store is touched.
    DEFAULT_CALIBRATION.quantile(args.level)
    store = db.open_store(args.db, readonly=True)  # a forecast never writes, nor creates a store
    try:
        spec = require_sweep(store, args.sweep)
        metric, axis, _, _ = resolve_request(FitRequest(metric=args.metric, axis=args.axis), spec)
        require_metric(store, args.sweep, metric)
        groups = load_groups(store, args.sweep, metric, axis)
    finally:
        store.close()
    clip = metric_bounds(metric, groups, args.bounds)
    out = forecast_rows(
        groups, args.at, level=args.level, reach=args.reach, siblings=args.siblings, bounds=clip.bounds
    )
    if args.json:
        from scalerl.harness.cli.output import emit

        emit(
            {
                "sweep": args.sweep,
                "metric": metric,
                "axis": axis,
                "bounds": None if clip.bounds is None else list(clip.bounds),
                "bounds_source": clip.source,
                "bounds_note": clip.note,
                "variants": out,
            }
        )
        return 0
    intervals = f"{args.level:.0%} prediction intervals, {clip.note}"
    print(f"sweep {args.sweep}: metric {metric} on {axis}; {len(out)} variant(s); {intervals}")
    print_rows(out, axis)
    return 0

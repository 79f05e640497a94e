"""``scalerl forecast``: where each variant of a sweep is heading, with calibrated intervals.

The numbers are :mod:`scalerl.harness.analysis.forecast.service`'s (shared with ``scalerl fit``,
``Sweep.forecast`` and the report); this module parses the command and prints them
(:func:`print_rows`)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from typing import Any

from scalerl.harness.argtypes import BoundsPair, fraction_open, positive_float
from scalerl.harness.axes import FIT_AXES


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
        choices=FIT_AXES,
        help="compute axis (default: the sweep's fit.axis, else flops)",
    )
    p.add_argument(
        "--no-siblings",
        dest="siblings",
        action="store_false",
        help="forecast each variant from its own points only (default: borrow strength from the "
        "sweep's other variants when at least 2 of them have a fitted ceiling; "
        "scalerl.harness.analysis.forecast.sweep_prior)",
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


def _num(v: float, fmt: str = ".4f") -> str:
    return format(v, fmt) if math.isfinite(v) else "-"


def print_rows(rows: Sequence[Mapping[str, Any]], axis: str, indent: str = "  ") -> None:
    """The text form of :func:`forecast_rows`: one header line per variant, one line per compute."""
    from scalerl.harness.analysis.forecast.intervals import HORIZON_EDGES

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
        if row.get("phase") == "before":
            print(
                f"{indent}  made before the curve's inflection: the ceiling is extrapolated, so the "
                "interval is the wide kind (it narrows once the curve bends over)"
            )
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
    from scalerl.harness.analysis.forecast.calibrations import DEFAULT_CALIBRATION
    from scalerl.harness.analysis.forecast.service import forecast_rows, metric_bounds
    from scalerl.harness.analysis.groups import load_groups
    from scalerl.harness.analysis.verdicts.service import FitRequest, resolve_request
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

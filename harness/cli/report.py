"""CLI: ``scalerl report SWEEP -o report.html`` writes one self-contained, offline HTML report."""

from __future__ import annotations

import argparse
from pathlib import Path

from scalerl.harness.argtypes import whole
from scalerl.harness.axes import FIT_AXES
from scalerl.harness.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="write one self-contained HTML report of a sweep (curves, fits, verdicts)",
        description=(
            "Write the sweep's curves, fitted sigmoids with extrapolations, the knob map and the "
            "verdict table as one HTML file that works offline. Reads the store only; fits are "
            "computed for the page (not stored) when `scalerl fit` has not been run. When the "
            "sweep has points but no fits can be had (none stored, none computable: e.g. no point "
            "on the axis), it says what is missing, writes nothing and exits 6."
        ),
    )
    p.add_argument(
        "sweep", metavar="SWEEP", nargs="?", help="sweep name (see `scalerl ls`; default: $SCALERL_SWEEP)"
    )
    p.add_argument("-o", "--output", default="report.html", help="HTML file to write (default: %(default)s)")
    p.add_argument("--db", default=None, metavar="URL",
                   help="store URL (default: $SCALERL_DB_URL, else sqlite:///./scalerl.db)")  # fmt: skip
    p.add_argument("--metric", default=None,
                   help="metric to plot and fit (default: the sweep's fit.metric, "
                   "else val/pass_rate)")  # fmt: skip
    p.add_argument("--axis", default=None, choices=FIT_AXES,
                   help="compute axis (default: the stored fits' axis, else the sweep's fit.axis, "
                   "else flops)")  # fmt: skip
    p.add_argument("--max-points", type=whole(10, 1_000_000), default=400, metavar="N",
                   help="points drawn per run; longer runs are downsampled for display only "
                   "(default: %(default)s)")  # fmt: skip
    p.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    from scalerl import db
    from scalerl.db.engine import resolve_url
    from scalerl.harness.analysis.groups import fit_defaults
    from scalerl.harness.cli.busy import activity
    from scalerl.harness.errors import AnalysisError
    from scalerl.harness.lookup import require_metric, require_sweep
    from scalerl.harness.report.build import load_report_data, missing_fits
    from scalerl.harness.report.document import render_html

    if args.max_points < 10:
        raise ConfigError("must be >= 10", field="--max-points", value=args.max_points, fix="use e.g. 400")
    out = Path(args.output)
    if out.is_dir():
        raise ConfigError("is a folder, not a file", field="--output", value=str(out),
                          fix=f"name the file, e.g. -o {out / 'report.html'}")  # fmt: skip
    if not out.parent.is_dir():
        raise ConfigError("the output folder does not exist", field="--output", value=str(out),
                          fix=f"create {out.parent} first or pick another path")  # fmt: skip
    store = db.open_store(args.db, readonly=True)  # a report never writes, nor creates a store
    spec = require_sweep(store, args.sweep)
    require_metric(store, args.sweep, args.metric or fit_defaults(spec)[0])
    with activity(f"reading sweep {args.sweep}", as_json=args.json) as busy:
        data = load_report_data(
            store, args.sweep, metric=args.metric, axis=args.axis,
            store_kind=resolve_url(args.db).get_backend_name(), max_points_per_run=args.max_points,
        )  # fmt: skip
        missing = missing_fits(data)
        if missing is not None:  # a page of curves on an empty axis would pass for a report
            raise AnalysisError(missing)
        busy.step(f"drawing {len(data.runs)} runs")
        page = render_html(data)
    from scalerl.harness.atomicio import write_atomic

    try:
        write_atomic(out, page)  # a reader never opens a half-written report; nothing half-written stays
    except OSError as err:
        raise ConfigError(f"cannot write the report ({err.strerror})", field="--output", value=str(out),
                          fix="pick a writable file path") from None  # fmt: skip
    size_mb = out.stat().st_size / 1e6
    print(f"report: {out.resolve()} ({size_mb:.1f} MB, {len(data.runs)} runs, fits: {data.fits_source})")
    if args.json:
        from scalerl.harness.cli.output import emit

        emit({"report": str(out.resolve()), "bytes": out.stat().st_size, "runs": len(data.runs),
              "fits": data.fits_source})  # fmt: skip
    return 0

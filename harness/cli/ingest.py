"""``scalerl import``: ingest curves logged elsewhere (W&B CSV, TensorBoard, parsed CSV)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import",
        help="import curves from W&B CSV exports, TensorBoard event files or parsed-log CSVs",
        description="Read each FILE (format auto-detected unless --format) and write its curves into "
        "the store under SWEEP: one run per source run, one point per step. The x axis fills a "
        "compute column: a step axis fills none (fit with --axis step), a time axis in seconds "
        "fills wall_s and gpu_hours (x / 3600, one device assumed), else name it with --axis-unit.",
    )
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--sweep", required=True, metavar="NAME", help="store sweep to import into")
    p.add_argument("--metric", metavar="M", help="only this metric (exact name or glob)")
    p.add_argument("--axis-column", metavar="C", help="x column/series (default: the file's step / x)")
    p.add_argument(
        "--axis-unit",
        choices=("step", "wall_s", "gpu_hours", "flops", "tokens", "samples"),
        help="what the x axis measures (default: inferred from its name)",
    )
    p.add_argument(
        "--format",
        dest="fmt",
        choices=("wandb-csv", "tensorboard", "csv", "verl-jsonl"),
        help="skip auto-detection",
    )
    p.add_argument(
        "--db", metavar="URL", help="store URL (default: $SCALERL_DB_URL, else sqlite:///./scalerl.db)"
    )
    p.set_defaults(func=_import)


def _import(args: argparse.Namespace) -> int:
    import db
    from harness.importers import read_curves
    from harness.importers.ingest import import_curves

    # Read (and validate) every file before writing anything: a bad file leaves the store untouched.
    curves = [
        c
        for f in args.files
        for c in read_curves(f, fmt=args.fmt, metric=args.metric, axis_column=args.axis_column)
    ]
    store = db.open_store(args.db)
    try:
        summary = import_curves(store, curves, args.sweep, axis_unit=args.axis_unit)
    finally:
        store.close()
    print(
        f"imported {summary.curves} curve(s), {summary.points} point(s) into sweep {summary.sweep!r}: "
        f"{summary.runs} run(s) ({summary.new_runs} new); metrics: {', '.join(summary.metrics[:8])}"
        + (" ..." if len(summary.metrics) > 8 else "")
    )
    return 0

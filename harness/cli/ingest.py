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
        "fills wall_s and gpu_hours (x / 3600, one device assumed), else name it with --axis-unit. "
        "Prints one line per file with what it lost, counted per reason; any loss exits 7 and "
        "writes nothing unless --allow-partial.",
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
    p.add_argument(
        "--allow-partial",
        action="store_true",
        help="import what is sound even when a file lost data (a corrupt or cut-short record, a bad "
        "or repeated step, a repeated column, NaN/inf values); without it such a file fails the "
        "import (exit 7) and nothing is written",
    )
    p.set_defaults(func=_import)


def _import(args: argparse.Namespace) -> int:
    import db
    from harness.errors import ImportFormatError
    from harness.importers.base import partial_message, read_file
    from harness.importers.ingest import import_curves

    # Read (and validate) every file before writing anything: a bad file leaves the store untouched.
    results = [
        read_file(f, fmt=args.fmt, metric=args.metric, axis_column=args.axis_column) for f in args.files
    ]
    for r in results:
        lost = f"; lost: {r.losses.describe()}" if r.losses else ""
        print(f"{r.source}: {len(r.curves)} curve(s), {r.points} point(s){lost}")
    partial = [r for r in results if r.losses]
    if partial and not args.allow_partial:
        raise ImportFormatError(f"nothing imported: {partial_message(partial)}")
    curves = [c for r in results for c in r.curves]
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

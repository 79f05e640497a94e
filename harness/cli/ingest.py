"""``scalerl import``: ingest curves logged elsewhere (W&B CSV, TensorBoard files or log
directories, parsed CSV, verl JSONL, MLflow tracking stores, W&B offline runs and projects),
optionally mapped onto a baseline, knob variants and seeds so that ``scalerl fit`` gives verdicts."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scalerl.harness.importers.base import ImportResult
    from scalerl.harness.importers.mapping import RunMapping


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import",
        help="import curves from W&B CSV exports, TensorBoard event files or log directories, "
        "parsed-log CSVs, verl JSONL, an MLflow tracking store or W&B runs (offline or a project)",
        description="Read each FILE (format auto-detected unless --format) and write its curves into "
        "the store under SWEEP: one run per source run, one point per step. The x axis fills a "
        "compute column: a step axis fills none (fit with --axis step), a time axis in seconds "
        "fills wall_s and gpu_hours (x / 3600, one device assumed), else name it with --axis-unit. "
        "Prints one line per file with what it lost, counted per reason; any loss exits 7 and "
        "writes nothing unless --allow-partial. A SOURCE is a file, a TensorBoard log directory "
        "(one run per directory holding event files; params from its params.json or hparams), "
        "mlflow:TRACKING_URI with --experiment, wandb-offline:DIR (W&B offline runs: an "
        "offline-run-* directory or one holding them, such as ./wandb; found without the prefix too) "
        "or wandb:ENTITY/PROJECT (the W&B public API; run config gives params). Without a mapping "
        "each run is its own variant (seed 0) and `scalerl fit` gives no verdicts; with --map or "
        "--variant-from each run lands on a variant, knob, alternative and seed, and the baseline "
        "runs make up variant 'baseline'.",
    )
    p.add_argument("files", nargs="*", metavar="SOURCE")
    p.add_argument(
        "--mlflow-uri", metavar="URI", help="MLflow tracking URI to read (same as SOURCE mlflow:URI)"
    )
    p.add_argument("--experiment", metavar="NAME", help="MLflow experiment to read (with mlflow: sources)")
    m = p.add_argument_group("mapping runs to variants and seeds (see harness/importers/mapping.py)")
    m.add_argument(
        "--map",
        metavar="YAML",
        help="mapping file: knob/alternative (or variant), seed, baseline {param: value} or "
        "baseline_run, run_regex (named groups read params from run names)",
    )
    m.add_argument("--variant-from", metavar="PARAM", help="param whose value names the variant")
    m.add_argument("--seed-from", metavar="PARAM", help="param holding the seed (default: 0, 1, ...)")
    m.add_argument("--baseline", metavar="VALUE", help="the --variant-from value of the baseline runs")
    m.add_argument("--baseline-run", metavar="NAME", help="baseline run name (a glob for several seeds)")
    m.add_argument("--run-regex", metavar="RE", help="regex whose named groups add params from run names")
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


def _mapping(args: argparse.Namespace) -> RunMapping | None:
    from scalerl.harness.errors import ConfigError
    from scalerl.harness.importers.mapping import from_flags, load_mapping

    flags = (args.variant_from, args.seed_from, args.baseline, args.baseline_run, args.run_regex)
    if args.map is not None:
        if any(f is not None for f in flags):
            raise ConfigError(
                "--map excludes --variant-from/--seed-from/--baseline/--baseline-run/--run-regex",
                field="--map",
                value=args.map,
                fix="put the whole mapping in the file, or use only the flags",
            )
        return load_mapping(args.map)
    if all(f is None for f in flags):
        return None
    return from_flags(*flags)


def _read(args: argparse.Namespace) -> list[ImportResult]:
    from pathlib import Path

    from scalerl.harness.errors import ImportFormatError
    from scalerl.harness.importers.base import read_file
    from scalerl.harness.importers.mlflow_runs import PREFIX, read_mlflow
    from scalerl.harness.importers.tensorboard import read_logdir
    from scalerl.harness.importers.wandb_runs import (
        API_PREFIX,
        OFFLINE_PREFIX,
        offline_run_dirs,
        read_wandb_offline,
        read_wandb_project,
    )

    sources = list(args.files) + ([PREFIX + args.mlflow_uri] if args.mlflow_uri else [])
    if not sources:
        raise ImportFormatError("nothing to import (fix: name a SOURCE, or pass --mlflow-uri URI)")
    results: list[ImportResult] = []
    for src in sources:
        if src.startswith(PREFIX):
            if not args.experiment:
                raise ImportFormatError(f"{src}: which experiment? (fix: pass --experiment NAME)")
            results.append(
                read_mlflow(
                    src.removeprefix(PREFIX),
                    args.experiment,
                    metric=args.metric,
                    axis_column=args.axis_column,
                )
            )
        elif src.startswith(OFFLINE_PREFIX) or (
            args.fmt is None and Path(src).is_dir() and offline_run_dirs(src)
        ):
            results.extend(
                read_wandb_offline(
                    src.removeprefix(OFFLINE_PREFIX), metric=args.metric, axis_column=args.axis_column
                )
            )
        elif src.startswith(API_PREFIX):
            path = src.removeprefix(API_PREFIX)
            results.append(read_wandb_project(path, metric=args.metric, axis_column=args.axis_column))
        elif Path(src).is_dir():
            if args.fmt not in (None, "tensorboard"):
                raise ImportFormatError(
                    f"{src}: a directory is read as a TensorBoard log directory (fix: drop --format)"
                )
            results.extend(read_logdir(src, metric=args.metric, axis_column=args.axis_column))
        else:
            results.append(read_file(src, fmt=args.fmt, metric=args.metric, axis_column=args.axis_column))
    return results


def _import(args: argparse.Namespace) -> int:
    from scalerl import db
    from scalerl.harness.errors import ImportFormatError
    from scalerl.harness.importers.base import check_run_names, partial_message
    from scalerl.harness.importers.ingest import import_curves, run_params

    mapping = _mapping(args)  # a bad mapping file fails before any source is read
    # Read (and validate) every source before writing anything: a bad one leaves the store untouched.
    results = _read(args)
    for r in results:
        lost = f"; lost: {r.losses.describe()}" if r.losses else ""
        print(f"{r.source}: {len(r.curves)} curve(s), {r.points} point(s){lost}")
    partial = [r for r in results if r.losses]
    if partial and not args.allow_partial:
        raise ImportFormatError(f"nothing imported: {partial_message(partial)}")
    curves = [c for r in results for c in r.curves]
    check_run_names(curves)  # before mapping: runs of one name would merge there already
    roles = None
    if mapping is not None:
        roles = mapping.assign(run_params(curves))
        variants = sorted({r.variant for r in roles.values()})
        print(f"mapped {len(roles)} run(s) onto {len(variants)} variant(s): {', '.join(variants)}")
    store = db.open_store(args.db)
    try:
        summary = import_curves(store, curves, args.sweep, axis_unit=args.axis_unit, roles=roles)
    finally:
        store.close()
    print(
        f"imported {summary.curves} curve(s), {summary.points} point(s) into sweep {summary.sweep!r}: "
        f"{summary.runs} run(s) ({summary.new_runs} new); metrics: {', '.join(summary.metrics[:8])}"
        + (" ..." if len(summary.metrics) > 8 else "")
    )
    return 0

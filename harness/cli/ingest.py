"""``scalerl import``: ingest curves logged elsewhere (W&B CSV, TensorBoard files or log
directories, parsed CSV, verl JSONL, MLflow tracking stores, W&B offline runs and projects),
optionally mapped onto a baseline, knob variants and seeds so that ``scalerl fit`` gives verdicts."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any

from scalerl.harness.axes import COMPUTE_AXES

if TYPE_CHECKING:
    from scalerl.harness.importers.axis import AxisChoice
    from scalerl.harness.importers.base import ImportResult
    from scalerl.harness.importers.mapping import RunMapping, RunRole


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import",
        help="import curves from W&B CSV exports, TensorBoard event files or log directories, "
        "parsed-log CSVs, verl JSONL, an MLflow tracking store or W&B runs (offline or a project)",
        description="Read each FILE (format auto-detected unless --format) and write its curves into "
        "the store under SWEEP: one run per source run, one point per step. The x axis (the step, "
        "or --axis-column: any metric the runs log, such as perf/gpu_hours, or its running total "
        "with --axis-cumulative) fills a compute column: a step axis fills none, a time axis in "
        "seconds fills wall_s and gpu_hours (x / 3600, one device assumed), a name with hours, "
        "tokens, flops or samples that column, else name it with --axis-unit. The sweep keeps the "
        "axis and the metric (--metric, else the only or the one validation metric) as its "
        "defaults, so `scalerl fit`, `report` and `forecast` need no --axis or --metric. "
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
    m.add_argument(
        "--baseline-run",
        metavar="NAME",
        help="baseline run name (a glob for several seeds); without --variant-from each other run's "
        "knob is the one param whose value differs from the baseline's (its alternative: that value)",
    )
    m.add_argument(
        "--ignore-param",
        action="append",
        default=[],
        metavar="PARAM",
        help="with an inferred knob: a param that is no knob (an output folder, a run name), left "
        "out of the comparison (repeat for several)",
    )
    m.add_argument("--run-regex", metavar="RE", help="regex whose named groups add params from run names")
    m.add_argument(
        "--strict",
        action="store_true",
        help="a run the mapping does not match (it lacks a param the mapping reads) fails the import; "
        "without it such a run is skipped and listed",
    )
    s = p.add_argument_group(
        "choosing runs (see harness/importers/selection.py)",
        "A run's state comes from its source (MLflow FINISHED/FAILED/KILLED/RUNNING, W&B "
        "finished/failed/crashed/killed/running); files that record none are completed. Failed and "
        "killed runs are left out of the sweep (and so of its verdicts) and listed. A filter is "
        "name:GLOB, param:KEY=VALUE, tag:KEY=VALUE, param:KEY or tag:KEY (the run has it); a VALUE "
        "matches exactly, as a glob, or as the same number (1e-4 matches 0.0001).",
    )
    s.add_argument(
        "--include-failed",
        action="store_true",
        help="import failed and killed runs too (stored with their status, pooled in the verdicts)",
    )
    s.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="FILTER",
        help="keep only runs matching FILTER (repeat: a run must match every one), e.g. tag:team=rl",
    )
    s.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="FILTER",
        help="leave out runs matching FILTER (repeat: any one leaves a run out), e.g. 'name:debug-*'",
    )
    s.add_argument(
        "--run-status",
        action="append",
        default=[],
        metavar="NAME=STATE",
        help="set the state of runs named NAME (a glob) whose source records none (TensorBoard, CSV, "
        "JSON lines) or records it wrongly: completed, failed, killed, running, ...",
    )
    p.add_argument("--sweep", metavar="NAME", help="store sweep to import into (default: $SCALERL_SWEEP)")
    p.add_argument("--metric", metavar="M", help="only this metric (exact name or glob)")
    p.add_argument(
        "--axis-column",
        metavar="C",
        help="x axis: a column, series or any metric the runs log, such as perf/gpu_hours; points are "
        "joined to a logged metric by step. Default: the logged metric named for GPU-hours, FLOPs, "
        "tokens or samples that every run logs and that never falls (one line says which), else "
        "the step; `step` keeps the step",
    )
    p.add_argument(
        "--axis-cumulative",
        action="store_true",
        help="the --axis-column metric counts what each step spent (verl's perf/total_num_tokens): "
        "sum it into a running total, 0 before its first step",
    )
    p.add_argument(
        "--axis-unit",
        choices=("step", "wall_s", *COMPUTE_AXES),
        help="which compute column the x axis fills (default: inferred from its name: hours -> "
        "gpu_hours, tokens, flops, samples, time -> wall_s and gpu_hours, a step name -> none)",
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
        "--dry-run",
        action="store_true",
        help="read, choose and map the runs and pick the axis, print where each run would land "
        "(variant, knob, alternative, seed), and write nothing",
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
        if any(f is not None for f in flags) or args.ignore_param:
            raise ConfigError(
                "--map excludes --variant-from/--seed-from/--baseline/--baseline-run/--run-regex/"
                "--ignore-param",
                field="--map",
                value=args.map,
                fix="put the whole mapping in the file, or use only the flags",
            )
        return load_mapping(args.map)
    if all(f is None for f in flags) and not args.ignore_param:
        return None
    return from_flags(*flags, ignore=args.ignore_param)


def _read(args: argparse.Namespace) -> tuple[list[ImportResult], AxisChoice | None]:
    """Every source read, on the axis asked for; without ``--axis-column``, on the one
    :func:`~scalerl.harness.importers.axis.pick_axis` picks from the logged metrics (its choice
    is returned, to be said in one line)."""
    from scalerl.harness.errors import ImportFormatError
    from scalerl.harness.importers.axis import on_logged_axis, pick_axis
    from scalerl.harness.importers.mlflow_runs import PREFIX

    sources = list(args.files) + ([PREFIX + args.mlflow_uri] if args.mlflow_uri else [])
    if not sources:
        raise ImportFormatError("nothing to import (fix: name a SOURCE, or pass --mlflow-uri URI)")
    on_step = args.axis_column is not None and args.axis_column.strip().lower() == "step"
    if args.axis_cumulative and (not args.axis_column or on_step):
        raise ImportFormatError(
            "--axis-cumulative sums a per-step count, and no --axis-column names one "
            "(fix: e.g. --axis-column perf/total_num_tokens --axis-cumulative)"
        )
    if args.axis_column and not args.axis_unit and not on_step:
        from scalerl.harness.importers.ingest import infer_unit

        infer_unit(args.axis_column)  # a rate or an unknown unit fails before any source is read
    if args.axis_column is not None or args.axis_unit is not None:
        column = None if on_step else args.axis_column
        return _read_sources(args, sources, args.metric, column, args.axis_cumulative), None
    # No axis named: read every metric on the step, and pick the axis from what the runs log.
    results = _read_sources(args, sources, None, None, False)
    choice = pick_axis(results)
    if args.metric is not None:  # read again, as asked (the filter counts only its metric's losses)
        return _read_sources(args, sources, args.metric, choice.metric, False), choice
    if choice.metric is not None:
        results = on_logged_axis(results, choice.metric)
    return results, choice


def _read_sources(
    args: argparse.Namespace, sources: list[str], metric: str | None, column: str | None, cumulative: bool
) -> list[ImportResult]:
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

    axis: dict[str, Any] = {"axis_column": column, "axis_cumulative": cumulative}
    results: list[ImportResult] = []
    for src in sources:
        if src.startswith(PREFIX):
            if not args.experiment:
                raise ImportFormatError(f"{src}: which experiment? (fix: pass --experiment NAME)")
            results.append(read_mlflow(src.removeprefix(PREFIX), args.experiment, metric=metric, **axis))
        elif src.startswith(OFFLINE_PREFIX) or (
            args.fmt is None and Path(src).is_dir() and offline_run_dirs(src)
        ):
            results.extend(read_wandb_offline(src.removeprefix(OFFLINE_PREFIX), metric=metric, **axis))
        elif src.startswith(API_PREFIX):
            path = src.removeprefix(API_PREFIX)
            results.append(read_wandb_project(path, metric=metric, **axis))
        elif Path(src).is_dir():
            if args.fmt not in (None, "tensorboard"):
                raise ImportFormatError(
                    f"{src}: a directory is read as a TensorBoard log directory (fix: drop --format)"
                )
            results.extend(read_logdir(src, metric=metric, **axis))
        else:
            results.append(read_file(src, fmt=args.fmt, metric=metric, **axis))
    return results


def _import(args: argparse.Namespace) -> int:
    import dataclasses

    from scalerl import db
    from scalerl.harness.cli.busy import activity
    from scalerl.harness.errors import ImportFormatError
    from scalerl.harness.importers.base import check_run_names, losses_kept, partial_message
    from scalerl.harness.importers.ingest import LeftOutRun, import_curves, run_params
    from scalerl.harness.importers.mapping import RunRole
    from scalerl.harness.importers.selection import (
        LEFT_OUT_STATUSES,
        RunFilter,
        parse_statuses,
        relogged_runs,
        select_runs,
    )

    mapping = _mapping(args)  # a bad mapping file fails before any source is read
    only = [RunFilter.parse(t, "--only") for t in args.only]
    exclude = [RunFilter.parse(t, "--exclude") for t in args.exclude]
    statuses = parse_statuses(args.run_status)
    # Read (and validate) every source before writing anything: a bad one leaves the store untouched.
    with activity(f"reading {len(args.files) + bool(args.mlflow_uri)} source(s)", as_json=args.json):
        results, choice = _read(args)
    for r in results:
        lost = f"; lost: {r.losses.describe()}" if r.losses else ""
        print(f"{r.source}: {sum(1 for c in r.curves if len(c))} curve(s), {r.points} point(s){lost}")
    if choice is not None:
        print(choice.line)
    # Curves that lost every point stay until the runs are chosen: a run left out (failed,
    # filtered, unmapped) takes its losses with it, so only the imported runs' losses count.
    curves = [c for r in results for c in r.curves]
    check_run_names(curves)  # before mapping: runs of one name would merge there already
    chosen = select_runs(
        curves, include_failed=args.include_failed, only=only, exclude=exclude, statuses=statuses
    )
    for out in chosen.left_out:
        print(f"left out run {out.run!r}: {out.reason}")
    every = {c.run: c for c in curves}
    curves = list(chosen.curves)
    roles = None
    skipped: dict[str, str] = {}
    inference = None
    if curves and mapping is not None:
        params = run_params(curves)
        if mapping.infer:
            inference = mapping.inferred(params)
            print(inference.describe())
        roles, skipped = mapping.match(params, strict=args.strict)
        for run, why in skipped.items():
            print(f"skipped run {run!r}: the mapping does not match it: {why} (--strict makes this an error)")
        curves = [c for c in curves if c.run in roles]
    # Runs left out for their state stay visible: stored with it, without points (LeftOutRun).
    stored_out: list[LeftOutRun] = []
    for out in chosen.left_out:
        if out.kind != "state" or out.status not in LEFT_OUT_STATUSES:
            continue  # filtered out by --only/--exclude: the user's choice, listed above
        c = every[out.run]
        placed = mapping.place(c.run, run_params([c])[c.run], inference) if mapping is not None else None
        variant, knob, alt = placed if placed is not None else (c.run, None, None)
        seed = _seed_of(mapping, c) if placed is not None else 0
        stored_out.append(LeftOutRun(c, RunRole(variant, knob, alt, seed), out.status, out.reason))
    dropped = {o.run for o in chosen.left_out} | set(skipped)
    kept = [(r, losses_kept(r, dropped)) for r in results]
    partial = [dataclasses.replace(r, losses=counted) for r, counted in kept if counted]
    for r, counted in kept:
        if r.losses and not counted:
            print(f"{r.source}: what it lost is in runs left out of the import, so it does not count")
    if roles is not None:
        variants = sorted({r.variant for r in roles.values()})
        print(f"mapped {len(roles)} run(s) onto {len(variants)} variant(s): {', '.join(variants)}")
    if args.dry_run:
        return _dry_run(args, results, choice, curves, roles, chosen.left_out, skipped, stored_out, inference)
    if partial and not args.allow_partial:
        raise ImportFormatError(f"nothing imported: {partial_message(partial)}")
    if not curves and not skipped:
        raise ImportFormatError(
            f"nothing to import: all {len(chosen.left_out)} run(s) were left out (fix: check "
            "--only/--exclude, or pass --include-failed to import failed and killed runs)"
        )
    relogged = relogged_runs(curves)
    for run, n in relogged.items():
        print(f"run {run!r}: {n} step(s) re-logged after a restart; later values kept")
    curves = [c for c in curves if len(c)]  # an empty curve has nothing to write
    store = db.open_store(args.db)
    try:
        with activity("writing runs", as_json=args.json) as busy:
            summary = import_curves(
                store,
                curves,
                args.sweep,
                axis_unit=args.axis_unit,
                roles=roles,
                metric=args.metric,
                left_out=stored_out,
                progress=lambda done, total, run: busy.count(done, total, f"writing run {run}"),
            )
    finally:
        store.close()
    print(
        f"imported {summary.curves} curve(s), {summary.points} point(s) into sweep {summary.sweep!r}: "
        f"{summary.runs} run(s) ({summary.new_runs} new); metrics: {', '.join(summary.metrics[:8])}"
        + (" ..." if len(summary.metrics) > 8 else "")
    )
    if summary.left_out_stored:
        print(
            f"stored {summary.left_out_stored} left-out run(s) with their state and no points: "
            "`scalerl status` and the report list them; they take no part in the verdicts"
        )
    print(summary.defaults_line())
    if args.json:
        from collections.abc import Mapping

        from scalerl.harness.cli.output import emit

        fields = {f.name: getattr(summary, f.name) for f in dataclasses.fields(summary)}
        fields = {k: dict(v) if isinstance(v, Mapping) else v for k, v in fields.items()}
        emit({**fields, **_common(results, choice, chosen.left_out, skipped), "relogged_steps": relogged})
    return 0


def _seed_of(mapping: RunMapping | None, curve: Any) -> int:
    """A left-out run's seed: its seed param where the mapping names one and it is a whole number."""
    if mapping is None or mapping.seed is None:
        return 0
    text = mapping.params_of(
        curve.run, {**curve.params, **{f"tag:{k}": v for k, v in curve.tags.items()}}
    ).get(mapping.seed)
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        return 0
    return int(value) if math.isfinite(value) and value == int(value) and value >= 0 else 0


def _common(
    results: list[ImportResult], choice: AxisChoice | None, left_out: Any, skipped: dict[str, str]
) -> dict[str, Any]:
    """The parts of the import's --json document a dry run shares."""
    sources = [{"source": r.source, "curves": sum(1 for c in r.curves if len(c)), "points": r.points,
                "lost": r.losses.describe() if r.losses else None} for r in results]  # fmt: skip
    out: list[dict[str, str | None]] = [
        {"run": o.run, "status": o.status, "reason": o.reason} for o in left_out
    ]
    out += [{"run": run, "status": None, "reason": f"unmapped: {why}"} for run, why in skipped.items()]
    axis = None if choice is None else {"metric": choice.metric, "unit": choice.unit, "line": choice.line}
    return {"sources": sources, "left_out": out, "axis_choice": axis}


def _dry_run(
    args: argparse.Namespace,
    results: list[ImportResult],
    choice: AxisChoice | None,
    curves: list[Any],
    roles: dict[str, RunRole] | None,
    left_out: Any,
    skipped: dict[str, str],
    stored_out: list[Any],
    inference: Any,
) -> int:
    """``--dry-run``: where each run would land, and nothing written."""
    from scalerl.harness.importers.mapping import RunRole

    runs: dict[str, Any] = {}
    for c in curves:
        runs.setdefault(c.run, c)
    rows = []
    for run, c in sorted(runs.items()):
        role = roles[run] if roles is not None else RunRole(run, None, None, 0)
        rows.append({"run": run, "status": c.status, "variant": role.variant, "knob": role.knob,
                     "alternative": role.alternative, "seed": role.seed, "points": None})  # fmt: skip
    points: dict[str, int] = {}
    for c in curves:
        points[c.run] = points.get(c.run, 0) + len(c)
    for row in rows:
        row["points"] = points.get(str(row["run"]), 0)
    for out in stored_out:
        rows.append({"run": out.curve.run, "status": out.status, "variant": out.role.variant,
                     "knob": out.role.knob, "alternative": out.role.alternative, "seed": out.role.seed,
                     "points": 0})  # fmt: skip
    header = ("run", "status", "variant", "knob", "alternative", "seed", "points")
    table = [header] + [tuple("-" if line[k] is None else str(line[k]) for k in header) for line in rows]
    widths = [max(len(cells[i]) for cells in table) for i in range(len(header))]
    print(f"dry run: nothing written; sweep {args.sweep!r} would hold:")
    for cells in table:
        print("  " + "  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip())
    if args.json:
        from scalerl.harness.cli.output import emit

        emit(
            {
                "dry_run": True,
                "sweep": args.sweep,
                "runs": rows,
                "inferred": None
                if inference is None
                else {
                    "compared": list(inference.compared),
                    "ignored": dict(inference.ignored),
                    "baseline": dict(inference.base),
                },
                **_common(results, choice, left_out, skipped),
            }
        )
    return 0

"""``scalerl sweep`` / ``scalerl status`` / ``scalerl cancel``: launch and follow a sweep's jobs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from scalerl.harness.argtypes import real, whole
from scalerl.harness.cli.output import emit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="submit a sweep's missing runs (local, slurm or debug executor)",
        description="Plan SWEEP.yaml, record it in the store and submit only what is missing: completed "
        "runs are skipped, failed ones retried up to max_retries, running ones left alone. With "
        "fit.stop_when=decided, --wait stops a variant's runs (checkpointed, status stopped-decided) "
        "once its verdict is decided (scalerl.harness.execution.decide); fit.stop_when=settled also "
        "once more compute cannot decide it (both ceilings measured, only seeds would). --extend "
        "BUDGET resumes the sweep's completed, stopped-decided and pruned runs from their "
        "checkpoints to BUDGET: each keeps its run id, the store logs an `extended` event {from, "
        "to}, and the curve continues without gaps or duplicate points (scalerl.harness.execution.extend).",
    )
    p.add_argument("sweep_file", metavar="SWEEP.yaml")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="overrides of the sweep / recipe")
    p.add_argument("--executor", help="local | slurm | debug (default: the sweep's executor)")
    p.add_argument("--profile", help="Slurm profile: slurm/profiles/NAME.yaml or a NAME under it")
    p.add_argument("--wait", action="store_true", help="follow progress until every run finished")
    p.add_argument(
        "--poll-s",
        type=real(0.0, 86_400.0, lo_open=True),
        help="with --wait: ask the scheduler at most every S seconds (default: the profile's poll_s, "
        "60, on Slurm; 2 locally)",
    )
    p.add_argument(
        "--extend",
        type=real(0.0, lo_open=True),  # finite and > 0: `--extend nan` never reaches a run
        metavar="BUDGET",
        help="resume completed / stopped runs from their checkpoints to this budget (the sweep's unit)",
    )
    p.add_argument(
        "--on-code-change",
        choices=("refuse", "reuse", "rerun"),
        help="runs that other code made (another commit, dirty diff or package version): refuse to "
        "submit (default), reuse their results, or rerun them from scratch (default: the sweep's "
        "on_code_change)",
    )
    p.add_argument("--json", action="store_true", help="print the submission's decisions as JSON")
    p.add_argument("--db", help="store URL (default: $SCALERL_DB_URL, else sqlite:///./scalerl.db)")
    p.add_argument("--state-dir", type=Path, help="run workdirs and job files (default ./.scalerl/SWEEP)")
    p.add_argument(
        "--max-parallel", type=whole(1, 4096), help="local executor: runs at once (default cores/cpus)"
    )
    p.add_argument("--workers", type=whole(1, 1024), help="design: optuna: workers (default optuna.workers)")
    p.set_defaults(func=_sweep)

    s = sub.add_parser("status", help="sync job states into the store and print the sweep's runs")
    s.add_argument(
        "sweep", metavar="SWEEP", nargs="?", help="sweep name (or its YAML file; default: $SCALERL_SWEEP)"
    )
    s.add_argument("--db", help="store URL")
    s.add_argument("--json", action="store_true", help="print {sweep, counts, runs: [...]} as JSON")
    s.set_defaults(func=_status)

    c = sub.add_parser("cancel", help="cancel a sweep's unfinished jobs (or one run's)")
    c.add_argument(
        "sweep", metavar="SWEEP", nargs="?", help="sweep name (or its YAML file; default: $SCALERL_SWEEP)"
    )
    c.add_argument("--run", dest="run_id", metavar="RUN_ID", help="only this run")
    c.add_argument("--db", help="store URL")
    c.set_defaults(func=_cancel)


def _sweep_name(arg: str) -> str:
    if arg.endswith((".yaml", ".yml")) and Path(arg).is_file():
        from scalerl.harness.recipe import load_sweep

        return str(load_sweep(arg).sweep)
    return arg


def _sweep(args: argparse.Namespace) -> int:
    from scalerl.harness.recipe import load_sweep

    sweep = load_sweep(args.sweep_file, list(args.overrides))
    if sweep.design == "optuna":
        return _search(args, sweep)
    from scalerl import db
    from scalerl.harness.execution.progress import Display, follow, wait_tick
    from scalerl.harness.execution.sweep import extend, launch, prepare

    prepared = prepare(
        args.sweep_file,
        list(args.overrides),
        executor=args.executor,
        profile=args.profile,
        db_url=args.db,
        state_dir=args.state_dir.resolve() if args.state_dir else None,
        max_parallel=args.max_parallel,
        loaded=sweep,
    )
    store = db.open_store(args.db)
    state_dir = prepared.executor.ctx.state_dir
    doc: dict[str, Any] | None = None  # the --json document, sent once the command is done
    if args.extend is not None:
        extended = extend(store, prepared, args.extend, on_code_change=args.on_code_change)
        if args.json:
            doc = _extend_json(extended, state_dir)
        else:
            _print_extend(extended, state_dir)
    else:
        report = launch(store, prepared, on_code_change=args.on_code_change)
        if args.json:
            doc = _report_json(report, state_dir)
        else:
            _print_report(report, len(prepared.specs), state_dir)
    if not args.wait:
        if doc is not None:
            emit(doc)
        return 0
    name = prepared.sweep.sweep
    # The store is ours to read every couple of seconds; the scheduler is shared, so squeue/sacct
    # are asked at most every poll_s (the Slurm profile's, 60 s by default, or --poll-s).
    on_slurm = prepared.executor.name == "slurm"
    every = args.poll_s or (prepared.executor.ctx.profile.poll_s if on_slurm else 2.0)
    fit = prepared.sweep.fit
    display = Display(sys.stdout)  # under --json, sys.stdout is stderr here (scalerl.harness.cli.output)
    tick = wait_tick(
        store, name, every_s=every, stop_when=fit.stop_when, confidence=fit.confidence, say=display.say
    )
    snap = follow(store, name, metric=prepared.sweep.fit.metric, before_tick=tick, display=display)
    if doc is not None:
        emit({**doc, "final": snap.as_dict()})
    return 1 if snap.failed else 0


def _extend_json(report: Any, state_dir: Path) -> dict[str, Any]:
    rows = [
        {"run_id": d.spec.run_id, "variant": d.spec.variant, "seed": d.spec.seed, "action": d.action,
         "reason": d.reason}
        for d in report.decisions
    ]  # fmt: skip
    return {"sweep": report.sweep, "executor": report.executor, "budget": report.budget, "unit": report.unit,
            "state_dir": str(state_dir), "decisions": rows}  # fmt: skip


def _print_extend(report: Any, state_dir: Path) -> None:
    print(
        f"sweep {report.sweep}: extending {report.count('extend')} run(s) to {report.budget:g} {report.unit} "
        f"on {report.executor}; {report.count('skip-at-budget')} already there, "
        f"{report.count('skip-status', 'skip-no-checkpoint')} not extendable"
    )
    for d in report.decisions:
        print(f"  {d.action:<18} {d.spec.variant:<28} seed {d.spec.seed:<3} {d.spec.run_id}  ({d.reason})")
    print(f"run files: {state_dir}")


def _report_json(report: Any, state_dir: Path) -> dict[str, Any]:
    jobs = {h.run_id: h.job_id for h in report.handles}
    rows = [
        {"run_id": d.spec.run_id, "variant": d.spec.variant, "seed": d.spec.seed, "action": d.action,
         "reason": d.reason, "job_id": jobs.get(d.spec.run_id)}
        for d in report.decisions
    ]  # fmt: skip
    code = report.code.as_json() if report.code is not None else None
    return {"sweep": report.sweep, "executor": report.executor, "state_dir": str(state_dir),
            "decisions": rows, "code_change": code}  # fmt: skip


def _print_report(report: Any, planned: int, state_dir: Path) -> None:
    submitted = report.count("submit", "retry", "rerun")
    print(
        f"sweep {report.sweep}: {planned} runs planned; submitted {submitted} to {report.executor} "
        f"({report.count('retry')} retries); skipped {report.count('skip-completed')} completed, "
        f"{report.count('skip-running')} running; {report.count('exhausted')} failed with no retries left"
        + (f"; {n} stopped early (--extend resumes them)" if (n := report.count("skip-stopped")) else "")
        + (f"; {n} rerun under new code" if (n := report.count("rerun")) else "")
    )
    jobs = {h.run_id: h.job_id for h in report.handles}
    for d in report.decisions:
        job = f" job {jobs[d.spec.run_id]}" if d.spec.run_id in jobs else ""
        print(
            f"  {d.action:<15} {d.spec.variant:<28} seed {d.spec.seed:<3} {d.spec.run_id}{job}  ({d.reason})"
        )
    for line in report.code.lines() if report.code is not None else []:
        print(f"warning: {line}" if not line.startswith("  ") else line)
    print(f"run files: {state_dir}")


def _status(args: argparse.Namespace) -> int:
    from scalerl import db
    from scalerl.harness.execution.codechange import mixed_warning
    from scalerl.harness.execution.executors.local_slots import sweep_waiting
    from scalerl.harness.execution.progress import snapshot
    from scalerl.harness.execution.status import latest_handles, sync, views

    store = db.open_store(args.db, create=False)  # status never creates a store
    name = _sweep_name(args.sweep)
    _require_sweep(store, name)
    try:
        states = sync(store, name)
    except db.StoreReadOnlyError:
        # A read-only store: show the scheduler's states without recording dead jobs as failed.
        from scalerl.harness.execution.status import poll_jobs

        states = poll_jobs(latest_handles(store, name))
        print(f"note: store {store.url} is read-only: job states shown, not synced into it", file=sys.stderr)
    rows = views(store, name, states)
    snap = snapshot(store, name)
    # Local runs queued behind machine-wide slots: whose runs hold them.
    waits = sweep_waiting(latest_handles(store, name).values()) if snap.waiting else []
    if args.json:
        import dataclasses

        emit(
            {
                "sweep": name,
                "counts": snap.as_dict(),
                "runs": [dataclasses.asdict(r) for r in rows],
                "waiting": [w.as_dict() for w in waits],
            }
        )
        return 0
    print(f"sweep {name}: {snap.headline()}")
    for w in waits:
        print(f"  {w.describe()}")
    mixed = mixed_warning(r.provenance for r in rows)
    if mixed:
        print(f"warning: {mixed}")
    print(
        f"  {'run_id':<20} {'variant':<28} {'seed':>4} {'status':<10} {'att':>3} {'code':<14} "
        f"{'job':<24} job state"
    )
    for r in rows:
        print(
            f"  {r.run_id:<20} {r.variant[:28]:<28} {r.seed:>4} {r.status:<10} {r.attempts:>3} "
            f"{r.code[:14]:<14} {r.job[:24]:<24} {r.job_state}"
        )
        if r.error and r.status == "failed":
            print(f"      error: {r.error.strip().splitlines()[0][:160]}")
    return 0


def _require_sweep(store: Any, name: str) -> None:
    from scalerl.harness.lookup import require_sweep

    require_sweep(store, name)


def _cancel(args: argparse.Namespace) -> int:
    from scalerl import db
    from scalerl.harness.execution.cancel import cancel

    store = db.open_store(args.db, create=False)  # cancelling never creates a store
    name = _sweep_name(args.sweep)
    _require_sweep(store, name)
    done = cancel(store, name, run_id=args.run_id, db_url=args.db)
    search = done.pop("search", None)
    for run_id, what in done.items():
        print(f"  {run_id}: {what}")
    runs = sum(w == "cancelled" for w in done.values())
    if search is not None:
        more = "; its workers start no further trial" if search == "cancelled" else ""
        print(f"search {name}: {search}{more}")
    print(f"sweep {name}: cancelled {runs} run(s)", file=sys.stdout)
    if args.json:
        emit({"sweep": name, "cancelled": runs, "runs": done, "search": search})
    if runs or search == "cancelled":
        return 0
    # Asked to cancel and nothing was: say so in the exit status, not only in the text above.
    print(f"scalerl cancel: nothing of sweep {name} was cancelled (see the lines above)", file=sys.stderr)
    return 1


def _search(args: argparse.Namespace, sweep: Any) -> int:
    """``design: optuna``: start the search's workers (and with --wait, follow the study)."""
    from scalerl import db
    from scalerl.harness.errors import ConfigError
    from scalerl.harness.execution.profile import SlurmProfile
    from scalerl.harness.execution.submit import default_state_dir
    from scalerl.harness.execution.sweep import (
        check_store_for,
        job_db_url,
        resolve_profile,
        resolve_resources,
    )
    from scalerl.harness.search import launch_search, wait_search
    from scalerl.harness.search.space import check_space

    if getattr(args, "extend", None) is not None:
        raise ConfigError(
            "--extend applies to planned sweeps; a search's runs are its trials",
            field="--extend",
            value=args.extend,
            fix="raise optuna.n_trials and run scalerl sweep again to add trials",
        )
    executor = args.executor or sweep.executor
    profile = (
        resolve_profile(sweep, args.profile) if (executor == "slurm" or args.profile) else SlurmProfile()
    )
    check_store_for(executor, args.db, profile)
    url = job_db_url(args.db)  # a URL with a secret is refused before the store is touched
    check_space(sweep)  # so is a bad corner of the space or a bad pruner option
    state_dir = args.state_dir.resolve() if args.state_dir else default_state_dir(sweep.sweep)
    db.open_store(args.db).ensure_sweep(sweep.sweep, sweep.model_dump(mode="json", by_alias=True))
    launched = launch_search(
        sweep,
        args.sweep_file,
        list(args.overrides),
        executor=executor,
        resources=resolve_resources(sweep, profile),
        profile=profile,
        db_url=url,
        state_dir=state_dir,
        workers=args.workers,
    )
    shown = ", ".join(launched.job_ids) or "in this process"
    sec = sweep.optuna
    print(
        f"search {sweep.sweep}: {sec.n_trials} trials, sampler {sec.sampler.type}, pruner {sec.pruner.type}, "
        f"objective {sec.objective.kind} ({sec.objective.direction}); workers on {executor}: {shown}"
    )
    print(f"study {sec.study or sweep.sweep} in the store's database; run files: {state_dir}")
    doc = {
        "sweep": sweep.sweep,
        "study": sec.study or sweep.sweep,
        "executor": executor,
        "workers": list(launched.job_ids),
        "n_trials": sec.n_trials,
        "state_dir": str(state_dir),
    }
    if not args.wait and executor != "debug":
        if args.json:
            emit(doc)
        return 0
    study = wait_search(sweep, launched, url, interval_s=0.0 if executor == "debug" else 5.0)
    from optuna.trial import TrialState

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if args.json:
        emit({**doc, "completed_trials": len(complete)})
    return 1 if not complete else 0

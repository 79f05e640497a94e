"""The ``replay`` runner: replay a recorded curve point by point, as if training.

``runner: {type: replay, file: exports/run.csv}`` (any format :mod:`scalerl.harness.importers` reads;
``run`` names one run of a file that holds several, ``format`` overrides detection) or
``runner: {type: replay, run_id: <id>}`` (a run in the store; ``db_url`` names another store than
the job's). Searches, pruners and stop rules can then be tested and benchmarked exactly and
cheaply on real curves, through the same writer, fencing and resume paths as a real run.

Contract (see :mod:`scalerl.harness.execution.runners.base`):

- The source is read once per attempt. Its points are grouped by step (one ``sink.add`` per
  step, all selected ``metrics`` of that step together, with the sample counts ``n`` a stored
  run carries) and replayed in step order. Values are passed through unchanged, non-finite ones
  included.
- Compute: without ``compute``, a stored run's own compute columns are replayed, and a file's x
  axis becomes compute the way ``scalerl import`` stores it (a step axis: none; a time axis:
  ``wall_s`` and ``gpu_hours``; an axis named after a unit: that unit). ``compute: {flops:
  {column: step, scale: 5.0e12}, gpu_hours: {column: accumulated_training_time, scale:
  2.2e-3}}`` maps our units from source columns instead (``column`` is a file column / key /
  series, a stored unit, or ``step``; a bare string is ``{column: ...}``); ``compute: {}``
  replays steps only. A step's compute is the first value the source has at that step; a step
  without the column carries no value for that unit.
- Budget: the recipe's ``budget`` caps the replay in its unit (``steps``: the source step; a
  compute unit: that compute of each point). Points are replayed while they are within the
  budget (``<=``); the first point beyond it ends the run as ``completed``. A source that ends
  before the budget completes at its last point (a replay cannot go further than its curve).
- Speed: ``speed`` points per second: the runner waits ``1/speed`` s before each point after an
  attempt's first (0 or null: no waiting). The wait is on ``ctx.stop``, so a stop cuts it short.
- Stop and resume: ``ctx.stop`` is checked before every point. On stop the sink is flushed,
  ``workdir/replay.json`` records the last replayed step, and the attempt returns ``stopped``;
  :meth:`ReplayRunner.resume_step` gives that step to the store and the next attempt replays
  from the point after it: no gap, no duplicate. The same checkpoint is written (after a flush)
  whenever the replay crosses a multiple of ``checkpoint_every_steps`` and at the end, so a
  killed attempt also resumes cleanly.

Identity: the runner config (path or run id, selection, mapping, speed) is part of the run id;
the file's content is not, so editing a replayed file in place does not make a new run.
A relative ``file`` is resolved against the job's working directory (where ``scalerl sweep`` ran
for the local and Slurm executors); an absolute path is safer.
"""

from __future__ import annotations

import fnmatch
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalerl.harness.atomicio import write_atomic
from scalerl.harness.axes import COMPUTE_UNITS
from scalerl.harness.errors import ConfigError, ExecutionError, ImportFormatError
from scalerl.harness.execution.runners.base import Outcome, RunContext, Runner, register_runner
from scalerl.harness.execution.spec import RunSpec
from scalerl.harness.recipe.schema import BudgetConfig, ReplayRunnerConfig

CHECKPOINT = "replay.json"


@dataclass(frozen=True)
class ReplayPoint:
    """One step of the source: its metrics, its compute and the sample counts behind rates."""

    step: int
    metrics: dict[str, float]
    compute: dict[str, float]
    n: dict[str, int] = field(default_factory=dict)


# --------------------------------------------------------------------------- reading the source
def _select_metrics(available: Iterable[str], patterns: Sequence[str] | None, where: str) -> list[str]:
    """The available metrics the ``runner.metrics`` names / globs pick (all when None)."""
    names = sorted(set(available))
    if patterns is None:
        return names
    picked: list[str] = []
    for pat in patterns:
        hits = [m for m in names if m == pat or fnmatch.fnmatchcase(m, pat)]
        if not hits:
            shown = ", ".join(names[:12]) + (" ..." if len(names) > 12 else "")
            raise ConfigError(
                f"no metric of {where} matches it",
                field="runner.metrics",
                value=pat,
                fix=f"use one of: {shown}",
            )
        picked.extend(m for m in hits if m not in picked)
    return picked


def _group(
    rows: Iterable[tuple[int, str, float, dict[str, float], int | None]],
) -> list[ReplayPoint]:
    """(step, metric, value, compute, n) rows -> one point per step, in step order."""
    by_step: dict[int, ReplayPoint] = {}
    for step, metric, value, compute, n in rows:
        point = by_step.get(step)
        if point is None:
            point = by_step[step] = ReplayPoint(step, {}, {})
        point.metrics[metric] = value
        for unit, x in compute.items():
            point.compute.setdefault(unit, x)
        if n is not None:
            point.n[metric] = n
    return [by_step[s] for s in sorted(by_step)]


def _file_points(cfg: ReplayRunnerConfig) -> list[ReplayPoint]:
    from scalerl.harness.importers import read_curves
    from scalerl.harness.importers.ingest import compute_for, infer_unit

    assert cfg.file is not None
    path = Path(cfg.file).expanduser()
    if not path.is_file():
        where = "" if path.is_absolute() else f" (relative to {Path.cwd()})"
        raise ConfigError(
            f"no such curve file{where}",
            field="runner.file",
            value=cfg.file,
            fix="give an absolute path to a W&B CSV, TensorBoard, CSV or verl JSONL file",
        )

    def read(axis: str | None, fld: str, value: str) -> list[Any]:
        try:
            return read_curves(path, fmt=cfg.format, axis_column=axis)
        except ImportFormatError as err:
            raise ConfigError(f"cannot replay it: {err}", field=fld, value=value) from None

    curves = read(None, "runner.file", cfg.file)
    runs = list(dict.fromkeys(c.run for c in curves))
    if not runs:
        raise ConfigError(
            "the file holds no curve with a value",
            field="runner.file",
            value=cfg.file,
            fix="replay another file",
        )
    if cfg.run is not None:
        if cfg.run not in runs:
            raise ConfigError(
                f"{path} holds no run of that name",
                field="runner.run",
                value=cfg.run,
                fix=f"use one of {runs}",
            )
        run = cfg.run
    elif len(runs) == 1:
        run = runs[0]
    else:
        raise ConfigError(
            f"{path} holds {len(runs)} runs; say which one to replay",
            field="runner.run",
            fix=f"add run: <one of {runs}>",
        )
    curves = [c for c in curves if c.run == run]
    metrics = set(_select_metrics((c.metric for c in curves), cfg.metrics, f"{path} run {run!r}"))
    curves = [c for c in curves if c.metric in metrics]

    # step -> compute, per unit: from the default axis, or one more read per mapped column.
    per_step: dict[int, dict[str, float]] = {}
    if cfg.compute is None:
        try:
            unit = infer_unit(curves[0].x_name)
        except ImportFormatError:
            unit = "step"  # an axis we cannot name: replay steps only
        for c in curves:
            for st, xv in zip(c.steps.tolist(), c.x.tolist(), strict=True):
                per_step.setdefault(int(st), compute_for(unit, float(xv)))
    else:
        axes: dict[str, dict[int, float]] = {}
        for our_unit, col in cfg.compute.items():
            if col.column == "step" or col.column in axes:
                continue
            fld = f"runner.compute.{our_unit}.column"
            xs: dict[int, float] = {}
            for c in read(col.column, fld, col.column):
                if c.run == run:
                    for st, xv in zip(c.steps.tolist(), c.x.tolist(), strict=True):
                        xs.setdefault(int(st), float(xv))
            axes[col.column] = xs
        steps = {int(s) for c in curves for s in c.steps.tolist()}
        for st in steps:
            comp: dict[str, float] = {}
            for our_unit, col in cfg.compute.items():
                x = float(st) if col.column == "step" else axes[col.column].get(st)
                if x is not None:
                    comp[our_unit] = x * col.scale
            per_step[st] = comp
    return _group(
        (int(st), c.metric, float(v), per_step.get(int(st), {}), None)
        for c in curves
        for st, v in zip(c.steps.tolist(), c.values.tolist(), strict=True)
    )


def _stored_run(store: Any, run_id: str) -> Any:
    info = store.get_run(run_id)
    if info is None:
        raise ConfigError(
            f"no such run in the store {store.url}",
            field="runner.run_id",
            value=run_id,
            fix="copy the id from `scalerl status <sweep>`, or point runner.db_url at its store",
        )
    return info


def _check_store_source(cfg: ReplayRunnerConfig, own_run_id: str | None) -> str:
    """What can be checked of a run_id source without the store; returns the run id."""
    if cfg.run_id is None:
        raise ConfigError("no run_id to replay", field="runner.run_id", fix="give run_id or file")
    if cfg.run_id == own_run_id:
        raise ConfigError(
            "a run cannot replay itself", field="runner.run_id", value=cfg.run_id, fix="name another run"
        )
    for our_unit, col in (cfg.compute or {}).items():
        if col.column not in ("step", *COMPUTE_UNITS):
            raise ConfigError(
                "a stored run has no such column",
                field=f"runner.compute.{our_unit}.column",
                value=col.column,
                fix=f"use one of {['step', *COMPUTE_UNITS]}",
            )
    return cfg.run_id


def _require_run(cfg: ReplayRunnerConfig, db_url: str | None, own_run_id: str | None) -> None:
    from scalerl import db

    run_id = _check_store_source(cfg, own_run_id)
    store = db.open_store(cfg.db_url or db_url)
    try:
        _stored_run(store, run_id)
    finally:
        store.close()


def _store_points(cfg: ReplayRunnerConfig, db_url: str | None, own_run_id: str | None) -> list[ReplayPoint]:
    from scalerl import db
    from scalerl.db import queries

    run_id = _check_store_source(cfg, own_run_id)
    store = db.open_store(cfg.db_url or db_url)
    try:
        info = _stored_run(store, run_id)
        frame = queries.curves(store, info.sweep, run_ids=[run_id])
    finally:
        store.close()
    if frame.empty:
        raise ConfigError(
            f"run {cfg.run_id} (sweep {info.sweep!r}, status {info.status}) has no points yet",
            field="runner.run_id",
            value=cfg.run_id,
            fix="replay a run that has written points",
        )
    metric_col = frame["metric"].astype(str).to_numpy()
    keep = set(_select_metrics(set(metric_col.tolist()), cfg.metrics, f"run {cfg.run_id}"))
    steps = frame["step"].to_numpy().tolist()
    values = frame["value"].to_numpy().tolist()
    counts = frame["n"].to_numpy().tolist()
    units = {u: frame[u].to_numpy().tolist() for u in COMPUTE_UNITS}
    if cfg.compute is None:
        mapping = {u: (u, 1.0) for u in COMPUTE_UNITS}
    else:
        mapping = {u: (c.column, c.scale) for u, c in cfg.compute.items()}

    def rows() -> Iterable[tuple[int, str, float, dict[str, float], int | None]]:
        for i, metric in enumerate(metric_col.tolist()):
            if metric not in keep:
                continue
            step = int(steps[i])
            comp: dict[str, float] = {}
            for our_unit, (col, scale) in mapping.items():
                x = float(step) if col == "step" else units[col][i]
                if not math.isnan(x):
                    comp[our_unit] = x * scale
            k = counts[i]
            yield step, metric, float(values[i]), comp, None if math.isnan(k) else int(k)

    return _group(rows())


def load_points(
    cfg: ReplayRunnerConfig, *, db_url: str | None, own_run_id: str | None = None
) -> list[ReplayPoint]:
    """Every point of the configured source, one per step, in step order."""
    points = _file_points(cfg) if cfg.file is not None else _store_points(cfg, db_url, own_run_id)
    if not points:
        raise ConfigError(
            "the replay source has no points",
            field="runner.metrics",
            value=cfg.metrics,
            fix="pick other metrics",
        )
    return points


def within_budget(points: Sequence[ReplayPoint], budget: BudgetConfig) -> list[ReplayPoint]:
    """The points up to the budget: every one until the first whose budget value exceeds it."""
    kept: list[ReplayPoint] = []
    for p in points:
        if budget.unit == "steps":
            value = float(p.step)
        elif budget.unit in p.compute:
            value = p.compute[budget.unit]
        else:
            raise ConfigError(
                f"the replay source has no {budget.unit} compute at step {p.step}",
                field="budget.unit",
                value=budget.unit,
                fix=f"map it (runner.compute.{budget.unit}: {{column: <source column>, scale: ...}}) "
                "or use a budget in steps",
            )
        if value > budget.value:
            break
        kept.append(p)
    return kept


# --------------------------------------------------------------------------- the runner
def _save(workdir: Path, step: int) -> None:
    # A superseded attempt may still be stopping in this folder: unique temporary names.
    write_atomic(workdir / CHECKPOINT, json.dumps({"step": step}))


@register_runner("replay")
class ReplayRunner(Runner):
    """See the module docstring. ``sleep`` replaces the wait between points (tests inject one to
    see the requested waits); by default the runner waits on ``ctx.stop``."""

    def __init__(self, sleep: Callable[[float], None] | None = None) -> None:
        self._sleep = sleep

    def _pause(self, ctx: RunContext, seconds: float) -> bool:
        """Wait ``seconds``; True when a stop was requested meanwhile."""
        if self._sleep is None:
            return ctx.stop.wait(seconds)
        self._sleep(seconds)
        return ctx.stop.is_set()

    def run(self, ctx: RunContext) -> Outcome:
        recipe = ctx.spec.typed_recipe()
        cfg = recipe.runner
        if not isinstance(cfg, ReplayRunnerConfig):
            raise ConfigError(
                "the replay runner needs runner.type=replay", field="runner.type", value=cfg.type
            )
        points = within_budget(load_points(cfg, db_url=ctx.db_url, own_run_id=ctx.spec.run_id), recipe.budget)
        after = self.resume_step(ctx.workdir)
        todo = [p for p in points if after is None or p.step > after]
        delay = 1.0 / cfg.speed if cfg.speed else 0.0
        every = recipe.checkpoint_every_steps
        last = after
        for i, p in enumerate(todo):
            if ctx.superseded():
                return Outcome.STOPPED  # a newer attempt owns the run and its checkpoint
            if ctx.stop.is_set() or (delay and i and self._pause(ctx, delay)):
                return self._stopped(ctx, last)
            if p.n:
                ctx.sink.add(p.step, p.metrics, p.compute, n=p.n)
            else:  # a sink written before points carried n still takes the point
                ctx.sink.add(p.step, p.metrics, p.compute)
            crossed = last is None or p.step // every != last // every
            last = p.step
            if crossed:
                ctx.sink.flush()
                _save(ctx.workdir, last)
        ctx.sink.flush()
        if last is not None:
            _save(ctx.workdir, last)
        return Outcome.COMPLETED

    @staticmethod
    def _stopped(ctx: RunContext, last: int | None) -> Outcome:
        # Flush first: the checkpoint must never claim a point the store has not acknowledged.
        ctx.sink.flush()
        if last is not None:
            _save(ctx.workdir, last)
        return Outcome.STOPPED

    def resume_step(self, workdir: Path) -> int | None:
        path = workdir / CHECKPOINT
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:
            raise ExecutionError(
                f"{path}: unreadable replay checkpoint ({err}); fix: delete it to replay from the start"
            ) from None
        step = data.get("step") if isinstance(data, dict) else None
        if isinstance(step, bool) or not isinstance(step, int):
            raise ExecutionError(
                f"{path}: replay checkpoint without an integer step ({data!r}); "
                "fix: delete it to replay from the start"
            )
        return step


def check_sources(specs: Iterable[RunSpec]) -> None:
    """Check each distinct replay source once, so a bad one is reported by ``scalerl sweep``
    before anything is submitted: a file is read (path, format, run, metrics, compute columns,
    budget unit); a stored run must exist (its points may still be coming: a sweep can replay a
    run it trains first)."""
    seen: set[str] = set()
    for spec in specs:
        recipe = spec.typed_recipe()
        cfg = recipe.runner
        if not isinstance(cfg, ReplayRunnerConfig):
            continue
        key = json.dumps([cfg.model_dump(mode="json"), recipe.budget.model_dump(mode="json"), spec.db_url])
        if key in seen:
            continue
        seen.add(key)
        if cfg.file is not None:
            within_budget(load_points(cfg, db_url=spec.db_url), recipe.budget)
        else:
            _require_run(cfg, spec.db_url, spec.run_id)

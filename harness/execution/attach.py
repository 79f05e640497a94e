"""Attach a run started outside the harness (a lab's sbatch script, a Ray job, plain ``python``) to
a sweep: :func:`attach` registers and starts it, :func:`finish` ends it. The public face is
:func:`scalerl.harness.client.init`; this module holds the rules, so they read in one place.

Identity (the harness's rule, :mod:`scalerl.harness.recipe.hashing`): the run id is the first 16
hex of the SHA-256 of the canonical JSON of what the run is, plus ``-s<seed>``. What an attached
run is: ``{"attach": {"config": <the lab's config>, "knob": ..., "alternative": ...}}``, which is
also what the store keeps as the run's config. The knob and alternative are part of it, so a lab
whose launcher passes one config to its baseline and its variants (the knob set elsewhere) never
merges two variants into one run; the sweep is not (the store's rule: one config at one seed is
one run, in as many sweeps as name it). A sweep holds one run per (variant, seed): attaching a
changed config under names a run already has is refused, naming where the configs differ, since
it would be pooled as one more seed (or a requeue would start over as a new run).

Fencing (the store's rule for a requeued run): every :func:`attach` starts a new attempt of the
run, which fences every older attempt's writer and its finish. Attaching the same (config, knob,
alternative, seed) again, from a requeued sbatch job or a restarted Ray job, is a resume:
``resume_step=N`` drops the stored points after step N (the trainer re-logs them from its
checkpoint at N); ``None`` keeps them all and the new attempt's values win where it logs a step
again; ``-1`` drops them all (a fresh start). A run still ``running`` when attached again (its
process died, or still runs and is now fenced) gets a ``requeued`` event. A ``completed`` run is
refused unless ``rerun=True``: its points are already there, and silently retraining it over them
would be the costly surprise.

Provenance: each attempt records the code it runs (``provenance.capture`` of the running
program's folder, :func:`code_dir`; :mod:`scalerl.harness.execution.provenance`). An attach
whose code differs from the run's last attempt logs a ``code-changed`` event (policy ``attach``)
and a warning: unlike a resubmission, the process already runs the new code, so there is nothing
left to refuse.

A sweep the store does not know is created, as an attached sweep (``spec: {source: attach, loo:
{baseline_name: baseline}}``): the seeds of an sbatch array start in any order and none should
have to go first. ``create=False`` refuses instead, so a mistyped sweep name fails at once.
``metric`` / ``axis`` become the attached sweep's ``fit`` defaults (the latest attach's win; a
recipe's sweep keeps its own).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, func, select

from scalerl.db.limits import SEED_MAX, STEP_MAX, name_problem
from scalerl.db.models import Point, Run, Sweep, SweepRun
from scalerl.db.spool import spool_dir
from scalerl.harness.axes import COMPUTE_UNITS, FIT_AXES
from scalerl.harness.errors import ConfigError, ExecutionError, StoreError
from scalerl.harness.execution import provenance
from scalerl.harness.recipe.hashing import RUN_ID_HEX, canonical_json

log = logging.getLogger(__name__)
EXECUTOR = "attach"  # the run's executor column: what started it
BASELINE = "baseline"
SWEEP_SPEC: Mapping[str, Any] = {"source": "attach", "loo": {"baseline_name": BASELINE}}
ERROR_TAIL_CHARS = 4000
_WHERE = "client.init"


@dataclass(frozen=True)
class Attached:
    """One started attempt of an attached run (what :func:`attach` returns)."""

    run_id: str
    attempt: int
    sweep: str
    variant: str
    knob: str | None
    alternative: str | None
    seed: int
    config_hash: str
    created_sweep: bool
    # The run's cumulative compute at ``resume_step`` as the store holds it (running totals
    # continue from there); empty for a fresh start.
    compute_at_resume: Mapping[str, float]


def _bad(field: str, value: object, reason: str, fix: str) -> ConfigError:
    shown = value if isinstance(value, str | int | float | bool) or value is None else type(value).__name__
    return ConfigError(reason, file=_WHERE, field=field, value=shown, fix=fix)


def _name(field: str, value: object, fix: str) -> str:
    problem = name_problem(value)
    if problem is not None:
        raise _bad(field, value, f"{field} {problem}", fix)
    return str(value)


def _whole(field: str, value: object, lo: int, hi: int, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(field, value, f"{field} must be a whole number, not {type(value).__name__}", fix)
    if not lo <= value <= hi:
        raise _bad(field, value, f"{field} must be in [{lo}, {hi}]", fix)
    return value


def identity(config: Mapping[str, Any] | None, knob: str | None, alternative: str | None) -> dict[str, Any]:
    """What an attached run is (see the module docstring), as plain JSON data."""
    if not isinstance(config, Mapping):
        raise _bad(
            "config",
            config,
            "config is missing: it is what identifies the run"
            if config is None
            else f"config must be a mapping (the run's own settings), not {type(config).__name__}",
            'pass the trainer\'s resolved config as a dict, e.g. config={"lr": 1e-6, "model": "qwen-7b"} '
            "(OmegaConf: OmegaConf.to_container(cfg, resolve=True))",
        )
    if not config:
        raise _bad(
            "config",
            None,
            "config is empty: it is what identifies the run, so two different runs would share one id",
            "pass the trainer's resolved config (at least what differs between your runs)",
        )
    try:
        canonical_json(config)
    except ConfigError as err:  # a NaN / inf somewhere in the config: name its path in it
        raise ConfigError(
            err.reason, file=_WHERE, field=f"config.{err.field}", value=err.value, fix=err.fix
        ) from None
    data: dict[str, Any] = json.loads(
        canonical_json({"attach": {"config": config, "knob": knob, "alternative": alternative}})
    )
    return data


def config_hash(data: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(data).encode("ascii")).hexdigest()


def run_id_of(digest: str, seed: int) -> str:
    """``<first 16 hex of the hash>-s<seed>``: the planner's spelling."""
    return f"{digest[:RUN_ID_HEX]}-s{seed}"


def current_job_id() -> str:
    """Where this process runs: the Slurm array task / job, else the pid (for ``status``)."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID") or str(os.getpid())


def code_dir() -> Path:
    """Where the attached trainer's code is: the running program's folder (a lab's script, or
    ``python -m verl.trainer.main_ppo``'s module in the lab's fork), else the working directory."""
    main = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else ""
    path = Path(main).resolve() if main else None
    return path.parent if path is not None and path.is_file() else Path.cwd()


def not_code(store: Any) -> list[Path]:
    """Paths whose changes are not code: the SQLite store with its WAL files, the spool folder."""
    paths = [Path(".scalerl"), spool_dir(store.spool_dir)]
    db_file = getattr(store, "sqlite_path", None)
    if db_file:
        paths += [Path(db_file + suffix) for suffix in ("", "-wal", "-shm", "-journal")]
    return paths


def error_text(exc: BaseException) -> str:
    """What the store records for a failed run: the message first, then the traceback's tail."""
    head = f"{type(exc).__name__}: {exc}"
    tb = "".join(traceback.format_exception(exc))
    return (head + "\n" + tb[-(ERROR_TAIL_CHARS - len(head)) :]) if len(head) < ERROR_TAIL_CHARS else head


def attach(
    store: Any,
    *,
    sweep: str,
    knob: str | None = None,
    alternative: str | None = None,
    seed: int = 0,
    config: Mapping[str, Any] | None = None,
    variant: str | None = None,
    resume_step: int | None = None,
    rerun: bool = False,
    create: bool = True,
    metric: str | None = None,
    axis: str | None = None,
) -> Attached:
    """Register the run in ``sweep`` (if new) and start a new attempt of it; see the module
    docstring for the rules. Every argument is checked (a lab's script passes anything) before
    the first write."""
    from scalerl.db import RunRecord

    sweep = _name("sweep", sweep, 'name the sweep the run belongs to, e.g. sweep="loss-loo"')
    if (knob is None) != (alternative is None):
        given = "knob" if knob is not None else "alternative"
        raise _bad(
            given,
            knob if knob is not None else alternative,
            "knob and alternative go together: a variant is one knob set to one alternative",
            'pass both (knob="loss", alternative="dapo"), or neither for the baseline',
        )
    if knob is not None:
        knob = _name("knob", knob, 'name the knob this run changes, e.g. knob="loss"')
        alternative = _name("alternative", alternative, 'name its value, e.g. alternative="dapo"')
    seed = _whole("seed", seed, 0, SEED_MAX, "pass the run's seed, e.g. seed=0")
    if resume_step is not None:
        resume_step = _whole(
            "resume_step",
            resume_step,
            -1,
            STEP_MAX,
            "pass the step your trainer resumed from (its checkpoint's step), -1 for a fresh start, "
            "or leave it out",
        )
    defaults = _fit_defaults(metric, axis)
    data = identity(config, knob, alternative)
    digest = config_hash(data)
    run_id = run_id_of(digest, seed)
    known = _sweep_spec(store, sweep)
    if known is None and not create:
        raise _bad(
            "sweep",
            sweep,
            f"store {store.url} has no sweep {sweep!r} (create=False)",
            "check the name (`scalerl ls` lists the store's sweeps), or leave create at True",
        )
    baseline = str(((known or {}).get("loo") or {}).get("baseline_name") or BASELINE)
    default = baseline if knob is None else f"{knob}={alternative}"
    name = default if variant is None else _name("variant", variant, "name the variant, or leave it out")
    _check_variant(store, sweep, name, knob, alternative)
    _check_seed(store, sweep, name, seed, run_id, data)
    existing = store.get_run(run_id)
    if existing is not None and existing.status == "completed" and not rerun:
        raise _bad(
            "seed",
            seed,
            f"run {run_id} ({existing.sweep}/{existing.variant}: this config, knob and seed) is "
            "already completed; its points are in the store",
            "skip training it; or change the seed or config for another run; or pass rerun=True to "
            "train it again (a new attempt; its values win where it logs a step again)",
        )
    if known is None:
        store.ensure_sweep(sweep, {**SWEEP_SPEC, "fit": defaults} if defaults else SWEEP_SPEC)
    elif defaults and known.get("source") == EXECUTOR:
        # The latest attach's defaults win (as a later import's do); a recipe's sweep keeps its own.
        fit = dict(known.get("fit") or {})
        if {**fit, **defaults} != fit:
            store.update_sweep_spec(sweep, {"fit": {**fit, **defaults}})
    record = RunRecord(
        run_id=run_id, sweep=sweep, variant=name, seed=seed, config=data, config_hash=digest,
        knob=knob, alternative=alternative,
    )  # fmt: skip
    store.register_run(record)
    if existing is not None and existing.status == "running":
        # Its process died (a preemption, a node failure) or runs on, fenced from now on.
        store.log_event(run_id, "requeued", {"attempt": existing.attempts, "by": EXECUTOR})
    code = provenance.capture(code_dir(), exclude=not_code(store))
    changed = provenance.differences(existing.provenance if existing is not None else None, code)
    if changed and existing is not None:
        # The process runs the new code already: say so where `status` and the report look,
        # rather than refuse a requeued job at its start.
        log.warning(
            "run %s: the code changed since its last attempt: %s", run_id, provenance.describe(changed)
        )
        detail = {"policy": EXECUTOR, "old": dict(existing.provenance or {}), "new": code,
                  "changed": [f for f, _, _ in changed]}  # fmt: skip
        store.log_event(run_id, "code-changed", detail)
    attempt = store.start_attempt(
        run_id, executor=EXECUTOR, job_id=current_job_id(), host=socket.gethostname(),
        resume_step=resume_step, provenance=code,
    )  # fmt: skip
    at_resume = (
        _compute_at(store, run_id, resume_step) if resume_step is not None and resume_step >= 0 else {}
    )
    return Attached(run_id, attempt, sweep, name, knob, alternative, seed, digest, known is None, at_resume)


def finish(store: Any, writer: Any, run: Attached, error: str | None) -> str:
    """Close ``writer`` and end the attempt: ``failed`` with ``error`` when given, else
    ``completed``. Returns the status recorded, or ``superseded`` when a newer attempt owns the run
    (nothing is changed), or ``cancelled`` when ``scalerl cancel`` ended it first.

    Raises StoreError when points did not reach the store (they wait in the spool; the replay
    completes the run), and ExecutionError for a run that would complete with no point at all."""
    from scalerl.db.spool import note_finish

    writer.close()
    if writer.fenced:
        return "superseded"
    left = writer.left_in_spool
    if left is not None:
        spool, points = left
        # The replay stores the points and then ends the run as this attempt meant to.
        note_finish(spool, run.run_id, run.attempt, "failed" if error else "completed", error)
        with contextlib.suppress(StoreError):  # the store itself may be the problem
            store.finish_run(
                run.run_id, run.attempt, "failed", error=error or f"{points} point(s) in the spool"
            )
        if error is None:
            raise StoreError(
                f"run {run.run_id}: {points} point(s) did not reach the store {store.url} and wait in "
                f"{spool} (fix: repair the store, then `scalerl db replay --spool {spool.parent} URL`)"
            )
        return "failed"
    now = store.get_run(run.run_id)
    if now is not None and now.status == "cancelled":
        return "cancelled"
    if error is not None:
        return "failed" if store.finish_run(run.run_id, run.attempt, "failed", error=error) else "superseded"
    if not _point_count(store, run.run_id):
        reason = (
            f"run {run.run_id} (attempt {run.attempt}) ended with no point in the store "
            "(fix: call run.log(step, {metric: value}, compute={...}) before finishing)"
        )
        store.finish_run(run.run_id, run.attempt, "failed", error=reason)
        raise ExecutionError(reason)
    return "completed" if store.finish_run(run.run_id, run.attempt, "completed") else "superseded"


# ---------------------------------------------------------------------------- store reads
def _fit_defaults(metric: str | None, axis: str | None) -> dict[str, str]:
    """The ``fit`` section an attached sweep keeps, so ``scalerl fit``/``report``/``forecast``
    need no ``--metric``/``--axis``."""
    out: dict[str, str] = {}
    if metric is not None:
        out["metric"] = _name("metric", metric, 'name the metric to fit, e.g. metric="val/pass_rate"')
    if axis is not None:
        if axis not in FIT_AXES:
            raise _bad("axis", axis, "axis is not a compute axis", f"use one of {', '.join(FIT_AXES)}")
        out["axis"] = axis
    return out


def _sweep_spec(store: Any, sweep: str) -> dict[str, Any] | None:
    def tx(conn: Connection) -> dict[str, Any] | None:
        row = conn.execute(select(Sweep.spec).where(Sweep.name == sweep)).first()
        return None if row is None else dict(row[0] or {})

    result: dict[str, Any] | None = store.transaction(tx, doing=f"reading sweep {sweep!r}", write=False)
    return result


def _check_variant(store: Any, sweep: str, variant: str, knob: str | None, alternative: str | None) -> None:
    """A variant is one knob at one alternative: refuse a name the sweep already gives to another."""

    def tx(conn: Connection) -> set[tuple[str | None, str | None]]:
        q = select(SweepRun.knob, SweepRun.alternative).where(
            SweepRun.sweep == sweep, SweepRun.variant == variant
        )
        return {(r[0], r[1]) for r in conn.execute(q.distinct())}

    seen = store.transaction(tx, doing=f"reading variant {variant!r} of sweep {sweep!r}", write=False)
    others = sorted(seen - {(knob, alternative)}, key=str)
    if others:
        k, a = others[0]
        raise _bad(
            "variant",
            variant,
            f"sweep {sweep!r} already has variant {variant!r} as "
            + ("the baseline (no knob)" if k is None else f"knob {k!r} = {a!r}")
            + ", not "
            + ("the baseline" if knob is None else f"knob {knob!r} = {alternative!r}"),
            "use another variant name, or the knob and alternative that variant has",
        )


def _check_seed(
    store: Any, sweep: str, variant: str, seed: int, run_id: str, data: Mapping[str, Any]
) -> None:
    """One run per (sweep, variant, seed): a changed config under the same names would be pooled
    as one more seed of the variant (or a requeue whose config changed would start over as another
    run), so it is refused, saying where the configs differ."""

    def tx(conn: Connection) -> list[tuple[str, Any]]:
        q = (
            select(Run.run_id, Run.config)
            .join(SweepRun, SweepRun.run_id == Run.run_id)
            .where(
                SweepRun.sweep == sweep, SweepRun.variant == variant, Run.seed == seed, Run.run_id != run_id
            )
        )
        return [(str(r[0]), r[1]) for r in conn.execute(q)]

    others = store.transaction(tx, doing=f"reading the runs of {variant!r} in sweep {sweep!r}", write=False)
    if not others:
        return
    other, config = others[0]
    mine = (data.get("attach") or {}).get("config") or {}
    theirs = ((config or {}).get("attach") or {}).get("config") if isinstance(config, Mapping) else None
    where = ", ".join(_differences(mine, theirs)[:5]) if isinstance(theirs, Mapping) else "its whole config"
    raise _bad(
        "config",
        None,
        f"sweep {sweep!r} already has {variant} seed {seed} as run {other}, whose config differs "
        f"(at: {where})",
        "attach with that run's config (keep out of it what changes between a job and its requeue), "
        "or use another seed or sweep for the changed config",
    )


def _differences(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The dotted paths where two plain configs differ, in key order."""
    out: list[str] = []
    for key in sorted(set(a) | set(b), key=str):
        path = f"{prefix}{key}"
        x, y = a.get(key), b.get(key)
        if isinstance(x, Mapping) and isinstance(y, Mapping):
            out += _differences(x, y, path + ".")
        elif key not in a or key not in b or x != y:
            out.append(path)
    return out


def _point_count(store: Any, run_id: str) -> int:
    def tx(conn: Connection) -> int:
        return int(conn.execute(select(func.count()).where(Point.run_id == run_id)).scalar_one())

    n: int = store.transaction(tx, doing=f"counting the points of run {run_id!r}", write=False)
    return n


def _compute_at(store: Any, run_id: str, step: int) -> dict[str, float]:
    """The run's compute columns at its last stored step <= ``step`` (running totals resume there)."""
    cols = [getattr(Point, u) for u in COMPUTE_UNITS]

    def tx(conn: Connection) -> dict[str, float]:
        last = (
            select(func.max(Point.step)).where(Point.run_id == run_id, Point.step <= step).scalar_subquery()
        )
        rows = conn.execute(select(*cols).where(Point.run_id == run_id, Point.step == last)).all()
        out: dict[str, float] = {}
        for row in rows:  # one row per metric at that step; they share the step's compute
            for unit, value in zip(COMPUTE_UNITS, row, strict=True):
                if value is not None:
                    out[unit] = max(out.get(unit, 0.0), float(value))
        return out

    result: dict[str, float] = store.transaction(
        tx, doing=f"reading the compute of run {run_id!r}", write=False
    )
    return result

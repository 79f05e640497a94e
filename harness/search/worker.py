"""A search worker: pull trials from the shared Optuna study, train each as a run, tell the result.

N workers (local processes, or the tasks of one Slurm job array) run :func:`run_worker` against
the same study, which lives in an Optuna ``RDBStorage`` at the store's URL. One trial:

1. ``study.ask()`` (a retried trial's copy is popped first); its parameters become the variant
   ``trial-NNNN`` and, through the planner's rules, a run id: identical parameters are one run;
2. the run is registered in the store under the sweep, with a ``trial`` event carrying the study,
   the trial number and its parameters; the trial records ``run_id`` as a user attribute;
3. the run trains through the ordinary job body (:func:`scalerl.harness.execution.job.execute`), whose
   points are also reported to the trial (``step = round(compute x compute_scale)`` on the fit
   axis); when the pruner says so, the run stops at its next step with a checkpoint and ends as
   ``pruned`` (``scalerl sweep --extend`` can take it further);
4. a finished run's objective (:mod:`scalerl.harness.search.objective`) is told to the study.

Failures and preemption. A worker told to stop (Slurm's USR2 / SIGTERM, ``scalerl cancel``)
checkpoints its run, fails the trial and enqueues a copy with the same parameters, so whichever
worker asks next resumes the same run from its checkpoint. A worker killed outright stops beating
its trial's heartbeat; after ``2 x heartbeat_s`` another worker fails it and Optuna's
``RetryFailedTrialCallback`` enqueues the copy (up to the sweep's ``max_retries``). A trial whose
run is already completed or pruned (the same parameters asked again) costs nothing: its stored
curve answers. Workers stop once ``n_trials`` trials are claimed (complete, pruned, running,
waiting, or failed for good); two workers asking at the same instant can overshoot by one each.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from submitit.helpers import Checkpointable, DelayedSubmission

from scalerl.db.redaction import scrub
from scalerl.harness.errors import ConfigError, ExecutionError, HarnessError
from scalerl.harness.execution.spec import Resources, RunSpec

if TYPE_CHECKING:
    import optuna

    from scalerl.harness.recipe.sweep import SweepSpec

log = logging.getLogger(__name__)

RETRY_ATTR = "retry_of"  # user attribute: the trial number this one re-runs (a stopped worker's)


@dataclass(frozen=True)
class WorkerSpec:
    """Everything one worker needs, as plain data (pickled by submitit, or a JSON file)."""

    sweep_file: str
    overrides: tuple[str, ...]
    db_url: str | None
    state_dir: str
    executor: str = "local"
    index: int = 0
    resources: Resources = field(default_factory=Resources)
    checkpoint_grace_s: float = 60.0

    def __post_init__(self) -> None:
        from scalerl.db.engine import refuse_secret

        refuse_secret(self.db_url, where="the search worker's JSON file")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        data = json.loads(text)
        data["overrides"] = tuple(data.get("overrides", ()))
        data["resources"] = Resources(**data.get("resources", {}))
        return cls(**data)

    def write(self, path: Path) -> None:
        from scalerl.harness.atomicio import PRIVATE, write_atomic

        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, self.to_json(), mode=PRIVATE)  # may carry a DB URL


@dataclass
class WorkerReport:
    complete: int = 0
    pruned: int = 0
    failed: int = 0
    reused: int = 0  # trials answered by a run already in the store


def storage_url(db_url: str | None) -> str:
    """The store's URL with its password, for Optuna (never printed)."""
    from scalerl.db.engine import resolve_url

    return resolve_url(db_url).render_as_string(hide_password=False)


def open_study(sweep: SweepSpec, db_url: str | None, worker: int = 0) -> optuna.Study:
    """Create (or load) the sweep's study in an RDBStorage at the store's URL.

    A grid sampler's grid is enqueued once, in a seeded order, when the study is new: Optuna's
    ``GridSampler`` stops a study through ``Study.stop``, which only ``optimize`` allows, and
    workers use ask-and-tell. Trials past the grid would be random, so the grid also caps
    ``n_trials`` (see :func:`claimed`)."""
    import inspect

    import optuna
    from optuna import storages

    from scalerl.harness.search.space import (
        SPACE_ATTR,
        check_study,
        make_pruner,
        make_sampler,
        section,
        space_json,
        study_name,
    )

    sec = section(sweep)
    url = storage_url(db_url)
    kwargs: dict[str, Any] = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    # Optuna >= 4.9 renamed the stale-trial hook; older releases (>= 3.6 is allowed) have the old name.
    retry_cls = (
        getattr(storages, "RetryHeartbeatStaleTrialCallback", None) or storages.RetryFailedTrialCallback
    )
    hook = (
        "heartbeat_stale_trial_callback"
        if "heartbeat_stale_trial_callback" in inspect.signature(storages.RDBStorage).parameters
        else "failed_trial_callback"
    )
    with optuna_quiet():
        storage = storages.RDBStorage(
            url,
            engine_kwargs=kwargs,
            heartbeat_interval=sec.heartbeat_s,
            grace_period=2 * sec.heartbeat_s,
            **{hook: retry_cls(max_retry=sweep.max_retries)},  # type: ignore[arg-type]
        )
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # Each worker seeds its sampler with seed + its slot (:func:`worker_slot`, unique across every
    # launch on the study): with one seed, N workers would propose the same first trials in
    # lockstep (the same run N times).
    sampler = make_sampler(sec, worker=worker)
    study = optuna.create_study(
        study_name=study_name(sweep),
        storage=storage,
        sampler=sampler,
        pruner=make_pruner(sweep),
        direction=sec.objective.direction,
        load_if_exists=True,
    )
    check_study(study, sweep)  # an existing study of another direction or space is refused
    if SPACE_ATTR not in study.user_attrs:
        study.set_user_attr(SPACE_ATTR, space_json(sec))
    if sec.sampler.type == "grid" and not study.get_trials(deepcopy=False):
        for params in grid_points(sweep)[: sec.n_trials]:
            study.enqueue_trial(params, skip_if_exists=True)
    return study


def grid_points(sweep: SweepSpec) -> list[dict[str, Any]]:
    """Every combination of the grid, shuffled by the sampler's seed (as Optuna's grid sampler)."""
    import itertools
    import random

    from scalerl.harness.search.space import section

    sec = section(sweep)
    keys = list(sec.space)
    combos = [
        dict(zip(keys, values, strict=True))
        for values in itertools.product(*(sec.space[k].grid() or [] for k in keys))
    ]
    random.Random(sec.sampler.seed).shuffle(combos)
    return combos


@contextmanager
def optuna_quiet() -> Iterator[None]:
    """Heartbeats with ask-and-tell are what Optuna's docs describe for distributed workers, but it
    flags them experimental and warns on every call; the warnings say nothing to a user here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _retried_numbers(trials: list[Any]) -> set[int]:
    """Numbers of the trials some later trial re-runs (ours: ``retry_of``; Optuna's retry
    callback: ``retry_history``)."""
    out = set()
    for t in trials:
        origin = t.user_attrs.get(RETRY_ATTR)
        if origin is not None:
            out.add(int(origin))
        out.update(int(n) for n in t.system_attrs.get("retry_history", ()))
    return out


def claimed(study: optuna.Study) -> tuple[int, int]:
    """(trials that count towards n_trials, trials waiting to be asked)."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    retried = _retried_numbers(trials)
    waiting = sum(t.state == TrialState.WAITING for t in trials)
    counted = sum(not (t.state == TrialState.FAIL and t.number in retried) for t in trials)
    return counted, waiting


def target_trials(sweep: SweepSpec) -> int:
    """``n_trials``, capped by the grid's size for a grid sampler."""
    from scalerl.harness.search.space import section

    sec = section(sweep)
    if sec.sampler.type == "grid":
        return min(sec.n_trials, len(grid_points(sweep)))
    return sec.n_trials


class _Reporter:
    """The job's tap: each point of the fit metric goes to the trial; a prune sets ``stop``."""

    def __init__(self, trial: Any, metric: str, axis: str, scale: float, stop: threading.Event) -> None:
        self.trial, self.metric, self.axis, self.scale, self.stop = trial, metric, axis, scale, stop
        self.pruned_at: int | None = None

    def report(self, value: float, compute: float) -> None:
        if self.pruned_at is not None:
            return
        at = round(compute * self.scale)
        with warnings.catch_warnings():  # a resumed run re-reports the steps after its checkpoint
            warnings.simplefilter("ignore")
            self.trial.report(float(value), at)
        if self.trial.should_prune():
            self.pruned_at = at
            self.stop.set()

    def __call__(self, step: int, metrics: Mapping[str, float], compute: Mapping[str, float]) -> None:
        if self.metric not in metrics:
            return
        c = float(step) if self.axis == "step" else compute.get(self.axis)
        if c is None:
            return
        self.report(float(metrics[self.metric]), float(c))


def _stored_curve(store: Any, sweep: str, run_id: str, metric: str, axis: str) -> tuple[Any, Any]:
    """(compute on ``axis``, values) of one run's stored points, in step order."""
    from scalerl.db import queries

    frame = queries.curves(store, sweep, metric=metric, run_ids=[run_id]).sort_values("step")
    return frame[axis].to_numpy(dtype=float), frame["value"].to_numpy(dtype=float)


def _finished_elsewhere(err: BaseException) -> bool:
    """Optuna refused to update a trial another worker already finished: UpdateFinishedTrialError
    from optuna 4, a RuntimeError saying so before (our floor is 3.6)."""
    if type(err).__name__ == "UpdateFinishedTrialError":
        return True
    return isinstance(err, RuntimeError) and "already finished" in str(err)


def run_worker(spec: WorkerSpec, stop: threading.Event | None = None) -> WorkerReport:
    """Run trials until ``n_trials`` are claimed or ``stop`` is set; see the module docstring."""

    from scalerl import db
    from scalerl.harness.recipe import load_sweep
    from scalerl.harness.search.control import is_cancelled, watch_cancel
    from scalerl.harness.search.space import check_space, section

    stop = stop or threading.Event()
    sweep = load_sweep(spec.sweep_file, list(spec.overrides))
    sec = section(sweep)
    check_space(sweep)
    store = db.open_store(spec.db_url)  # our tables first, so an empty database becomes a store
    store.ensure_sweep(sweep.sweep, sweep.model_dump(mode="json", by_alias=True))
    study = open_study(sweep, spec.db_url, worker=worker_slot(store, sweep, spec))
    report = WorkerReport()
    from optuna.storages import fail_stale_trials

    from scalerl.harness.search.space import distributions

    dists = distributions(sec)
    wanted = target_trials(sweep)
    done = threading.Event()
    # `scalerl cancel` flags the study; this sets `stop`, which ends the trial's run (checkpointed).
    watcher = threading.Thread(
        target=watch_cancel, args=(study, stop, done, min(2.0, sec.heartbeat_s)), daemon=True
    )
    watcher.start()
    try:
        while not stop.is_set() and not is_cancelled(study):
            with optuna_quiet():
                fail_stale_trials(study)
            counted, waiting = claimed(study)
            if counted >= wanted and not waiting:
                break
            with optuna_quiet():
                trial = study.ask(dists)
            # Beat from the moment the trial exists: a worker that dies anywhere after this leaves
            # a stale trial that the others reap (fail and retry), never one RUNNING forever.
            ended = threading.Event()
            beat = threading.Thread(
                target=_heartbeat, args=(study, trial, ended, sec.heartbeat_s), daemon=True
            )
            beat.start()
            try:
                _run_trial(spec, sweep, store, study, trial, stop, report)
            except Exception as err:
                if not _finished_elsewhere(err):
                    _fail_if_running(study, trial, err)  # a sibling clause would not see this raise
                    raise
                # Reaped as stale while it ran (a stall longer than the grace period): its copy
                # is enqueued and answered by the run's stored result; this worker goes on.
                log.warning("trial %d was failed as stale by another worker meanwhile", trial.number)
            except BaseException as exc:
                _fail_if_running(study, trial, exc)
                raise
            finally:
                ended.set()
    finally:
        done.set()
    return report


def worker_slot(store: Any, sweep: SweepSpec, spec: WorkerSpec) -> int:
    """This worker's place among every worker ever started on the study, 0, 1, 2, ... in start
    order: its sampler's seed offset. Worker indices restart at 0 with each launch, so two
    launches on one store would otherwise seed their samplers alike and propose the same trials.
    The store's event ids are the counter: one insert each, ordered, whatever the executor."""
    import socket
    import uuid

    from scalerl.db import queries
    from scalerl.harness.search.space import study_name

    mark = uuid.uuid4().hex  # (not "token": the store redacts values under secret-like keys)
    name = study_name(sweep)
    detail = {"study": name, "index": spec.index, "host": socket.gethostname(), "pid": os.getpid()}
    store.log_event(None, "search-worker", detail | {"mark": mark}, sweep=sweep.sweep)
    events = queries.events(store, sweep.sweep)
    mine = events[(events.kind == "search-worker")]
    slot = 0
    for d in mine["detail"]:
        if d.get("mark") == mark:
            return slot
        slot += d.get("study") == name
    return spec.index  # our own event not read back: keep the launch's index


def _fail_if_running(study: optuna.Study, trial: optuna.Trial, exc: BaseException) -> None:
    """A worker leaving a trial on an error of its own (not the run's) fails it first, so it is
    never left RUNNING; Optuna's retry callback does not apply, the trial's error is recorded."""
    from optuna.trial import TrialState

    try:
        if study._storage.get_trial(trial._trial_id).state == TrialState.RUNNING:
            trial.set_user_attr("error", scrub(f"worker error: {type(exc).__name__}: {exc}")[:500])
            study.tell(trial, state=TrialState.FAIL)
    except Exception:  # the store is what failed: the heartbeat reaps the trial later
        log.exception("failing trial %d after a worker error", trial.number)


def _run_trial(
    spec: WorkerSpec,
    sweep: SweepSpec,
    store: Any,
    study: optuna.Study,
    trial: optuna.Trial,
    worker_stop: threading.Event,
    report: WorkerReport,
) -> None:
    from optuna.trial import TrialState

    from scalerl.db import RunRecord
    from scalerl.harness.execution.job import execute
    from scalerl.harness.recipe.hashing import RUN_ID_HEX, config_hash
    from scalerl.harness.recipe.planner import variant_recipe
    from scalerl.harness.search.control import is_cancelled
    from scalerl.harness.search.objective import NoObjective, objective
    from scalerl.harness.search.space import section, study_name, trial_variant

    sec = section(sweep)
    seed = sweep.seeds[0]
    params = dict(trial.params)
    variant = trial_variant(sweep, trial.number, params)
    try:
        recipe = variant_recipe(sweep, variant)
    except ConfigError as exc:  # a combination the recipe rules refuse: this trial fails, not the worker
        trial.set_user_attr("error", scrub(str(exc))[:500])
        study.tell(trial, state=TrialState.FAIL)
        report.failed += 1
        return
    digest = config_hash(recipe)
    run_id = f"{digest[:RUN_ID_HEX]}-s{seed}"
    store.register_runs([RunRecord(run_id, sweep.sweep, variant.name, seed, recipe.resolved(), digest)])
    trial.set_user_attr("run_id", run_id)
    trial.set_user_attr("variant", variant.name)
    store.log_event(
        run_id,
        "trial",
        {"study": study_name(sweep), "number": trial.number, "params": params, "worker": spec.index},
    )
    _wait_for_twin(study, trial.number, run_id, worker_stop)
    trial_stop = threading.Event()
    reporter = _Reporter(trial, sweep.fit.metric, sweep.fit.axis, sec.compute_scale, trial_stop)
    before = store.get_run(run_id)
    x, y = _stored_curve(store, sweep.sweep, run_id, sweep.fit.metric, sweep.fit.axis)
    for c, v in zip(x, y, strict=True):
        reporter.report(float(v), float(c))
    if before is not None and before.status in ("completed", "pruned"):
        report.reused += 1
        if before.status == "pruned" or reporter.pruned_at is not None:
            study.tell(trial, state=TrialState.PRUNED)
            report.pruned += 1
            return
    run_spec = RunSpec(
        sweep=sweep.sweep,
        variant=variant.name,
        knob=None,
        alternative=None,
        seed=seed,
        run_id=run_id,
        recipe=recipe.model_dump(mode="json"),
        workdir=str(Path(spec.state_dir) / "runs" / run_id),
        db_url=spec.db_url,
        resources=spec.resources,
        checkpoint_grace_s=spec.checkpoint_grace_s,
        provenance=_code(spec, store, recipe.runner.type),
    )
    # The worker's own stop (preemption) reaches the run through the trial's event.
    finished = threading.Event()
    relay = threading.Thread(target=_relay, args=(worker_stop, trial_stop, finished), daemon=True)
    relay.start()  # (the trial's heartbeat beats from run_worker, since the ask)
    attempts: list[int] = []
    try:
        if reporter.pruned_at is None:
            outcome = execute(
                run_spec, executor=spec.executor, stop=trial_stop, attempt_box=attempts, tap=reporter
            )
        else:
            outcome = "stopped"
    except Exception as exc:  # the run's error is in the store; the trial fails
        log.warning("trial %d (run %s) failed: %s", trial.number, run_id, exc)
        trial.set_user_attr("error", scrub(str(exc))[:500])
        study.tell(trial, state=TrialState.FAIL)
        report.failed += 1
        return
    finally:
        finished.set()  # ends the relay thread
    if reporter.pruned_at is not None:
        attempt = attempts[-1] if attempts else (before.attempts if before is not None else 0)
        store.finish_run(run_id, attempt, "pruned")
        trial.set_user_attr("pruned_at", reporter.pruned_at)  # the store logs the `pruned` event
        study.tell(trial, state=TrialState.PRUNED)
        report.pruned += 1
        return
    if outcome == "superseded":
        # Another trial asked for the same parameters at the same instant and took the run over
        # (the store fenced this attempt): the run is one, so its result answers this trial too.
        _wait_for_twin(study, trial.number, run_id, worker_stop, earlier_only=False)
        now = store.get_run(run_id)
        status = now.status if now is not None else "missing"
        if status == "pruned":
            study.tell(trial, state=TrialState.PRUNED)
            report.pruned += 1
            return
        if status == "completed":
            report.reused += 1
            outcome = "completed"
        else:  # the twin did not finish it either: a copy of this trial resumes the run
            outcome = "stopped"
    if outcome in ("stopped", "cancelled"):
        # Preempted, stopped or cancelled: the run kept its checkpoint; a copy of the trial waits
        # to resume it (after a cancel, until the search is started again).
        if is_cancelled(study):
            _mark_cancelled(store, run_id, attempts)
            trial.set_user_attr("error", "cancelled by user (scalerl cancel)")
        study.tell(trial, state=TrialState.FAIL)
        study.enqueue_trial(params, user_attrs={RETRY_ATTR: trial.number})
        report.failed += 1
        return
    x, y = _stored_curve(store, sweep.sweep, run_id, sweep.fit.metric, sweep.fit.axis)
    try:
        obj = objective(sec.objective, sweep.fit, x, y)
    except NoObjective as exc:
        trial.set_user_attr("error", scrub(str(exc))[:500])
        study.tell(trial, state=TrialState.FAIL)
        report.failed += 1
        return
    for key, value in obj.detail.items():
        trial.set_user_attr(f"objective_{key}", value)
    study.tell(trial, obj.value)
    report.complete += 1


def _code(spec: WorkerSpec, store: Any, runner: str) -> dict[str, Any]:
    """The code this trial runs (:mod:`scalerl.harness.execution.provenance`), captured per trial:
    a worker lives for many trials, and the checkout may change under it. The worker's own
    outputs (state dir, sweep file, a SQLite store) are not code."""
    from scalerl.harness.execution.provenance import for_runners

    db_file = getattr(store, "sqlite_path", None)
    outputs = [Path(spec.state_dir), Path(spec.sweep_file), Path(".scalerl")]
    outputs += [Path(db_file + x) for x in ("", "-wal", "-shm", "-journal")] if db_file else []
    return for_runners([runner], exclude=outputs)[runner]


def _mark_cancelled(store: Any, run_id: str, attempts: list[int]) -> None:
    """The run of a trial stopped by ``scalerl cancel`` ends ``cancelled`` (fenced on its attempt;
    ``scalerl cancel`` may have marked it already)."""
    run = store.get_run(run_id)
    if run is None or run.status in ("cancelled", "completed", "pruned", "failed"):
        return
    attempt = attempts[-1] if attempts else run.attempts
    store.finish_run(run_id, attempt, "cancelled", error="cancelled by user")


def _wait_for_twin(
    study: optuna.Study, number: int, run_id: str, stop: threading.Event, *, earlier_only: bool = True
) -> None:
    """Two trials with the same parameters are one run: the later waits for the earlier to end,
    then reads its stored result instead of superseding it mid-run. ``earlier_only=False``: wait
    for any other trial on the run (the one that superseded this trial's attempt)."""
    from optuna.trial import TrialState

    while not stop.is_set():
        twins = [
            t
            for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
            if (t.number < number or (not earlier_only and t.number != number))
            and t.user_attrs.get("run_id") == run_id
        ]
        if not twins:
            return
        stop.wait(1.0)


def _relay(source: threading.Event, target: threading.Event, finished: threading.Event) -> None:
    while not finished.is_set():
        if source.wait(0.5):
            target.set()
            return


def _heartbeat(study: optuna.Study, trial: optuna.Trial, done: threading.Event, every_s: float) -> None:
    storage = study._storage
    record = getattr(storage, "record_heartbeat", None)
    if record is None:
        return
    while not done.is_set():
        try:
            record(trial._trial_id)
        except Exception:  # a missed beat only risks a retry of a live trial; keep training
            log.exception("recording the heartbeat of trial %d", trial.number)
        done.wait(every_s)


class SearchWorker(Checkpointable):
    """A checkpointable worker for Slurm (submitit requeues it on USR2); see the module docstring."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.spec = state["spec"]
        self._init_runtime()

    @property
    def stop_event(self) -> threading.Event:
        return self._stop

    def _set_thread(self, thread: threading.Thread) -> None:
        self._thread = thread

    def __call__(self) -> dict[str, int]:
        from scalerl.harness.execution.job import call_beside_signals

        if threading.current_thread() is threading.main_thread():
            # Slurm's SIGTERM (scancel, preemption) stops at the next step with a checkpoint.
            signal.signal(signal.SIGTERM, lambda *_: self._stop.set())
        try:
            report = call_beside_signals(
                lambda: run_worker(self.spec, self._stop),
                f"search-worker-{self.spec.index}",
                self._set_thread,
            )
        except (HarnessError, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:
            raise ExecutionError(
                f"search worker {self.spec.index} failed: {type(err).__name__}: {err}"
            ) from err
        return asdict(report)

    def checkpoint(self, *args: Any, **kwargs: Any) -> DelayedSubmission:
        """Called by submitit on USR2: stop the trial's run at a checkpoint, then requeue."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.spec.checkpoint_grace_s)
        return DelayedSubmission(SearchWorker(self.spec))


def main(argv: list[str] | None = None) -> int:
    """``python -m scalerl.harness.search WORKER.json``: one local worker process."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m scalerl.harness.search WORKER.json", file=sys.stderr)
        return 2
    from scalerl.db.redaction import scrub_logs

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    scrub_logs()  # no URL secret reaches a log line, whatever logs it
    spec = WorkerSpec.from_json(Path(args[0]).read_text())
    worker = SearchWorker(spec)
    for sig in (signal.SIGTERM, signal.SIGUSR2):
        signal.signal(sig, lambda *_: worker.stop_event.set())
    started = time.monotonic()
    try:
        result = worker()
    except Exception as exc:
        print(f"scalerl search worker {spec.index}: failed: {scrub(str(exc))}", file=sys.stderr)
        return 1
    print(f"scalerl search worker {spec.index}: {result} in {time.monotonic() - started:.0f} s")
    return 0

"""Start a search's workers and follow its study.

- ``local``: ``optuna.workers`` detached processes (``python -m scalerl.harness.search``), logs and
  pid files under ``STATE_DIR/search/``; they outlive the terminal, like the local executor's jobs.
- ``slurm``: one submitit job array of ``workers`` tasks, each a :class:`SearchWorker` (requeued
  with a checkpoint on preemption / time limit), with the sweep's resources and Slurm profile.
- ``debug``: the workers run one after another in this process (tests, a quick look).

Starting workers again (a second ``scalerl sweep`` of the same file) adds workers to the same
study; they stop as soon as ``n_trials`` are claimed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from scalerl.harness.errors import ExecutionError
from scalerl.harness.execution.spec import Resources
from scalerl.harness.search.worker import SearchWorker, WorkerSpec, run_worker


@dataclass(frozen=True)
class Launched:
    sweep: str
    executor: str
    job_ids: tuple[str, ...]  # pids (local), Slurm job ids, or () for debug
    state_dir: Path


def launch_search(
    sweep: Any,
    sweep_file: str | Path,
    overrides: list[str],
    *,
    executor: str,
    resources: Resources,
    profile: Any,
    db_url: str | None,
    state_dir: Path,
    workers: int | None = None,
) -> Launched:
    """Start the workers of ``sweep`` (a loaded ``design: optuna`` SweepSpec)."""
    from scalerl.harness.search.space import check_space, section

    check_space(sweep)  # a bad corner of the space fails here, not in N workers
    _check_study(sweep, db_url)  # so does a study of another direction or space
    n = workers or section(sweep).workers
    folder = state_dir / "search"
    # A second launch into the same state dir numbers its workers after the first's, so their
    # spec, log and pid files stay apart (their samplers' seeds are apart anyway: worker_slot).
    first = len(list(folder.glob("worker-*.json"))) if executor == "local" and folder.is_dir() else 0
    specs = [
        WorkerSpec(
            sweep_file=str(Path(sweep_file).resolve()),
            overrides=tuple(overrides),
            db_url=db_url,
            state_dir=str(state_dir),
            executor=executor,
            index=i,
            resources=resources,
            checkpoint_grace_s=float(getattr(profile, "checkpoint_grace_s", 60.0)),
        )
        for i in range(first, first + n)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    if executor == "debug":
        for spec in specs:
            run_worker(spec)
        return Launched(sweep.sweep, executor, (), state_dir)
    if executor == "local":
        pids = []
        for spec in specs:
            path = folder / f"worker-{spec.index}.json"
            spec.write(path)
            with (folder / f"worker-{spec.index}.log").open("ab") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "scalerl.harness.search", str(path)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            (folder / f"worker-{spec.index}.pid").write_text(str(proc.pid))
            pids.append(str(proc.pid))
        return Launched(sweep.sweep, executor, tuple(pids), state_dir)
    if executor == "slurm":
        return Launched(
            sweep.sweep, executor, tuple(_submit_slurm(specs, sweep.sweep, profile, state_dir)), state_dir
        )
    raise ExecutionError(f"unknown executor {executor!r} for a search; fix: use local, slurm or debug")


def _check_study(sweep: Any, db_url: str | None) -> None:
    """Open (or create) the study here, before any worker: a study of another direction or space
    is refused in this process, with the error, instead of in every worker's log. Starting a
    search again also lifts an earlier ``scalerl cancel`` (the user asked for it again)."""
    from scalerl.harness.search.control import clear_cancel
    from scalerl.harness.search.worker import open_study

    clear_cancel(open_study(sweep, db_url))


def _submit_slurm(specs: list[WorkerSpec], sweep: str, profile: Any, state_dir: Path) -> list[str]:
    import submitit

    from scalerl.harness.execution.executors.base import ExecutorContext
    from scalerl.harness.execution.executors.slurm import SlurmExecutor, _require

    _require("sbatch")
    slurm = SlurmExecutor(ExecutorContext(state_dir, profile))
    ex = submitit.SlurmExecutor(folder=state_dir / "slurm" / "%j", max_num_timeout=profile.max_num_timeout)
    ex.update_parameters(**slurm.parameters(specs[0].resources, sweep))
    try:
        with ex.batch():
            jobs = [ex.submit(SearchWorker(spec)) for spec in specs]
    except Exception as err:  # submitit raises bare errors on sbatch failures
        raise ExecutionError(
            f"sbatch refused the array of {len(specs)} search worker(s) for sweep {sweep}: {err}; "
            "fix: check the profile's partition/account/qos against `sinfo`"
        ) from err
    return [str(job.job_id) for job in jobs]


def _alive(launched: Launched) -> bool:
    if launched.executor == "debug":
        return False
    if launched.executor == "local":
        from scalerl.harness.execution.executors.local_files import pid_alive

        return any(pid_alive(int(pid), b"scalerl.harness.search") for pid in launched.job_ids)
    from scalerl.harness.execution.executors.base import ExecutorContext, JobHandle, JobState
    from scalerl.harness.execution.executors.slurm import SlurmExecutor

    handles = [JobHandle(f"worker-{i}", "slurm", j) for i, j in enumerate(launched.job_ids)]
    states = SlurmExecutor(ExecutorContext(launched.state_dir)).poll(handles)
    return any(s in (JobState.PENDING, JobState.RUNNING) for s in states.values())


def summary(study: Any) -> str:
    """One line: trial counts by state and the best trial so far."""
    from collections import Counter

    counts = Counter(t.state.name.lower() for t in study.get_trials(deepcopy=False))
    parts = [f"{counts.get(k, 0)} {k}" for k in ("complete", "pruned", "running", "waiting", "fail")]
    best = ""
    try:
        b = study.best_trial
        best = f"; best {b.value:.4f} (trial {b.number}, run {b.user_attrs.get('run_id', '?')})"
    except ValueError:
        pass
    return "trials: " + ", ".join(parts) + best


def trial_table(study: Any) -> str:
    lines = [f"  {'trial':>5} {'state':<9} {'value':>8}  {'run_id':<20} params"]
    for t in study.get_trials(deepcopy=False):
        value = "-" if t.value is None else f"{t.value:.4f}"
        params = ", ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in t.params.items()
        )
        lines.append(
            f"  {t.number:>5} {t.state.name.lower():<9} {value:>8}  "
            f"{t.user_attrs.get('run_id', '-')!s:<20} {params}"
        )
    return "\n".join(lines)


def wait_search(
    sweep: Any,
    launched: Launched,
    db_url: str | None,
    *,
    interval_s: float = 5.0,
    timeout_s: float | None = None,
    out: TextIO = sys.stdout,
) -> Any:
    """Follow the study until no worker is alive (or ``timeout_s``); returns the study."""
    from scalerl.harness.search.worker import open_study

    study = open_study(sweep, db_url)
    start = time.monotonic()
    shown = ""
    while True:
        line = summary(study)
        if line != shown:
            out.write(f"[{time.strftime('%H:%M:%S')}] {line}\n")
            out.flush()
            shown = line
        if not _alive(launched) or (timeout_s is not None and time.monotonic() - start > timeout_s):
            out.write(trial_table(study) + "\n")
            return study
        time.sleep(interval_s)

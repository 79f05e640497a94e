"""Where a run's job log is, for ``scalerl logs RUN``.

A run's latest ``submitted`` event names its executor, job id and where the job keeps its files
(:class:`~scalerl.harness.execution.executors.base.JobHandle`); each executor that writes a log
has an entry in :data:`LOG_FILES` that turns such a handle into the log's paths:

- ``local``: ``<state>/local/logs/<run_id>.log`` (the job's stdout and stderr; every attempt
  appends to it);
- ``slurm``: submitit's ``<folder>/<job_id>_<task>_log.out`` and ``.err`` (one pair per task).

A ``command`` runner's trainer writes its own stdout and stderr into the run's workdir
(``<state>/runs/<run_id>/stdout.attemptN.log``, ``stderr.attemptN.log``: the job log holds only
the harness's lines), so the latest attempt's pair follows the job's log (:func:`runner_output`).

The ``debug`` executor runs jobs inside the submitting process, and imported or attached runs
have no job: they have no log, and :func:`run_logs` says so.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.executors.base import JobHandle, JobState
from scalerl.harness.execution.executors.local_files import LocalLayout

_CHUNK = 1 << 16


def _local(handle: JobHandle) -> list[Path]:
    return [LocalLayout(Path(str(handle.detail["state_dir"]))).logs / f"{handle.run_id}.log"]


def _slurm(handle: JobHandle) -> list[Path]:
    # submitit's folder holds %j (the job id, an array task's "123_4"), its files %j_%t_log.*.
    folder = Path(str(handle.detail["folder"]).replace("%j", handle.job_id))
    found = sorted(folder.glob(f"{handle.job_id}_*_log.out")) + sorted(
        folder.glob(f"{handle.job_id}_*_log.err")
    )
    return found or [folder / f"{handle.job_id}_0_log.out", folder / f"{handle.job_id}_0_log.err"]


LOG_FILES: dict[str, Callable[[JobHandle], list[Path]]] = {"local": _local, "slurm": _slurm}


def _state_dir(handle: JobHandle) -> Path | None:
    if "state_dir" in handle.detail:  # local
        return Path(str(handle.detail["state_dir"]))
    if "folder" in handle.detail:  # slurm: <state>/slurm/%j
        return Path(str(handle.detail["folder"])).parent.parent
    return None


def runner_output(handle: JobHandle) -> list[Path]:
    """The stdout and stderr a ``command`` runner's trainer wrote in its latest attempt (the run's
    workdir, ``submit.py``: ``<state>/runs/<run_id>``); none for other runners."""
    state = _state_dir(handle)
    if state is None:
        return []
    workdir = state / "runs" / handle.run_id
    attempts = [
        int(m.group(1))
        for f in (workdir.glob("std*.attempt*.log") if workdir.is_dir() else [])
        if (m := re.fullmatch(r"std(?:out|err)\.attempt(\d+)\.log", f.name))
    ]
    if not attempts:
        return []
    last = max(attempts)
    found = [workdir / f"{name}.attempt{last}.log" for name in ("stdout", "stderr")]
    return [f for f in found if f.is_file()]


@dataclass(frozen=True)
class RunLogs:
    """A run's job log files (those that exist), and the job they belong to."""

    run_id: str
    files: tuple[Path, ...]
    handle: JobHandle

    @property
    def executor(self) -> str:
        return self.handle.executor

    @property
    def job_id(self) -> str:
        return self.handle.job_id

    def job_alive(self) -> bool:
        """Whether the job may still write (its scheduler says pending or running)."""
        from scalerl.harness.execution.status import poll_jobs

        return poll_jobs({self.run_id: self.handle}).get(self.run_id, JobState.UNKNOWN).alive


def resolve_run(store: Any, given: str) -> str:
    """The run id ``given`` names: itself, or the one run whose id starts with it."""
    from scalerl.db import queries

    if store.get_run(given) is not None:
        return given
    found = queries.run_ids_starting(store, given, limit=11)
    if len(found) == 1:
        return found[0]
    if not found:
        raise ConfigError(
            "no run has this id or an id starting with it", field="RUN", value=given,
            fix="copy a run id from `scalerl status SWEEP` (a unique prefix is enough), or pass --db",
        )  # fmt: skip
    shown = ", ".join(found[:10]) + (", ..." if len(found) > 10 else "")
    raise ConfigError(
        f"ambiguous: {len(found) if len(found) <= 10 else 'more than 10'} runs start with it ({shown})",
        field="RUN", value=given, fix="give more characters of the run id",
    )  # fmt: skip


def run_logs(store: Any, run_id: str) -> RunLogs:
    """The log files of ``run_id``'s latest job; a ConfigError naming why when it has none."""
    handle = _latest_handle(store, run_id)
    if handle is None:
        info = store.get_run(run_id)
        how = f" (sweep {info.sweep}, status {info.status})" if info is not None else ""
        raise ConfigError(
            f"run {run_id}{how} was never submitted as a job: an imported or attached run, or one "
            "trained by `scalerl train`, has no job log",
            field="RUN", value=run_id, fix="read the log where the run was launched",
        )  # fmt: skip
    files = LOG_FILES.get(handle.executor)
    if files is None:
        raise ConfigError(
            f"run {run_id} ran on the {handle.executor} executor, inside the process that submitted "
            "it: its output went to that process's terminal, not to a log file",
            field="RUN", value=run_id, fix="resubmit it with --executor local or slurm to get a log file",
        )  # fmt: skip
    paths = tuple(p for p in files(handle) if p.is_file()) + tuple(runner_output(handle))
    if not paths:
        raise ConfigError(
            f"run {run_id}: its {handle.executor} job {handle.job_id} has no log file yet at "
            f"{files(handle)[0]}",
            field="RUN", value=run_id,
            fix="wait until the job starts (`scalerl status SWEEP`), or check that this machine sees "
            "the sweep's state directory",
        )  # fmt: skip
    return RunLogs(run_id, paths, handle)


def _latest_handle(store: Any, run_id: str) -> JobHandle | None:
    from scalerl.db import queries
    from scalerl.harness.execution.status import SUBMITTED

    frame = queries.events(store, run_id=run_id)
    handle = None
    for row in frame.itertuples(index=False):  # oldest first: the last one wins
        if row.kind == SUBMITTED and isinstance(row.detail, dict) and "job_id" in row.detail:
            handle = JobHandle.from_event(run_id, dict(row.detail))
    return handle


def tail_start(path: Path, lines: int) -> int:
    """The byte offset where the last ``lines`` lines of ``path`` begin (read backwards in blocks,
    so a multi-GB log costs what its tail costs)."""
    size = path.stat().st_size
    if lines <= 0:
        return size
    with path.open("rb") as fh:
        end = size
        # A final newline ends the last line; it does not start another.
        fh.seek(max(0, size - 1))
        wanted = lines + (1 if size and fh.read(1) == b"\n" else 0)
        while end > 0:
            start = max(0, end - _CHUNK)
            fh.seek(start)
            block = fh.read(end - start)
            count = block.count(b"\n")
            if count >= wanted:
                cut = len(block)
                for _ in range(wanted):
                    cut = block.rindex(b"\n", 0, cut)
                return start + cut + 1
            wanted -= count
            end = start
    return 0


def read_from(path: Path, offset: int) -> Iterator[bytes]:
    """``path``'s bytes from ``offset`` to its current end, in chunks."""
    with path.open("rb") as fh:
        fh.seek(offset)
        while chunk := fh.read(_CHUNK):
            yield chunk


def size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0

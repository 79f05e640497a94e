"""The ``slurm`` executor: one submitit job array per resource shape.

Runs with the same :class:`Resources` go into one ``sbatch --array`` (submitit's ``batch()``),
throttled by the profile's ``array_parallelism``; so a 1,000-variant sweep is one ``sbatch`` call
per shape, not 1,000. Each array task runs a pickled :class:`SweepJob`, which submitit requeues
on USR2 (preemption / time limit) through ``SweepJob.checkpoint``.

``poll`` asks ``squeue`` for this user's live jobs (it lists pending array tasks one by one with
``-r``) and ``sacct`` for ended ones; both once per call, however many runs. ``scalerl sweep
--wait`` calls it at most every ``poll_s`` seconds (the profile's, or ``--poll-s``).
"""

from __future__ import annotations

import getpass
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from scalerl.harness.errors import ExecutionError
from scalerl.harness.execution.executors.base import Executor, JobHandle, JobState, register_executor
from scalerl.harness.execution.job import SweepJob
from scalerl.harness.execution.spec import Resources, RunSpec

_ALIVE = {
    "PENDING",
    "RUNNING",
    "REQUEUED",
    "CONFIGURING",
    "COMPLETING",
    "SUSPENDED",
    "RESIZING",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "SIGNALING",
    "STAGE_OUT",
    "STOPPED",
    "RESV_DEL_HOLD",
}
_ENDED = {"COMPLETED": JobState.FINISHED, "FAILED": JobState.FINISHED}


def _require(cmd: str) -> str:
    path = shutil.which(cmd)
    if path is None:
        raise ExecutionError(
            f"`{cmd}` is not on PATH: this machine is not a Slurm submit host; "
            "fix: run on a login node, bring up the testbed (sudo slurm/testbed/up), or use --executor local"
        )
    return path


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ExecutionError(f"`{' '.join(argv[:3])} ...` failed: {err}") from err
    if done.returncode != 0:
        raise ExecutionError(
            f"`{' '.join(argv[:3])} ...` exited with {done.returncode}: {done.stderr.strip()[-500:]}; "
            "fix: check that slurmctld answers (`sinfo`) and that the profile's partition exists"
        )
    return done.stdout


@register_executor("slurm")
class SlurmExecutor(Executor):
    def parameters(self, res: Resources, sweep: str) -> dict[str, Any]:
        """The sbatch parameters of one array: the profile plus the shape."""
        params = self.ctx.profile.sbatch_parameters()
        params.update(
            time=res.timeout_min,
            cpus_per_task=res.cpus_per_task,
            job_name=f"scalerl-{sweep}",
            nodes=res.nodes,
            ntasks_per_node=res.tasks_per_node,
        )
        if res.gpus_per_node and "gres" not in params:
            params["gpus_per_node"] = res.gpus_per_node
        if res.mem_gb is not None:
            params["mem"] = f"{max(1, round(res.mem_gb * 1024))}MB"
        return params

    def submit(self, specs: Sequence[RunSpec]) -> list[JobHandle]:
        if not specs:
            return []
        _require("sbatch")
        import submitit

        groups: dict[tuple[object, ...], list[RunSpec]] = defaultdict(list)
        for spec in specs:
            groups[spec.resources.key()].append(spec)
        folder = self.ctx.state_dir / "slurm" / "%j"
        by_run: dict[str, JobHandle] = {}
        for group in groups.values():
            ex = submitit.SlurmExecutor(folder=folder, max_num_timeout=self.ctx.profile.max_num_timeout)
            ex.update_parameters(**self.parameters(group[0].resources, group[0].sweep))
            try:
                with ex.batch():
                    jobs = [ex.submit(SweepJob(spec, "slurm")) for spec in group]
            except Exception as err:  # submitit raises bare errors on sbatch failures
                raise ExecutionError(
                    f"sbatch refused the job array for {len(group)} run(s) of sweep {group[0].sweep}: {err}; "
                    "fix: check the profile's partition/account/qos/gres against `sinfo` and "
                    "`sacctmgr show assoc`"
                ) from err
            for spec, job in zip(group, jobs, strict=True):
                by_run[spec.run_id] = JobHandle(
                    spec.run_id, "slurm", str(job.job_id), {"folder": str(folder)}
                )
        return [by_run[s.run_id] for s in specs]

    def poll(self, handles: Sequence[JobHandle]) -> dict[str, JobState]:
        if not handles:
            return {}
        _require("squeue")
        live: dict[str, str] = {}
        # Only this user's jobs (a shared cluster's queue holds everyone's), and only once per call.
        for line in _run(["squeue", "-h", "-r", "-u", getpass.getuser(), "-o", "%i|%T"]).splitlines():
            job_id, _, name = line.strip().partition("|")
            live[job_id] = name
        out: dict[str, JobState] = {}
        missing: list[JobHandle] = []
        for h in handles:
            seen = live.get(h.job_id)
            if seen is None:
                missing.append(h)
            else:
                out[h.run_id] = JobState.RUNNING if seen == "RUNNING" else JobState.PENDING
        if missing:
            ended = sacct_states([h.job_id for h in missing])
            for h in missing:
                st = ended.get(h.job_id)
                if st is None:
                    out[h.run_id] = JobState.UNKNOWN
                elif st in _ALIVE:
                    out[h.run_id] = JobState.RUNNING if st == "RUNNING" else JobState.PENDING
                else:
                    out[h.run_id] = _ENDED.get(st, JobState.LOST)
        return out

    def cancel(self, handles: Sequence[JobHandle]) -> None:
        if handles:
            _require("scancel")
            _run(["scancel", *sorted({h.job_id for h in handles})])


def sacct_states(job_ids: Sequence[str]) -> dict[str, str]:
    """Job (or array task) id -> the first word of sacct's State (``CANCELLED by 0`` ->
    ``CANCELLED``); ``{}`` when this machine has no ``sacct``. The one sacct parser of the project:
    the test fixture and ``slurm/testbed/smoke.py`` use it too."""
    if shutil.which("sacct") is None:
        return {}
    text = _run(["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ",".join(job_ids)])
    out: dict[str, str] = {}
    for line in text.splitlines():
        job_id, _, state = line.strip().partition("|")
        if job_id:
            out[job_id] = state.split()[0] if state else ""
    return out

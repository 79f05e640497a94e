"""Submit a small submitit job array to the Slurm that ``sinfo`` talks to and show what came back.

    python slurm/testbed/smoke.py [--tasks 4] [--partition debug] [--folder DIR]

Each array task computes a sum of squares, then the script prints every task's result next to the
state ``sacct`` records for it. It is the testbed's end-to-end check; on a real cluster it checks
that submitit, the partition and accounting work before a sweep is launched there.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY"})


def sum_of_squares(n: int) -> tuple[int, int, str]:
    """The work of one array task: (n, 1² + ... + n², the Slurm array task id:host that ran it)."""
    where = f"{os.environ.get('SLURM_ARRAY_TASK_ID', '?')}:{socket.gethostname()}"
    return n, sum(i * i for i in range(1, n + 1)), where


def sacct_states(job_id: str, expected: int, timeout_s: float = 60.0) -> dict[str, str]:
    """Array task id -> state from sacct, polled until all have ended (accounting lags a little)."""
    from scalerl.harness.execution.executors.slurm import sacct_states as parse_sacct

    deadline = time.monotonic() + timeout_s
    while True:
        states = parse_sacct([job_id])
        done = len(states) >= expected and all(s in ENDED for s in states.values())
        if done or time.monotonic() > deadline:
            return states
        time.sleep(1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=4, help="array size (default 4)")
    parser.add_argument("--partition", default=None, help="Slurm partition (default: the cluster's default)")
    parser.add_argument("--folder", type=Path, default=None, help="submitit log folder (default: a temp dir)")
    args = parser.parse_args(argv)

    import submitit

    folder = args.folder or Path(tempfile.mkdtemp(prefix="scalerl-smoke-"))
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    params: dict[str, object] = {"timeout_min": 5, "cpus_per_task": 1, "mem_gb": 1}
    params["slurm_array_parallelism"] = args.tasks
    if args.partition:
        params["slurm_partition"] = args.partition
    executor.update_parameters(**params)
    inputs = [10 ** (k + 1) for k in range(args.tasks)]
    jobs = executor.map_array(sum_of_squares, inputs)
    array_id = jobs[0].job_id.split("_")[0]
    print(f"submitted array job {array_id} ({args.tasks} tasks), logs in {folder}")
    results = [job.result() for job in jobs]
    states = sacct_states(array_id, expected=len(jobs))
    print(f"{'job':>10} {'n':>8} {'sum of squares':>22} {'task:host':>14} {'sacct state':>12}")
    ok = True
    for job, (n, value, where) in zip(jobs, results, strict=True):
        state = states.get(job.job_id, "?")
        ok = ok and value == n * (n + 1) * (2 * n + 1) // 6 and state == "COMPLETED"
        print(f"{job.job_id:>10} {n:>8} {value:>22} {where:>14} {state:>12}")
    print(
        "all tasks returned the closed-form value and sacct says COMPLETED" if ok else "MISMATCH: see above"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

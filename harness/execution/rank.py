"""Which process of a multi-task job this is.

A Slurm job with ``nodes`` > 1 or ``tasks_per_node`` > 1 starts the job body once per task (srun,
through submitit), and a lab's distributed script runs once per rank. Only rank 0 owns the run:
it starts the attempt, writes points and finishes the run; every other rank runs the same work
with nowhere to write (two writers would fence each other out, each a new attempt).
"""

from __future__ import annotations

import os

# torchrun / accelerate set RANK; srun sets SLURM_PROCID (the task's global rank).
_RANK_VARS = ("RANK", "SLURM_PROCID")


def process_rank() -> int:
    """This process's global rank (0 when no launcher says otherwise)."""
    for name in _RANK_VARS:
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0

"""Optuna searches over recipes (``design: optuna``): workers, launch and the trial -> run rules.

The sweep file's ``optuna:`` section is :mod:`scalerl.harness.recipe.search`; the workers that pull
trials from the shared study are :mod:`scalerl.harness.search.worker`;
:mod:`scalerl.harness.search.launch` starts them as local processes, one Slurm job array, or
in-process (debug). The forecast pruners, usable in any
Optuna study, are :mod:`scalerl.harness.optuna`'s ``BoundPruner`` and ``BeatPruner``.
"""

from scalerl.harness.search.launch import launch_search, wait_search
from scalerl.harness.search.worker import SearchWorker, WorkerSpec, run_worker

__all__ = ["SearchWorker", "WorkerSpec", "launch_search", "run_worker", "wait_search"]

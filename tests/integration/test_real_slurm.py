"""The real single-node Slurm testbed runs submitit job arrays and accounts for them.

These prove the ground the Slurm executor stands on: submitit's sbatch scripts are accepted by
this Slurm, array tasks run as separate Slurm allocations with their own environment, results
come back through submitit's pickles, and ``sacct`` (slurmdbd + MariaDB) reports each task's end.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.fixtures.slurm import SlurmCluster

pytestmark = pytest.mark.slurm


def square_in_slurm(x: int) -> tuple[int, int, str]:
    """Runs inside a Slurm array task: returns x², the task id Slurm gave it, and its job id."""
    return x * x, int(os.environ["SLURM_ARRAY_TASK_ID"]), os.environ["SLURM_ARRAY_JOB_ID"]


def test_submitit_array_returns_results_and_sacct_reports_completed(slurm_cluster: SlurmCluster) -> None:
    executor = slurm_cluster.executor("array", slurm_array_parallelism=4)
    jobs = executor.map_array(square_in_slurm, [2, 3, 5, 7])
    results = [job.result() for job in jobs]

    array_id = jobs[0].job_id.split("_")[0]
    assert [r[0] for r in results] == [4, 9, 25, 49]
    # Each function ran in its own array task, in submission order, under one array job.
    assert [r[1] for r in results] == [0, 1, 2, 3]
    assert {r[2] for r in results} == {array_id}
    assert [job.job_id for job in jobs] == [f"{array_id}_{i}" for i in range(4)]

    states = slurm_cluster.wait_sacct(array_id, expected=4)
    assert states == {f"{array_id}_{i}": "COMPLETED" for i in range(4)}
    # submitit reads the same states back from sacct (forced: its watcher caches between polls).
    assert [job.get_info(mode="force").get("State") for job in jobs] == ["COMPLETED"] * 4


def test_cluster_matches_this_machine_and_has_a_preempting_partition(slurm_cluster: SlurmCluster) -> None:
    # The node is sized like the machine so 1-2 CPU, few-GB jobs schedule.
    assert slurm_cluster.cpus == os.cpu_count()
    assert slurm_cluster.memory_mb > 1024
    assert slurm_cluster.partition == "debug"

    out = subprocess.run(
        ["scontrol", "show", "partition", slurm_cluster.urgent_partition, "-o"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    fields = dict(kv.split("=", 1) for kv in out.split() if "=" in kv)
    assert fields["PriorityTier"] == "10"
    config = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    settings = {
        k.strip(): v.strip() for k, v in (line.split("=", 1) for line in config.splitlines() if "=" in line)
    }
    assert settings["PreemptType"] == "preempt/partition_prio"
    assert settings["PreemptMode"] == "REQUEUE"
    assert settings["JobRequeue"] == "1"
    assert settings["AccountingStorageType"] == "accounting_storage/slurmdbd"

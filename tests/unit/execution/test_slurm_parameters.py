"""What the slurm executor asks sbatch for: the profile plus each shape, as submitit renders it."""

from __future__ import annotations

from pathlib import Path

from submitit.slurm.slurm import _make_sbatch_string

from scalerl.harness.execution.executors.base import ExecutorContext
from scalerl.harness.execution.executors.slurm import SlurmExecutor
from scalerl.harness.execution.profile import load_profile
from scalerl.harness.execution.spec import Resources
from tests.unit.execution.helpers import REPO


def test_gpu_profile_and_shape_render_the_expected_sbatch_lines(tmp_path: Path) -> None:
    profile = load_profile(REPO / "slurm" / "profiles" / "gpu-cluster.yaml")
    ex = SlurmExecutor(ExecutorContext(tmp_path, profile))
    params = ex.parameters(Resources(gpus_per_node=8, cpus_per_task=32, mem_gb=512, timeout_min=720), "loo")
    assert params["time"] == 720 and params["cpus_per_task"] == 32 and params["mem"] == "524288MB"
    assert "gpus_per_node" not in params  # the profile's gres wins over --gpus-per-node
    script = _make_sbatch_string(command="python -m x", folder=tmp_path / "%j", map_count=1000, **params)
    lines = set(script.splitlines())
    for expected in (
        "#SBATCH --partition=gpu",
        "#SBATCH --account=my-lab",
        "#SBATCH --qos=normal",
        "#SBATCH --gres=gpu:8",
        "#SBATCH --constraint=h100",
        "#SBATCH --cpus-per-task=32",
        "#SBATCH --mem=524288MB",
        "#SBATCH --time=720",
        "#SBATCH --array=0-999%16",
        "#SBATCH --signal=USR2@300",
        "#SBATCH --job-name=scalerl-loo",
        "module load cuda/12.4",
    ):
        assert expected in lines, expected


def test_gpus_per_node_is_used_when_the_profile_has_no_gres(tmp_path: Path) -> None:
    ex = SlurmExecutor(ExecutorContext(tmp_path, load_profile(REPO / "slurm" / "profiles" / "testbed.yaml")))
    params = ex.parameters(Resources(gpus_per_node=2, cpus_per_task=1, mem_gb=None, timeout_min=5), "t")
    assert params["gpus_per_node"] == 2 and "mem" not in params and params["partition"] == "debug"

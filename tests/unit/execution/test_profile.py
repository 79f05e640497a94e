"""Slurm profiles: the shipped ones validate; bad ones name file, line, field, value and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.profile import load_profile
from tests.unit.execution.helpers import REPO


def test_shipped_profiles_load_into_sbatch_parameters() -> None:
    gpu = load_profile(REPO / "slurm" / "profiles" / "gpu-cluster.yaml")
    params = gpu.sbatch_parameters()
    assert params["partition"] == "gpu"
    assert params["gres"] == "gpu:8"
    assert params["constraint"] == "h100"
    assert params["array_parallelism"] == 16
    assert params["signal_delay_s"] == 300
    assert params["setup"][0] == "module load cuda/12.4"
    assert (gpu.timeout_min, gpu.cpus_per_task, gpu.mem_gb) == (1440, 64, 900)
    testbed = load_profile(REPO / "slurm" / "profiles" / "testbed.yaml")
    assert testbed.partition == "debug"
    assert testbed.array_parallelism == 2


def test_unknown_key_lists_the_valid_keys_with_line(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("partition: gpu\ngpus: 8\n")
    with pytest.raises(ConfigError) as err:
        load_profile(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}:2: gpus=8: unknown key")
    assert "gpus_per_node (default 0)" in msg and "array_parallelism (default 64)" in msg


def test_bad_value_names_field_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("partition: gpu\ntimeout_min: -5\n")
    with pytest.raises(ConfigError) as err:
        load_profile(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}:2: timeout_min=-5: ")
    assert "greater than 0" in msg and "time limit per attempt" in msg


def test_missing_file_says_where_profiles_are(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"slurm/profiles/NAME\.yaml"):
        load_profile(tmp_path / "nope.yaml")


def test_a_profile_reads_yaml_like_a_recipe(tmp_path: Path) -> None:
    """One loader: YAML 1.2 scalars (``off`` stays a string), and errors carry the key's line."""
    from scalerl.harness.execution.profile import load_profile

    path = tmp_path / "p.yaml"
    path.write_text("partition: off\nqos: normal\n")
    assert load_profile(path).partition == "off"
    path.write_text("partition: debug\n\nnot_a_key: 1\n")
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    assert f"{path}:3" in str(info.value) and "not_a_key" in str(info.value)

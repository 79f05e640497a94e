"""Issue 26, second hostile pass, on Slurm profiles: the recipes' value rules hold in every YAML
the product reads, so a profile's ``mem_gb: .inf`` or ``timeout_min: true`` (read by pydantic's
lax mode as an infinite memory request and a one-minute time limit) is refused with its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.profile import load_profile


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("mem_gb: .inf", "mem_gb=inf"),
        ("checkpoint_grace_s: .nan", "checkpoint_grace_s=nan"),
        ("timeout_min: true", "timeout_min='true'"),
        ("gpus_per_node: false", "gpus_per_node='false'"),
    ],
)
def test_a_non_finite_or_boolean_number_is_refused_with_its_line(
    tmp_path: Path, line: str, shown: str
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(f"partition: gpu\n{line}\n")
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    assert str(info.value).startswith(f"{path}:2: {shown}: ")


def test_booleans_still_fill_boolean_fields(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("partition: gpu\nuse_srun: false\nmem_gb: 64\n")
    profile = load_profile(path)
    assert profile.use_srun is False and profile.mem_gb == 64.0

"""Slurm cluster profiles: ``slurm/profiles/NAME.yaml`` validated into :class:`SlurmProfile`.

A profile says where and how a sweep's jobs run on one cluster (partition, account, qos, gres,
time limit, constraint, array parallelism, setup lines). A sweep's own ``resources`` override the
per-run shape (GPUs, CPUs, memory, time). Unknown keys are errors that list every valid key with
its default; every error names the file, the line, the field, the value and the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError

from harness.errors import ConfigError


class SlurmProfile(BaseModel):
    """One cluster's submission settings (sbatch options submitit passes through)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    partition: str | None = Field(None, description="sbatch --partition")
    account: str | None = Field(None, description="sbatch --account")
    qos: str | None = Field(None, description="sbatch --qos")
    gres: str | None = Field(None, description="sbatch --gres, e.g. gpu:8 (overrides gpus_per_node)")
    gpus_per_node: int = Field(0, ge=0, description="GPUs per run (sbatch --gpus-per-node)")
    cpus_per_task: PositiveInt = Field(1, description="CPU cores per run")
    mem_gb: float | None = Field(None, gt=0, description="memory per run in GB; null = cluster default")
    timeout_min: PositiveInt = Field(60, description="time limit per attempt in minutes (sbatch --time)")
    constraint: str | None = Field(None, description="sbatch --constraint, e.g. h100")
    array_parallelism: PositiveInt = Field(64, description="max tasks of one job array running at once")
    setup: tuple[str, ...] = Field((), description="shell lines run in the sbatch script before the job")
    signal_delay_s: PositiveInt = Field(120, description="USR2 this long before the time limit")
    checkpoint_grace_s: float = Field(60.0, gt=0, description="wait for the trainer's checkpoint on USR2")
    max_num_timeout: int = Field(20, ge=0, description="requeues allowed after time limits")
    use_srun: bool = Field(True, description="run the job through srun (submitit's default)")
    additional_parameters: dict[str, Any] = Field(
        default_factory=dict, description="other sbatch options, e.g. {exclusive: true}"
    )

    def sbatch_parameters(self) -> dict[str, Any]:
        """The parameters for ``submitit.SlurmExecutor.update_parameters`` (no per-run shape)."""
        out: dict[str, Any] = {
            "signal_delay_s": self.signal_delay_s,
            "array_parallelism": self.array_parallelism,
            "use_srun": self.use_srun,
        }
        for key in ("partition", "account", "qos", "gres", "constraint"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.setup:
            out["setup"] = list(self.setup)
        if self.additional_parameters:
            out["additional_parameters"] = dict(self.additional_parameters)
        return out


def valid_keys() -> str:
    parts = []
    for name, info in SlurmProfile.model_fields.items():
        default = info.get_default(call_default_factory=True)
        parts.append(f"{name} (default {default!r})")
    return ", ".join(parts)


def _key_lines(text: str) -> dict[str, int]:
    """Top-level key -> 1-based line, for error messages."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(k.value): k.start_mark.line + 1 for k, _ in node.value}


def load_profile(path: str | Path) -> SlurmProfile:
    """Read and validate a profile YAML; every failure is a :class:`ConfigError`."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError(
            f"cannot read the Slurm profile ({err.strerror})",
            file=str(path),
            fix="pass --profile slurm/profiles/NAME.yaml (see slurm/profiles/)",
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise ConfigError(
            f"not valid YAML ({getattr(err, 'problem', err)})",
            file=str(path),
            line=mark.line + 1 if mark is not None else None,
            fix="fix the YAML syntax",
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("a profile must be a mapping of key: value", file=str(path), value=data)
    lines = _key_lines(text)
    try:
        return SlurmProfile.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        top = str(first["loc"][0]) if first["loc"] else ""
        if first["type"] == "extra_forbidden":
            raise ConfigError(
                "unknown key",
                file=str(path),
                line=lines.get(top),
                field=field,
                value=first.get("input"),
                fix=f"use one of: {valid_keys()}",
            ) from None
        raise ConfigError(
            first["msg"],
            file=str(path),
            line=lines.get(top),
            field=field,
            value=first.get("input"),
            fix=f"{field}: {SlurmProfile.model_fields[top].description}"
            if top in SlurmProfile.model_fields
            else None,
        ) from None

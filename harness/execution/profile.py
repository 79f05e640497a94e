"""Slurm cluster profiles: ``slurm/profiles/NAME.yaml`` validated into :class:`SlurmProfile`.

A profile says where and how a sweep's jobs run on one cluster (partition, account, qos, gres,
time limit, constraint, array parallelism, setup lines). A sweep's own ``resources`` override the
per-run shape (GPUs, CPUs, memory, time). Unknown keys are errors that list every valid key with
its default; every error names the file, the line, the field, the value and the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, PositiveInt, ValidationError

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe.schema import Frozen


class SlurmProfile(Frozen):
    """One cluster's submission settings (sbatch options submitit passes through). A
    :class:`~scalerl.harness.recipe.schema.Frozen` model, so the recipes' rules hold here too:
    no NaN or infinity (``mem_gb: .inf``), no boolean read as a number (``timeout_min: true``)."""

    partition: str | None = Field(None, description="sbatch --partition")
    account: str | None = Field(None, description="sbatch --account")
    qos: str | None = Field(None, description="sbatch --qos")
    gres: str | None = Field(None, description="sbatch --gres, e.g. gpu:8 (overrides gpus_per_node)")
    gpus_per_node: int = Field(0, ge=0, description="GPUs per run (sbatch --gpus-per-node)")
    cpus_per_task: PositiveInt = Field(1, description="CPU cores per run")
    mem_gb: float | None = Field(None, gt=0, description="memory per run in GB; null = cluster default")
    timeout_min: PositiveInt = Field(60, description="time limit per attempt in minutes (sbatch --time)")
    constraint: str | None = Field(None, description="sbatch --constraint, e.g. h100")
    nodes: PositiveInt = Field(1, description="nodes per run (sbatch --nodes); rank 0 owns the run")
    tasks_per_node: PositiveInt = Field(1, description="processes per node (sbatch --ntasks-per-node)")
    exclude: str | None = Field(None, description="sbatch --exclude, e.g. node[01-02]")
    comment: str | None = Field(None, description="sbatch --comment")
    mem_per_gpu: str | None = Field(None, description="sbatch --mem-per-gpu, e.g. 80G")
    cpus_per_gpu: PositiveInt | None = Field(None, description="sbatch --cpus-per-gpu")
    gpus_per_task: PositiveInt | None = Field(None, description="sbatch --gpus-per-task")
    array_parallelism: PositiveInt = Field(64, description="max tasks of one job array running at once")
    setup: tuple[str, ...] = Field((), description="shell lines run in the sbatch script before the job")
    signal_delay_s: PositiveInt = Field(120, description="USR2 this long before the time limit")
    checkpoint_grace_s: float = Field(60.0, gt=0, description="wait for the trainer's checkpoint on USR2")
    max_num_timeout: int = Field(20, ge=0, description="requeues allowed after time limits")
    use_srun: bool = Field(True, description="run the job through srun (submitit's default)")
    poll_s: float = Field(
        60.0, ge=1.0, description="`scalerl sweep --wait` asks squeue/sacct at most this often (seconds)"
    )
    allow_sqlite: bool = Field(
        False,
        description="single-node testbeds only: let jobs write a SQLite store (its locks do not "
        "work across hosts; a cluster needs a PostgreSQL URL)",
    )
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
        for key in ("partition", "account", "qos", "gres", "constraint", "exclude", "comment",
                    "mem_per_gpu", "cpus_per_gpu", "gpus_per_task"):  # fmt: skip
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


def load_profile(path: str | Path) -> SlurmProfile:
    """Read and validate a profile YAML; every failure is a :class:`ConfigError`.

    Read with the recipes' loader (:func:`scalerl.harness.recipe.yamlio.parse_yaml`): one YAML dialect
    everywhere (1.2 scalars, so ``off`` is the string "off" here as in a recipe), bounded
    aliases, and line numbers for every key."""
    from scalerl.harness.recipe.yamlio import read_yaml_file

    path = Path(path)
    try:
        data, sources = read_yaml_file(path)  # a regular file, bounded in size and aliases
    except ConfigError as err:
        if err.fix != "check the path":
            raise
        raise ConfigError(
            f"cannot read the Slurm profile ({err.reason})",
            file=str(path),
            fix="pass --profile slurm/profiles/NAME.yaml (see slurm/profiles/)",
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("a profile must be a mapping of key: value", file=str(path), value=data)
    lines = {str(k[0]): src.line for k, src in sources.entries.items() if len(k) == 1 and src.line}
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

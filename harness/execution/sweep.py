"""From a sweep file to submitted jobs: the glue ``scalerl sweep`` runs.

Resolves the executor (``--executor`` or the sweep's ``executor``), the Slurm profile (``--profile``
or the sweep's ``resources.profile`` under ``slurm/profiles/``), the per-run resource shape (the
sweep's explicit ``resources`` over the profile's), the store URL the jobs use, then registers and
submits (:func:`harness.execution.submit.submit_sweep`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.execution.executors.base import Executor, ExecutorContext, get_executor
from harness.execution.profile import SlurmProfile, load_profile
from harness.execution.spec import Resources, RunSpec
from harness.execution.submit import SubmitReport, default_state_dir, register, run_specs, submit_sweep

PROFILE_DIR = Path("slurm/profiles")


@dataclass(frozen=True)
class Prepared:
    sweep: Any  # harness.recipe.SweepSpec
    planned: tuple[Any, ...]  # harness.recipe.PlannedRun
    specs: tuple[RunSpec, ...]
    executor: Executor
    max_retries: int


def resolve_profile(sweep: Any, profile: str | None) -> SlurmProfile:
    name = profile or sweep.resources.profile
    if not name:
        return SlurmProfile()
    path = Path(name)
    if path.suffix not in (".yaml", ".yml"):
        path = PROFILE_DIR / f"{name}.yaml"
        if not path.is_file():
            known = sorted(p.stem for p in PROFILE_DIR.glob("*.yaml")) if PROFILE_DIR.is_dir() else []
            raise ConfigError(
                f"Slurm profile {name!r} not found at {path}",
                file=str(getattr(sweep, "path", None) or "") or None,
                field="resources.profile",
                value=name,
                fix=f"use one of {known} or pass --profile path/to/profile.yaml",
            )
    return load_profile(path)


def resolve_resources(sweep: Any, profile: SlurmProfile) -> Resources:
    """The sweep's explicitly written ``resources`` win over the profile's shape."""
    res = sweep.resources
    given = res.model_fields_set
    return Resources(
        gpus_per_node=res.gpus if "gpus" in given else profile.gpus_per_node,
        cpus_per_task=res.cpus if "cpus" in given else profile.cpus_per_task,
        mem_gb=res.mem_gb if "mem_gb" in given else profile.mem_gb,
        timeout_min=res.time_min if "time_min" in given else profile.timeout_min,
    )


def job_db_url(url: str | None) -> str | None:
    """The URL jobs open: an explicit one as given; the default SQLite file made absolute (jobs may
    start in another directory); ``None`` for ``$SCALERL_DB_URL`` so a password stays in the
    environment instead of spec files."""
    from db.engine import resolve_url

    if url:
        return url
    resolved = resolve_url(None)
    if os.environ.get("SCALERL_DB_URL"):
        return None
    if resolved.get_backend_name() == "sqlite" and resolved.database and resolved.database != ":memory:":
        return f"sqlite:///{Path(resolved.database).resolve()}"
    return None


def prepare(
    sweep_file: str | Path,
    overrides: list[str],
    *,
    executor: str | None,
    profile: str | None,
    db_url: str | None,
    state_dir: Path | None = None,
    max_parallel: int | None = None,
) -> Prepared:
    from harness.recipe import load_sweep, plan

    sweep = load_sweep(sweep_file, overrides)
    planned = plan(sweep)
    name = executor or sweep.executor
    # The sweep's resources.profile names a cluster; off the cluster only an explicit --profile counts.
    prof = resolve_profile(sweep, profile) if (name == "slurm" or profile) else SlurmProfile()
    state = state_dir or default_state_dir(sweep.sweep)
    specs = run_specs(
        sweep.sweep,
        planned.runs,
        resources=resolve_resources(sweep, prof),
        state_dir=state,
        db_url=job_db_url(db_url),
        checkpoint_grace_s=prof.checkpoint_grace_s,
    )
    from harness.execution.runners.command import check_templates

    for spec in specs:
        if spec.recipe.get("runner", {}).get("type") == "command":
            check_templates(spec)
    from harness.execution.runners.replay import check_sources

    check_sources(specs)
    ex = get_executor(name, ExecutorContext(state, prof, max_parallel))
    return Prepared(sweep, planned.runs, tuple(specs), ex, sweep.max_retries)


def launch(store: Any, prepared: Prepared) -> SubmitReport:
    from harness.execution.extend import apply_extensions

    sweep = prepared.sweep
    register(store, sweep.sweep, sweep.model_dump(mode="json", by_alias=True), prepared.planned)
    # A run extended by `--extend` trains to its extended budget when it is submitted again.
    specs = apply_extensions(store, prepared.specs)
    return submit_sweep(store, prepared.executor, specs, max_retries=prepared.max_retries)


def extend(store: Any, prepared: Prepared, budget: float) -> Any:
    """``scalerl sweep --extend BUDGET``: :func:`harness.execution.extend.extend_sweep`."""
    from harness.execution.extend import extend_sweep

    sweep = prepared.sweep
    register(store, sweep.sweep, sweep.model_dump(mode="json", by_alias=True), prepared.planned)
    return extend_sweep(store, prepared.executor, prepared.specs, budget)

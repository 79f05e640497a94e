"""From a sweep file to submitted jobs: the glue ``scalerl sweep`` runs.

Resolves the executor (``--executor`` or the sweep's ``executor``), the Slurm profile (``--profile``
or the sweep's ``resources.profile`` under ``slurm/profiles/``), the per-run resource shape (the
sweep's explicit ``resources`` over the profile's), the store URL the jobs use, then registers and
submits (:func:`scalerl.harness.execution.submit.submit_sweep`).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.codechange import CodeCheck, Policy, attach, check, enforce, resolve_policy
from scalerl.harness.execution.executors.base import Executor, ExecutorContext, get_executor
from scalerl.harness.execution.profile import SlurmProfile, load_profile
from scalerl.harness.execution.spec import Resources, RunSpec
from scalerl.harness.execution.submit import (
    SubmitReport,
    default_state_dir,
    register,
    run_specs,
    submit_sweep,
)

PROFILE_DIR = Path("slurm/profiles")


@dataclass(frozen=True)
class Prepared:
    sweep: Any  # scalerl.harness.recipe.SweepSpec
    planned: tuple[Any, ...]  # scalerl.harness.recipe.PlannedRun
    specs: tuple[RunSpec, ...]
    executor: Executor
    max_retries: int


def profile_dirs() -> list[Path]:
    """Where a profile NAME is looked for, first hit wins: each folder in ``$SCALERL_PROFILE_PATH``
    (``:``-separated), the user's ``$XDG_CONFIG_HOME/scalerl/profiles`` (``~/.config/...``), then
    ``slurm/profiles`` under the working directory (this repository's)."""
    dirs = [Path(d) for d in os.environ.get("SCALERL_PROFILE_PATH", "").split(os.pathsep) if d]
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return [*dirs, config / "scalerl" / "profiles", PROFILE_DIR]


def resolve_profile(sweep: Any, profile: str | None) -> SlurmProfile:
    name = profile or sweep.resources.profile
    if not name:
        return SlurmProfile()
    path = Path(name)
    if path.suffix not in (".yaml", ".yml"):
        dirs = profile_dirs()
        found = next((d / f"{name}.yaml" for d in dirs if (d / f"{name}.yaml").is_file()), None)
        if found is None:
            known = sorted({p.stem for d in dirs if d.is_dir() for p in d.glob("*.yaml")})
            raise ConfigError(
                f"Slurm profile {name!r} not found in {', '.join(str(d) for d in dirs)}",
                file=str(getattr(sweep, "path", None) or "") or None,
                field="resources.profile",
                value=name,
                fix=f"use one of {known}, pass --profile path/to/profile.yaml, or put NAME.yaml in "
                "a folder listed in $SCALERL_PROFILE_PATH",
            )
        path = found
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
        nodes=res.nodes if "nodes" in given else profile.nodes,
        tasks_per_node=res.tasks_per_node if "tasks_per_node" in given else profile.tasks_per_node,
    )


def job_db_url(url: str | None) -> str | None:
    """The URL jobs open: an explicit one as given; the default SQLite file made absolute (jobs may
    start in another directory); ``None`` for ``$SCALERL_DB_URL`` so a password stays in the
    environment instead of spec files.

    An explicit URL that carries a password is refused (spec files and Slurm pickles would hold
    it), unless it is the one in ``$SCALERL_DB_URL``, which jobs inherit."""
    from scalerl.db.engine import redact, resolve_url
    from scalerl.db.redaction import secret_in

    if url:
        given = resolve_url(url)
        where = secret_in(given)  # every form: user:PW@, ?password=, ?sslpassword=, options...
        if where is None:
            return url
        env = os.environ.get("SCALERL_DB_URL")
        if env and resolve_url(env) == given:
            return None
        raise ConfigError(
            f"this store URL carries a secret ({where}), which every job's spec file (and, on "
            "Slurm, its pickle on the shared filesystem) would then hold",
            field="--db",
            value=redact(given),
            fix="export SCALERL_DB_URL='<the URL>' and drop --db (jobs inherit it), or keep the "
            "password in ~/.pgpass (PGPASSFILE) and leave it out of the URL",
        )
    resolved = resolve_url(None)
    if os.environ.get("SCALERL_DB_URL"):
        return None
    if resolved.get_backend_name() == "sqlite" and resolved.database and resolved.database != ":memory:":
        return f"sqlite:///{Path(resolved.database).resolve()}"
    return None


def check_store_for(executor: str, db_url: str | None, profile: SlurmProfile) -> None:
    """Refuse a SQLite store behind Slurm: every compute node would write one file over the shared
    filesystem, and SQLite's locking (WAL included) does not hold across hosts."""
    from scalerl.db.engine import resolve_url

    if executor != "slurm" or profile.allow_sqlite:
        return
    url = resolve_url(db_url)
    if url.get_backend_name() == "sqlite":
        raise ConfigError(
            "a Slurm sweep cannot use a SQLite store: its jobs on several nodes would write one "
            "file over the shared filesystem, where SQLite's locks do not hold",
            field="--db",
            value=url.database,
            fix="pass --db postgresql+psycopg://USER@HOST/DB (or export SCALERL_DB_URL); on a "
            "single-node testbed set allow_sqlite: true in the Slurm profile",
        )


def prepare(
    sweep_file: str | Path,
    overrides: list[str],
    *,
    executor: str | None,
    profile: str | None,
    db_url: str | None,
    state_dir: Path | None = None,
    max_parallel: int | None = None,
    loaded: Any = None,
) -> Prepared:
    """``loaded``: the SweepSpec already read from ``sweep_file`` with ``overrides`` (the CLI and
    the API read it first to tell a search from a planned sweep), so it is not read twice."""
    from scalerl.harness.recipe import load_sweep, plan

    sweep = loaded if loaded is not None else load_sweep(sweep_file, overrides)
    planned = plan(sweep)
    name = executor or sweep.executor
    # The sweep's resources.profile names a cluster; off the cluster only an explicit --profile counts.
    prof = resolve_profile(sweep, profile) if (name == "slurm" or profile) else SlurmProfile()
    check_store_for(name, db_url, prof)
    state = state_dir or default_state_dir(sweep.sweep)
    specs = run_specs(
        sweep.sweep,
        planned.runs,
        resources=resolve_resources(sweep, prof),
        state_dir=state,
        db_url=job_db_url(db_url),
        checkpoint_grace_s=prof.checkpoint_grace_s,
    )
    from scalerl.harness.execution.runners.command import check_templates

    for spec in specs:
        if spec.recipe.get("runner", {}).get("type") == "command":
            check_templates(spec)
    from scalerl.harness.execution.runners.replay import check_sources

    check_sources(specs)
    from scalerl.harness.execution.runners.trl import check_specs

    check_specs(specs)  # a knob TRL cannot express is refused before anything is submitted
    if name == "local":
        from scalerl.harness.execution.executors.local_gpus import check_gpus

        check_gpus(specs)  # more GPUs than the machine has would wait in the queue forever
    ex = get_executor(name, ExecutorContext(state, prof, max_parallel))
    return Prepared(sweep, planned.runs, tuple(specs), ex, sweep.max_retries)


def not_code(store: Any, prepared: Prepared) -> list[Path]:
    """Paths whose changes are not trainer code: the sweep's state dir (workdirs, checkpoints, job
    files), the SQLite store and its WAL files, the default ``.scalerl`` folder and the sweep file
    with its base recipe (their settings are in each run's config and id already)."""
    paths = [prepared.executor.ctx.state_dir, Path(".scalerl")]
    db_file = getattr(store, "sqlite_path", None)
    if db_file:
        paths += [Path(db_file + suffix) for suffix in ("", "-wal", "-shm", "-journal")]
    sweep = prepared.sweep
    with contextlib.suppress(ConfigError):  # a sweep built without a file has none to leave out
        paths += [Path(sweep.path), Path(sweep.path).parent / sweep.base]
    return paths


def check_code(store: Any, prepared: Prepared, policy: Policy | None) -> tuple[list[RunSpec], CodeCheck]:
    """The specs with the code they will run, and what changed since their stored runs were made;
    raises (nothing submitted) when the policy is ``refuse`` and anything did."""
    chosen = resolve_policy(policy, getattr(prepared.sweep, "on_code_change", None))
    specs = attach(prepared.specs, exclude=not_code(store, prepared))
    result = check(store, specs, chosen)
    try:
        where = str(prepared.sweep.path)
    except ConfigError:
        where = f"sweep {prepared.sweep.sweep}"
    enforce(result, where=where)
    return specs, result


def launch(store: Any, prepared: Prepared, *, on_code_change: Policy | None = None) -> SubmitReport:
    """Register and submit the missing runs. ``on_code_change`` overrides the sweep file's policy
    for runs other code made (:mod:`scalerl.harness.execution.codechange`)."""
    from scalerl.harness.execution.extend import apply_extensions

    sweep = prepared.sweep
    specs, code = check_code(store, prepared, on_code_change)  # before anything is written
    register(store, sweep.sweep, sweep.model_dump(mode="json", by_alias=True), prepared.planned)
    # A run extended by `--extend` trains to its extended budget when it is submitted again.
    specs = apply_extensions(store, specs)
    return submit_sweep(store, prepared.executor, specs, max_retries=prepared.max_retries, code=code)


def extend(store: Any, prepared: Prepared, budget: float, *, on_code_change: Policy | None = None) -> Any:
    """``scalerl sweep --extend BUDGET``: :func:`scalerl.harness.execution.extend.extend_sweep`.

    An extension continues a run from its checkpoint, so new code would be stitched onto the old
    curve: ``refuse`` stops it, ``reuse`` goes ahead (each attempt's code is on its ``started``
    event), and ``rerun`` is refused here (rerun first, then extend)."""
    from scalerl.harness.execution.extend import extend_sweep

    sweep = prepared.sweep
    specs, code = check_code(store, prepared, on_code_change)
    if code.changed and code.policy == "rerun":
        raise ConfigError(
            "--extend continues runs from their checkpoints; it cannot rerun them under new code",
            field="--on-code-change",
            value="rerun",
            fix="run `scalerl sweep FILE --on-code-change rerun` first, then --extend; or pass "
            "--on-code-change reuse to continue the old runs with the new code",
        )
    register(store, sweep.sweep, sweep.model_dump(mode="json", by_alias=True), prepared.planned)
    if code.changed:
        from scalerl.harness.execution.codechange import log

        log(store, sweep.sweep, code)
    return extend_sweep(store, prepared.executor, specs, budget)

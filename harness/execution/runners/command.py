"""The ``command`` runner: launch a lab's own training command for one variant.

``argv`` and ``env`` are templated (see :mod:`scalerl.harness.execution.runners.template`). The script
gets ``SCALERL_RUN_ID``, ``SCALERL_ATTEMPT``, ``SCALERL_CHECKPOINT_DIR``, ``SCALERL_METRICS_FILE``
and, when the sweep named a database, ``SCALERL_DB_URL``. It reports points either through
:mod:`scalerl.harness.client` or by appending JSONL lines to ``SCALERL_METRICS_FILE``, which this runner
tails while the script runs (format: :mod:`scalerl.harness.execution.runners.metrics_file`; a line may
carry ``"n": {"val/pass_rate": 512}``, the samples behind a rate, so its noise is known). A
non-zero exit fails the run with the tail of its stderr.

On preemption (``stop`` set) the script gets SIGTERM, the conventional "save and exit" signal,
and ``checkpoint_grace_s`` to exit before SIGKILL; resuming from ``SCALERL_CHECKPOINT_DIR`` is the
script's job.

The script runs in its own process group (:mod:`scalerl.harness.execution.runners.procgroup`):
signals reach every process it started, and the group is ended with the run on every way out (a
clean exit that left children behind, a malformed metrics line, a store error, and, through a
watchdog, the job or search worker being SIGKILLed), so no orphan writes beside the next attempt.
Non-finite metric values are kept and counted, as importers count them (the run's ``losses``
event); an exit status 0 with no point logged fails the run (:func:`scalerl.harness.execution.job.execute`).

Multi-process runs: ``runner.launcher: torchrun`` starts the command as ``torchrun --standalone
--nproc-per-node N --no-python ARGV`` (:func:`launch_argv`), N = ``runner.nproc_per_node``, else
the run's GPUs (``resources.gpus``), at least 1. Every rank inherits the run's environment,
``CUDA_VISIBLE_DEVICES`` (its GPU set on the local executor) included, and gets torchrun's
``RANK`` / ``LOCAL_RANK`` / ``WORLD_SIZE``; only rank 0 should report points (the client writes
only from rank 0; a metrics file is the script's to write from rank 0).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from scalerl.harness.errors import ConfigError, ExecutionError
from scalerl.harness.execution.runners.base import NullSink, Outcome, RunContext, Runner, register_runner
from scalerl.harness.execution.runners.metrics_file import MetricsTail
from scalerl.harness.execution.runners.procgroup import ProcessGroup
from scalerl.harness.execution.runners.tail import Tails, follow
from scalerl.harness.execution.runners.template import Template, run_fields
from scalerl.harness.execution.spec import RunSpec
from scalerl.harness.importers.base import ImportLosses
from scalerl.harness.recipe.schema import CommandRunnerConfig

log = logging.getLogger(__name__)
POLL_S = 0.25
FAIL_GRACE_S = 5.0  # a failed run's command gets this long after SIGTERM to save, then SIGKILL
STDERR_TAIL_BYTES = 4000


def _tail(path: Path, n: int = STDERR_TAIL_BYTES) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - n))
            return fh.read().decode("utf-8", errors="replace").strip()
    except OSError:
        return ""


def torchrun_program() -> list[str]:
    """How torchrun is started: ``python -m torch.distributed.run`` (torchrun's documented
    equivalent) with this interpreter where it has torch, else ``torchrun`` from PATH."""
    if importlib.util.find_spec("torch") is not None:
        return [sys.executable, "-m", "torch.distributed.run"]
    return [shutil.which("torchrun") or "torchrun"]


def launch_argv(argv: list[str], cfg: CommandRunnerConfig, gpus: int) -> list[str]:
    """``argv`` as the runner's ``launcher`` starts it. ``--no-python``: argv[0] is run as given
    (the lab's interpreter or script), as it is without a launcher."""
    if cfg.launcher is None:
        return argv
    nproc = cfg.nproc_per_node or max(1, gpus)
    return [*torchrun_program(), "--standalone", "--nproc-per-node", str(nproc), "--no-python", *argv]


def build_command(ctx: RunContext) -> tuple[list[str], dict[str, str], Path]:
    """(argv, extra env, metrics file) for this attempt; raises ConfigError on bad templates."""
    recipe = ctx.spec.typed_recipe()
    cfg = recipe.runner
    if not isinstance(cfg, CommandRunnerConfig):
        raise ConfigError("the command runner needs runner.type=command", field="runner.type", value=cfg.type)
    spec = ctx.spec
    metrics_default = str(ctx.workdir / "metrics.jsonl")
    fields = run_fields(ctx)
    fields["metrics_file"] = metrics_default
    tpl = Template(fields, recipe.resolved())
    metrics = Path(tpl.render(cfg.metrics_file, where="runner.metrics_file")) if cfg.metrics_file else None
    if metrics is not None and not metrics.is_absolute():
        metrics = ctx.workdir / metrics
    metrics = metrics or Path(metrics_default)
    fields["metrics_file"] = str(metrics)
    tpl = Template(fields, recipe.resolved())
    argv = launch_argv(tpl.render_all(cfg.argv, where="runner.argv"), cfg, spec.resources.gpus_per_node)
    env = {k: tpl.render(v, where=f"runner.env.{k}") for k, v in cfg.env.items()}
    env.update(
        SCALERL_RUN_ID=spec.run_id,
        SCALERL_ATTEMPT=str(ctx.attempt),
        SCALERL_CHECKPOINT_DIR=str(ctx.workdir / "checkpoint"),
        SCALERL_METRICS_FILE=str(metrics),
    )
    if ctx.db_url:
        env["SCALERL_DB_URL"] = ctx.db_url
    return argv, env, metrics


@register_runner("command")
class CommandRunner(Runner):
    def run(self, ctx: RunContext) -> Outcome:
        argv, extra_env, metrics_path = build_command(ctx)
        (ctx.workdir / "checkpoint").mkdir(parents=True, exist_ok=True)
        stderr_path = ctx.workdir / f"stderr.attempt{ctx.attempt}.log"
        stdout_path = ctx.workdir / f"stdout.attempt{ctx.attempt}.log"
        metrics = MetricsTail(metrics_path, ctx.sink)
        tail = follow(ctx, metrics)  # + runner.tensorboard_dir
        try:
            with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
                group = ProcessGroup(
                    argv,
                    env={**os.environ, **extra_env},
                    stdout=out,
                    stderr=err,
                    orphan_grace_s=ctx.spec.checkpoint_grace_s,
                )
        except OSError as exc:
            if getattr(ctx.spec.typed_recipe().runner, "launcher", None) == "torchrun":
                raise ExecutionError(
                    f"runner.launcher=torchrun: cannot start {argv[0]!r} ({exc}); fix: install torch "
                    "(the [trainer] extra) where the harness runs, or put torchrun on PATH"
                ) from exc
            raise ExecutionError(
                f"runner.argv[0]={argv[0]!r}: cannot start the command ({exc}); "
                "fix: use an absolute path or a program on PATH"
            ) from exc
        try:
            rc = self._follow(ctx, group, tail)
        finally:
            # Whatever ended the run (a clean exit, a malformed metrics line, a store error, a
            # stop), no process of the command outlives it to write beside the next attempt.
            group.end(grace_s=min(FAIL_GRACE_S, ctx.spec.checkpoint_grace_s))
        lost = metrics.losses.freeze()
        if lost:
            self._report_losses(ctx, metrics_path, lost)
        if ctx.stop.is_set() or ctx.superseded():
            return Outcome.STOPPED
        if rc != 0:
            raise ExecutionError(
                f"command {argv[0]!r} exited with status {rc} (run {ctx.spec.run_id}, attempt "
                f"{ctx.attempt}); stderr tail ({stderr_path}):\n{_tail(stderr_path)}"
            )
        return Outcome.COMPLETED

    @staticmethod
    def _follow(ctx: RunContext, group: ProcessGroup, tail: Tails) -> int:
        """Tail the metrics while the command runs; returns its exit status. On ``stop`` the whole
        group gets SIGTERM (save and exit), then SIGKILL after ``checkpoint_grace_s``; once the
        attempt is superseded, SIGKILL at once (a SIGTERM would have it checkpoint over its
        successor's)."""
        stopping_since: float | None = None
        while True:
            rc = group.poll()
            if tail.poll():
                ctx.sink.flush()
            if rc is not None:
                break
            if ctx.superseded():
                group.signal(signal.SIGKILL)
            elif ctx.stop.is_set():
                if stopping_since is None:
                    stopping_since = time.monotonic()
                    group.signal(signal.SIGTERM)
                elif time.monotonic() - stopping_since > ctx.spec.checkpoint_grace_s:
                    group.signal(signal.SIGKILL)
            time.sleep(POLL_S)
        tail.poll(final=True)
        ctx.sink.flush()
        return rc

    @staticmethod
    def _report_losses(ctx: RunContext, path: Path, lost: ImportLosses) -> None:
        """Non-finite values kept, unplaceable lines dropped: counted as importers count them, in
        the job's log and as the run's ``losses`` event."""
        log.warning("run %s: %s: %s", ctx.spec.run_id, path, lost.describe())
        if ctx.note is not None:
            ctx.note(
                "losses",
                {
                    "attempt": ctx.attempt,
                    "source": str(path),
                    "counts": dict(lost.counts),
                    "examples": {k: list(v) for k, v in lost.examples.items()},
                },
            )

    def has_checkpoint(self, workdir: Path) -> bool:
        """The script saves to ``SCALERL_CHECKPOINT_DIR`` (``workdir/checkpoint``) in its own format:
        anything there is a checkpoint. Its step is the script's to know, so :meth:`resume_step`
        stays None and a resumed attempt's re-logged points overwrite the stored ones."""
        folder = workdir / "checkpoint"
        return folder.is_dir() and any(folder.iterdir())


def check_templates(spec: RunSpec) -> None:
    """Render a command run's argv / env / metrics_file once, so a bad placeholder is reported by
    ``scalerl sweep`` before anything is submitted; refuse a torchrun launch over several tasks."""
    res = spec.resources
    if (
        getattr(spec.typed_recipe().runner, "launcher", None) == "torchrun"
        and res.nodes * res.tasks_per_node > 1
    ):
        raise ConfigError(
            f"launcher: torchrun starts its ranks on one node (--standalone), but the run has "
            f"{res.nodes} node(s) x {res.tasks_per_node} task(s), each of which would start its own",
            field="runner.launcher",
            value="torchrun",
            fix="set resources.nodes: 1 and tasks_per_node: 1 (torchrun starts nproc_per_node ranks), "
            "or drop the launcher and let srun start one task per rank",
        )
    ctx = RunContext(
        spec=spec,
        attempt=1,
        sink=NullSink(),
        workdir=Path(spec.workdir),
        stop=threading.Event(),
        db_url=spec.db_url,
    )
    build_command(ctx)

"""Follow a trainer's TensorBoard directory while it runs (the command runner's ``tensorboard_dir``).

A lab whose trainer already logs to TensorBoard (verl and OpenRLHF with
``trainer.logger=[...,tensorboard]``) needs no code change: the command runner polls the run's
directory with :class:`scalerl.harness.importers.tensorboard.LogdirTail` (the importer's own framing,
checksums and parsing, read incrementally) and writes the new points through ``ctx.sink``::

    runner:
      type: command
      argv: [...]
      env: {TENSORBOARD_DIR: "{workdir}/tb"}
      tensorboard_dir: tb                    # templated like argv; relative to the run's workdir
      tensorboard_tags: {"val-core/openai/gsm8k/reward/mean@1": val/pass_rate}   # empty: all tags
      tensorboard_compute: {samples: {column: step, scale: 512}, wall_s: wall_time}

Each polled step becomes one ``sink.add(step, metrics, compute)``; a step whose tags arrive over
two polls is two adds (the store keys points by run, metric and step, so that is one curve, and a
step logged again, by a resumed trainer, keeps the later value, as the importer does). Compute is
the step or the wall time since the run's first scalar, times a scale. Only the job's owner
(rank 0, :mod:`scalerl.harness.execution.rank`) runs a runner, so only rank 0 tails. A new attempt re-reads
the directory from the start; that is idempotent.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from scalerl.harness.execution.runners.base import RunContext, Sink
from scalerl.harness.execution.runners.template import Template, run_fields
from scalerl.harness.importers.tensorboard import LogdirTail
from scalerl.harness.recipe.schema import CommandRunnerConfig, TensorBoardCompute

log = logging.getLogger(__name__)


class Poller(Protocol):
    def poll(self, *, final: bool = False) -> int: ...


class TensorBoardTail:
    """Incrementally ingest a TensorBoard run directory into ``sink``."""

    def __init__(
        self,
        run_dir: Path,
        sink: Sink,
        tags: Mapping[str, str] | None = None,
        compute: Mapping[Any, TensorBoardCompute] | None = None,
    ) -> None:
        self.reader = LogdirTail(run_dir)
        self.sink = sink
        self.tags = dict(tags or {})
        self.compute = dict(compute or {})
        self._origin: float | None = None

    def poll(self, *, final: bool = False) -> int:
        """Ingest the records completed since the last poll; returns how many points (metric values)
        went to the sink. ``final``: the writer has exited (see :meth:`LogdirTail.poll`)."""
        polled = self.reader.poll(final=final)
        steps: dict[int, dict[str, float]] = {}
        walls: dict[int, float] = {}
        n = 0
        for tag, points in polled.items():
            name = self.tags.get(tag, tag) if not self.tags or tag in self.tags else None
            if points:
                first = min(p[1] for p in points)
                self._origin = first if self._origin is None else min(self._origin, first)
            if name is None:
                continue
            for step, wall, value, _ in points:
                steps.setdefault(step, {})[name] = value
                walls[step] = min(walls.get(step, wall), wall)
                n += 1
        for step, metrics in sorted(steps.items()):
            self.sink.add(step, metrics, self._compute(step, walls[step]))
        lost = self.reader.losses.freeze() if final else None
        if lost:
            log.warning("%s: the TensorBoard tail lost %s", self.reader.run_dir, lost.describe())
        return n

    def _compute(self, step: int, wall: float) -> dict[str, float]:
        origin = self._origin if self._origin is not None else wall
        return {
            unit: (step if col.column == "step" else wall - origin) * col.scale
            for unit, col in self.compute.items()
        }


class Tails:
    """The command runner's tails polled together: the metrics JSONL and, when the recipe names
    one, the TensorBoard directory."""

    def __init__(self, metrics: Poller, tensorboard: TensorBoardTail | None) -> None:
        self.metrics = metrics
        self.tensorboard = tensorboard

    def poll(self, *, final: bool = False) -> int:
        n = self.metrics.poll(final=final)  # final: a last line without its newline counts
        if self.tensorboard is not None:
            n += self.tensorboard.poll(final=final)
        return n


def tensorboard_dir(ctx: RunContext) -> Path | None:
    """The run's rendered ``runner.tensorboard_dir`` (relative paths from the workdir), or None."""
    recipe = ctx.spec.typed_recipe()
    cfg = recipe.runner
    if not isinstance(cfg, CommandRunnerConfig) or cfg.tensorboard_dir is None:
        return None
    template = Template(run_fields(ctx), recipe.resolved())
    path = Path(template.render(cfg.tensorboard_dir, where="runner.tensorboard_dir"))
    return path if path.is_absolute() else ctx.workdir / path


def follow(ctx: RunContext, metrics: Poller) -> Tails:
    """What the command runner polls while its command runs (and once, ``final=True``, after)."""
    run_dir = tensorboard_dir(ctx)
    if run_dir is None:
        return Tails(metrics, None)
    cfg = ctx.spec.typed_recipe().runner
    assert isinstance(cfg, CommandRunnerConfig)
    return Tails(metrics, TensorBoardTail(run_dir, ctx.sink, cfg.tensorboard_tags, cfg.tensorboard_compute))

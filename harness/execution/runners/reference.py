"""The ``reference`` runner: the built-in RL trainer (:func:`scalerl.harness.rl.train`).

The trainer checkpoints to ``workdir/checkpoint/`` every ``checkpoint_every_steps`` and when
``stop`` is set, and resumes from that checkpoint when one exists, so calling it again after a
preemption continues the same curve.
"""

from __future__ import annotations

from pathlib import Path

from scalerl.harness.execution.runners.base import Outcome, RunContext, Runner, register_runner


@register_runner("reference")
class ReferenceRunner(Runner):
    def run(self, ctx: RunContext) -> Outcome:
        from scalerl.harness.rl import train  # heavy (torch): only inside the job

        result = train(
            ctx.spec.typed_recipe(),
            ctx.spec.seed,
            sink=ctx.sink,
            workdir=ctx.workdir,
            stop=ctx.stop,
            superseded=ctx.superseded,
        )
        return Outcome.STOPPED if result.stopped else Outcome.COMPLETED

    def resume_step(self, workdir: Path) -> int | None:
        if not (workdir / "checkpoint").exists() and not (workdir / "checkpoint.old").exists():
            return None
        from scalerl.harness.rl import checkpoint

        state = checkpoint.load(workdir)
        step = None if state is None else state.get("step")
        return int(step) if isinstance(step, int) else None

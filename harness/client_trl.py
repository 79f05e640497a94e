"""A transformers ``TrainerCallback`` that streams a TRL (or any ``Trainer``) run's logs into a run
:func:`scalerl.harness.client.init` attached::

    from scalerl.harness import client
    from scalerl.harness.client_trl import scalerl_callback

    with client.init(sweep="grpo-loss", knob="loss", alternative="dapo", seed=0, config=cfg) as run:
        trainer = GRPOTrainer(..., callbacks=[scalerl_callback(run, n_params=model.num_parameters())])
        trainer.train()

Every numeric value the trainer logs (``reward``, ``loss``, ``eval_*`` after an evaluation, ...)
but :data:`NOT_METRICS` becomes a point at ``state.global_step``; ``metrics`` (logged name ->
stored name) keeps and renames only those it lists. Compute, cumulative like every point's:

- ``tokens``: TRL's ``num_tokens`` (the tokens it has seen, prompts and completions, restored
  from its checkpoint on resume), where the logs carry it;
- ``flops``: ``8 * n_params * tokens`` when ``n_params`` is given (2N per token generated or
  forwarded plus 6N trained: the reference trainer's estimate, :mod:`scalerl.harness.rl.compute`);
- ``wall_s`` and ``gpu_hours`` (wall time x ``args.world_size``): running totals of the time
  between logs, which go on from the store's values when ``init`` was given ``resume_step``.

Once a newer attempt of the run takes it over (``run.superseded``), a single-process training
stops after its step without saving (the newer attempt owns the output folder); under several
processes every rank must agree to stop, so there it only warns and the lab's launcher decides.

``transformers`` is imported when the callback is made, never by ``scalerl.harness.client``.
"""

from __future__ import annotations

import logging
import math
import numbers
import time
from collections.abc import Mapping
from typing import Any

from scalerl.harness.client import Run
from scalerl.harness.errors import ConfigError

log = logging.getLogger(__name__)

FLOPS_PER_TOKEN_PER_PARAM = 8.0  # 2N generation/forward + 6N training (scalerl.harness.rl.compute)
# Not curves: the compute count itself, the epoch, and the summary ``Trainer.train`` logs at its end.
NOT_METRICS = frozenset(
    {"num_tokens", "epoch", "total_flos", "train_runtime", "train_samples_per_second",
     "train_steps_per_second", "train_loss"}
)  # fmt: skip


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    return float(value)


def scalerl_callback(
    run: Run, *, n_params: int | None = None, metrics: Mapping[str, str] | None = None
) -> Any:
    """A ``transformers.TrainerCallback`` writing the trainer's logs into ``run`` (see the module
    docstring). Only the main process writes (``state.is_world_process_zero``)."""
    if not isinstance(run, Run):
        raise ConfigError(
            f"scalerl_callback needs the Run client.init returned, not {type(run).__name__}",
            field="run",
            fix="run = client.init(sweep=..., seed=..., config=...); scalerl_callback(run)",
        )
    if n_params is not None and (
        isinstance(n_params, bool) or not isinstance(n_params, int) or n_params <= 0
    ):
        raise ConfigError(
            "n_params must be a whole number > 0 (the model's parameter count)",
            field="n_params",
            value=n_params if isinstance(n_params, str | int | float) else type(n_params).__name__,
            fix="pass model.num_parameters(), or leave it out to log no flops",
        )
    from transformers import TrainerCallback

    class ScaleRLCallback(TrainerCallback):
        def __init__(self) -> None:
            self.last = time.perf_counter()
            self.warned = False

        def on_train_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            self.last = time.perf_counter()  # model loading is not training compute

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **_: Any) -> None:
            if not state.is_world_process_zero or not logs:
                return
            now = time.perf_counter()
            wall, self.last = now - self.last, now
            values = {k: _number(v) for k, v in logs.items()}
            if metrics is not None:
                points = {metrics[k]: v for k, v in values.items() if k in metrics and v is not None}
            else:
                points = {k: v for k, v in values.items() if v is not None and k not in NOT_METRICS}
            compute: dict[str, float] = {}
            tokens = values.get("num_tokens")
            if tokens is not None and math.isfinite(tokens):
                compute["tokens"] = tokens
                if n_params is not None:
                    compute["flops"] = FLOPS_PER_TOKEN_PER_PARAM * n_params * tokens
            devices = max(1, int(getattr(args, "world_size", 1) or 1))
            run.log(
                int(state.global_step),
                points,
                compute,
                add_compute={"wall_s": wall, "gpu_hours": wall * devices / 3600.0},
            )

        def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            if not run.superseded:
                return
            if max(1, int(getattr(args, "world_size", 1) or 1)) == 1:
                control.should_save = False
                control.should_training_stop = True
            elif not self.warned:
                log.warning("run %s: a newer attempt took it over; stop this job", run.run_id)
                self.warned = True

        def on_train_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            run.flush()

    return ScaleRLCallback()

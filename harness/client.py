"""The small API a lab's own training script uses to report points to the harness.

::

    from scalerl.harness import client
    client.log(step, {"val/pass_rate": 0.41}, compute={"gpu_hours": 1.5, "samples": 4096},
               n={"val/pass_rate": 512})

Inside a run launched by the ``command`` runner the environment says where to write:
``SCALERL_RUN_ID``, ``SCALERL_ATTEMPT`` and (optionally) ``SCALERL_DB_URL``. The writer is opened
on the first ``log`` and carries the attempt, so a superseded attempt's points are fenced by the
store. Points are batched; ``flush()`` pushes them now, and they are flushed at interpreter exit.
Not thread-safe: log from one thread.
"""

from __future__ import annotations

import atexit
import math
import os
from collections.abc import Mapping
from typing import Any

from scalerl.harness.errors import ConfigError

_writer: Any = None


def _open() -> Any:
    global _writer
    if _writer is None:
        run_id = os.environ.get("SCALERL_RUN_ID")
        attempt = os.environ.get("SCALERL_ATTEMPT")
        if not run_id or not attempt or not attempt.isdigit():
            raise ConfigError(
                "scalerl.harness.client needs SCALERL_RUN_ID and SCALERL_ATTEMPT in the environment",
                field="SCALERL_ATTEMPT" if run_id else "SCALERL_RUN_ID",
                value=attempt if run_id else run_id,
                fix="launch the script through a sweep with runner: {type: command, ...}",
            )
        from scalerl import db

        store = db.open_store(os.environ.get("SCALERL_DB_URL"))
        _writer = store.writer(run_id, int(attempt))
        atexit.register(close)
    return _writer


def log(
    step: int,
    metrics: Mapping[str, float],
    compute: Mapping[str, float] | None = None,
    n: Mapping[str, int] | None = None,
) -> None:
    """Record ``metrics`` at ``step`` with the cumulative ``compute`` (gpu_hours, flops, tokens,
    samples, wall_s). ``n`` (optional) maps a rate metric to the number of samples it was
    measured on (e.g. ``{"val/pass_rate": 512}``), so the fits and verdicts know its binomial
    noise; without it the noise is estimated from the curve. Idempotent per (step, metric).

    In a multi-process job only rank 0 (``RANK`` / ``SLURM_PROCID``) records; on the other
    ranks this is a no-op, so every rank may call it."""
    from scalerl.harness.execution.rank import process_rank

    if process_rank() != 0:
        return
    step = _as_step(step)
    for name, value in (("metrics", metrics), ("compute", compute or {}), ("n", n or {})):
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"client.log: {name} must be a mapping of name -> number, not {type(value).__name__}",
                field=name,
                value=value if isinstance(value, str | int | float) else None,
                fix='pass e.g. client.log(10, {"val/pass_rate": 0.41}, compute={"flops": 1e15})',
            )
    # Values are converted (and refused with their metric's name) by the writer, the one place
    # every writer path shares: a bad value fails this call, never a batch in the background.
    _open().add(step, dict(metrics), dict(compute or {}), n=n)


def _as_step(step: Any) -> Any:
    """An integral float (``10.0``) is taken as its int; everything else goes to the writer as
    given, whose ``add`` checks every step (type and the store's range) for every writer path, at
    the call, so a bad one never fails a batch in the background or spools later points."""
    if isinstance(step, float) and math.isfinite(step) and step.is_integer():
        return int(step)
    return step


def flush() -> None:
    if _writer is not None:
        _writer.flush()


def close() -> None:
    global _writer
    if _writer is not None:
        try:
            _writer.close()
        finally:
            _writer = None

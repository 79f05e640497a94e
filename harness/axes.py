"""The compute axes, spelled once (a bottom-layer module: it imports nothing).

A point's cumulative compute, what a sweep is fitted on: GPU hours, FLOPs, tokens and samples
(:data:`COMPUTE_AXES`). A point can also carry wall-clock seconds: the compute columns of the
store's points table are :data:`COMPUTE_UNITS`, in this order. A sweep is fitted, reported and
forecast on one of :data:`FIT_AXES`: a compute axis, or the training step. The type checker's
spellings of the same names (``FitAxis`` in :mod:`scalerl.harness.recipe.sweep`, the unit
``Literal`` types of :mod:`scalerl.harness.recipe.schema`) are pinned to these by a test.
"""

from __future__ import annotations

COMPUTE_AXES: tuple[str, ...] = ("gpu_hours", "flops", "tokens", "samples")
COMPUTE_UNITS: tuple[str, ...] = (*COMPUTE_AXES, "wall_s")
FIT_AXES: tuple[str, ...] = (*COMPUTE_AXES, "step")

"""Simulated sweeps whose truth is known.

:mod:`.simulate`: :func:`simulate_sweep` draws a LOO sweep from true sigmoids and a
:class:`NoiseModel`; :func:`write_sweep` writes it into a store through the trainer's writer. The
noise model's parameters are fitted to real curves by the benchmark (bench/noise_fit.py).

Importing this package loads nothing: the names below come from their modules on first access.
"""

from typing import TYPE_CHECKING

from scalerl import lazy_getattr

if TYPE_CHECKING:
    from scalerl.harness.analysis.sim.simulate import (
        CurveTruth,
        NoiseModel,
        SimulatedSweep,
        SweepDesign,
        VariantTruth,
        simulate_sweep,
        write_sweep,
    )

__all__ = [
    "CurveTruth",
    "NoiseModel",
    "SimulatedSweep",
    "SweepDesign",
    "VariantTruth",
    "simulate_sweep",
    "write_sweep",
]

__getattr__ = lazy_getattr(
    "scalerl.harness.analysis.sim",
    {
        "CurveTruth": "scalerl.harness.analysis.sim.simulate",
        "NoiseModel": "scalerl.harness.analysis.sim.simulate",
        "SimulatedSweep": "scalerl.harness.analysis.sim.simulate",
        "SweepDesign": "scalerl.harness.analysis.sim.simulate",
        "VariantTruth": "scalerl.harness.analysis.sim.simulate",
        "simulate_sweep": "scalerl.harness.analysis.sim.simulate",
        "write_sweep": "scalerl.harness.analysis.sim.simulate",
    },
)

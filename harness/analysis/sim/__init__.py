"""Simulated sweeps whose truth is known, and the noise model fitted to real curves.

- :mod:`.simulate`: :func:`simulate_sweep` draws a LOO sweep from true sigmoids and a
  :class:`NoiseModel`; :func:`write_sweep` writes it into a store through the trainer's writer;
- :mod:`.noise_fit`: :func:`estimate_noise` fits a :class:`NoiseModel`'s parameters to real
  curves (used by bench/verdict_sim.py).

Importing this package loads nothing: the names below come from their modules on first access.
"""

from typing import TYPE_CHECKING

from scalerl import lazy_getattr

if TYPE_CHECKING:
    from scalerl.harness.analysis.sim.noise_fit import NoiseEstimate, estimate_noise
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
    "NoiseEstimate",
    "NoiseModel",
    "SimulatedSweep",
    "SweepDesign",
    "VariantTruth",
    "estimate_noise",
    "simulate_sweep",
    "write_sweep",
]

__getattr__ = lazy_getattr(
    "scalerl.harness.analysis.sim",
    {
        "CurveTruth": "scalerl.harness.analysis.sim.simulate",
        "NoiseEstimate": "scalerl.harness.analysis.sim.noise_fit",
        "NoiseModel": "scalerl.harness.analysis.sim.simulate",
        "SimulatedSweep": "scalerl.harness.analysis.sim.simulate",
        "SweepDesign": "scalerl.harness.analysis.sim.simulate",
        "VariantTruth": "scalerl.harness.analysis.sim.simulate",
        "estimate_noise": "scalerl.harness.analysis.sim.noise_fit",
        "simulate_sweep": "scalerl.harness.analysis.sim.simulate",
        "write_sweep": "scalerl.harness.analysis.sim.simulate",
    },
)

"""Synthetic LOO sweeps with known truth, shared by the verdict and CLI tests."""

from __future__ import annotations

import numpy as np

from scalerl.harness.analysis.fit.curve import sigmoid_curve
from scalerl.harness.analysis.groups import VariantCurves

COMPUTE = np.geomspace(200, 150_000, 50)  # to 30 x C_mid: every curve reaches its plateau
# variant -> (knob, A, B, C_mid); the baseline is A=0.70, B=1.5, C_mid=5000.
TRUTH = {
    "baseline": (None, 0.70, 1.5, 5000.0),
    "loo-dapo": ("loss", 0.62, 1.5, 5000.0),  # ceiling drops by 0.08: asymptote-mover
    "loo-savg": ("aggregation", 0.70, 1.5, 2000.0),  # reaches half-gain 2.5x sooner: shaper
    "loo-lp": ("length_control", 0.70, 2.5, 5000.0),  # steeper: shaper
    "loo-fp32": ("lm_head", 0.70, 1.5, 5000.0),  # identical: no effect
}


Truth = dict[str, tuple[str | None, float, float, float]]


def synthetic_sweep(
    seeds: int = 3,
    seed: int = 0,
    noise: float = 0.01,
    truth: Truth | None = None,
    compute: np.ndarray | None = None,
) -> dict[str, VariantCurves]:
    """One curve per seed for each variant of ``truth`` (default :data:`TRUTH`): Eq. 1 with
    R0 = 0.2 at ``compute`` (default :data:`COMPUTE`) plus Gaussian noise."""
    rng = np.random.default_rng(seed)
    x = COMPUTE if compute is None else compute
    out = {}
    for name, (knob, a, b, c_mid) in (TRUTH if truth is None else truth).items():
        curves = tuple(
            (x, sigmoid_curve(x, 0.2, a, b, c_mid) + rng.normal(0, noise, x.size)) for _ in range(seeds)
        )
        out[name] = VariantCurves(
            name,
            curves,
            knob=knob,
            alternative=None if knob is None else name,
            run_ids=tuple(f"{name}-s{s}" for s in range(seeds)),
        )
    return out

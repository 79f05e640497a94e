"""AR(1) noise: how much a window mean of serially correlated points varies.

Real evaluation curves wander around their trend: residuals are serially correlated (W&B GSM8K,
lag-1 0.51; :mod:`scalerl.harness.analysis.sim.noise_fit`), so the mean of ``w`` consecutive
points varies more than ``sigma^2 / w``. For a stationary AR(1) with lag-1 correlation ``rho``::

    Var(mean of w points) = sigma^2 / w * F,   F = 1 + 2 sum_{k=1}^{w-1} (1 - k/w) rho^k

(exact for equal variances). The collapse test (:mod:`scalerl.harness.analysis.verdicts.collapse`)
and the noise model fitted for the simulator (:mod:`scalerl.harness.analysis.sim.noise_fit`) both
use these two functions.
"""

from __future__ import annotations

import numpy as np


def ar1_variance_factor(rho: float, w: int) -> float:
    """``F``: ``Var(mean of w points) / (sigma^2 / w)`` for a stationary AR(1) with lag-1 ``rho``
    (1 for one point or no correlation)."""
    if w <= 1 or rho == 0.0:
        return 1.0
    k = np.arange(1, w, dtype=np.float64)
    return float(1.0 + 2.0 * np.sum((1.0 - k / w) * rho**k))


def ar1_mean_variance(sigma2: float, phi: float, k: int) -> float:
    """The variance of the mean of ``k`` consecutive values of a stationary AR(1) with variance
    ``sigma2`` and lag-1 ``phi``; a ``phi`` at or below 0 is read as white noise."""
    if phi <= 0 or k <= 1:
        return sigma2 / k
    return sigma2 / k * ar1_variance_factor(phi, k)

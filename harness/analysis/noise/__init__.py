"""Per-point noise of a curve: the standard error of every point (binomial where its sample
count is known, else the curve's residual scatter), the forecast's noise scale, and AR(1) window
variances.

- :mod:`.point`: :func:`point_se` (the fits' and verdicts' per-point SE: :func:`binomial_se`,
  :func:`residual_se`) and :func:`noise_scale` (the forecast interval's noise unit); its
  docstring says which serves what, and why they are two;
- :mod:`.ar1`: the variance of a window mean of AR(1) points (:func:`ar1_variance_factor`,
  :func:`ar1_mean_variance`).

Importing this package loads nothing: the names below come from their modules on first access.
"""

from typing import TYPE_CHECKING

from scalerl import lazy_getattr

if TYPE_CHECKING:
    from scalerl.harness.analysis.noise.ar1 import ar1_mean_variance, ar1_variance_factor
    from scalerl.harness.analysis.noise.point import (
        NoiseSource,
        binomial_se,
        noise_scale,
        point_se,
        residual_se,
    )

__all__ = [
    "NoiseSource",
    "ar1_mean_variance",
    "ar1_variance_factor",
    "binomial_se",
    "noise_scale",
    "point_se",
    "residual_se",
]

__getattr__ = lazy_getattr(
    "scalerl.harness.analysis.noise",
    {
        "NoiseSource": "scalerl.harness.analysis.noise.point",
        "ar1_mean_variance": "scalerl.harness.analysis.noise.ar1",
        "ar1_variance_factor": "scalerl.harness.analysis.noise.ar1",
        "binomial_se": "scalerl.harness.analysis.noise.point",
        "noise_scale": "scalerl.harness.analysis.noise.point",
        "point_se": "scalerl.harness.analysis.noise.point",
        "residual_se": "scalerl.harness.analysis.noise.point",
    },
)

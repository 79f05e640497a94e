"""Per-point noise of a curve: the standard error of every point (binomial where its sample
count is known, else the curve's residual scatter) and the forecast's noise scale.

- :mod:`.point`: :func:`point_se` (the verdicts' and fits' per-point SE: :func:`binomial_se`,
  :func:`residual_se`) and :func:`noise_scale` (the forecast interval's noise unit).

Importing this package loads nothing: the names below come from their modules on first access.
"""

from typing import TYPE_CHECKING

from scalerl import lazy_getattr

if TYPE_CHECKING:
    from scalerl.harness.analysis.noise.point import (
        NoiseSource,
        binomial_se,
        noise_scale,
        point_se,
        residual_se,
    )

__all__ = [
    "NoiseSource",
    "binomial_se",
    "noise_scale",
    "point_se",
    "residual_se",
]

__getattr__ = lazy_getattr(
    "scalerl.harness.analysis.noise",
    {
        "NoiseSource": "scalerl.harness.analysis.noise.point",
        "binomial_se": "scalerl.harness.analysis.noise.point",
        "noise_scale": "scalerl.harness.analysis.noise.point",
        "point_se": "scalerl.harness.analysis.noise.point",
        "residual_se": "scalerl.harness.analysis.noise.point",
    },
)

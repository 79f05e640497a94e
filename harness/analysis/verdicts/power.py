"""Power, stated: the smallest effect a sweep could have detected, and the seeds a target needs.

A verdict test calls a difference ``d`` (dA or dB, variant minus baseline) real when its interval
at level ``1 - alpha`` excludes zero, and (the rule's floor) ``|d|`` exceeds a threshold (the A
margin, or ``min_rel_effect x B``). With ``se`` the standard error of ``d`` (from the two groups'
bootstrap spread), a true effect ``delta`` passes both with probability ``power`` when

    delta >= (z_{1-alpha/2} + z_power) * se      (the interval excludes zero)
    delta >= floor + z_power * se                  (the estimate clears the floor)

so the minimum detectable effect is the larger of the two (the usual two-sided MDE formula,
e.g. Bloom 1995, "Minimum detectable effects", Evaluation Review 19:547, plus the floor).
Defaults: power 0.8, the verdict's level (0.95).

Seeds: ``se`` shrinks as ``1/sqrt(seeds)`` when every variant gets more seeds (a pooled fit over
independent seeds), so the seeds that reach a target are the smallest ``s`` with
``MDE(se * sqrt(seeds_now / s)) <= target``. A target at or below the floor is unreachable by
seeds alone (the floor does not shrink): :func:`seeds_for` returns None and the caller says so.
With one seed, ``se`` comes from resampling points only and the seed-to-seed spread is unknown,
so the answer is a lower bound.
"""

from __future__ import annotations

import math
from statistics import NormalDist

DEFAULT_POWER = 0.8
_Z = NormalDist().inv_cdf


def z_two_sided(alpha: float) -> float:
    """The two-sided critical value ``z_{1-alpha/2}`` (1.960 for alpha = 0.05)."""
    return _Z(1.0 - alpha / 2.0)


def mde(se: float, *, alpha: float = 0.05, power: float = DEFAULT_POWER, floor: float = 0.0) -> float:
    """Minimum detectable |effect|: ``max((z_{1-alpha/2} + z_power) se, floor + z_power se)``.

    NaN when ``se`` is not a finite non-negative number. E.g. se = 0.01, alpha = 0.05, power
    0.8, floor 0.02: max(2.802 x 0.01, 0.02 + 0.842 x 0.01) = 0.0284.
    """
    if not (math.isfinite(se) and se >= 0.0):
        return math.nan
    zp = _Z(power)
    return max((z_two_sided(alpha) + zp) * se, floor + zp * se)


def seeds_for(
    target: float,
    se: float,
    seeds_now: int,
    *,
    alpha: float = 0.05,
    power: float = DEFAULT_POWER,
    floor: float = 0.0,
) -> int | None:
    """Seeds per variant for an MDE of at most ``target``, scaling ``se`` by sqrt(seeds_now/s).

    None when no seed count can (``target <= floor``) or ``se`` is unknown. At least 1. E.g.
    target 0.02, se 0.01 at 3 seeds, floor 0: the SE must fall to 0.02 / 2.802 = 0.00714, so
    s >= 3 x (0.01 / 0.00714)^2 = 5.89 -> 6 seeds.
    """
    if not (math.isfinite(se) and se >= 0.0 and math.isfinite(target)) or seeds_now < 1:
        return None
    if target <= floor:
        return None
    if se == 0.0:
        return 1
    zp = _Z(power)
    se_needed = min(target / (z_two_sided(alpha) + zp), (target - floor) / zp)
    ratio = (se / se_needed) ** 2
    # A hair of tolerance so that an exact fit (ratio x seeds an integer) is not rounded up.
    return max(1, math.ceil(seeds_now * ratio - 1e-9))

"""A look plan for stopping early: when to look at a growing sweep, and at what confidence.

Stop-when-decided (:mod:`scalerl.harness.execution.decide`) refits a sweep while its runs train
and stops a variant once its verdict is decided. Each look is a chance to decide wrongly, so
looking at every new point at the sweep's level (say 95%) would make a wrong early stop far
likelier than 5%. A :class:`LookPlan` fixes the looks in advance, Haybittle-Peto style:

- interim looks at planned fractions of each run's planned compute (default 25%, 50%, 75% of
  the budget), each at a very high level (``interim_level``, default 99.9%, alpha_i = 0.001);
- the final verdict, on the full curves, at :func:`final_level`:
  ``1 - (alpha - k * alpha_i)`` with ``alpha = 1 - level`` and ``k`` planned looks (0.953 for the
  defaults: alpha 0.05 less 3 x 0.001).

The guarantee: a wrong verdict anywhere in the sequence needs some look's interval to miss the
truth, so by the union bound (Bonferroni over the looks, valid whatever the correlation between
looks at the same growing curves) the chance of a wrong verdict, interim or final, is at most
``k * alpha_i + (alpha - k * alpha_i) = alpha``, as long as each interval has its nominal coverage.
A look that is skipped (the sweep jumped past two planned fractions between two ticks) spends
nothing; a look is never taken twice. Why this shape: interim looks only stop variants whose
evidence is overwhelming (an interval at 99.9% already clear of its threshold), which is the
case where more compute buys nothing; the final verdict keeps nearly all its power (its level
moves from 95% to 95.3%, a z of 1.986 instead of 1.960).

When a run's planned size is unknown (no budget in its config, or no points on the budget's
unit), the fraction cannot be computed; :func:`looks_by_points` then places the looks by point
count instead (a look when the fewest points of a run reach ``points_first``, then each doubling),
still at most ``len(fractions)`` looks at ``interim_level`` each: the spending, so the guarantee,
is the same; only the timing is a guess.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scalerl.harness.errors import ConfigError


@dataclass(frozen=True)
class LookPlan:
    """Planned interim looks (fractions of the planned compute, increasing, in (0, 1)) at
    ``interim_level`` each; the final verdict at :func:`final_level`, so that the whole sequence
    errs with probability at most ``1 - level``."""

    level: float = 0.95
    fractions: tuple[float, ...] = (0.25, 0.5, 0.75)
    interim_level: float = 0.999
    # Unknown planned size: first look when every run has this many points, then at each doubling.
    points_first: int = 8

    def __post_init__(self) -> None:
        if not 0.0 < self.level < 1.0:
            raise ConfigError("must be in (0, 1)", field="level", value=self.level, fix="use 0.95")
        if not self.level < self.interim_level < 1.0:
            raise ConfigError(
                "must be in (level, 1)", field="interim_level", value=self.interim_level, fix="use 0.999"
            )
        fr = self.fractions
        if any(not 0.0 < f < 1.0 for f in fr) or list(fr) != sorted(set(fr)):
            raise ConfigError(
                "must be increasing and each in (0, 1)",
                field="fractions",
                value=fr,
                fix="use (0.25, 0.5, 0.75)",
            )
        if self.final_alpha <= 0.0:
            raise ConfigError(
                f"{len(fr)} looks at alpha {1 - self.interim_level:g} spend all of alpha {1 - self.level:g}",
                field="interim_level",
                value=self.interim_level,
                fix="raise interim_level or plan fewer looks",
            )
        if self.points_first < 4:
            raise ConfigError(
                "too few points to fit", field="points_first", value=self.points_first, fix="use 8"
            )

    @property
    def alpha(self) -> float:
        return 1.0 - self.level

    @property
    def interim_alpha(self) -> float:
        return 1.0 - self.interim_level

    @property
    def final_alpha(self) -> float:
        """What the final verdict may spend: alpha less every planned interim look's alpha."""
        return self.alpha - len(self.fractions) * self.interim_alpha


def final_level(plan: LookPlan) -> float:
    """The final verdict's confidence level: ``1 - (alpha - k * alpha_interim)``."""
    return 1.0 - plan.final_alpha


def looks_reached(plan: LookPlan, fraction: float) -> int:
    """How many planned looks ``fraction`` (compute reached / planned compute) has reached."""
    if not math.isfinite(fraction):
        return 0
    return bisect.bisect_right(plan.fractions, fraction + 1e-12)


def looks_by_points(plan: LookPlan, points: int) -> int:
    """How many looks the fallback schedule (planned size unknown) has reached at ``points``
    (the fewest points of any run the verdict rests on): ``points_first``, then each doubling,
    at most ``len(plan.fractions)``."""
    return min(len(plan.fractions), (max(points, 0) // plan.points_first).bit_length())


def look_level(plan: LookPlan, fraction: float, taken: int = 0) -> float | None:
    """The level of an interim look at ``fraction`` (the smallest compute fraction over the runs
    still running that the verdict rests on), given ``taken`` looks already taken: the interim
    level when a planned look not yet taken has been reached, else None (no look now)."""
    return plan.interim_level if looks_reached(plan, fraction) > taken else None


def sweep_level(fit_spec: Mapping[str, Any] | None) -> float:
    """The level a sweep's final verdicts belong at, from its ``fit`` section: ``confidence``
    (default 0.95), or, under ``stop_when: decided`` or ``settled`` (interim looks were taken),
    the :func:`final_level` of ``LookPlan(level=confidence)``."""
    spec = dict(fit_spec or {})
    level = float(spec.get("confidence") or 0.95)
    looked = spec.get("stop_when") in ("decided", "settled")
    return final_level(LookPlan(level=level)) if looked else level

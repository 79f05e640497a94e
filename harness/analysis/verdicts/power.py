"""Power, stated: the smallest effect a sweep detects, and the seeds that would decide a knob.

One formula for both, the one the verdict's own intervals use (:mod:`.rule`): a contrast ``d``
with standard error ``se`` on a t reference with ``df`` degrees of freedom, judged against a
threshold ``m`` (the A margin, or ``log(1 + min_rel_effect)`` for log B and log C_mid) at level
``1 - alpha``. Its interval clears the threshold on the side its estimate lies (beyond it, or
inside it) with probability ``power`` when the distance ``|(|d| - m)|`` is at least
``(t_{1-alpha/2, df} + z_power) se`` (the usual two-sided minimum-detectable-effect formula,
e.g. Bloom 1995, "Minimum detectable effects", Evaluation Review 19:547, with the t quantile of
the sweep's pooled seed variance in place of the normal one: at 3-8 seeds per variant the
difference is what decides).

- :func:`mde`: the smallest ``|d|`` shown beyond ``m`` with that power: ``m + (t + z) se``;
- :func:`seeds_needed`: the seeds per variant at which one interval of the same centre clears its
  threshold with that power, ``se`` shrinking as ``1/sqrt(seeds)`` and the t quantile kept at the
  current ``df`` (conservative: more seeds bring more degrees of freedom);
- :func:`seeds_to_decide`: the seeds per variant that would decide a knob: every interval its
  nearest claim rests on must clear (dA alone when its estimate is beyond the margin; else the
  easier efficiency move for a shaper, or all three for no effect). The verdict's reason,
  ``scalerl fit``'s "not decided" list and stop-when-decided's futility note all print this one
  number.

Defaults: power 0.8 at the verdict's level.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from scalerl.harness.analysis.verdicts.inference import Contrast
from scalerl.harness.analysis.verdicts.rule import Evidence

DEFAULT_POWER = 0.8
_Z = NormalDist().inv_cdf


def mde(c: Contrast, threshold: float, level: float, power: float = DEFAULT_POWER) -> float:
    """The smallest ``|d|`` that ``c``'s noise shows beyond ``threshold`` at ``level`` with
    ``power``: ``threshold + (t_{(1+level)/2, df} + z_power) se``; NaN when ``c`` is not usable.
    E.g. se 0.01 on 18 degrees of freedom, margin 0.02, level 0.95, power 0.8: 0.02 + (2.101 +
    0.842) x 0.01 = 0.0494."""
    if not c.ok:
        return math.nan
    return threshold + (c.quantile(level) + _Z(power)) * c.se


def seeds_needed(
    c: Contrast, threshold: float, seeds_now: int, level: float, power: float = DEFAULT_POWER
) -> int | None:
    """Seeds per group at which an interval with ``c``'s centre clears ``threshold`` (beyond it or
    inside it, whichever side the estimate is on) with ``power``, the SE scaling as
    ``1/sqrt(seeds)`` and the t quantile at ``c``'s df. ``seeds_now`` when the current seeds
    already suffice; None when ``c`` is not usable or its estimate sits on the threshold."""
    if not c.ok:
        return None
    gap = abs(abs(c.d) - threshold)
    if gap <= 0:
        return None
    z = c.quantile(level) + _Z(power)
    need = seeds_now * (z * c.se / gap) ** 2
    return max(seeds_now + 1, math.ceil(need)) if need > seeds_now else seeds_now


def seeds_to_decide(evidence: Evidence, seeds_now: int, power: float = DEFAULT_POWER) -> int | None:
    """Seeds per variant at which the knob's nearest claim would be shown with ``power`` (see the
    module docstring); None when an estimate it needs sits on its threshold (no seed count moves
    it off), a contrast is not usable, or the claim needs a ceiling that is not measured."""
    ev = evidence
    a = seeds_needed(ev.a, ev.margin, seeds_now, ev.level, power) if ev.a is not None else None
    if ev.a is not None and (ev.lower_bound or (math.isfinite(ev.a.d) and abs(ev.a.d) > ev.margin)):
        return a  # the mover claim: dA alone
    if not ev.efficiency_compared:
        return a
    assert ev.log_b is not None and ev.log_c is not None
    effs = [(c, seeds_needed(c, ev.efficiency, seeds_now, ev.level2, power)) for c in (ev.log_b, ev.log_c)]
    moving = [n for c, n in effs if math.isfinite(c.d) and abs(c.d) > ev.efficiency]
    if moving:  # a shaper: the easier efficiency move shown (the ceilings need not be equal)
        return _min(*moving)
    if not ev.ceiling_measured:
        return None  # equivalence needs a measured dA: compute, not seeds
    return _max(a, *(n for _, n in effs))  # no effect: every interval inside its threshold


def _max(*ns: int | None) -> int | None:
    return None if any(n is None for n in ns) else max(n for n in ns if n is not None)


def _min(*ns: int | None) -> int | None:
    known = [n for n in ns if n is not None]
    return min(known) if known else None

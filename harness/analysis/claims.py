"""The knob rule's last step: from a knob's contrasts to its claims, their probabilities and verdict.

Input per knob (variant less baseline, each a :class:`~scalerl.harness.analysis.inference.Contrast`
with a t reference): dA (the ceiling), d log B and d log C_mid (efficiency). Thresholds: the
margin ``m`` on A (0.02 by default, the paper's practical threshold) and ``t = log(1 +
min_rel_effect)`` on log B and log C_mid. Three claims, each with a p-value that is below alpha
exactly when its printed interval(s) lie in the claim's region (``level`` for dA, ``1 - alpha/2``
for each of d log B and d log C_mid, Bonferroni over the two):

- **the ceiling moves**: the dA interval lies wholly beyond +m or wholly beyond -m;
- **efficiency differs**: the d log B or the d log C_mid interval lies wholly beyond +/-t. It does
  not ask that the ceilings be shown equal first: at 3-8 seeds that needs SE(dA) under 0.01 and
  made shapers undecidable (DESIGN.md section 5, revised 2026-11-28);
- **no effect**: all three intervals lie inside their thresholds (two one-sided tests each; an
  intersection-union test).

Many knobs at once: each claim's p-values go through Benjamini-Hochberg at false-discovery rate
``1 - level`` over the sweep's knobs (every knob counts, a knob whose claim cannot be tested with
p = 1, so a sweep cannot buy decisions by leaving knobs out). A claim is *made* when BH accepts it.
Its **probability** is ``1 - q``, q the claim's BH-adjusted p-value (the smallest false-discovery
rate at which it would be accepted): among claims made at probability 0.9 or more, at most 10%
are false in expectation, whatever the share of knobs that truly do nothing. Not a posterior: it
is conservative where most knobs move (bench/README.md has its calibration on known truth).

The verdict: ``asymptote-mover`` when the ceiling claim is made (``efficiency`` = "differs" when
the efficiency claim is made too: the knob is both); ``efficiency-shaper`` when only the
efficiency claim is made; ``no-effect`` when the equivalence claim is made; else ``undecided``.
A knob whose ceiling is only bounded from below (its curves have not made enough of their gain: a
late level against a measured baseline) can only make "the ceiling rises" among the ceiling
claims; its efficiency can still be compared, so it can still be an ``efficiency-shaper``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from scalerl.harness.analysis.inference import Contrast

_NAN = math.nan


@dataclass(frozen=True)
class KnobContrasts:
    """One knob's contrasts against the baseline; None where not measured. ``lower_bound``: dA is a
    late level less the baseline's ceiling (only "the ceiling rises" can be shown)."""

    a: Contrast | None
    log_b: Contrast | None = None
    log_c_mid: Contrast | None = None
    lower_bound: bool = False
    why: str = ""  # why dA is only a lower bound (for the reason), in words


@dataclass(frozen=True)
class KnobClaims:
    """One knob's claims: raw p-values, BH-adjusted q-values, which claims are made, the verdict."""

    p_mover: float
    p_efficiency: float
    p_no_effect: float
    q_mover: float
    q_efficiency: float
    q_no_effect: float
    mover: bool
    efficiency: bool
    no_effect: bool

    @property
    def verdict(self) -> str:
        if self.mover:
            return "asymptote-mover"
        if self.efficiency:
            return "efficiency-shaper"
        if self.no_effect:
            return "no-effect"
        return "undecided"

    @property
    def prob_ceiling(self) -> float:
        """How sure the rule is that the ceiling moves beyond the margin (1 - q)."""
        return 1.0 - self.q_mover

    @property
    def prob_efficiency(self) -> float:
        """How sure the rule is that efficiency differs beyond its threshold (1 - q)."""
        return 1.0 - self.q_efficiency

    @property
    def prob_no_effect(self) -> float:
        return 1.0 - self.q_no_effect

    @property
    def best_p(self) -> float:
        """The p-value of the verdict's claim (the smallest of the three when undecided)."""
        if self.mover:
            return self.p_mover
        if self.efficiency:
            return self.p_efficiency
        if self.no_effect:
            return self.p_no_effect
        return min(self.p_mover, self.p_efficiency, self.p_no_effect)


def claim_pvalues(k: KnobContrasts, margin: float, thr: float) -> tuple[float, float, float]:
    """(ceiling moves, efficiency differs, no effect) p-values; 1.0 where a claim cannot be tested
    (no dA: no ceiling claim and no equivalence; a lower bound on dA: only "the ceiling rises";
    no d log B or d log C_mid: no efficiency claim and no equivalence)."""
    a = k.a if k.a is not None and k.a.ok else None
    b = k.log_b if k.log_b is not None and k.log_b.ok else None
    c = k.log_c_mid if k.log_c_mid is not None and k.log_c_mid.ok else None
    if a is None:
        p_mover = 1.0
    elif k.lower_bound:
        p_mover = a.p_beyond(margin) if a.d > 0 else 1.0
    else:
        p_mover = a.p_beyond(margin)
    if b is None or c is None:
        return p_mover, 1.0, 1.0
    p_eff = min(1.0, 2.0 * min(b.p_beyond(thr), c.p_beyond(thr)))
    if a is None or k.lower_bound:
        return p_mover, p_eff, 1.0
    p_same = max(a.p_inside(margin), min(1.0, 2.0 * b.p_inside(thr)), min(1.0, 2.0 * c.p_inside(thr)))
    return p_mover, p_eff, p_same


def bh_adjusted(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values): ``p_(i) m / i``, made monotone from the
    largest down, capped at 1. A p-value is accepted at rate q exactly when its q-value <= q."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = p.size
    if not m:
        return []
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    adj = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adj, 1.0)
    return [float(x) for x in out]


def judge(
    knobs: Mapping[str, KnobContrasts], margin: float, thr: float, level: float
) -> dict[str, KnobClaims]:
    """Every knob's claims, made at false-discovery rate ``1 - level`` over the sweep's knobs."""
    alpha = 1.0 - level
    names = list(knobs)
    ps = [claim_pvalues(knobs[n], margin, thr) for n in names]
    qs = [bh_adjusted([p[i] for p in ps]) for i in range(3)]
    out = {}
    for j, n in enumerate(names):
        pm, pe, pn = ps[j]
        qm, qe, qn = qs[0][j], qs[1][j], qs[2][j]
        out[n] = KnobClaims(pm, pe, pn, qm, qe, qn, qm <= alpha, qe <= alpha, qn <= alpha)
    return out

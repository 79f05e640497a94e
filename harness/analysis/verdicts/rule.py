"""The verdict rule: what one knob's intervals show, and what a sweep's knobs are called.

This is the one place a knob's verdict is decided: :func:`~.pipeline.classify` (the verdict table,
``scalerl fit``, the report, ``--json``) calls :func:`decide` on each variant's :class:`Evidence`
and :func:`claims` on the sweep's rulings; stop-when-decided
(:mod:`scalerl.harness.execution.decide`) calls :func:`decide` again through :func:`decided` on
the evidence a verdict carries, and the advice on what would decide a knob (:mod:`.next_steps`)
reads the same :class:`Ruling`. Nothing here parses text: a verdict's reason is rendered from
these values (:mod:`.explain`), never read back.

**Inputs** (:class:`Evidence`), one knob against the baseline, each difference "variant minus
baseline" a :class:`~.inference.Contrast` (an estimate ``d``, its standard error ``se`` and the
degrees of freedom ``df`` of its t reference; :mod:`.inference` pools the seeds that make them,
each seed's own fit giving one value per parameter):

- ``a``: dA, the difference of the two ceilings; None when the baseline's ceiling is not pinned.
  With ``lower_bound`` set, the variant's ceiling is not pinned (its curves have not made enough
  of their gain) and ``a`` is its late level less the baseline's A: a lower bound on dA;
- ``log_b``, ``log_c``: d log B and d log C_mid, from each seed's own fit; None when either
  group's fit has not passed its inflection or has no bend to measure them on;
- the standard they are held to: ``margin`` ``m`` on dA (the paper's practical threshold, 0.02 by
  default; noise enters through the intervals, never the margin), ``efficiency``
  ``t = log(1 + min_rel_effect)`` on d log B and d log C_mid (10% of B, a factor 1.1 in C_mid),
  and the confidence ``level`` (alpha = 1 - level).

**The claims** (:class:`Claim`), each a region its intervals must lie in. dA's interval is at
``level``; d log B's and d log C_mid's at ``1 - alpha/2`` each (Bonferroni over the two):

- ``asymptote-mover`` (the ceiling moves): the dA interval lies wholly beyond +m or wholly beyond
  -m (from a lower bound: beyond +m);
- ``efficiency-shaper`` (efficiency differs): the d log B or the d log C_mid interval lies wholly
  beyond +-t. It does not ask that the ceilings be shown equal first: at 3-8 seeds that needs
  SE(dA) under 0.01 and left shapers undecidable (DESIGN.md section 5, revised 2026-11-28);
- ``no-effect``: equivalence on all three (two one-sided tests): dA inside (-m, m), d log B and
  d log C_mid inside (-t, t).

Why efficiency is judged on d log B and d log C_mid rather than on one curve-level quantity: the
alternative, the gap between the two groups' fitted curves in the metric's units (each seed's
share of its gain at six computes over the range both observed, times the baseline's gain, held
to the margin m; one definition for both claims), was measured on the same draws and not adopted
(bench/README.md, "Repeated on fresh draws, and efficiency on the curves' gap"). It took B
shapers at 3 seeds on plateaued curves from 96/88% to 64/56% (a doubled B moves such a curve by
only ~2.3 m), showed no null as ``no-effect`` and decided none more of the demo's knobs.

Each claim gets a p-value stated so that ``p < alpha`` exactly when its interval(s) lie in its
region (:meth:`.inference.Contrast.p_beyond`, :meth:`~.inference.Contrast.p_inside`; a
two-interval condition takes the larger p, a choice of two the Bonferroni-doubled smaller one):
one interval drives the decision, the table and the reason. A claim the evidence cannot test
(no dA, no efficiency) has p = 1.

**A sweep's knobs** (:func:`claims`). Each claim's p-values go through Benjamini-Hochberg at
false-discovery rate alpha over all the sweep's knobs (every knob counts, one without evidence
with p = 1, so a sweep cannot buy decisions by leaving knobs out). A claim is *made* when BH
accepts it. Its **probability** is ``1 - q``, q its BH-adjusted p-value (the smallest
false-discovery rate at which it would be made): among claims made at probability 0.9 or more, at
most 10% are false in expectation, whatever the share of knobs that truly do nothing. It is not a
posterior (bench/README.md has its calibration on known truth). The verdict: ``asymptote-mover``
when the ceiling claim is made (and "both" when the efficiency claim is made too: the verdict's
``efficiency`` is "differs"); else ``efficiency-shaper`` when the efficiency claim is made; else
``no-effect`` when equivalence is made; else ``undecided``. A verdict that claims is always shown
by its own intervals; :func:`decided` re-checks that on the evidence the verdict carries, so
nothing can stop a run on a claim its numbers do not show.

This module imports no numerical library (the contrasts bring their own methods), so the sweep
file's schema can read :data:`MARGIN` from it.

Error rates, power beside a pooled-seed t reference, and the probabilities' calibration against
known truth: bench/README.md, "Verdicts against known truth".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scalerl.harness.analysis.verdicts.inference import Contrast
    from scalerl.harness.analysis.verdicts.types import Verdict

# The A margin by default: the paper's practical threshold on dA (its verdicts' 0.02). The
# sweep file's ``fit.margin``, ``scalerl fit --margin`` and the simulator's designs start from it,
# and the smallest drop a seed's collapse test and the simulator's dip rule count is the same
# number (a smaller drop could not move a verdict).
MARGIN = 0.02


class Claim(StrEnum):
    """What a knob can be shown to do (a verdict kind that decides)."""

    MOVER = "asymptote-mover"
    SHAPER = "efficiency-shaper"
    NO_EFFECT = "no-effect"


@dataclass(frozen=True)
class Evidence:
    """One knob's contrasts with the baseline and the standard they are held to (see the module
    docstring). ``efficiency`` is ``log(1 + min_rel_effect)``."""

    a: Contrast | None
    log_b: Contrast | None
    log_c: Contrast | None
    margin: float
    efficiency: float
    level: float
    lower_bound: bool = False

    @property
    def alpha(self) -> float:
        return 1.0 - self.level

    @property
    def level2(self) -> float:
        """The level of d log B's and d log C_mid's intervals: Bonferroni over the two."""
        return 1.0 - self.alpha / 2.0

    @property
    def ceiling_measured(self) -> bool:
        """Whether dA is a measured difference (not missing, not a lower bound)."""
        return self.a is not None and self.a.ok and not self.lower_bound

    @property
    def efficiency_compared(self) -> bool:
        return self.log_b is not None and self.log_c is not None and self.log_b.ok and self.log_c.ok

    def parts(self) -> list[tuple[str, Contrast, float, float]]:
        """(name, contrast, threshold, interval level) of each interval the claims rest on."""
        out = [] if self.a is None else [("dA", self.a, self.margin, self.level)]
        if self.log_b is not None and self.log_c is not None:
            out += [
                ("dlogB", self.log_b, self.efficiency, self.level2),
                ("dlogC_mid", self.log_c, self.efficiency, self.level2),
            ]
        return out


@dataclass(frozen=True)
class Ruling:
    """What :func:`decide` found: each claim's p-value (1 where it cannot be tested)."""

    evidence: Evidence
    p: dict[Claim, float]

    @property
    def best(self) -> tuple[Claim, float]:
        """The claim with the smallest p (the first of equals: mover, shaper, no-effect)."""
        return min(self.p.items(), key=lambda kv: kv[1])

    def shown(self, claim: Claim | str) -> bool:
        """Whether ``claim``'s intervals lie in its region (its p is below alpha)."""
        p = self.p.get(Claim(claim)) if claim in set(Claim) else None
        return p is not None and p < self.evidence.alpha

    def straddling(self) -> list[str]:
        """The names of the intervals (dA, dlogB, dlogC_mid) that lie neither wholly inside nor
        wholly beyond their thresholds: what more seeds would have to narrow."""
        out = []
        for name, c, threshold, level in self.evidence.parts():
            lo, hi = c.ci(level)
            if self.evidence.lower_bound and name == "dA":
                hi = math.nan  # a lower bound has no upper end
            if not (_inside(lo, hi, threshold) or _beyond(lo, hi, threshold)):
                out.append(name)
        return out


def decide(evidence: Evidence) -> Ruling:
    """THE rule: each claim's p-value from one knob's evidence (see the module docstring)."""
    a = evidence.a if evidence.a is not None and evidence.a.ok else None
    m, t = evidence.margin, evidence.efficiency
    if a is None:
        p_mover = 1.0
    elif evidence.lower_bound:
        p_mover = a.p_beyond(m) if a.d > 0 else 1.0  # only "the ceiling rises" from a lower bound
    else:
        p_mover = a.p_beyond(m)
    p = {Claim.MOVER: p_mover, Claim.SHAPER: 1.0, Claim.NO_EFFECT: 1.0}
    if evidence.efficiency_compared:
        b, c = evidence.log_b, evidence.log_c
        assert b is not None and c is not None
        # B and C_mid: two tests, Bonferroni (their printed intervals are at 1 - alpha/2).
        p[Claim.SHAPER] = min(1.0, 2.0 * min(b.p_beyond(t), c.p_beyond(t)))
        if evidence.ceiling_measured and a is not None:
            same = max(min(1.0, 2.0 * b.p_inside(t)), min(1.0, 2.0 * c.p_inside(t)))
            p[Claim.NO_EFFECT] = max(a.p_inside(m), same)
    return Ruling(evidence, p)


@dataclass(frozen=True)
class Findings:
    """One knob's claims over the sweep (:func:`claims`): the BH-adjusted p-value (q) of each
    claim, which are made, the verdict they make and how sure the rule is of each."""

    ruling: Ruling | None
    q: dict[Claim, float]
    made: frozenset[Claim]
    alpha: float

    @property
    def verdict(self) -> str:
        for claim in (Claim.MOVER, Claim.SHAPER, Claim.NO_EFFECT):
            if claim in self.made:
                return claim.value
        return "undecided"

    @property
    def both(self) -> bool:
        """The ceiling moves and efficiency differs."""
        return Claim.MOVER in self.made and Claim.SHAPER in self.made

    def probability(self, claim: Claim) -> float:
        """How sure the rule is of ``claim``: 1 - its q (NaN: no evidence at all)."""
        return 1.0 - self.q[claim] if self.ruling is not None else math.nan

    @property
    def p(self) -> float:
        """The raw p-value of the verdict's claim (of the best claim when undecided)."""
        if self.ruling is None:
            return math.nan
        if self.made:
            return self.ruling.p[Claim(self.verdict)]
        return self.ruling.best[1]


def claims(rulings: Mapping[str, Ruling | None], level: float) -> dict[str, Findings]:
    """Every knob's claims, made at false-discovery rate ``1 - level`` over the sweep's knobs
    (Benjamini-Hochberg per claim; a knob without a ruling counts with p = 1)."""
    from scalerl.harness.analysis.verdicts.inference import bh_adjusted  # scipy: only when judging

    alpha = 1.0 - level
    names = list(rulings)
    q: dict[Claim, list[float]] = {}
    for claim in Claim:
        q[claim] = bh_adjusted([r.p[claim] if r is not None else 1.0 for r in rulings.values()])
    out = {}
    for j, n in enumerate(names):
        qs = {claim: q[claim][j] for claim in Claim}
        made = frozenset(c for c, v in qs.items() if v <= alpha)
        out[n] = Findings(rulings[n], qs, made, alpha)
    return out


def decided(verdict: Verdict) -> bool:
    """Whether ``verdict`` decides its knob: it claims (``asymptote-mover``,
    ``efficiency-shaper`` or ``no-effect``) and :func:`decide`, run on the evidence it carries,
    shows that claim. ``undecided``, ``unfit`` and ``unstable`` never decide."""
    if verdict.evidence is None or verdict.verdict not in set(Claim):
        return False
    return decide(verdict.evidence).shown(verdict.verdict)


def _inside(lo: float, hi: float, t: float) -> bool:
    return math.isfinite(lo) and math.isfinite(hi) and -t < lo and hi < t


def _beyond(lo: float, hi: float, t: float) -> bool:
    return lo > t or hi < -t  # NaN compares False: a missing end proves nothing

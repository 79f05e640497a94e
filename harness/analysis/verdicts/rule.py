"""The verdict rule: what one knob's intervals decide. Everything that decides calls :func:`decide`.

This is the one place a knob's verdict is decided: :func:`~.pipeline.classify` (the verdict table,
``scalerl fit``, the report, ``--json``) calls :func:`decide` on each variant's :class:`Evidence`,
stop-when-decided (:mod:`scalerl.harness.execution.decide`) calls it again through :func:`decided`
on the evidence a verdict carries, and the advice on what would decide a knob
(:mod:`.next_steps`) reads the same :class:`Ruling`. Nothing here parses text: a verdict's reason
is rendered from these values (:mod:`.explain`), never read back.

**Inputs** (:class:`Evidence`), one knob against the baseline, each difference "variant minus
baseline" a :class:`~.inference.Contrast` (an estimate ``d``, its standard error ``se`` and the
degrees of freedom ``df`` of its t reference; :mod:`.inference` pools the seeds that make them):

- ``a``: dA, the difference of the two ceilings. With ``lower_bound`` set, the variant's ceiling
  is not measured (its curves are still rising) and ``a`` is its late level less the baseline's
  A: a lower bound on dA, from which only "the ceiling rises" can be shown;
- ``log_b``, ``log_c``: d log B and d log C_mid, both curves refitted at a common A (the paper's
  efficiency comparison); None when there is no such comparison (the refits failed, or ``a`` is
  a lower bound);
- the standard they are held to: ``margin`` ``m`` on dA (the paper's practical threshold, 0.02 by
  default), ``efficiency`` ``t = log(1 + min_rel_effect)`` on d log B and d log C_mid (10% of B,
  a factor 1.1 in C_mid), and the confidence ``level`` (alpha = 1 - level).

**The claims** (:class:`Claim`), each a region its intervals must lie in. dA's interval is at
``level``; d log B's and d log C_mid's at ``1 - alpha/2`` each (Bonferroni over the two):

- ``asymptote-mover``: the dA interval lies wholly beyond +m or wholly beyond -m (from a lower
  bound: beyond +m);
- ``efficiency-shaper``: the dA interval lies inside (-m, m) (the ceilings are shown equal) and
  the d log B or the d log C_mid interval lies wholly beyond +-t;
- ``no-effect``: equivalence on all three (two one-sided tests): dA inside (-m, m), d log B and
  d log C_mid inside (-t, t).

**How probabilities and intervals are used.** Each claim gets a p-value stated so that
``p < alpha`` exactly when its interval(s) lie in its region (:meth:`.inference.Contrast.p_beyond`,
:meth:`~.inference.Contrast.p_inside`; a two-interval condition takes the larger p, a choice of
two the Bonferroni-doubled smaller one): one interval drives the decision, the table and the
reason. :meth:`Ruling.shown` says whether a claim's intervals lie in its region; :attr:`Ruling.best`
is the claim with the smallest p.

**What each verdict means.** The rule shows claims one knob at a time; the sweep then keeps the
share of wrong decisions among its knobs at most alpha: :func:`~.pipeline.classify` puts every
knob's best p (1 for a knob with no evidence) through Benjamini-Hochberg at false-discovery rate
alpha over all the sweep's knobs (:func:`~.inference.bh`). A knob whose best claim passes gets
that claim as its verdict; every other knob is ``undecided`` (its ``pending`` says whether seeds
or compute would decide it). A knob without evidence is ``undecided`` (a ceiling not measured,
``pending = "compute"``), ``unstable`` (most of its seeds diverged or collapsed) or ``unfit`` (its
fit, or the baseline's, failed). A verdict that claims is always shown by its own intervals;
:func:`decided` re-checks that on the evidence the verdict carries, so nothing can stop a run on a
claim its numbers do not show.

This module imports no numerical library (the contrasts bring their own methods), so the sweep
file's schema can read :data:`MARGIN` from it.

Error rates and power of this rule against known truth: bench/README.md, "Verdicts against known
truth (simulator)".
"""

from __future__ import annotations

import math
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

    a: Contrast
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
    def efficiency_compared(self) -> bool:
        return self.log_b is not None and self.log_c is not None

    def parts(self) -> list[tuple[str, Contrast, float, float]]:
        """(name, contrast, threshold, interval level) of each interval the claims rest on."""
        out = [("dA", self.a, self.margin, self.level)]
        if self.log_b is not None and self.log_c is not None:
            out += [
                ("dlogB", self.log_b, self.efficiency, self.level2),
                ("dlogC_mid", self.log_c, self.efficiency, self.level2),
            ]
        return out


@dataclass(frozen=True)
class Ruling:
    """What :func:`decide` found: each testable claim's p-value (``p``), in the order mover,
    shaper, no-effect."""

    evidence: Evidence
    p: dict[Claim, float]

    @property
    def best(self) -> tuple[Claim, float]:
        """The claim with the smallest p (the first of equals)."""
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
    a, m, t = evidence.a, evidence.margin, evidence.efficiency
    if evidence.lower_bound:
        # Only "the ceiling rises" can be shown from a lower bound.
        return Ruling(evidence, {Claim.MOVER: a.p_beyond(m) if a.d > 0 else 1.0})
    p = {Claim.MOVER: a.p_beyond(m)}
    if evidence.log_b is not None and evidence.log_c is not None:
        b, c = evidence.log_b, evidence.log_c
        equal_a = a.p_inside(m)
        # B and C_mid: two tests, Bonferroni (their printed intervals are at 1 - alpha/2).
        moves = min(1.0, 2.0 * min(b.p_beyond(t), c.p_beyond(t)))
        same = max(min(1.0, 2.0 * b.p_inside(t)), min(1.0, 2.0 * c.p_inside(t)))
        p[Claim.SHAPER] = max(equal_a, moves)
        p[Claim.NO_EFFECT] = max(equal_a, same)
    return Ruling(evidence, p)


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

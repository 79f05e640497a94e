"""A variant's seeds as the verdict rule sees them: which are judged, which were set aside.

Each seed's curve is judged by :func:`scalerl.harness.analysis.verdicts.collapse.judge`: a diverged
or collapsed seed is set aside and named in the verdict; only when more than half of a variant's
seeds fail is the variant ``unstable``. A seed that overshot and settled is kept and noted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scalerl.harness.analysis.fit.curve import FloatArray, SigmoidFit
from scalerl.harness.analysis.groups import VariantCurves
from scalerl.harness.analysis.verdicts.collapse import CollapseOptions, judge
from scalerl.harness.analysis.verdicts.types import VerdictOptions


@dataclass
class SeedGroup:
    """One variant's seeds as the rule sees them: which are judged, which were set aside."""

    vc: VariantCurves
    sigma: list[FloatArray]
    fits: list[SigmoidFit]
    healthy: list[int]
    set_aside: list[str]  # "run (why)" for each diverged or collapsed seed
    unstable: str  # why the whole variant is unstable ('' when at most half its seeds failed)
    settled: list[str] = field(default_factory=list)  # seeds that peaked and settled (kept, noted)

    def run(self, i: int) -> str:
        return self.vc.run_ids[i] if i < len(self.vc.run_ids) else f"curve {i}"

    def note(self) -> str:
        extra = f"; note: {'; '.join(self.settled)}" if self.settled else ""
        if not self.set_aside:
            return extra
        kept = [self.run(i) for i in self.healthy]
        return extra + (
            f"; {self.vc.variant}: {'; '.join(self.set_aside)}, so it is judged on "
            f"{len(kept)} seed(s) ({', '.join(kept)})"
        )


def judge_seeds(
    vc: VariantCurves, sigma: list[FloatArray], fits: list[SigmoidFit], opts: VerdictOptions
) -> SeedGroup:
    """Judge each seed; a collapse is a finding about that seed, and only a majority of failed
    seeds makes the variant unstable (one dip in three seeds used to void the whole knob)."""
    healthy, aside, whys, settled = [], [], [], []
    copts = CollapseOptions(opts.collapse_alpha, opts.collapse_drop, opts.tail_fraction, opts.smooth)
    for i, (c, v) in enumerate(vc.curves):
        seed = vc.run_ids[i] if i < len(vc.run_ids) else f"curve {i}"
        vals = np.asarray(v, dtype=np.float64)
        bad = int((~np.isfinite(vals)).sum())
        if bad:
            aside.append(f"{seed} diverged ({bad} non-finite value(s))")
            whys.append(f"diverged: {bad} non-finite value(s) in {seed}")
            continue
        health = judge(c, vals, sigma[i], copts)
        if health.kind == "collapsed":
            aside.append(f"{seed} collapsed ({health.how})")
            whys.append(f"collapsed: {seed} {health.how}")
            continue
        if health.kind == "settled":
            settled.append(f"{seed} overshot and settled ({health.how})")
        healthy.append(i)
    unstable = ""
    if 2 * len(aside) > len(vc.curves) or not healthy:
        unstable = f"{len(aside)} of {len(vc.curves)} seeds failed: " + "; ".join(whys)
    return SeedGroup(vc, sigma, fits, healthy, aside, unstable, settled)

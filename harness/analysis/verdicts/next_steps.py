"""What would decide the knobs that are not decided: more seeds, or more compute?

:func:`what_decides` answers "where should the next GPU-hours go" for every verdict the rule
(:func:`.rule.decided`) does not decide, at the current noise, from the values the verdict
carries (never from its text):

- **seeds**, for an ``undecided`` verdict whose ceilings are measured (``pending == "seeds"``):
  :func:`.power.seeds_to_decide`, the number the verdict's reason prints too, with the intervals
  that straddle their thresholds (:meth:`.rule.Ruling.straddling`);
- **compute**, for a ceiling not measured (``pending == "compute"``): the compute at which each
  unpinned pooled fit reaches 75% of its gain (:data:`PIN_FRACTION`), read off the fitted curve
  (a forecast at the current slope);
- ``unfit`` / ``unstable``: fix the runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalerl.harness.analysis.verdicts.explain import seeds_phrase
from scalerl.harness.analysis.verdicts.power import DEFAULT_POWER
from scalerl.harness.analysis.verdicts.rule import Claim, decide, decided
from scalerl.harness.analysis.verdicts.types import SweepAnalysis, Verdict


@dataclass(frozen=True)
class NextStep:
    """What would decide one knob: ``seeds`` per variant (None: seeds alone cannot, or not asked)
    and/or ``compute`` per run on the fit axis (NaN: not a question of compute, or unknown),
    ``factor`` = that compute over the most any of its runs reached; ``note`` in words."""

    knob: str | None
    variant: str
    verdict: str
    seeds: int | None
    compute: float
    factor: float
    note: str


# The share of its gain at which a curve's ceiling counts as measured for "what would decide it":
# the rule pins a ceiling from 60% of the gain on (.ceiling.PIN_GAIN), and on known truth its
# intervals held from 60% to 99% (bench/README.md); 75% is a target well inside that range.
PIN_FRACTION = 0.75


def _pin_compute(analysis: SweepAnalysis, name: str) -> float:
    """Compute at which the pooled fit of ``name`` reaches :data:`PIN_FRACTION` of its gain (its
    raw A where the fit has not passed its inflection): a forecast at its current slope."""
    boot = analysis.variant_fits.get(name)
    if boot is None:
        return math.nan
    f = boot.fit
    a = f.a if math.isfinite(f.a) else f.a_raw
    if not all(math.isfinite(x) for x in (f.r0, a, f.b, f.c_mid)) or a <= f.r0 or f.b <= 0:
        return math.nan
    return float(f.c_mid * (PIN_FRACTION / (1.0 - PIN_FRACTION)) ** (1.0 / f.b))


def _seeds_step(v: Verdict, power: float) -> NextStep:
    assert v.evidence is not None
    straddling = ", ".join(decide(v.evidence).straddling())
    detail = (
        f"{straddling} straddle"
        if straddling
        else "every interval clears its threshold; the false-discovery step over the sweep's knobs held it"
    )
    note = f"{seeds_phrase(v.seeds_needed, v.seeds_now, power)} ({detail})"
    return NextStep(v.knob, v.variant, v.verdict, v.seeds_needed, math.nan, math.nan, note)


def _compute_step(v: Verdict, analysis: SweepAnalysis, baseline: str, reached: dict[str, float]) -> NextStep:
    need = [(_pin_compute(analysis, name), name) for name in (baseline, v.variant)]
    needed = [(c, name) for c, name in need if math.isfinite(c) and c > reached.get(name, math.inf)]
    if needed:
        c, name = max(needed)
        factor = c / reached[name]
        note = f"{name}'s ceiling is measured at ~{c:.3g} (x{factor:.1f} its compute), by its fit's slope"
        return NextStep(v.knob, v.variant, v.verdict, None, c, factor, note)
    note = "ceiling not measured, and its fit gives no compute that would measure it"
    return NextStep(v.knob, v.variant, v.verdict, None, math.nan, math.nan, note)


def what_decides(
    analysis: SweepAnalysis, baseline: str, reached: dict[str, float], *, power: float = DEFAULT_POWER
) -> list[NextStep]:
    """One :class:`NextStep` per verdict that is not :func:`.rule.decided`. ``reached``: variant ->
    the largest compute its runs reached on the fit axis; ``power`` as the verdicts were stated."""
    out: list[NextStep] = []
    for v in analysis.verdicts:
        if decided(v):
            continue
        if v.evidence is not None and (v.verdict in set(Claim) or v.pending == "seeds"):
            out.append(_seeds_step(v, power))
        elif v.verdict == "undecided":
            out.append(_compute_step(v, analysis, baseline, reached))
        else:
            head = v.reason.split(";")[0][:100]
            out.append(
                NextStep(v.knob, v.variant, v.verdict, None, math.nan, math.nan, f"{head}: fix the runs")
            )
    return out

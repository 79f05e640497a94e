"""What would decide the knobs that are not decided: more seeds, or more compute?

:func:`what_decides` answers "where should the next GPU-hours go" for every verdict the rule
(:func:`.rule.decided`) does not decide, at the current noise, from the values the verdict
carries (never from its text):

- **seeds**, for an ``undecided`` verdict whose ceilings are measured (``pending == "seeds"``):
  :func:`.power.seeds_to_decide`, the number the verdict's reason prints too, with the intervals
  that straddle their thresholds (:meth:`.rule.Ruling.straddling`);
- **compute**, for a ceiling not measured (``pending == "compute"``): the compute at which each
  unpinned pooled fit passes its inflection and comes within ``max(0.05, 2m)`` of its A, read off
  the fitted curve (a forecast at the current slope); where the curves are still rising at the
  end but the fit already bends over, a rule of thumb (x2 the compute), said as one;
- ``unfit`` / ``unstable``: fix the runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalerl.harness.analysis.fit.curve import compute_to_reach
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


RISING_FACTOR = 2.0  # "train further" for curves still rising where their fit has bent over


def _pin_compute(analysis: SweepAnalysis, name: str, margin: float) -> float:
    """Compute at which the pooled fit of ``name`` passes C_mid and comes within max(0.05, 2m) of A."""
    boot = analysis.variant_fits.get(name)
    if boot is None:
        return math.nan
    f = boot.fit
    if not all(math.isfinite(x) for x in (f.r0, f.a, f.b, f.c_mid)) or f.a <= f.r0 or f.a <= 0:
        return math.nan
    tol = max(0.05, 2.0 * margin)
    frac = (f.a - tol) / f.a
    near = compute_to_reach(f.r0, f.a, f.b, f.c_mid, frac) if 0.0 < frac < 1.0 else 0.0
    return max(f.c_mid, near) if math.isfinite(near) else math.nan


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
    need = [(_pin_compute(analysis, name, v.margin), name) for name in (baseline, v.variant)]
    needed = [(c, name) for c, name in need if math.isfinite(c) and c > reached.get(name, math.inf)]
    if needed:
        c, name = max(needed)
        factor = c / reached[name]
        note = f"{name}'s ceiling is measured at ~{c:.3g} (x{factor:.1f} its compute), by its fit's slope"
        return NextStep(v.knob, v.variant, v.verdict, None, c, factor, note)
    rising = [name for name in (baseline, v.variant) if name in v.rising]
    if rising and all(name in reached for name in rising):
        # The data still climb where the fit already bends over: the fit cannot say how far to go,
        # so the answer is a rule of thumb, and the note says so.
        name = rising[-1]
        note = (
            f"{name}'s curves are still rising at the end while its fit puts the ceiling "
            "within reach: train further, e.g. x2 its compute (a rule of thumb, not a forecast)"
        )
        return NextStep(
            v.knob, v.variant, v.verdict, None, RISING_FACTOR * reached[name], RISING_FACTOR, note
        )
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

"""A verdict's reason, in words, rendered from the typed values the rule used.

Every sentence a verdict carries is made here, from numbers (:class:`.rule.Evidence`, the
intervals, the seeds :func:`.power.seeds_to_decide` asks for): the verdict table's reason column,
``scalerl fit``'s "not decided" list (:mod:`.next_steps`) and stop-when-decided's events. Nothing
reads these sentences back: a decision travels as the values, never as its text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from scalerl.harness.analysis.groups import VariantCurves
from scalerl.harness.analysis.verdicts.rule import Claim, Evidence
from scalerl.harness.analysis.verdicts.types import Verdict

# Past this many times the seeds a sweep has now, "seeds will not decide it".
PRACTICAL_SEEDS = 100


def interval(d: float, lo: float, hi: float) -> str:
    return f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def seeds_phrase(needed: int | None, seeds_now: int, power: float) -> str:
    """What seeds would do for an undecided knob (:func:`.power.seeds_to_decide`'s number)."""
    if needed is None:
        return "an estimate sits on its threshold: no seed count decides it"
    if needed > PRACTICAL_SEEDS * seeds_now:
        return f"seeds will not decide it (~{needed:.2g} needed, now {seeds_now})"
    if needed <= seeds_now:
        return (
            f"its {seeds_now} seeds per variant decide it {power:.0%} of the time at this noise "
            "(this draw did not)"
        )
    return f"~{needed} seeds per variant would decide it at this noise (now {seeds_now})"


def rule_text(verdict: Verdict) -> str:
    """The intervals a verdict rests on against their thresholds, e.g. ``dA [+0.038, +0.059] vs
    margin 0.020``: dA alone for a mover, all three for the other claims and for an undecided
    verdict pending seeds; ``verdict KIND`` for the rest (stop-when-decided's event text)."""
    evidence, kind = verdict.evidence, verdict.verdict
    if evidence is None or not (kind in set(Claim) or verdict.pending == "seeds"):
        return f"verdict {kind}"
    parts = []
    for name, c, threshold, level in evidence.parts():
        lo, hi = c.ci(level)
        if name == "dA":
            if evidence.lower_bound:
                hi = math.nan
            parts.append(f"dA [{lo:+.3f}, {hi:+.3f}] vs margin {threshold:.3f}")
            if kind == "asymptote-mover":
                break
        else:
            parts.append(f"{name} [{lo:+.3f}, {hi:+.3f}] vs {threshold:.3f}")
    return "; ".join(parts)


def extrapolation_note(fits: Sequence[tuple[VariantCurves, float]], margin: float) -> str:
    """A note for each fitted ceiling far above anything its curves reached.

    Such an A is past the inflection (else the fit would be pre-inflection) but still an
    extrapolation: the curve was rising slowly at the end, and A is where the sigmoid says it
    would go. The verdict stands on the numbers; the note tells the reader which ones are
    forecasts rather than observations. "Far" = more than max(0.05, 2 x margin) above the highest
    observed value (the observed maximum itself sits above the plateau by the point noise).
    """
    parts = []
    for vc, a in fits:
        values = [np.asarray(v, dtype=np.float64) for _, v in vc.curves]
        finite = [v[np.isfinite(v)] for v in values]
        observed = max((float(v.max()) for v in finite if v.size), default=math.nan)
        if math.isfinite(a) and math.isfinite(observed) and a - observed > max(0.05, 2.0 * margin):
            parts.append(f"{vc.variant} A={a:.3f} vs observed max {observed:.3f}")
    return f"; note: extrapolated ceiling ({', '.join(parts)})" if parts else ""


def unmeasured(why: str, level: float, level_se: float, base_a: float) -> str:
    """A ceiling not measured and no lower-bound claim to test (the baseline's not measured)."""
    return (
        f"{why}: its ceiling is not measured at the compute reached; the variant's late level is "
        f"{level:.3f} +/- {level_se:.3f} against the baseline's A {base_a:.3f}; train further before "
        "judging this knob"
    )


def late(why: str, evidence: Evidence, decided: bool, p: float, knobs: int) -> str:
    """The lower-bound claim (the variant's ceiling not measured): shown, or not."""
    d, lo = evidence.a.d, evidence.a.ci(evidence.level)[0]
    head = f"{why}: its ceiling is not measured; "
    if decided:
        return (
            f"the ceiling rises: {head}the late level (a lower bound on A) less the baseline's A is "
            f"{d:+.3f}, at least {lo:+.3f} at {evidence.level:.0%}, beyond the margin "
            f"{evidence.margin:.3f} (p {p:.2g}, false-discovery control over {knobs} knobs); how far is "
            "unknown"
        )
    return (
        f"{head}its late level exceeds the baseline's A by {d:+.3f} (lower end {lo:+.3f} at "
        f"{evidence.level:.0%}), not shown beyond the margin {evidence.margin:.3f}; train further "
        "before judging this knob"
    )


def a_text(evidence: Evidence, seed_sd: float, known_sd: float | None) -> str:
    """dA with its interval and the reference it is read on."""
    lo, hi = evidence.a.ci(evidence.level)
    ref = (
        f"normal, seed sd of A {known_sd:.3f} given"
        if known_sd is not None
        else f"t({evidence.a.df:.0f}) over seeds, seed sd of A {seed_sd:.3f}"
    )
    return f"dA {interval(evidence.a.d, lo, hi)} ({ref})"


def efficiency_text(evidence: Evidence, a_common: float) -> str:
    """d log B and d log C_mid at the common A, or why they were not compared."""
    b, c = evidence.log_b, evidence.log_c
    if b is None or c is None:
        return "efficiency not compared (the refits at a common A failed)"
    level2 = evidence.level2
    return (
        f"at common A={a_common:.3f}: dlogB {interval(b.d, *b.ci(level2))}, "
        f"dlogC_mid {interval(c.d, *c.ci(level2))} ({level2:.1%} each) vs +/-{evidence.efficiency:.3f}"
    )


def claimed(kind: str, a_txt: str, eff_txt: str, evidence: Evidence, p: float, knobs: int) -> str:
    """The reason of a decided claim (mover, shaper, no effect)."""
    m = evidence.margin
    fdr = f"p {p:.2g}; false-discovery control over {knobs} knobs"
    if kind == "asymptote-mover":
        way = "rises" if evidence.a.d > 0 else "drops"
        return f"the ceiling {way}: {a_txt} lies beyond the margin {m:.3f} ({fdr}); B from the free fits"
    if kind == "efficiency-shaper":
        return f"ceilings equal: {a_txt} lies inside +/-{m:.3f}; efficiency differs: {eff_txt} ({fdr})"
    return f"equivalent: {a_txt} lies inside +/-{m:.3f} and {eff_txt}, both inside ({fdr})"


def not_decided(
    a_txt: str,
    eff_txt: str,
    evidence: Evidence,
    best: tuple[str, float],
    fdr_threshold: float,
    knobs: int,
    mde_a: float,
    power: float,
    seeds: str,
) -> str:
    """The reason of an undecided verdict pending seeds: its intervals, why the best claim did not
    pass, the smallest |dA| the sweep detects and what seeds would do (:func:`seeds_phrase`)."""
    kind, p = best
    fdr = ""
    if p < evidence.alpha:
        fdr = (
            f"; its best claim ({kind}, p {p:.2g}) is in its region but above the false-discovery "
            f"threshold {fdr_threshold:.2g} for {knobs} knobs"
        )
    return (
        f"not decided: {a_txt} vs margin {evidence.margin:.3f}; {eff_txt}{fdr}; the smallest |dA| this "
        f"sweep detects with {power:.0%} power is {mde_a:.3f}; {seeds}"
    )


def power_note(target: float | None, margin: float, needed: int | None, seeds_now: int) -> str:
    """What the sweep's ``power.detect_d_a`` target needs, in words ('' when not asked)."""
    if target is None:
        return ""
    if target <= margin:
        return f"|dA| {target:g} is not above the margin ({margin:.3f}): no seed count shows it beyond"
    if needed is None:
        return f"|dA| {target:g}: its noise could not be measured"
    return f"|dA| {target:g} needs {needed} seed(s) per variant (now {seeds_now})"

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
from scalerl.harness.analysis.verdicts.rule import Claim, Evidence, Findings
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
    margin 0.020``: dA alone for a mover, d log B and d log C_mid for a shaper, all three for no
    effect and for an undecided verdict pending seeds; ``verdict KIND`` for the rest
    (stop-when-decided's event text)."""
    evidence, kind = verdict.evidence, verdict.verdict
    if evidence is None or not (kind in set(Claim) or verdict.pending == "seeds"):
        return f"verdict {kind}"
    parts = []
    for name, c, threshold, level in evidence.parts():
        if kind == "efficiency-shaper" and name == "dA":
            continue  # a shaper rests on its efficiency intervals alone
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


def unmeasured(why: str) -> str:
    """No contrast at all: neither the ceiling nor the efficiency could be compared."""
    return (
        f"{why}: its ceiling is not measured at the compute reached; train further before judging this knob"
    )


def a_text(evidence: Evidence, seed_sd: float, known_sd: float | None, why: str) -> str:
    """dA with its interval and the reference it is read on; a lower bound, or why there is none."""
    a = evidence.a
    if a is None or not a.ok:
        return f"{why}: no dA"
    lo, hi = a.ci(evidence.level)
    if evidence.lower_bound:
        return (
            f"{why}, so its ceiling is only bounded: its late level (a lower bound on A) less the "
            f"baseline's A is {a.d:+.3f}, at least {lo:+.3f} at {evidence.level:.0%}"
        )
    ref = (
        f"normal, seed sd of A {known_sd:.3f} given"
        if known_sd is not None
        else f"t({a.df:.0f}) over seeds, seed sd of A {seed_sd:.3f}"
    )
    return f"dA {interval(a.d, lo, hi)} ({ref})"


def efficiency_text(evidence: Evidence) -> str:
    """d log B and d log C_mid from the seeds' own fits, or why they were not compared."""
    b, c = evidence.log_b, evidence.log_c
    if b is None or c is None or not (b.ok and c.ok):
        return "efficiency not compared (a fit with no bend, or no seed's fit gave B and C_mid)"
    level2 = evidence.level2
    return (
        f"dlogB {interval(b.d, *b.ci(level2))}, dlogC_mid {interval(c.d, *c.ci(level2))} "
        f"({level2:.1%} each) vs +/-{evidence.efficiency:.3f}"
    )


def reason(
    findings: Findings, a_txt: str, eff_txt: str, knobs: int, mde_a: float, power: float, seeds: str
) -> str:
    """A judged knob's reason: the claims made (with how sure the rule is of each), or why none
    was, with the smallest |dA| the sweep detects and what seeds would do."""
    assert findings.ruling is not None
    ev = findings.ruling.evidence
    m = ev.margin
    p_c, p_e = findings.probability(Claim.MOVER), findings.probability(Claim.SHAPER)
    fdr = f"false-discovery control over {knobs} knobs"
    kind = findings.verdict
    if kind == "asymptote-mover":
        assert ev.a is not None
        way = "rises" if ev.a.d > 0 else "drops"
        head = f"the ceiling {way}: {a_txt}, {'already ' if ev.lower_bound else ''}beyond the margin {m:.3f}"
        out = f"{head} (P {p_c:.2f}; {fdr})" + ("; how far is unknown" if ev.lower_bound else "")
        if findings.both:
            return out + f"; efficiency differs too (both): {eff_txt} (P {p_e:.2f})"
        return out + f"; efficiency: {eff_txt} (P it differs {p_e:.2f})"
    if kind == "efficiency-shaper":
        ceiling = f"{a_txt} vs margin {m:.3f} (P it moves {p_c:.2f})" if ev.ceiling_measured else a_txt
        return (
            f"efficiency differs: {eff_txt} (P {p_e:.2f}; {fdr}); the ceiling is not shown to move: {ceiling}"
        )
    if kind == "no-effect":
        p_n = findings.probability(Claim.NO_EFFECT)
        return f"equivalent: {a_txt} lies inside +/-{m:.3f} and {eff_txt}, both inside (P {p_n:.2f}; {fdr})"
    if not ev.ceiling_measured:
        return (
            f"{a_txt}, not shown beyond the margin {m:.3f}; {eff_txt} (P efficiency differs {p_e:.2f}); "
            "train further before judging this knob's ceiling"
        )
    return (
        f"not decided: {a_txt} vs margin {m:.3f} (P the ceiling moves {p_c:.2f}); {eff_txt} (P efficiency "
        f"differs {p_e:.2f}); nothing shown at false-discovery rate {ev.alpha:.0%} over {knobs} knobs; the "
        f"smallest |dA| this sweep detects with {power:.0%} power is {mde_a:.3f}; {seeds}"
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

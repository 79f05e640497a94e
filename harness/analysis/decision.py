"""When is a knob decided, and what would decide the ones that are not?

:func:`decided` is the rule stop-when-decided uses (:mod:`scalerl.harness.execution.decide`). The
verdict kind carries the decision (:mod:`scalerl.harness.analysis.verdicts`: intervals at the
sweep's level, Benjamini-Hochberg over its knobs); :func:`decided` re-checks the intervals so that
a verdict cannot claim more than its numbers show. Thresholds: the A margin ``m`` (the verdict's
``margin``) and ``t = log(1 + min_rel_effect)`` for log B (dB is stored in B's units and read back
as a log ratio) and log C_mid. An interval *straddles* a threshold when it is neither wholly
inside it nor wholly beyond it. Decided:

- ``asymptote-mover``: dA wholly beyond ``m`` (a late-level mover has only its lower bound);
- ``efficiency-shaper``: d log B or d log C_mid wholly beyond ``t`` (the ceiling need not be shown
  equal: :mod:`scalerl.harness.analysis.claims`);
- ``no-effect``: dA, d log B and d log C_mid each wholly inside their thresholds;
- ``undecided``, ``unfit``, ``unstable``: never.

:func:`what_decides` answers "where should the next GPU-hours go" for every knob that is not
decided, at the current noise. Seeds (an ``undecided`` verdict whose ``pending`` is "seeds"): the
seeds per variant at which an interval of the same centre would clear its threshold with 80%
power (:func:`scalerl.harness.analysis.power.seeds_for`, the interval's SE scaling as
``1/sqrt(seeds)``); dA alone when its estimate is beyond the margin (the mover claim), else
every interval of the equivalence claim. Compute (``pending`` "compute", a ceiling not
measured): the compute at which each unpinned pooled fit reaches 75% of its gain
(:data:`PIN_FRACTION`), read off the fitted curve, so a forecast at the current slope.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from scalerl.harness.analysis.power import DEFAULT_POWER, seeds_for
from scalerl.harness.analysis.verdicts import SweepAnalysis, Verdict, VerdictOptions

MIN_REL_EFFECT = VerdictOptions.min_rel_effect


def _inside(lo: float, hi: float, t: float) -> bool:
    return math.isfinite(lo) and math.isfinite(hi) and -t < lo and hi < t


def _beyond(lo: float, hi: float, t: float) -> bool:
    return lo > t or hi < -t  # NaN compares False: a missing end proves nothing


def _log_ratio(d: float, base: float) -> float:
    """dB in B's units to the log-ratio the efficiency claims are made on."""
    if not (math.isfinite(d) and math.isfinite(base)) or base <= 0 or base + d <= 0:
        return math.nan
    return math.log1p(d / base)


def _floors(v: Verdict, min_rel_effect: float) -> tuple[float, float, float]:
    """The thresholds: the A margin, and log(1 + min_rel_effect) for log B and log C_mid."""
    return v.margin, math.log1p(min_rel_effect), math.log1p(min_rel_effect)


def _b_interval(v: Verdict) -> tuple[float, float, float]:
    return tuple(_log_ratio(x, v.b_base) for x in (v.d_b, v.d_b_lo, v.d_b_hi))  # type: ignore[return-value]


def decided(v: Verdict, min_rel_effect: float = MIN_REL_EFFECT) -> tuple[bool, str]:
    """(decided?, the intervals against their thresholds in words); see the module docstring.

    The verdict kind carries the decision (the sweep's false-discovery step is part of it); the
    intervals are re-checked so that a verdict read back from elsewhere cannot claim more than
    its numbers show.
    """
    m, f_b, f_c = _floors(v, min_rel_effect)
    _, b_lo, b_hi = _b_interval(v)
    a_txt = f"dA [{v.d_a_lo:+.3f}, {v.d_a_hi:+.3f}] vs margin {m:.3f}"
    b_txt = f"dlogB [{b_lo:+.3f}, {b_hi:+.3f}] vs {f_b:.3f}"
    c_txt = f"dlogC_mid [{v.d_log_c_mid_lo:+.3f}, {v.d_log_c_mid_hi:+.3f}] vs {f_c:.3f}"
    a_in = _inside(v.d_a_lo, v.d_a_hi, m)
    if v.verdict == "asymptote-mover":
        return _beyond(v.d_a_lo, v.d_a_hi, m), a_txt
    if v.verdict == "efficiency-shaper":
        moves = _beyond(b_lo, b_hi, f_b) or _beyond(v.d_log_c_mid_lo, v.d_log_c_mid_hi, f_c)
        return moves, f"{a_txt}; {b_txt}; {c_txt}"
    if v.verdict == "no-effect":
        same = _inside(b_lo, b_hi, f_b) and _inside(v.d_log_c_mid_lo, v.d_log_c_mid_hi, f_c)
        return a_in and same, f"{a_txt}; {b_txt}; {c_txt}"
    if v.verdict == "undecided" and v.pending == "seeds":
        return False, f"{a_txt}; {b_txt}; {c_txt}"
    return False, f"verdict {v.verdict}"


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


PRACTICAL_SEEDS = 100  # beyond 100x the seeds now, "seeds will not decide it"


def _straddles(part: str) -> bool:
    """Whether one ``NAME [lo, hi] vs t`` clause of :func:`decided`'s text straddles ``t``."""
    try:
        lo_hi, t = part.split("[", 1)[1].split("] vs")
        lo, hi = (float(x) for x in lo_hi.split(","))
        thr = float(t.split()[-1])
    except (IndexError, ValueError):
        return True
    return not (_inside(lo, hi, thr) or _beyond(lo, hi, thr))


def _seeds(d: float, lo: float, hi: float, t: float, level: float, seeds_now: int) -> int | None:
    """Seeds for the interval [lo, hi] around ``d`` (at ``level``) to clear threshold ``t``."""
    if not (math.isfinite(lo) and math.isfinite(hi) and math.isfinite(d) and math.isfinite(t)):
        return None
    se = (hi - lo) / (2.0 * NormalDist().inv_cdf(0.5 + level / 2.0))
    dist = abs(abs(d) - t)
    if dist <= 0.0 or se <= 0.0:
        return None
    return seeds_for(dist, se, seeds_now, alpha=1.0 - level, power=DEFAULT_POWER)


def _max(*ns: int | None) -> int | None:
    return None if any(n is None for n in ns) else max(n for n in ns if n is not None)


def _min(*ns: int | None) -> int | None:
    known = [n for n in ns if n is not None]
    return min(known) if known else None


def _seeds_to_decide(v: Verdict, level: float, seeds_now: int, min_rel_effect: float) -> int | None:
    """Seeds per variant for the intervals that straddle to clear their thresholds: dA alone when
    its estimate is beyond the margin (the mover claim); the easier of dlogB and dlogC_mid whose
    estimate is beyond its threshold (the efficiency claim); else every interval of the
    equivalence claim."""
    m, f_b, f_c = _floors(v, min_rel_effect)
    level2 = 1.0 - (1.0 - level) / 2.0  # dlogB and dlogC_mid: Bonferroni over the two tests
    a = _seeds(v.d_a, v.d_a_lo, v.d_a_hi, m, level, seeds_now)
    if v.verdict == "asymptote-mover" or (math.isfinite(v.d_a) and abs(v.d_a) > m):
        return a
    b = _seeds(*_b_interval(v), f_b, level2, seeds_now)
    c = _seeds(v.d_log_c_mid, v.d_log_c_mid_lo, v.d_log_c_mid_hi, f_c, level2, seeds_now)
    d_b = _b_interval(v)[0]
    out_b = math.isfinite(d_b) and abs(d_b) > f_b
    out_c = math.isfinite(v.d_log_c_mid) and abs(v.d_log_c_mid) > f_c
    if out_b or out_c:
        # The efficiency claim: the easier of B and C_mid whose estimate is beyond its threshold.
        return _min(b if out_b else None, c if out_c else None)
    if v.verdict == "efficiency-shaper":
        return _min(b, c)
    return _max(a, b, c)  # no effect: every interval inside its threshold


# The share of its gain at which a curve's ceiling counts as pinned for "what would decide it":
# past the inflection the rule judges a ceiling by its fit's extrapolation, and on known truth its
# intervals held at 60-90% of the gain (bench/README.md); 75% is a target inside that range.
PIN_FRACTION = 0.75


def _pin_compute(analysis: SweepAnalysis, name: str, margin: float) -> float:
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


def what_decides(
    analysis: SweepAnalysis,
    baseline: str,
    reached: dict[str, float],
    *,
    level: float = 0.95,
    min_rel_effect: float = MIN_REL_EFFECT,
) -> list[NextStep]:
    """One :class:`NextStep` per verdict that is not :func:`decided`. ``reached``: variant -> the
    largest compute its runs reached on the fit axis."""
    out: list[NextStep] = []
    for v in analysis.verdicts:
        ok, rule = decided(v, min_rel_effect)
        if ok:
            continue
        seeds_now = analysis.seeds
        if v.verdict in ("asymptote-mover", "efficiency-shaper", "no-effect") or v.pending == "seeds":
            n = _seeds_to_decide(v, level, seeds_now, min_rel_effect)
            straddling = ", ".join(part.split(" [")[0] for part in rule.split("; ") if _straddles(part))
            if n is None:
                note = f"an estimate sits on its threshold: no seed count decides it ({straddling} straddle)"
            elif n > PRACTICAL_SEEDS * seeds_now:
                note = f"seeds will not decide it (~{n:.2g} needed, now {seeds_now}; {straddling} too wide)"
            else:
                note = f"~{n} seed(s) per variant (now {seeds_now}) at this noise ({straddling} straddle)"
            out.append(NextStep(v.knob, v.variant, v.verdict, n, math.nan, math.nan, note))
        elif v.verdict == "undecided":
            need = [(_pin_compute(analysis, name, v.margin), name) for name in (baseline, v.variant)]
            needed = [(c, name) for c, name in need if math.isfinite(c) and c > reached.get(name, math.inf)]
            if not needed:
                note = "ceiling not measured, and its fit gives no compute that would measure it"
                out.append(NextStep(v.knob, v.variant, v.verdict, None, math.nan, math.nan, note))
                continue
            c, name = max(needed)
            factor = c / reached[name]
            note = f"{name}'s ceiling is measured at ~{c:.3g} (x{factor:.1f} its compute), by its fit's slope"
            out.append(NextStep(v.knob, v.variant, v.verdict, None, c, factor, note))
        else:
            head = v.reason.split(";")[0][:100]
            out.append(
                NextStep(v.knob, v.variant, v.verdict, None, math.nan, math.nan, f"{head}: fix the runs")
            )
    return out

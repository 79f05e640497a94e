"""Knob verdicts: does a LOO variant move the ceiling, change the efficiency, both, or nothing?

One rule (DESIGN.md section 5) drives the table, ``scalerl fit``'s "not decided" list,
stop-when-decided, the report and ``--json``. Each variant is compared with the baseline (same
metric, same compute axis) by intervals at the sweep's level (``VerdictOptions.level``, 95%):

1. **Noise and seeds.** Every point has its standard error (binomial where its sample count is
   known, else the curve's residual scatter). Every run is fitted on its own (weighted least
   squares), with one R0 for the whole sweep (:func:`shared_r0`: the runs' step-0 evaluations,
   else the median of the runs' fitted starts). Each seed is judged
   (:mod:`scalerl.harness.analysis.collapse`): a diverged or collapsed seed is set aside and
   *named in the verdict*, which is judged on the remaining seeds; only when more than half of
   a variant's seeds fail is it ``unstable`` (a baseline that fails makes every verdict
   ``unfit``). A seed that overshot and settled is kept and noted.
2. **Is the ceiling pinned?** A variant's ceiling is measured once its pooled fit (all its healthy
   seeds' points) has passed its inflection, as the paper uses its fits: a curve still rising at
   the end of the budget is extrapolated by its fit, and what the extrapolation leaves unknown
   shows in the seeds' scatter, not in a veto. A variant whose pooled fit never turned
   (``pre-inflection``), sits at A's bound, or has no bend (B below :data:`MIN_SHAPE_B`: the
   fitted points hold no rise, e.g. a fit window that starts on the plateau) has no measured
   ceiling: it is ``undecided`` (pending compute: what would pin it), except that its late level
   (each seed's mean over its last 20% of points) is a lower bound on its A, so "the ceiling
   rises" can still be shown against a measured baseline. Only the baseline's own ceiling, when
   it is not measured, leaves its knobs undecided.
3. **Per-seed parameters, pooled over the sweep.** Each seed's own fit gives A, log B and log C_mid
   (:func:`seed_estimates`) with their sampling variances: A's from the seed's profile likelihood
   (:func:`profile_a_var`, which sees a ceiling left open upward), log B's and log C_mid's
   linearised. Each is pooled over the sweep's measured groups by
   :func:`scalerl.harness.analysis.inference.pool_groups` (random
   effects, Hartung-Knapp scale, seeds - groups degrees of freedom, a group's own scatter where
   it is significantly larger, the baseline never below its own seeds' scatter); a contrast is a
   variant's weighted seed mean less the baseline's with a t interval.
4. **Claims** (:mod:`scalerl.harness.analysis.claims`): the ceiling moves (the dA interval beyond
   +/-m, ``m`` the margin, 0.02 by default, the paper's practical threshold; noise enters through
   the intervals, never the margin); efficiency differs (the d log B or d log C_mid interval
   beyond +/-t, ``t`` = log(1 + ``min_rel_effect``), 1 - alpha/2 each), whether or not the
   ceiling moves too; no effect (all three inside). Each claim is made under Benjamini-Hochberg
   at false-discovery rate 1 - level over the sweep's knobs, and carries a probability, 1 - its
   BH-adjusted p-value.
5. **The verdict**: ``asymptote-mover`` (``efficiency`` "differs" when it is a shaper too: both),
   ``efficiency-shaper``, ``no-effect`` or ``undecided``; an undecided reason gives the intervals,
   the smallest |dA| the sweep detects with 80% power and the seeds per variant that would decide
   it.

Every verdict carries dA with its interval, dB (in B's units, from the log-scale interval) and
d log C_mid with theirs, the margin, and the probability of each claim, so a reader can disagree.
Error rates, power beside a pooled-seed t reference, and the probabilities' calibration against
known truth: bench/README.md, "Verdicts against known truth".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import t as student_t

from scalerl.harness.analysis.claims import KnobClaims, KnobContrasts, judge
from scalerl.harness.analysis.collapse import CollapseOptions
from scalerl.harness.analysis.collapse import judge as judge_health
from scalerl.harness.analysis.curve import (
    FitOptions,
    FloatArray,
    PreparedCurve,
    SigmoidFit,
    prepare,
    sigmoid_curve,
)
from scalerl.harness.analysis.fitters import Curve, Fitter, fit_sigmoid_many
from scalerl.harness.analysis.inference import Contrast, Pooled, pool_groups, remove_seed_effects
from scalerl.harness.analysis.noise import NoiseSource, point_se
from scalerl.harness.analysis.power import DEFAULT_POWER
from scalerl.harness.analysis.uncertainty import DEFAULT_BOOT, BootstrapResult, bootstrap_fits

VerdictKind = Literal["asymptote-mover", "efficiency-shaper", "no-effect", "undecided", "unstable", "unfit"]


_NAN = math.nan


@dataclass(frozen=True)
class VerdictOptions:
    margin: float = 0.02
    n_boot: int = DEFAULT_BOOT
    level: float = 0.95
    seed: int = 0
    # Smallest efficiency change worth a verdict: 10% in B, or C_mid moving by a factor of 1.1.
    min_rel_effect: float = 0.1
    # Collapse test (see the module docstring): false-alarm rate per curve before the Bonferroni
    # correction over candidate peaks, the smallest drop worth calling a collapse (the paper's
    # 0.02 margin), the last window's share of the points and its minimum width.
    collapse_alpha: float = 0.001
    collapse_drop: float = 0.02
    tail_fraction: float = 0.2
    smooth: int = 5
    power: float = DEFAULT_POWER  # the power at which mde_a / mde_b are stated
    # Targets from the sweep's ``power:`` section: the seeds per variant that would reach them.
    detect_d_a: float | None = None
    detect_d_b: float | None = None
    # The seed-to-seed sd of a ceiling when it is known rather than measured (an earlier replicate
    # study; the sweep's fit.seed_sd): intervals then use it with a normal reference.
    seed_sd: float | None = None


@dataclass(frozen=True)
class VariantCurves:
    """One variant's curves, one per seed (``run_ids`` in the same order)."""

    variant: str
    curves: tuple[Curve, ...]
    knob: str | None = None
    alternative: str | None = None
    run_ids: tuple[str, ...] = ()
    # Per curve: the Bernoulli sample count behind each point (aligned with its values; NaN where
    # unknown), or None / left out when the curve has none: its noise is then estimated.
    n: tuple[ArrayLike | None, ...] = ()
    # Per curve: its seed number. Variants run at the same seed numbers share each seed's effect,
    # which the rule takes out (inference.remove_seed_effects); empty: seeds unknown.
    seeds: tuple[int, ...] = ()

    def counts(self, i: int) -> ArrayLike | None:
        return self.n[i] if i < len(self.n) else None


@dataclass(frozen=True)
class Verdict:
    knob: str | None
    variant: str
    alternative: str | None
    verdict: VerdictKind
    a_base: float
    a_variant: float
    d_a: float
    d_a_lo: float
    d_a_hi: float
    b_base: float
    b_variant: float
    d_b: float
    d_b_lo: float
    d_b_hi: float
    margin: float
    reason: str
    d_log_c_mid: float = _NAN
    d_log_c_mid_lo: float = _NAN
    d_log_c_mid_hi: float = _NAN
    mde_a: float = _NAN  # smallest |dA| detectable at 80% power with these seeds and this noise
    mde_b: float = _NAN
    # Seeds per variant that reach VerdictOptions.detect_d_a / detect_d_b (None: not asked, or
    # unreachable by seeds; ``power_note`` says which, in words).
    seeds_for_a: int | None = None
    seeds_for_b: int | None = None
    power_note: str = ""
    # What would decide an ``undecided`` verdict: "seeds" (the intervals are set by seed noise) or
    # "compute" (a ceiling is not measured yet); empty for every other verdict.
    pending: str = ""
    # The p-value of the verdict's claim (the smallest when undecided), before the sweep's
    # false-discovery step; NaN when no claim could be tested.
    p_value: float = _NAN
    # How sure the rule is of each claim: 1 - its Benjamini-Hochberg adjusted p-value over the
    # sweep's knobs (claims.py); NaN when the claim could not be tested.
    p_ceiling: float = _NAN  # the ceiling moves beyond the margin
    p_efficiency: float = _NAN  # B or C_mid differs beyond min_rel_effect
    p_no_effect: float = _NAN  # all three inside their thresholds
    # The efficiency claim: "differs" (made; on a mover: the knob is both), "same" (equivalence
    # shown, part of no-effect), "" (not decided or not compared).
    efficiency: str = ""

    def row(self, metric: str, axis: str) -> dict[str, Any]:
        """The ``store.replace_verdicts`` row (the verdict table's columns)."""
        keys = (
            "knob",
            "variant",
            "alternative",
            "verdict",
            "a_base",
            "a_variant",
            "d_a",
            "d_a_lo",
            "d_a_hi",
            "b_base",
            "b_variant",
            "d_b",
            "d_b_lo",
            "d_b_hi",
            "margin",
            "reason",
            "mde_a",
            "mde_b",
            "d_log_c_mid",
            "d_log_c_mid_lo",
            "d_log_c_mid_hi",
            "p_ceiling",
            "p_efficiency",
            "p_no_effect",
            "efficiency",
        )
        return {k: getattr(self, k) for k in keys} | {"metric": metric, "axis": axis}


@dataclass(frozen=True)
class SweepAnalysis:
    run_fits: dict[str, SigmoidFit]
    variant_fits: dict[str, BootstrapResult]
    seed_noise: float
    margin: float
    verdicts: list[Verdict] = field(default_factory=list)
    # Which component set the margin: "configured", "seed noise" or "measurement noise".
    margin_source: str = "configured"
    # The mean over healthy runs of the SE of A implied by the points' measurement noise.
    noise_a: float = _NAN
    # Where the point noise came from, per variant: binomial, residual, mixed or unknown.
    noise_sources: dict[str, NoiseSource] = field(default_factory=dict)
    seeds: int = 1  # the fewest seeds of any variant (what the power statements assume)
    df: int = 0  # degrees of freedom of the pooled seed variance on A (seeds - groups)
    # The per-seed parameters pooled over the sweep (A, log B, log C_mid); None when no group's
    # ceiling was measured.
    pooled: dict[str, Pooled] = field(default_factory=dict)
    r0: float = _NAN  # the sweep's shared R0 (NaN: each fit has its own)
    r0_source: str = ""  # where the shared R0 came from, in words


_NORMAL = NormalDist()


def _typical_a_se(a_ses: Sequence[float]) -> float:
    """The mean of the seeds' SEs of A (profile likelihood; the fit notes' "measurement-noise SE of
    one run's A"), the largest 10% left out when there are 10 or more (one seed whose A is barely
    pinned should not speak for the sweep)."""
    finite = np.sort(np.array([x for x in a_ses if math.isfinite(x)], dtype=np.float64))
    if not finite.size:
        return _NAN
    keep = finite[: math.ceil(0.9 * finite.size)] if finite.size >= 10 else finite
    return float(keep.mean())


def _blank(
    base: BootstrapResult,
    vc: VariantCurves,
    kind: VerdictKind,
    margin: float,
    reason: str,
    var: BootstrapResult | None = None,
    *,
    pending: str = "",
) -> Verdict:
    a_var = var.fit.a if var is not None else _NAN
    b_var = var.fit.b if var is not None else _NAN
    return Verdict(
        vc.knob,
        vc.variant,
        vc.alternative,
        kind,
        base.fit.a,
        a_var,
        _NAN,
        _NAN,
        _NAN,
        base.fit.b,
        b_var,
        _NAN,
        _NAN,
        _NAN,
        margin,
        reason,
        pending=pending,
    )


def _extrapolation_note(fits: Sequence[tuple[VariantCurves, float]], margin: float) -> str:
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


# The share of each run's points (by compute, at least 3) whose mean is its late level.
LATE_SHARE = 0.2


def late_level(vc: VariantCurves, sigma: Sequence[FloatArray]) -> tuple[float, float]:
    """(mean, standard error) of the variant's late level: each seed's mean over its last
    ``LATE_SHARE`` of points, averaged over seeds. The SE combines the points' measurement noise
    with the seed-to-seed spread of those means (the larger of the two). For a curve still rising
    toward its ceiling the late level is a lower bound on A."""
    means, noise_vars = [], []
    for (c, v), se in zip(vc.curves, sigma, strict=True):
        cc, vv = np.asarray(c, dtype=np.float64), np.asarray(v, dtype=np.float64)
        ss = np.broadcast_to(np.asarray(se, dtype=np.float64), vv.shape)
        keep = np.isfinite(cc) & np.isfinite(vv)
        order = np.argsort(cc[keep], kind="stable")
        vv, ss = vv[keep][order], ss[keep][order]
        k = max(3, round(LATE_SHARE * vv.size))
        if vv.size < k:
            continue
        means.append(float(vv[-k:].mean()))
        tail = ss[-k:]
        noise_vars.append(float(np.nansum(tail**2)) / k**2)
    if not means:
        return math.nan, math.nan
    m = np.array(means)
    se_noise = math.sqrt(sum(noise_vars)) / m.size
    se_seed = float(np.std(m, ddof=1)) / math.sqrt(m.size) if m.size > 1 else 0.0
    return float(m.mean()), max(se_noise, se_seed)


def shared_r0(
    curves: Sequence[Curve], opts: FitOptions, sigma: Sequence[ArrayLike | None] | None = None
) -> tuple[float | None, str]:
    """One R0 for the whole sweep and where it came from, or (None, '') to leave each fit its own.

    A LOO sweep's runs start from one checkpoint, so their starts measure one number; estimating
    it per variant from a few noisy points and holding it fixed turned R0 noise into efficiency
    "effects" (with no seed noise at all, 49% of null knobs were shapers; with R0 shared, none).
    Under the default rule (:data:`scalerl.harness.analysis.curve.R0Rule`) that number is the
    mean of every run's step-0 evaluations (points at compute <= 0) when every run has one, else
    the median over the runs of each one's fitted R0 (fitted with A, B and C_mid; the median,
    because a run that starts late pins its own start only roughly). Never the runs' first logged
    values: a curve logged from its first training step has already risen there, and an R0
    biased up bends every fit's A and B. None when the options fix R0 or take each run's first
    values (``r0_rule="first"``, the paper's procedure).
    """
    if opts.r0 is not None or opts.rule == "first" or not curves:
        return None, ""
    starts = []
    for c, v in curves:
        cc, vv = np.asarray(c, dtype=np.float64), np.asarray(v, dtype=np.float64)
        at0 = vv[np.isfinite(cc) & np.isfinite(vv) & (cc <= 0)]
        starts.append(float(at0.mean()) if at0.size else _NAN)
    if opts.rule == "auto" and all(math.isfinite(x) for x in starts):
        return float(np.mean(starts)), "the runs' step-0 evaluations"
    fits = fit_sigmoid_many(list(curves), options=replace(opts, r0_rule="fit"), sigma=sigma)
    r0s = [f.r0 for f in fits if f.status in ("ok", "pre-inflection") and math.isfinite(f.r0)]
    if not r0s:
        return None, ""
    return float(np.median(r0s)), f"fitted: the median of {len(r0s)} runs' own fits"


@dataclass
class _Seeds:
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


def _health(
    vc: VariantCurves, sigma: list[FloatArray], fits: list[SigmoidFit], opts: VerdictOptions
) -> _Seeds:
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
        health = judge_health(c, vals, sigma[i], copts)
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
    return _Seeds(vc, sigma, fits, healthy, aside, unstable, settled)


# exp() of a log-scale interval's end: an interval of a B that is barely identified (a curve cut
# early, looked at by stop-when-decided) can reach e^710 and beyond, which math.exp cannot hold.
_LOG_MAX = math.log(np.finfo(np.float64).max)


def _exp(x: float) -> float:
    return math.exp(x) if x < _LOG_MAX else math.inf


def _expm1(x: float) -> float:
    return math.expm1(x) if x < _LOG_MAX else math.inf


def _tq(df: float, level: float) -> float:
    return float(student_t.ppf(0.5 + level / 2.0, df)) if df > 0 else math.nan


def _fmt(d: float, lo: float, hi: float) -> str:
    return f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def _seed_cov(fit: SigmoidFit, curve: Curve, sigma: FloatArray, opts: FitOptions) -> FloatArray:
    """One seed's linearised sampling variances of (A, log B, log C_mid): the diagonal of the
    weighted-least-squares covariance ``(J^T W J)^-1`` at its fitted parameters (A raw where the
    fit is pre-inflection), on its windowed points, R0 held at its value. NaN where unknown."""
    nan3 = np.full(3, np.nan)
    a = fit.a if fit.ok else fit.a_raw
    if not all(math.isfinite(p) for p in (a, fit.b, fit.c_mid, fit.r0)) or fit.b <= 0 or fit.c_mid <= 0:
        return nan3
    prep = prepare(curve[0], curve[1], opts, r0_override=fit.r0, sigma=sigma)
    if prep.sigma is None or prep.x.size < 4:
        return nan3
    x, sd = prep.x, prep.sigma
    with np.errstate(over="ignore", invalid="ignore"):
        u = (fit.c_mid / x) ** fit.b
        g = 1.0 / (1.0 + u)
        gain = a - fit.r0
        jac = np.column_stack(
            [
                g,  # dR/dA
                gain * fit.b * u * np.log(x / fit.c_mid) * g**2,  # dR/dlog B
                -gain * fit.b * u * g**2,  # dR/dlog C_mid
            ]
        )
    if not np.all(np.isfinite(jac)):
        return nan3
    info = (jac / sd[:, None] ** 2).T @ jac
    try:
        cov = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        return nan3
    var = np.diag(cov).astype(np.float64)
    return np.where(np.isfinite(var) & (var > 0), var, np.nan)


@dataclass(frozen=True)
class SeedEstimates:
    """One variant's per-seed parameters for the pooled contrasts: values and their sampling
    variances (linearised; A's replaced by its profile-likelihood variance in :func:`classify`),
    one entry per usable seed (``used``: their indices in the variant's curves), for A, log B and
    log C_mid."""

    a: list[float]
    a_var: list[float]
    log_b: list[float]
    log_b_var: list[float]
    log_c_mid: list[float]
    log_c_mid_var: list[float]
    used: list[int]


# Where each seed's profile likelihood is evaluated: A at these multiples of its linearised SE
# from the estimate (clipped to A's bounds). The upper steps run far: a seed whose curve is still
# rising leaves its ceiling open upward by many linearised SEs.
_PROFILE_STEPS = np.array([-4.0, -2.5, -1.5, -0.75, 0.75, 1.5, 2.5, 4.0, 6.0, 9.0, 14.0, 20.0])
# ... and at these absolute offsets, so that a seed whose linearised SE is tiny still has its
# profile followed as far as its data leave the ceiling open (a grid that stops short of the
# crossing would cut the interval there).
_PROFILE_REACH = np.array([-0.2, -0.1, -0.05, 0.05, 0.1, 0.2, 0.4])
_PROFILE_Z = 1.959963984540054  # the profile interval's level: 95%, chi-square(1) = z^2
_PROFILE_CHI2 = _PROFILE_Z**2


def profile_a_var(
    items: Sequence[tuple[SigmoidFit, Curve, FloatArray, float, float]],
    opts: FitOptions,
    method: str | Fitter,
) -> list[float]:
    """Each seed's sampling variance of A from its profile likelihood.

    ``items``: (fit, curve, point SEs, A, linearised variance of A) per seed. The 95% profile
    interval is where refits with A held (B and C_mid free, R0 at the fit's) stay within
    chi-square(1) of the best fit; the variance is (its width / 3.92)^2. The linearised variance
    sees only the curvature at the estimate: on curves stopped at 74% of their gain it was a
    fraction of the spread of A over seeds, while the profile runs as far as the data leave the
    ceiling open (to A's bound). One batch of refits for the whole sweep."""
    lo_b, hi_b = opts.a_bounds
    batch: list[Curve] = []
    fixed: list[float] = []
    sig: list[ArrayLike | None] = []
    grids: list[FloatArray] = []
    for _, c, se, a, var in items:
        step = min(max(math.sqrt(var) if math.isfinite(var) and var > 0 else 0.02, 2e-3), 0.1)
        grid = np.unique(
            np.clip(np.concatenate([a + step * _PROFILE_STEPS, a + _PROFILE_REACH]), lo_b + 1e-6, hi_b)
        )
        grids.append(grid)
        batch += [c] * grid.size
        fixed += [float(g) for g in grid]
        sig += [se] * grid.size
    refits = fit_sigmoid_many(batch, options=opts, method=method, fixed_a=fixed, sigma=sig)
    out = []
    k = 0
    for (f, c, se, a, var), grid in zip(items, grids, strict=True):
        held = refits[k : k + grid.size]
        k += grid.size
        prep = prepare(c[0], c[1], opts, r0_override=f.r0, sigma=se)
        if prep.sigma is None:
            out.append(var)
            continue
        best = _chi2(prep, f.r0, a, f.b, f.c_mid)
        prof = np.array(
            [_chi2(prep, g.r0, float(gv), g.b, g.c_mid) for g, gv in zip(held, grid, strict=True)]
        )
        dev = prof - min(best, float(np.min(prof)))
        below, above = grid < a, grid > a
        lo = _crossing(grid[below][::-1], dev[below][::-1], a, float(grid.min()))
        hi = _crossing(grid[above], dev[above], a, float(grid.max()))
        out.append(((hi - lo) / (2.0 * _PROFILE_Z)) ** 2)
    return out


def _chi2(prep: PreparedCurve, r0: float, a: float, b: float, c_mid: float) -> float:
    """Sum of squared standardised residuals of one curve's windowed points (inf: no fit)."""
    if not all(math.isfinite(p) for p in (r0, a, b, c_mid)) or prep.sigma is None:
        return math.inf
    return float(np.sum(((prep.y - sigmoid_curve(prep.x, r0, a, b, c_mid)) / prep.sigma) ** 2))


def _crossing(g: FloatArray, dev: FloatArray, a: float, end: float) -> float:
    """Where the profile deviance first reaches the chi-square cut moving away from ``a`` along
    ``g`` (linear interpolation), else the grid's end."""
    prev_g, prev_d = a, 0.0
    for gi, di in zip(g, dev, strict=True):
        if di >= _PROFILE_CHI2:
            if not math.isfinite(di) or di == prev_d:
                return float(gi)
            return float(prev_g + (gi - prev_g) * (_PROFILE_CHI2 - prev_d) / (di - prev_d))
        prev_g, prev_d = float(gi), float(max(di, 0.0))
    return end


def seed_estimates(s: _Seeds, opts: FitOptions) -> SeedEstimates:
    """Each healthy seed's own fit: A (the raw A of a seed whose own fit has not passed its
    inflection while its variant's pooled fit has: its extrapolation is the seed's, and dropping
    the slow seeds would bias the variant's A down), log B, log C_mid and their variances."""
    cols: list[list[float]] = [[] for _ in range(6)]
    used: list[int] = []
    for i in s.healthy:
        f = s.fits[i]
        if f.status not in ("ok", "pre-inflection"):
            continue
        a = f.a if f.ok else f.a_raw
        if not all(math.isfinite(p) for p in (a, f.b, f.c_mid)) or f.b <= 0 or f.c_mid <= 0:
            continue
        var = _seed_cov(f, s.vc.curves[i], s.sigma[i], opts)
        for k, v in enumerate((a, math.log(f.b), math.log(f.c_mid))):
            cols[2 * k].append(float(v))
            cols[2 * k + 1].append(float(var[k]))
        used.append(i)
    return SeedEstimates(cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], used)


def _a_items(s: _Seeds, e: SeedEstimates) -> list[tuple[SigmoidFit, Curve, FloatArray, float, float]]:
    """(fit, curve, point SEs, A, linearised variance of A) of each seed in ``e``."""
    return [(s.fits[i], s.vc.curves[i], s.sigma[i], e.a[k], e.a_var[k]) for k, i in enumerate(e.used)]


# The flattest pooled fit whose ceiling and efficiency count as measured. B = 0.3 spreads the rise
# from 10% to 90% of the gain over 81^(1/0.3), about 2e6 x the compute: no sweep sees that bend, so
# a flatter fit is a straight line in log compute whose A and C_mid are not identified. Seen on
# known truth (bench/verdict_sim.py, a fit window that starts at 90% of the gain): pooled fits with
# B 0.05-0.15 put A at 0.9-1.0 for a curve whose ceiling was 0.72, and C_mid 400x too low.
MIN_SHAPE_B = 0.3
# The share of its gain a variant's pooled fit must say it has made for its ceiling to count as
# pinned. Below it a fitted A is an extrapolation whose error the seeds' scatter does not show:
# on known truth (bench/verdict_sim2.py, tuning seeds) curves stopped at 50-63% of their gain came
# out with ceilings biased low together, and their dA intervals missed; with this floor every
# cell held 93-99% and the probabilities of "the ceiling moves" held their calibration.
PIN_GAIN = 0.6


def _why_unshaped(vc: VariantCurves, fit: SigmoidFit) -> str:
    """Why a variant's pooled fit gives no efficiency to compare ('' when it does)."""
    if fit.status not in ("ok", "pre-inflection") or not math.isfinite(fit.b):
        return f"{vc.variant}'s fit is {fit.status}"
    if fit.b < MIN_SHAPE_B:
        return (
            f"{vc.variant}'s fit has no bend (B={fit.b:.3g}: a rise spread over more than six decades of "
            "compute), so neither its ceiling nor its efficiency is measured: the fitted points hold no "
            "rise to fit (a fit window that starts on the plateau?)"
        )
    return ""


def _why_unpinned(vc: VariantCurves, fit: SigmoidFit, opts: FitOptions) -> str:
    """Why a variant's pooled fit does not measure its ceiling ('' when it does)."""
    if fit.status == "pre-inflection":
        return (
            f"{vc.variant} has not passed its inflection (C_mid={fit.c_mid:.3g} beyond its last compute), "
            "so its ceiling is not pinned"
        )
    if fit.ok and fit.a >= opts.a_bounds[1] - 1e-9:
        return f"{vc.variant}'s fitted ceiling sits at its upper bound {opts.a_bounds[1]:g}"
    if fit.ok:
        top = max(float(np.nanmax(np.asarray(c, dtype=np.float64))) for c, _ in vc.curves)
        gain = 1.0 / (1.0 + (fit.c_mid / top) ** fit.b)
        if gain < PIN_GAIN:
            return (
                f"{vc.variant} has made {gain:.0%} of its gain by its fit (under {PIN_GAIN:.0%}), so its "
                "ceiling is not pinned"
            )
    return ""


def _interval_txt(name: str, c: Contrast, level: float) -> str:
    lo, hi = c.ci(level)
    return f"{name} {_fmt(c.d, lo, hi)}"


def classify(
    baseline: VariantCurves,
    variants: Sequence[VariantCurves],
    *,
    options: FitOptions | None = None,
    verdict_options: VerdictOptions | None = None,
    method: str | Fitter = "fast",
) -> SweepAnalysis:
    """Fit every run, pool the seeds, and judge each variant (the module docstring's rule)."""
    opts = options or FitOptions()
    vopts = verdict_options or VerdictOptions()
    everyone = [baseline, *variants]
    margin, level = vopts.margin, vopts.level
    thr = math.log1p(vopts.min_rel_effect)
    # 0. Every point's standard error (binomial where n is known, else from the curve's scatter).
    sigma: dict[str, list[FloatArray]] = {}
    sources: dict[str, NoiseSource] = {}
    for vc in everyone:
        per_curve = [point_se(c, v, vc.counts(i)) for i, (c, v) in enumerate(vc.curves)]
        sigma[vc.variant] = [se for se, _ in per_curve]
        kinds = {src for _, src in per_curve}
        sources[vc.variant] = kinds.pop() if len(kinds) == 1 else "mixed"
    # 1. One R0 for the sweep, then every seed's own fit (one batch, weighted by 1/SE^2).
    flat_curves = [c for vc in everyone for c in vc.curves]
    flat_sigma: list[ArrayLike | None] = [se for vc in everyone for se in sigma[vc.variant]]
    r0, r0_source = shared_r0(flat_curves, opts, flat_sigma)
    fopts = opts if r0 is None else replace(opts, r0=r0)
    flat_fits = fit_sigmoid_many(flat_curves, options=fopts, method=method, sigma=flat_sigma)
    run_fits: dict[str, SigmoidFit] = {}
    seeds: dict[str, _Seeds] = {}
    k = 0
    for vc in everyone:
        fits = list(flat_fits[k : k + len(vc.curves)])
        k += len(vc.curves)
        for i, f in enumerate(fits):
            run_fits[vc.run_ids[i] if i < len(vc.run_ids) else f"{vc.variant}#{i}"] = f
        seeds[vc.variant] = _health(vc, sigma[vc.variant], fits, vopts)
    # 2. Pooled fits (all healthy seeds' points together) with bootstrap bands: the curves the
    #    report draws, and the test of whether a variant's ceiling is pinned at all.
    healthy_curves = {n: [s.vc.curves[i] for i in s.healthy] or list(s.vc.curves) for n, s in seeds.items()}
    healthy_sigma = {n: [s.sigma[i] for i in s.healthy] or list(s.sigma) for n, s in seeds.items()}
    boots = bootstrap_fits(
        [healthy_curves[vc.variant] for vc in everyone],
        options=fopts,
        n_boot=vopts.n_boot,
        seed=vopts.seed,
        level=level,
        method=method,
        sigma=[healthy_sigma[vc.variant] for vc in everyone],
    )
    pooled = {vc.variant: b for vc, b in zip(everyone, boots, strict=True)}
    base = pooled[baseline.variant]
    base_seeds = seeds[baseline.variant]
    healthy_vc = {vc.variant: replace(vc, curves=tuple(healthy_curves[vc.variant])) for vc in everyone}
    # 3. Per-seed A, log B, log C_mid. Efficiency is compared between groups whose pooled fit has a
    #    bend (``unshaped`` empty: passed its inflection or not); ceilings between groups whose
    #    ceiling is pinned (``unpinned`` empty), both pooled over the sweep.
    unshaped = {n: _why_unshaped(healthy_vc[n], pooled[n].fit) for n in healthy_vc}
    unpinned = {n: unshaped[n] or _why_unpinned(healthy_vc[n], pooled[n].fit, fopts) for n in healthy_vc}
    est: dict[str, SeedEstimates] = {}
    for vc in everyone:
        n = vc.variant
        if seeds[n].unstable or unshaped[n]:
            continue
        e = seed_estimates(seeds[n], fopts)
        if e.a:
            est[n] = e
        else:
            unshaped[n] = unpinned[n] = f"{n}: no seed's own fit gives parameters"
    pinned = {n: e for n, e in est.items() if not unpinned[n]}
    # Each seed's variance of A from its profile likelihood: the pooled weights (and the seeds
    # the own-scatter test sees as noisy) follow how far each seed's data leave its ceiling open.
    items = [(f, c, se, a, v) for n in pinned for f, c, se, a, v in _a_items(seeds[n], pinned[n])]
    owners = [(n, j) for n in pinned for j in range(len(pinned[n].a))]
    for (n, j), v in zip(owners, profile_a_var(items, fopts, method), strict=True):
        pinned[n].a_var[j] = v
    base_floor = (baseline.variant,)

    def pool(which: str, groups: dict[str, SeedEstimates], known_sd: float | None = None) -> Pooled:
        vals = {n: getattr(e, which) for n, e in groups.items()}
        spent = 0
        if known_sd is None and all(len(seeds[n].vc.seeds) == len(seeds[n].vc.curves) for n in groups):
            ids = {n: [seeds[n].vc.seeds[i] for i in e.used] for n, e in groups.items()}
            vals, spent = remove_seed_effects(vals, ids)
        var = {n: getattr(e, which + "_var") for n, e in groups.items()}
        return pool_groups(vals, var, known_sd=known_sd, own_floor=base_floor, df_spent=spent)

    pooled_a = pool("a", pinned, vopts.seed_sd)
    pooled_b = pool("log_b", est)
    pooled_c = pool("log_c_mid", est)
    a_ses = [math.sqrt(v) for e in pinned.values() for v in e.a_var if math.isfinite(v) and v > 0]
    # 4. Contrasts per variant (or a verdict that needs none).
    contrasts: dict[str, KnobContrasts] = {}
    verdicts: dict[str, Verdict] = {}
    base_note = base_seeds.note()
    for vc in variants:
        n = vc.variant
        s = seeds[n]
        var = pooled[n]
        if s.unstable or var.fit.status == "decreasing":
            why = s.unstable or f"pooled curve is decreasing: {var.fit.reason}"
            verdicts[n] = _blank(base, vc, "unstable", margin, why, var)
            continue
        if base_seeds.unstable:
            why = f"baseline is unstable ({base_seeds.unstable}); nothing sound to compare with"
            verdicts[n] = _blank(base, vc, "unfit", margin, why, var)
            continue
        if not base.fit.ok and base.fit.status != "pre-inflection":
            why = f"baseline fit is {base.fit.status}: {base.fit.reason}"
            verdicts[n] = _blank(base, vc, "unfit", margin, why, var)
            continue
        if not var.fit.ok and var.fit.status != "pre-inflection":
            why = f"variant fit is {var.fit.status}: {var.fit.reason}"
            verdicts[n] = _blank(base, vc, "unfit", margin, why, var)
            continue
        b_est = pooled_a.groups.get(baseline.variant)
        eff = (
            (Contrast.between(pooled_b, baseline.variant, n), Contrast.between(pooled_c, baseline.variant, n))
            if n in est and baseline.variant in est
            else (None, None)
        )
        if n in pinned and b_est is not None:
            contrasts[n] = KnobContrasts(Contrast.between(pooled_a, baseline.variant, n), eff[0], eff[1])
            continue
        if b_est is not None and unpinned[n]:
            # The late level (each seed's mean over its last points) bounds a rising curve's A
            # from below: "the ceiling rises" is still decidable against a measured baseline.
            level_v, level_se = late_level(healthy_vc[n], healthy_sigma[n])
            if math.isfinite(level_v):
                n_v = len(s.healthy)
                se_seed = pooled_a.seed_sd / math.sqrt(n_v) if math.isfinite(pooled_a.seed_sd) else 0.0
                se = math.sqrt(max(level_se, se_seed) ** 2 + b_est.var)
                bound = Contrast(level_v - b_est.mean, se, float(pooled_a.df))
                contrasts[n] = KnobContrasts(bound, eff[0], eff[1], lower_bound=True, why=unpinned[n])
                continue
        if eff[0] is not None:
            # No ceiling to compare (the baseline's is not pinned), but efficiency can still be.
            contrasts[n] = KnobContrasts(None, eff[0], eff[1], why=unpinned[baseline.variant] or unpinned[n])
            continue
        why_unpinned = unpinned[baseline.variant] or unpinned[n] or "no ceiling could be measured"
        verdicts[n] = _blank(
            base, vc, "undecided", margin,
            f"{why_unpinned}: its ceiling is not measured at the compute reached; train further (or "
            "evaluate more often late) before judging this knob" + base_note + s.note(),
            var, pending="compute",
        )  # fmt: skip
    # 5. Claims, with false-discovery control over the sweep's knobs (every knob counts: one that
    #    could not be judged enters with p = 1).
    names = [vc.variant for vc in variants]
    claims = judge({n: contrasts.get(n, KnobContrasts(None)) for n in names}, margin, thr, level)
    a_base_est = pooled_a.groups.get(baseline.variant)
    a_base = a_base_est.mean if a_base_est is not None else base.fit.a
    b_base_est = pooled_b.groups.get(baseline.variant)
    b0 = math.exp(b_base_est.mean) if b_base_est is not None else base.fit.b
    fdr = f"false-discovery control over {len(names)} knobs"
    for vc in variants:
        n = vc.variant
        if n in verdicts:
            continue
        kc, cl = contrasts[n], claims[n]
        verdicts[n] = _verdict(vc, kc, cl, pooled[n], base, a_base, b0, pooled_a, vopts, fdr)
        verdicts[n] = replace(
            verdicts[n],
            reason=verdicts[n].reason
            + base_note
            + seeds[n].note()
            + _extrapolation_note([(baseline, base.fit.a), (vc, pooled[n].fit.a)], margin),
        )
    seeds_now = (
        min(len(base_seeds.healthy), *(len(seeds[n].healthy) for n in names))
        if names
        else len(base_seeds.healthy)
    )
    ordered = [
        _with_power(verdicts[vc.variant], contrasts.get(vc.variant), vopts, seeds_now, level)
        for vc in variants
    ]
    return SweepAnalysis(
        run_fits,
        pooled,
        pooled_a.seed_sd,
        margin,
        ordered,
        margin_source="configured",
        noise_a=_typical_a_se(a_ses),
        noise_sources=sources,
        seeds=min(len(vc.curves) for vc in everyone),
        df=pooled_a.df,
        r0=r0 if r0 is not None else _NAN,
        r0_source=r0_source,
        pooled={"a": pooled_a, "log_b": pooled_b, "log_c_mid": pooled_c},
    )


def _verdict(
    vc: VariantCurves,
    kc: KnobContrasts,
    cl: KnobClaims,
    var: BootstrapResult,
    base: BootstrapResult,
    a_base: float,
    b0: float,
    pooled_a: Pooled,
    vopts: VerdictOptions,
    fdr: str,
) -> Verdict:
    """One judged variant's verdict, numbers and reason. ``kc.a`` is a measured dA, a lower bound
    on it (``kc.lower_bound``: the variant's ceiling is not pinned) or None (the baseline's is not)."""
    margin, level = vopts.margin, vopts.level
    level2 = 1.0 - (1.0 - level) / 2.0
    thr = math.log1p(vopts.min_rel_effect)
    a, b, c = kc.a, kc.log_b, kc.log_c_mid
    measured = a is not None and a.ok and not kc.lower_bound
    # The ceiling, in words.
    if a is None or not a.ok:
        d_a, lo, hi, a_var = _NAN, _NAN, _NAN, var.fit.a
        a_txt = f"{kc.why or 'a ceiling is not pinned'}: no dA"
    elif kc.lower_bound:
        d_a, (lo, _), hi, a_var = a.d, a.ci(level), _NAN, a_base + a.d
        a_txt = (
            f"{kc.why}, so its ceiling is only bounded: its late level (a lower bound on A) less the "
            f"baseline's A is {a.d:+.3f}, at least {lo:+.3f} at {level:.0%}"
        )
    else:
        (lo, hi), d_a, a_var = a.ci(level), a.d, a_base + a.d
        seed_txt = (
            f"normal, seed sd of A {vopts.seed_sd:.3f} given"
            if vopts.seed_sd is not None
            else f"t({a.df:.0f}) over seeds, seed sd of A {pooled_a.seed_sd:.3f}"
        )
        a_txt = f"dA {_fmt(a.d, lo, hi)} ({seed_txt})"
    # Efficiency, in words and in B's units.
    if b is not None and c is not None and b.ok and c.ok:
        blo, bhi = b.ci(level2)
        clo, chi = c.ci(level2)
        b_var, d_b = b0 * _exp(b.d), b0 * _expm1(b.d)
        d_b_lo, d_b_hi = b0 * _expm1(blo), b0 * _expm1(bhi)
        d_c, d_c_lo, d_c_hi = c.d, clo, chi
        eff_txt = (
            f"dlogB {_fmt(b.d, blo, bhi)}, dlogC_mid {_fmt(c.d, clo, chi)} ({level2:.1%} each) "
            f"vs +/-{thr:.3f}"
        )
        mde_b = b0 * _expm1(thr + (_tq(b.df, level2) + _NORMAL.inv_cdf(vopts.power)) * b.se)
    else:
        b_var, d_b, d_b_lo, d_b_hi = var.fit.b, _NAN, _NAN, _NAN
        d_c = d_c_lo = d_c_hi = _NAN
        eff_txt = "efficiency not compared (a fit with no bend, or no seed's fit gave B and C_mid)"
        mde_b = _NAN
    p_c, p_e = cl.prob_ceiling, cl.prob_efficiency
    if cl.mover:
        how = "rises" if d_a > 0 else "drops"
        shown = "beyond" if measured else "already beyond"
        reason = f"the ceiling {how}: {a_txt}, {shown} the margin {margin:.3f} (P {p_c:.2f}; {fdr})"
        if not measured:
            reason += "; how far is unknown"
        reason += (
            f"; efficiency differs too (both): {eff_txt} (P {p_e:.2f})"
            if cl.efficiency
            else f"; efficiency: {eff_txt} (P it differs {p_e:.2f})"
        )
    elif cl.efficiency:
        ceiling = f"{a_txt} vs margin {margin:.3f} (P it moves {p_c:.2f})" if measured else a_txt
        reason = (
            f"efficiency differs: {eff_txt} (P {p_e:.2f}; {fdr}); the ceiling is not shown to move: {ceiling}"
        )
    elif cl.no_effect:
        reason = (
            f"equivalent: {a_txt} lies inside +/-{margin:.3f} and {eff_txt}, both inside "
            f"(P {cl.prob_no_effect:.2f}; {fdr})"
        )
    elif measured:
        reason = (
            f"not decided: {a_txt} vs margin {margin:.3f} (P the ceiling moves {p_c:.2f}); {eff_txt} "
            f"(P efficiency differs {p_e:.2f}); nothing shown at false-discovery rate {1 - level:.0%} "
            f"over {fdr.split(' over ')[-1]}"
        )
    else:
        reason = (
            f"{a_txt}, not shown beyond the margin {margin:.3f}; {eff_txt} (P efficiency differs "
            f"{p_e:.2f}); train further before judging this knob's ceiling"
        )
    efficiency = "differs" if cl.efficiency else ("same" if cl.no_effect else "")
    pending = "" if cl.verdict != "undecided" else ("seeds" if measured else "compute")
    return Verdict(
        vc.knob, vc.variant, vc.alternative, cl.verdict, a_base, a_var, d_a, lo, hi,  # type: ignore[arg-type]
        b0, b_var, d_b, d_b_lo, d_b_hi, margin, reason, d_c, d_c_lo, d_c_hi, mde_b=mde_b,
        pending=pending, p_value=cl.best_p, efficiency=efficiency, p_ceiling=p_c,
        p_efficiency=p_e if b is not None else _NAN, p_no_effect=cl.prob_no_effect if measured else _NAN,
    )  # fmt: skip


def _with_power(
    v: Verdict, kc: KnobContrasts | None, vopts: VerdictOptions, seeds_now: int, level: float
) -> Verdict:
    """The smallest |dA| the sweep detects with ``vopts.power``, the seeds that would decide an
    undecided knob, and the sweep's power targets, added to a judged verdict."""
    if kc is None or kc.a is None or not kc.a.ok or kc.lower_bound:
        return v
    a, margin = kc.a, vopts.margin
    mde_a = margin + (_tq(a.df, level) + _NORMAL.inv_cdf(vopts.power)) * a.se
    reason = v.reason
    if v.verdict == "undecided":
        need = a.seeds_to_clear(margin, seeds_now, level, vopts.power)
        need_txt = (
            f"~{need} seeds per variant would decide dA at this noise (now {seeds_now})"
            if need is not None
            else "dA sits on the margin: no seed count decides it"
        )
        reason += (
            f"; the smallest |dA| this sweep detects with {vopts.power:.0%} power is {mde_a:.3f}; {need_txt}"
        )
    return replace(
        v,
        reason=reason,
        mde_a=mde_a,
        power_note=_power_note(vopts, a, margin, seeds_now, level),
        seeds_for_a=_seeds_for_target(vopts, a, margin, seeds_now, level),
    )


def _seeds_for_target(
    vopts: VerdictOptions, a: Contrast, margin: float, seeds_now: int, level: float
) -> int | None:
    """Seeds per variant at which a true |dA| of the sweep's ``power.detect_d_a`` would be
    shown beyond the margin with the stated power (None: not asked, or not reachable)."""
    target = vopts.detect_d_a
    if target is None or not a.ok or target <= margin:
        return None
    return Contrast(target, a.se, a.df).seeds_to_clear(margin, seeds_now, level, vopts.power)


def _power_note(vopts: VerdictOptions, a: Contrast, margin: float, seeds_now: int, level: float) -> str:
    target = vopts.detect_d_a
    if target is None:
        return ""
    if target <= margin:
        return f"|dA| {target:g} is not above the margin ({margin:.3f}): no seed count shows it beyond"
    n = _seeds_for_target(vopts, a, margin, seeds_now, level)
    if n is None:
        return f"|dA| {target:g}: its noise could not be measured"
    return f"|dA| {target:g} needs {n} seed(s) per variant (now {seeds_now})"

"""Knob verdicts: does a LOO variant move the ceiling, shape the efficiency, or do nothing?

For each variant against the baseline (same metric, same compute axis), DESIGN.md §5:

- ``unstable``: a seed diverged (non-finite values) or collapsed, or the pooled curve decreases.
  A collapse is a sustained drop that is significant against the points' measurement noise
  (:mod:`scalerl.harness.analysis.noise`), never a fixed threshold: the mean of the last window (the last
  ``tail_fraction`` = 20% of the points, at least ``smooth`` = 5) lies below the highest earlier
  window mean by more than ``z_K`` combined standard errors, where ``z_K`` is the one-sided normal
  quantile at ``collapse_alpha / K`` (0.001, Bonferroni over the K candidate peak windows, since
  the peak is the maximum of K noisy means), AND the drop persists: the last half-window alone
  is still below the peak at one-sided 95%, AND the drop is at least ``collapse_drop`` (0.02, the
  paper's margin: a smaller drop cannot change a verdict). A point's SE is its binomial SE when
  its sample count is known, replaced by the curve's residual scatter where that is over 1.5x
  larger (a curve that moves more from point to point than sampling explains is judged against
  what it shows). Under pure
  binomial noise a smooth curve is called collapsed in well under 1% of draws (tested).
- ``unfit``: the pooled baseline or variant curve cannot be fitted (too few points, flat,
  pre-inflection, optimiser failure), or the baseline itself is unstable; the reason says which.
- ``asymptote-mover``: ``|A_variant - A_base| > margin``, where margin is the largest of the
  configured margin (default 0.02), the measured seed noise on A (the pooled per-seed sd), and
  the uncertainty on one run's A that its points' measurement noise implies (the mean over
  healthy runs of the linearised weighted-least-squares SE of A, see ``_typical_a_se``);
  ``SweepAnalysis.margin_source`` and every reason say which one set it. AND the bootstrap
  interval of dA excludes zero. The second condition matters when the seed noise cannot be measured (one
  seed): a 0.023 gap whose interval is [-0.085, +0.041] is not a detected ceiling shift, so such a
  variant goes on to the efficiency test and its reason says why it was not called a mover.
- ``efficiency-shaper``: A not shown to move, and after refitting both pooled curves with A fixed
  at their mean (the paper's rule) ``B_variant - B_base`` or ``log C_mid_variant - log C_mid_base``
  is beyond its bootstrap uncertainty: the interval (Bonferroni-adjusted for the two tests, so
  97.5% each at the default level) excludes zero, and the change is at least ``min_rel_effect``
  (10% of B, or C_mid moving by a factor of 1.1), so that a tight interval on a trivial change
  does not make a shaper.
- ``no-effect``: neither.
- ``undecided``: a pooled ceiling is not measured: the baseline's or the variant's fit has not
  passed its inflection, or its A lies more than max(0.05, 2 x margin) above anything its curves
  reached. Comparing such an A would turn the fit's guess about unspent compute into a verdict
  (on the demo's 300-step curves those guesses flipped between seed sets). One conclusion is
  still sound: a variant whose *late level* (the mean of each seed's last ``LATE_SHARE`` of
  points, a lower bound on a rising curve's A), less z standard errors, is above the baseline's
  A upper bound plus the margin is an ``asymptote-mover`` by that lower bound. Otherwise the
  reason gives the late level against the baseline's A and says to train further.

A mover's or shaper's reason ends with ``note: extrapolated ceiling (...)`` when a fitted A lies
far above the highest value its curves reached: the verdict stands, but that A is a forecast.

Fits are weighted by the points' standard errors (1/SE^2). Every verdict that compared two fits
states its power: ``mde_a`` / ``mde_b``, the smallest |dA| / |dB| this sweep would detect with 80%
probability at its seeds and noise (:mod:`scalerl.harness.analysis.power`); a ``no-effect`` reason reads
"no effect larger than |dA| X, |dB| Y".

Every verdict carries dA with its 95% CI (from the free fits), dB with its CI (for non-movers
from the fixed-A refits, at the Bonferroni 97.5% level of the test; for movers from the free
fits, 95%), and the margin, so a reader can disagree. The seed noise is measured only on
variants that are not unstable (a collapsed seed says nothing about healthy seed-to-seed spread)
and only on seeds whose fit pins its ceiling (``_pins_ceiling``: not at the bound, at most
``PINNED_A_TOLERANCE`` above the run's highest value; an extrapolated A is not a measurement);
the measurement-noise SE of A is averaged over the same seeds.
All fits of a sweep (per-seed, pooled, bootstraps, fixed-A refits) run as a few batched calls.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.curve import FitOptions, FloatArray, SigmoidFit, prepare
from scalerl.harness.analysis.fitters import Curve, Fitter, fit_sigmoid_many
from scalerl.harness.analysis.noise import NoiseSource, point_se, residual_se, window_se
from scalerl.harness.analysis.power import DEFAULT_POWER, mde, seeds_for
from scalerl.harness.analysis.uncertainty import (
    DEFAULT_BOOT,
    BootstrapResult,
    bootstrap_fits,
    diff_ci,
    seed_noise,
)

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


_NORMAL = NormalDist()
OVERDISPERSED = 1.5  # residual scatter / binomial SE above which the scatter is the noise


def collapse(compute: ArrayLike, values: ArrayLike, se: ArrayLike, opts: VerdictOptions) -> tuple[bool, str]:
    """(collapsed?, how) for one finite curve with per-point SEs; see the module docstring.

    ``how`` describes the largest drop even when it is not a collapse (empty when the curve is
    too short to judge: fewer than two windows of points).
    """
    order = np.argsort(np.asarray(compute, dtype=np.float64), kind="stable")
    vals = np.asarray(values, dtype=np.float64)[order]
    sd = np.asarray(se, dtype=np.float64)[order]
    # Overdispersion: a curve that scatters clearly more than sampling explains (policy noise
    # between evaluations) is judged against the scatter it shows. "Clearly": the residual
    # estimate from ~30 points has a ~20% relative spread (more where a collapse step touches a
    # few pseudo-residuals), so only a ratio above OVERDISPERSED (1.5; 1% of pure-binomial draws
    # of the demo's curve exceed it) replaces the binomial SE: below it, noise in the estimate
    # alone would weaken the test for no reason.
    resid = residual_se(np.asarray(compute, dtype=np.float64)[order], vals)
    known = sd[np.isfinite(sd)]
    if math.isfinite(resid) and (not known.size or resid > OVERDISPERSED * float(np.median(known))):
        sd = np.where(np.isfinite(sd), np.maximum(sd, resid), resid)
    if not np.isfinite(sd).all():
        return False, ""
    size = vals.size
    width = max(opts.smooth, math.ceil(opts.tail_fraction * size))
    if size < 2 * width:
        return False, ""
    last_mean = float(vals[-width:].mean())
    last_se = window_se(sd[-width:])
    # Candidate peaks: every window that ends before the last window starts.
    kernel = np.ones(width) / width
    means = np.convolve(vals[:-width], kernel, mode="valid")
    variances = np.convolve(sd[:-width] ** 2, kernel / width, mode="valid")
    k = means.size
    j = int(np.argmax(means))
    peak, peak_se = float(means[j]), float(math.sqrt(variances[j]))
    drop = peak - last_mean
    combined = math.hypot(peak_se, last_se)
    z_k = _NORMAL.inv_cdf(1.0 - opts.collapse_alpha / k)
    z = drop / combined if combined > 0 else math.inf
    half = max(1, width // 2)
    half_drop = peak - float(vals[-half:].mean())
    persists = half_drop > _NORMAL.inv_cdf(0.95) * math.hypot(peak_se, window_se(sd[-half:]))
    collapsed = z > z_k and persists and drop > opts.collapse_drop
    how = (
        f"fell from a peak window mean of {peak:.3f} (points {j + 1}-{j + width}) to {last_mean:.3f} "
        f"over its last {width} of {size} points: a drop of {drop:.3f} = {z:.1f} standard errors "
        f"(threshold {z_k:.2f}: one-sided p < {opts.collapse_alpha:g} after {k} candidate peaks; "
        f"point noise ~{float(np.median(sd)):.2g})"
    )
    return collapsed, how


def _instability(vc: VariantCurves, sigma: Sequence[FloatArray], opts: VerdictOptions) -> str:
    """Why a variant's seeds look diverged or collapsed, or '' if they do not."""
    for i, (c, v) in enumerate(vc.curves):
        seed = vc.run_ids[i] if i < len(vc.run_ids) else f"curve {i}"
        vals = np.asarray(v, dtype=np.float64)
        bad = int((~np.isfinite(vals)).sum())
        if bad:
            return f"diverged: {bad} non-finite value(s) in {seed}"
        hit, how = collapse(c, vals, sigma[i], opts)
        if hit:
            return f"collapsed: {seed} {how}"
    return ""


def _a_se_from_noise(fit: SigmoidFit, curve: Curve, sigma: FloatArray, opts: FitOptions) -> float:
    """The SE of A that the points' measurement noise implies for one fit: the A entry of the
    linearised weighted-least-squares covariance ``(J^T W J)^-1`` over (A, B, log C_mid) at the
    fitted parameters, on the fit's windowed points (R0 held at its value). NaN if not ok."""
    if not fit.ok or not all(math.isfinite(p) for p in (fit.a, fit.b, fit.c_mid, fit.r0)):
        return math.nan
    prep = prepare(curve[0], curve[1], opts, r0_override=fit.r0, sigma=sigma)
    if prep.sigma is None or prep.x.size < 4:
        return math.nan
    x, sd = prep.x, prep.sigma
    u = (fit.c_mid / x) ** fit.b
    g = 1.0 / (1.0 + u)
    gain = fit.a - fit.r0
    jac = np.column_stack(
        [
            g,  # dR/dA
            gain * u * np.log(x / fit.c_mid) * g**2,  # dR/dB
            -gain * fit.b * u * g**2,  # dR/dlog C_mid
        ]
    )
    info = (jac / sd[:, None] ** 2).T @ jac
    try:
        cov = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        return math.nan
    var_a = float(cov[0, 0])
    return math.sqrt(var_a) if math.isfinite(var_a) and var_a > 0 else math.nan


def _typical_a_se(a_ses: Sequence[float]) -> float:
    """The mean of the runs' linearised SEs of A, the largest 10% left out when there are 10 or
    more (one run whose A is barely pinned should not set every knob's margin).

    The mean, not the median: the linearisation misses the sigmoid's curvature, so a typical run
    understates the spread of A; on the demo's shape (30 points, n=128, A=0.6) 300 draws gave a
    measured sd of A of 0.0273, a mean SE of 0.0277 and a median SE of 0.0195.
    """
    finite = np.sort(np.array([x for x in a_ses if math.isfinite(x)], dtype=np.float64))
    if not finite.size:
        return _NAN
    keep = finite[: math.ceil(0.9 * finite.size)] if finite.size >= 10 else finite
    return float(keep.mean())


def _sd(col: FloatArray) -> float:
    finite = col[np.isfinite(col)]
    return float(np.std(finite, ddof=1)) if finite.size >= 2 else math.nan


def diff_se(base: BootstrapResult, other: BootstrapResult, column: int) -> float:
    """SE of (other - base) for one parameter column from the two groups' independent replicates."""
    return math.hypot(_sd(base.samples[:, column]), _sd(other.samples[:, column]))


def _blank(
    base: BootstrapResult,
    vc: VariantCurves,
    kind: VerdictKind,
    margin: float,
    reason: str,
    var: BootstrapResult | None = None,
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
    )


def _excludes_zero(lo: float, hi: float) -> bool:
    return math.isfinite(lo) and math.isfinite(hi) and (lo > 0 or hi < 0)


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


# How far above a run's highest observed value its fitted A may sit and still count as a measured
# ceiling (the observed maximum sits above the plateau by the point noise; the same floor as the
# extrapolated-ceiling note).
PINNED_A_TOLERANCE = 0.05


def _pins_ceiling(fit: SigmoidFit, curve: Curve, opts: FitOptions) -> bool:
    """Whether one run's fit measures its ceiling rather than extrapolating it.

    The seed noise is the spread of *measured* ceilings. A per-seed A at the upper bound, or far
    above anything the run reached, is where a still-rising sigmoid says the run would go: on the
    demo's 300-step curves two such seeds (A = 1.0 and 0.74 against observed maxima of 0.75 and
    0.62) tripled the pooled sd, set a 0.089 margin and hid every knob. Those seeds still enter the
    pooled fits and their bootstrap intervals; they are only kept out of the noise floor.
    """
    if not fit.ok or not math.isfinite(fit.a):
        return False
    values = np.asarray(curve[1], dtype=np.float64)
    values = values[np.isfinite(values)]
    if not values.size:
        return False
    at_bound = fit.a >= opts.a_bounds[1] - 1e-9
    return not at_bound and fit.a - float(values.max()) <= PINNED_A_TOLERANCE


def _unpinned(vc: VariantCurves, fit: SigmoidFit, margin: float) -> str:
    """Why a pooled fit does not measure its ceiling ('' when it does): it never passed its
    inflection, or its A lies far above anything its curves reached (the extrapolated-ceiling rule:
    more than max(0.05, 2 x margin) above the highest observed value)."""
    if fit.status == "pre-inflection":
        return f"{vc.variant} has not passed its inflection (C_mid={fit.c_mid:.3g} beyond its last compute)"
    values = np.concatenate([np.asarray(v, dtype=np.float64) for _, v in vc.curves] or [np.zeros(0)])
    values = values[np.isfinite(values)]
    observed = float(values.max()) if values.size else math.nan
    if fit.ok and math.isfinite(observed) and fit.a - observed > max(0.05, 2.0 * margin):
        return f"{vc.variant}'s A={fit.a:.3f} is an extrapolation (highest observed value {observed:.3f})"
    return ""


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


def _margin(vopts: VerdictOptions, noise: float, noise_a: float) -> tuple[float, str]:
    """The largest of the configured margin, the seed noise and the measurement-noise SE of A."""
    parts = [(vopts.margin, "configured"), (noise, "seed noise"), (noise_a, "measurement noise")]
    value, source = max((p for p in parts if math.isfinite(p[0])), key=lambda p: p[0])
    return value, source


def _no_effect_tail(mde_a: float, mde_b: float, power: float) -> str:
    bits = [
        f"|dA| {mde_a:.3f}" if math.isfinite(mde_a) else "",
        f"|dB| {mde_b:.3f}" if math.isfinite(mde_b) else "",
    ]
    shown = " or ".join(b for b in bits if b)
    return f"; no effect larger than {shown} ({power:.0%} power)" if shown else ""


@dataclass(frozen=True)
class _Power:
    mde_a: float
    mde_b: float
    seeds_for_a: int | None
    seeds_for_b: int | None
    note: str


def _power(
    vopts: VerdictOptions,
    se_a: float,
    margin: float,
    se_b: float,
    alpha_b: float,
    floor_b: float,
    seeds_now: int,
) -> _Power:
    """MDEs for dA (the mover test: interval at the verdict level, floor = margin) and dB (the
    shaper test: Bonferroni-adjusted interval, floor = min_rel_effect x B), and the seeds that
    reach the sweep's targets."""
    alpha = 1.0 - vopts.level
    mde_a = mde(se_a, alpha=alpha, power=vopts.power, floor=margin)
    mde_b = mde(se_b, alpha=alpha_b, power=vopts.power, floor=floor_b)
    notes: list[str] = []
    found: list[int | None] = []
    for name, target, se, a, floor, what in (
        ("dA", vopts.detect_d_a, se_a, alpha, margin, "the margin"),
        ("dB", vopts.detect_d_b, se_b, alpha_b, floor_b, f"{vopts.min_rel_effect:.0%} of B"),
    ):
        if target is None:
            found.append(None)
            continue
        n = seeds_for(target, se, seeds_now, alpha=a, power=vopts.power, floor=floor)
        found.append(n)
        if n is not None:
            notes.append(f"|{name}| {target:g} needs {n} seed(s) per variant (now {seeds_now})")
        elif math.isfinite(se) and target <= floor:
            notes.append(f"|{name}| {target:g} is not above {what} ({floor:.3f}): no seed count reaches it")
        else:
            notes.append(f"|{name}| {target:g}: its noise could not be measured")
    return _Power(mde_a, mde_b, found[0], found[1], "; ".join(notes))


def _judge_unpinned(
    base: BootstrapResult,
    var: BootstrapResult,
    baseline: VariantCurves,
    vc: VariantCurves,
    var_sigma: Sequence[FloatArray],
    why: str,
    margin: float,
    margin_note: str,
    vopts: VerdictOptions,
) -> Verdict:
    """A verdict when a ceiling is not measured: a rising variant's late level is a lower bound on
    its A, so a ceiling shift upward can still be shown (the late level, less z standard errors,
    above the baseline's A upper bound plus the margin); anything else is ``undecided``: comparing
    an extrapolated A would turn the fit's guess into a verdict, and on the demo's 300-step curves
    such guesses flipped between seed sets (bench/README.md, "Replication")."""
    level, level_se = late_level(vc, var_sigma)
    z = NormalDist().inv_cdf(0.5 + vopts.level / 2.0)
    bound = level - z * level_se
    base_hi = base.fit.a_hi if math.isfinite(base.fit.a_hi) else base.fit.a
    pinned_base = not _unpinned(baseline, base.fit, margin)
    if pinned_base and math.isfinite(bound) and bound > base_hi + margin:
        # dA: the late level's gap (a lower bound on the shift), its lower end from the bound.
        d, d_lo = level - base.fit.a, bound - base.fit.a
        return Verdict(
            vc.knob, vc.variant, vc.alternative, "asymptote-mover", base.fit.a, var.fit.a, d, d_lo, _NAN,
            base.fit.b, var.fit.b, _NAN, _NAN, _NAN, margin,
            f"the ceiling rises: {why}, but its late level {level:.3f} +/- {level_se:.3f} is a lower "
            f"bound on A, and {bound:.3f} (at {vopts.level:.0%}) is above the baseline's A upper bound "
            f"{base_hi:.3f} + margin {margin:.3f}{margin_note}; dA >= {d_lo:+.3f}, how far is unknown",
        )  # fmt: skip
    return _blank(
        base, vc, "undecided", margin,
        f"{why}: its ceiling is not measured at the compute reached; the variant's late level is "
        f"{level:.3f} +/- {level_se:.3f} against the baseline's A {base.fit.a:.3f} [{base.fit.a_lo:.3f}, "
        f"{base_hi:.3f}]; train further (or add seeds) before judging this knob",
        var,
    )  # fmt: skip


def classify(
    baseline: VariantCurves,
    variants: Sequence[VariantCurves],
    *,
    options: FitOptions | None = None,
    verdict_options: VerdictOptions | None = None,
    method: str | Fitter = "fast",
) -> SweepAnalysis:
    """Fit every run and every pooled variant, measure the noise, and judge each variant."""
    opts = options or FitOptions()
    vopts = verdict_options or VerdictOptions()
    everyone = [baseline, *variants]
    # 0. Every point's standard error (binomial where n is known, else from the curve's scatter).
    sigma: dict[str, list[FloatArray]] = {}
    sources: dict[str, NoiseSource] = {}
    for vc in everyone:
        per_curve = [point_se(c, v, vc.counts(i)) for i, (c, v) in enumerate(vc.curves)]
        sigma[vc.variant] = [se for se, _ in per_curve]
        kinds = {src for _, src in per_curve}
        sources[vc.variant] = kinds.pop() if len(kinds) == 1 else "mixed"
    # 1. Per-seed fits (one batch, weighted by 1/SE^2): the seed-noise floor on A.
    flat_curves = [c for vc in everyone for c in vc.curves]
    flat_sigma: list[ArrayLike | None] = [se for vc in everyone for se in sigma[vc.variant]]
    flat_fits = fit_sigmoid_many(flat_curves, options=opts, method=method, sigma=flat_sigma)
    run_fits: dict[str, SigmoidFit] = {}
    by_variant: dict[str, list[SigmoidFit]] = {}
    k = 0
    for vc in everyone:
        fits = flat_fits[k : k + len(vc.curves)]
        k += len(vc.curves)
        by_variant[vc.variant] = list(fits)
        for i, f in enumerate(fits):
            run_fits[vc.run_ids[i] if i < len(vc.run_ids) else f"{vc.variant}#{i}"] = f
    # Seeds of a diverged or collapsed variant say nothing about the noise of healthy runs.
    unstable = {vc.variant: _instability(vc, sigma[vc.variant], vopts) for vc in everyone}
    noise = seed_noise(
        {
            vc.variant: [
                f for f, c in zip(by_variant[vc.variant], vc.curves, strict=True) if _pins_ceiling(f, c, opts)
            ]
            for vc in everyone
            if not unstable[vc.variant]
        }
    )
    a_ses = [
        _a_se_from_noise(f, c, se, opts)
        for vc in everyone
        if not unstable[vc.variant]
        for f, c, se in zip(by_variant[vc.variant], vc.curves, sigma[vc.variant], strict=True)
        if _pins_ceiling(f, c, opts)  # an extrapolated A's huge SE says nothing about the noise
    ]
    noise_a = _typical_a_se(a_ses)
    margin, margin_source = _margin(vopts, noise, noise_a)
    margin_note = f" ({margin_source})"
    # 2. Pooled fits with bootstrap CIs (one batch for all variants).
    boots = bootstrap_fits(
        [vc.curves for vc in everyone],
        options=opts,
        n_boot=vopts.n_boot,
        seed=vopts.seed,
        level=vopts.level,
        method=method,
        sigma=[sigma[vc.variant] for vc in everyone],
    )
    pooled = {vc.variant: b for vc, b in zip(everyone, boots, strict=True)}
    base = pooled[baseline.variant]
    alpha = 1.0 - vopts.level
    verdicts: dict[str, Verdict] = {}
    shaper_candidates: list[tuple[VariantCurves, BootstrapResult, float, float, float, float]] = []
    for vc in variants:
        var = pooled[vc.variant]
        if unstable[vc.variant] or var.fit.status == "decreasing":
            why = unstable[vc.variant] or f"pooled curve is decreasing: {var.fit.reason}"
            verdicts[vc.variant] = _blank(base, vc, "unstable", margin, why, var)
            continue
        if unstable[baseline.variant]:
            why = f"baseline is unstable ({unstable[baseline.variant]}); nothing sound to compare with"
            verdicts[vc.variant] = _blank(base, vc, "unfit", margin, why, var)
            continue
        # A fit that has not passed its inflection, or whose A is far above its data, has not
        # measured its ceiling: judged on what was observed, never on the extrapolated A.
        unpinned = _unpinned(baseline, base.fit, margin) or _unpinned(vc, var.fit, margin)
        if unpinned:
            verdicts[vc.variant] = _judge_unpinned(
                base, var, baseline, vc, sigma[vc.variant], unpinned, margin, margin_note, vopts
            )
            continue
        if not base.fit.ok:
            verdicts[vc.variant] = _blank(
                base, vc, "unfit", margin, f"baseline fit is {base.fit.status}: {base.fit.reason}", var
            )
            continue
        if not var.fit.ok:
            verdicts[vc.variant] = _blank(
                base, vc, "unfit", margin, f"variant fit is {var.fit.status}: {var.fit.reason}", var
            )
            continue
        d_a, d_a_lo, d_a_hi = diff_ci(base, var, 1, vopts.level)
        seeds_now = min(len(baseline.curves), len(vc.curves))
        if abs(d_a) > margin and _excludes_zero(d_a_lo, d_a_hi):
            d_b, d_b_lo, d_b_hi = diff_ci(base, var, 2, vopts.level)
            pw = _power(
                vopts,
                diff_se(base, var, 1),
                margin,
                diff_se(base, var, 2),
                alpha,
                vopts.min_rel_effect * base.fit.b,
                seeds_now,
            )
            verdicts[vc.variant] = Verdict(
                vc.knob,
                vc.variant,
                vc.alternative,
                "asymptote-mover",
                base.fit.a,
                var.fit.a,
                d_a,
                d_a_lo,
                d_a_hi,
                base.fit.b,
                var.fit.b,
                d_b,
                d_b_lo,
                d_b_hi,
                margin,
                f"|dA|={abs(d_a):.3f} > margin {margin:.3f}{margin_note}: the ceiling "
                f"{'rises' if d_a > 0 else 'drops'} (B from the free fits)"
                + _extrapolation_note([(baseline, base.fit.a), (vc, var.fit.a)], margin),
                mde_a=pw.mde_a,
                mde_b=pw.mde_b,
                seeds_for_a=pw.seeds_for_a,
                seeds_for_b=pw.seeds_for_b,
                power_note=pw.note,
            )
            continue
        shaper_candidates.append((vc, var, d_a, d_a_lo, d_a_hi, 0.5 * (base.fit.a + var.fit.a)))
    # 3. Efficiency: refit baseline and variant with A fixed at their mean (one batch for all).
    if shaper_candidates:
        groups: list[tuple[Curve, ...]] = []
        group_sigma: list[list[FloatArray]] = []
        fixed: list[float] = []
        for vc, _, _, _, _, a_mean in shaper_candidates:
            groups += [baseline.curves, vc.curves]
            group_sigma += [sigma[baseline.variant], sigma[vc.variant]]
            fixed += [a_mean, a_mean]
        refits = bootstrap_fits(
            groups,
            options=opts,
            n_boot=vopts.n_boot,
            seed=vopts.seed + 1,
            level=vopts.level,
            fixed_a=fixed,
            method=method,
            sigma=group_sigma,
        )
        for j, (vc, var, d_a, d_a_lo, d_a_hi, a_mean) in enumerate(shaper_candidates):
            rb, rv = refits[2 * j], refits[2 * j + 1]
            if not (rb.fit.ok and rv.fit.ok):
                bad = rb if not rb.fit.ok else rv
                why = f"refit at A={a_mean:.3f} is {bad.fit.status}: {bad.fit.reason}"
                verdicts[vc.variant] = _blank(base, vc, "unfit", margin, why)
                continue
            # Two tests (B and C_mid): Bonferroni keeps the family's false-positive rate at 1-level.
            level2 = 1.0 - (1.0 - vopts.level) / 2.0
            d_b, d_b_lo, d_b_hi = diff_ci(rb, rv, 2, level2)
            d_c, d_c_lo, d_c_hi = diff_ci(rb, rv, 3, level2, transform="log")
            pw = _power(
                vopts,
                diff_se(base, var, 1),
                margin,
                diff_se(rb, rv, 2),
                1.0 - level2,
                vopts.min_rel_effect * rb.fit.b,
                min(len(baseline.curves), len(vc.curves)),
            )
            b_moves = _excludes_zero(d_b_lo, d_b_hi) and abs(d_b) > vopts.min_rel_effect * rb.fit.b
            c_moves = _excludes_zero(d_c_lo, d_c_hi) and abs(d_c) > math.log1p(vopts.min_rel_effect)
            kind: VerdictKind = "efficiency-shaper" if (b_moves or c_moves) else "no-effect"
            detail = (
                f"at common A={a_mean:.3f}: dB={d_b:+.3f} [{d_b_lo:+.3f}, {d_b_hi:+.3f}], "
                f"dlogC_mid={d_c:+.3f} [{d_c_lo:+.3f}, {d_c_hi:+.3f}]"
            )
            if abs(d_a) > margin:
                a_part = (
                    f"|dA|={abs(d_a):.3f} > margin {margin:.3f}{margin_note} but its CI "
                    f"[{d_a_lo:+.3f}, {d_a_hi:+.3f}] includes 0 (no detected ceiling shift); "
                )
            else:
                a_part = f"|dA|={abs(d_a):.3f} <= margin {margin:.3f}{margin_note}; "
            head = a_part + (
                "efficiency differs beyond bootstrap uncertainty, "
                if kind != "no-effect"
                else "no efficiency difference beyond bootstrap uncertainty, "
            )
            tail = _no_effect_tail(pw.mde_a, pw.mde_b, vopts.power) if kind == "no-effect" else ""
            verdicts[vc.variant] = Verdict(
                vc.knob,
                vc.variant,
                vc.alternative,
                kind,
                base.fit.a,
                pooled[vc.variant].fit.a,
                d_a,
                d_a_lo,
                d_a_hi,
                rb.fit.b,
                rv.fit.b,
                d_b,
                d_b_lo,
                d_b_hi,
                margin,
                head
                + detail
                + tail
                + _extrapolation_note([(baseline, base.fit.a), (vc, pooled[vc.variant].fit.a)], margin),
                d_c,
                d_c_lo,
                d_c_hi,
                mde_a=pw.mde_a,
                mde_b=pw.mde_b,
                seeds_for_a=pw.seeds_for_a,
                seeds_for_b=pw.seeds_for_b,
                power_note=pw.note,
            )
    ordered = [verdicts[vc.variant] for vc in variants]
    return SweepAnalysis(
        run_fits,
        pooled,
        noise,
        margin,
        ordered,
        margin_source=margin_source,
        noise_a=noise_a,
        noise_sources=sources,
        seeds=min(len(vc.curves) for vc in everyone),
    )

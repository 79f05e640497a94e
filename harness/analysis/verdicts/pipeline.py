"""Knob verdicts: :func:`classify`, the steps that turn a sweep's curves into each knob's evidence.

The decision itself is :mod:`.rule` (:func:`.rule.decide` per knob, :func:`.rule.claims` over the
sweep; its docstring is the rule's contract); this module prepares what it judges and renders
what it found. Each variant is compared with the baseline (same metric, same compute axis) by
intervals at the sweep's level (``VerdictOptions.level``, 95%), in the stages :func:`classify`
runs in order:

1. **Noise and seeds.** Every point has its standard error (binomial where its sample count is
   known, else the curve's residual scatter). Every run is fitted on its own (weighted least
   squares), with one R0 for the whole sweep (:func:`.ceiling.shared_r0`: the runs' step-0
   evaluations, else the median of the runs' fitted starts). Each seed is judged
   (:mod:`.collapse`): a diverged or collapsed seed is set aside and *named in the verdict*, which
   is judged on the remaining seeds; only when more than half of a variant's seeds fail is it
   ``unstable`` (a baseline that fails makes every verdict ``unfit``). A seed that overshot and
   settled is kept and noted.
2. **What each variant's pooled fit measures** (all its healthy seeds' points; the report draws it
   with bootstrap bands). Its efficiency, when the fit has passed its inflection with a bend
   (:func:`.ceiling.why_unshaped`: C_mid inside the data, B of at least 0.3). Its ceiling, when it
   has also made at least 60% of its gain by its fit, below A's bound
   (:func:`.ceiling.why_unpinned`): a curve still rising at the end is extrapolated by its fit, as
   the paper uses its fits, and what the extrapolation leaves open shows in the seeds' scatter and
   their profile likelihoods, never in a veto. A variant whose ceiling is not pinned is compared by
   its late level, a lower bound on its A ("the ceiling rises" can still be shown); its efficiency
   is still compared once it has passed its inflection. Only the
   baseline's own ceiling, when it is not pinned, leaves its knobs without dA.
3. **Per-seed parameters, pooled over the sweep.** Each seed's own fit gives A, log B and log
   C_mid (:func:`.ceiling.seed_estimates`) with their sampling variances: A's from the seed's
   profile likelihood (:func:`.ceiling.profile_a_var`, which sees a ceiling left open upward),
   log B's and log C_mid's linearised. Variants run at the same seed numbers share each seed's
   effect (the data order, the sampling streams): it is taken out
   (:func:`.inference.remove_seed_effects`, a randomized block design; it costs its degrees of
   freedom). Each parameter is then pooled over the sweep's groups by
   :func:`.inference.pool_groups` (random effects, Hartung-Knapp scale, seeds - groups - seed
   effects degrees of freedom, a group's own scatter where it is significantly larger, the
   baseline never below its own seeds' scatter); a contrast is a variant's weighted seed mean
   less the baseline's with a t interval.
4. **The rule**: :func:`.rule.decide` on each knob's :class:`.rule.Evidence`, then
   :func:`.rule.claims` over the sweep (Benjamini-Hochberg per claim at false-discovery rate
   1 - level; the probability of each claim).
5. **The verdict** (:mod:`.explain` words it): dA with its interval (or its lower bound), dB in
   B's units (the log-scale interval times the baseline's B), d log C_mid with its interval, the
   probability of each claim, the smallest |dA| the sweep detects with 80% power and the seeds
   per variant that would decide an undecided knob (:func:`.power.seeds_to_decide`, the number
   every message prints), and the evidence itself, so a reader can disagree.

Error rates, power beside a pooled-seed t reference, and the probabilities' calibration against
known truth: bench/README.md, "Verdicts against known truth".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.bootstrap import BootstrapResult, bootstrap_fits
from scalerl.harness.analysis.fit.curve import FitOptions, FloatArray, SigmoidFit
from scalerl.harness.analysis.fit.fitters import Fitter, fit_sigmoid_many
from scalerl.harness.analysis.groups import VariantCurves
from scalerl.harness.analysis.noise.point import NoiseSource, point_se
from scalerl.harness.analysis.verdicts import explain
from scalerl.harness.analysis.verdicts.ceiling import (
    SeedEstimates,
    a_items,
    late_level,
    profile_a_var,
    seed_estimates,
    shared_r0,
    typical_a_se,
    why_unpinned,
    why_unshaped,
)
from scalerl.harness.analysis.verdicts.inference import Contrast, Pooled, pool_groups, remove_seed_effects
from scalerl.harness.analysis.verdicts.power import mde, seeds_needed, seeds_to_decide
from scalerl.harness.analysis.verdicts.rule import Claim, Evidence, Findings, claims, decide
from scalerl.harness.analysis.verdicts.seeds import SeedGroup, judge_seeds
from scalerl.harness.analysis.verdicts.types import SweepAnalysis, Verdict, VerdictKind, VerdictOptions

_NAN = math.nan


def classify(
    baseline: VariantCurves,
    variants: Sequence[VariantCurves],
    *,
    options: FitOptions | None = None,
    verdict_options: VerdictOptions | None = None,
    method: str | Fitter = "fast",
) -> SweepAnalysis:
    """Fit every run, pool the seeds, and judge each variant (the module docstring's stages)."""
    s = _fit_seeds(baseline, variants, options or FitOptions(), verdict_options or VerdictOptions(), method)
    _pool_fits(s)
    _measure(s)
    _pool_seeds(s)
    evidence, blanks = _contrast(s)
    names = [vc.variant for vc in variants]
    rulings = {n: decide(evidence[n]) if n in evidence else None for n in names}
    found = claims(rulings, s.vopts.level)
    verdicts = blanks | {n: _verdict(s, n, found[n], len(names)) for n in evidence}
    return SweepAnalysis(
        s.run_fits,
        s.pooled,
        s.pooled_a.seed_sd,
        s.vopts.margin,
        [verdicts[vc.variant] for vc in variants],
        margin_source="configured",
        noise_a=typical_a_se([x for x in s.a_ses if math.isfinite(x)]),
        noise_sources=s.sources,
        seeds=min(len(vc.curves) for vc in s.everyone),
        df=s.pooled_a.df,
        r0=s.r0 if s.r0 is not None else _NAN,
        r0_source=s.r0_source,
        pooled={"a": s.pooled_a, "log_b": s.pooled_b, "log_c_mid": s.pooled_c},
    )


@dataclass
class _Sweep:
    """What the stages share: the inputs, then what each stage adds."""

    baseline: VariantCurves
    variants: Sequence[VariantCurves]
    vopts: VerdictOptions
    fopts: FitOptions  # the caller's options with the sweep's shared R0
    method: str | Fitter
    r0: float | None
    r0_source: str
    sources: dict[str, NoiseSource]
    run_fits: dict[str, SigmoidFit]
    seeds: dict[str, SeedGroup]
    # Stage 2: pooled fits over each variant's healthy seeds, what each measures.
    pooled: dict[str, BootstrapResult] = field(default_factory=dict)
    healthy_sigma: dict[str, list[FloatArray]] = field(default_factory=dict)
    healthy_vc: dict[str, VariantCurves] = field(default_factory=dict)
    unshaped: dict[str, str] = field(default_factory=dict)  # why no efficiency ('' when measured)
    unpinned: dict[str, str] = field(default_factory=dict)  # why no ceiling ('' when pinned)
    # Stage 3: per-seed estimates and their pooling over the sweep.
    est: dict[str, SeedEstimates] = field(default_factory=dict)  # every group with a bend
    pinned: dict[str, SeedEstimates] = field(default_factory=dict)  # ... whose ceiling is pinned
    pooled_a: Pooled = field(default_factory=lambda: Pooled({}, _NAN, _NAN, 0))
    pooled_b: Pooled = field(default_factory=lambda: Pooled({}, _NAN, _NAN, 0))
    pooled_c: Pooled = field(default_factory=lambda: Pooled({}, _NAN, _NAN, 0))
    a_ses: list[float] = field(default_factory=list)
    why: dict[str, str] = field(default_factory=dict)  # stage 4: why a knob's dA is a bound / missing

    @property
    def everyone(self) -> list[VariantCurves]:
        return [self.baseline, *self.variants]

    @property
    def base(self) -> BootstrapResult:
        return self.pooled[self.baseline.variant]

    @property
    def base_seeds(self) -> SeedGroup:
        return self.seeds[self.baseline.variant]


def _fit_seeds(
    baseline: VariantCurves,
    variants: Sequence[VariantCurves],
    opts: FitOptions,
    vopts: VerdictOptions,
    method: str | Fitter,
) -> _Sweep:
    """Stage 1: every point's standard error (binomial where n is known, else the curve's
    scatter), one R0 for the sweep, every seed's own fit (one batch, weighted by 1/SE^2) and each
    seed's health."""
    everyone = [baseline, *variants]
    sigma: dict[str, list[FloatArray]] = {}
    sources: dict[str, NoiseSource] = {}
    for vc in everyone:
        per_curve = [point_se(c, v, vc.counts(i)) for i, (c, v) in enumerate(vc.curves)]
        sigma[vc.variant] = [se for se, _ in per_curve]
        kinds = {src for _, src in per_curve}
        sources[vc.variant] = kinds.pop() if len(kinds) == 1 else "mixed"
    flat_curves = [c for vc in everyone for c in vc.curves]
    flat_sigma: list[ArrayLike | None] = [se for vc in everyone for se in sigma[vc.variant]]
    r0, r0_source = shared_r0(flat_curves, opts, flat_sigma)
    fopts = opts if r0 is None else replace(opts, r0=r0)
    flat_fits = fit_sigmoid_many(flat_curves, options=fopts, method=method, sigma=flat_sigma)
    run_fits: dict[str, SigmoidFit] = {}
    seeds: dict[str, SeedGroup] = {}
    k = 0
    for vc in everyone:
        fits = list(flat_fits[k : k + len(vc.curves)])
        k += len(vc.curves)
        for i, f in enumerate(fits):
            run_fits[vc.run_ids[i] if i < len(vc.run_ids) else f"{vc.variant}#{i}"] = f
        seeds[vc.variant] = judge_seeds(vc, sigma[vc.variant], fits, vopts)
    return _Sweep(baseline, variants, vopts, fopts, method, r0, r0_source, sources, run_fits, seeds)


def _pool_fits(s: _Sweep) -> None:
    """Stage 2a: pooled fits (all healthy seeds' points together) with bootstrap bands: the curves
    the report draws, and the test of what a variant's curves measure."""
    healthy_curves = {n: [g.vc.curves[i] for i in g.healthy] or list(g.vc.curves) for n, g in s.seeds.items()}
    s.healthy_sigma = {n: [g.sigma[i] for i in g.healthy] or list(g.sigma) for n, g in s.seeds.items()}
    boots = bootstrap_fits(
        [healthy_curves[vc.variant] for vc in s.everyone],
        options=s.fopts,
        n_boot=s.vopts.n_boot,
        seed=s.vopts.seed,
        level=s.vopts.level,
        method=s.method,
        sigma=[s.healthy_sigma[vc.variant] for vc in s.everyone],
    )
    s.pooled = {vc.variant: b for vc, b in zip(s.everyone, boots, strict=True)}
    s.healthy_vc = {vc.variant: replace(vc, curves=tuple(healthy_curves[vc.variant])) for vc in s.everyone}


def _measure(s: _Sweep) -> None:
    """Stage 2b: which variants' efficiency and ceiling are measured, and each such variant's
    per-seed estimates (A's variance from each seed's profile likelihood, one batch of refits)."""
    for n, vc in s.healthy_vc.items():
        fit = s.pooled[n].fit
        s.unshaped[n] = why_unshaped(vc, fit)
        s.unpinned[n] = s.unshaped[n] or why_unpinned(vc, fit, s.fopts)
    for vc in s.everyone:
        n = vc.variant
        if s.seeds[n].unstable or s.unshaped[n]:
            continue
        e = seed_estimates(s.seeds[n], s.fopts)
        if e.a:
            s.est[n] = e
        else:
            s.unshaped[n] = s.unpinned[n] = f"{n}: no seed's own fit gives parameters"
    s.pinned = {n: e for n, e in s.est.items() if not s.unpinned[n]}
    items = [item for n, e in s.pinned.items() for item in a_items(s.seeds[n], e)]
    owners = [(n, j) for n, e in s.pinned.items() for j in range(len(e.a))]
    for (n, j), v in zip(owners, profile_a_var(items, s.fopts, s.method), strict=True):
        s.pinned[n].a_var[j] = v
    s.a_ses = [math.sqrt(v) for e in s.pinned.values() for v in e.a_var if math.isfinite(v) and v > 0]


def _pool_seeds(s: _Sweep) -> None:
    """Stage 3: each parameter's seeds, the seed effects shared by the variants taken out, pooled
    over the sweep (:mod:`.inference`; the baseline never below its own seeds' scatter)."""
    base_floor = (s.baseline.variant,)

    def pool(which: str, groups: dict[str, SeedEstimates], known_sd: float | None = None) -> Pooled:
        vals = {n: getattr(e, which) for n, e in groups.items()}
        spent = 0
        if known_sd is None and all(len(s.seeds[n].vc.seeds) == len(s.seeds[n].vc.curves) for n in groups):
            ids = {n: [s.seeds[n].vc.seeds[i] for i in e.used] for n, e in groups.items()}
            vals, spent = remove_seed_effects(vals, ids)
        var = {n: getattr(e, which + "_var") for n, e in groups.items()}
        return pool_groups(vals, var, known_sd=known_sd, own_floor=base_floor, df_spent=spent)

    s.pooled_a = pool("a", s.pinned, s.vopts.seed_sd)
    s.pooled_b = pool("log_b", s.est)
    s.pooled_c = pool("log_c_mid", s.est)


def _contrast(s: _Sweep) -> tuple[dict[str, Evidence], dict[str, Verdict]]:
    """Stage 4: each variant's evidence (dA, or a lower bound on it, or none; d log B and d log
    C_mid where both fits have a bend), or the verdict that needs none (``unstable``, ``unfit``,
    ``undecided`` when nothing can be compared)."""
    evidence: dict[str, Evidence] = {}
    blanks: dict[str, Verdict] = {}
    base, base_seeds, base_name = s.base, s.base_seeds, s.baseline.variant
    v = s.vopts
    t = math.log1p(v.min_rel_effect)
    b_est = s.pooled_a.groups.get(base_name)
    for vc in s.variants:
        n = vc.variant
        g = s.seeds[n]
        var = s.pooled[n]
        if g.unstable or var.fit.status == "decreasing":
            blanks[n] = _blank(
                s, vc, "unstable", g.unstable or f"pooled curve is decreasing: {var.fit.reason}"
            )
            continue
        why = ""
        if base_seeds.unstable:
            why = f"baseline is unstable ({base_seeds.unstable}); nothing sound to compare with"
        elif not base.fit.ok and base.fit.status != "pre-inflection":
            why = f"baseline fit is {base.fit.status}: {base.fit.reason}"
        elif not var.fit.ok and var.fit.status != "pre-inflection":
            why = f"variant fit is {var.fit.status}: {var.fit.reason}"
        if why:
            blanks[n] = _blank(s, vc, "unfit", why)
            continue
        if n in s.est and base_name in s.est:
            log_b: Contrast | None = Contrast.between(s.pooled_b, base_name, n)
            log_c: Contrast | None = Contrast.between(s.pooled_c, base_name, n)
        else:
            log_b = log_c = None
        if n in s.pinned and b_est is not None:
            a = Contrast.between(s.pooled_a, base_name, n)
            evidence[n] = Evidence(a, log_b, log_c, v.margin, t, v.level)
            continue
        if b_est is not None:
            # The late level (each seed's mean over its last points) bounds a rising curve's A
            # from below: "the ceiling rises" is still decidable against a measured baseline.
            level_v, level_se = late_level(s.healthy_vc[n], s.healthy_sigma[n])
            if math.isfinite(level_v):
                sd = s.pooled_a.seed_sd
                se_seed = sd / math.sqrt(len(g.healthy)) if math.isfinite(sd) else 0.0
                se = math.sqrt(max(level_se, se_seed) ** 2 + b_est.var)
                bound = Contrast(level_v - b_est.mean, se, float(s.pooled_a.df))
                s.why[n] = s.unpinned[n]
                evidence[n] = Evidence(bound, log_b, log_c, v.margin, t, v.level, lower_bound=True)
                continue
        why_unpinned = s.unpinned[base_name] or s.unpinned[n] or "no ceiling could be measured"
        if log_b is not None:
            # No ceiling to compare (the baseline's is not pinned), but efficiency can still be.
            s.why[n] = why_unpinned
            evidence[n] = Evidence(None, log_b, log_c, v.margin, t, v.level)
            continue
        reason = explain.unmeasured(why_unpinned) + base_seeds.note() + g.note()
        blanks[n] = _blank(s, vc, "undecided", reason, pending="compute")
    return evidence, blanks


def _verdict(s: _Sweep, n: str, found: Findings, knobs: int) -> Verdict:
    """Stage 5: one judged variant's verdict, its numbers and its reason (:mod:`.explain`)."""
    assert found.ruling is not None
    ev = found.ruling.evidence
    vc, g, vopts = s.seeds[n].vc, s.seeds[n], s.vopts
    base, var = s.base, s.pooled[n]
    margin, level = vopts.margin, vopts.level
    notes = (
        s.base_seeds.note()
        + g.note()
        + _unfitted_note(s, s.baseline.variant)
        + _unfitted_note(s, n)
        + explain.extrapolation_note([(s.baseline, base.fit.a), (vc, var.fit.a)], margin)
    )
    seeds_now = min(len(s.base_seeds.healthy), len(g.healthy))
    a_base = _a_base(s)
    a = ev.a
    if a is None or not a.ok:
        d_a = lo = hi = _NAN
        a_var = var.fit.a
    else:
        (lo, hi), d_a, a_var = a.ci(level), a.d, a_base + a.d
        if ev.lower_bound:
            hi = _NAN  # a lower bound has no upper end
    # dB in B's units: the log-scale contrast times the baseline's B (its seeds' geometric mean,
    # one number for the whole sweep); the claims are on log B (a factor, symmetric).
    b_est = s.pooled_b.groups.get(s.baseline.variant)
    b0 = math.exp(b_est.mean) if b_est is not None else base.fit.b
    if ev.efficiency_compared:
        assert ev.log_b is not None and ev.log_c is not None
        blo, bhi = ev.log_b.ci(ev.level2)
        b_var, d_b, d_b_lo, d_b_hi = (
            b0 * _exp(ev.log_b.d),
            b0 * _expm1(ev.log_b.d),
            b0 * _expm1(blo),
            b0 * _expm1(bhi),
        )
        d_c, (c_lo, c_hi) = ev.log_c.d, ev.log_c.ci(ev.level2)
        mde_b = b0 * _expm1(mde(ev.log_b, ev.efficiency, ev.level2, vopts.power))
    else:
        b_var, d_b, d_b_lo, d_b_hi = var.fit.b, _NAN, _NAN, _NAN
        d_c = c_lo = c_hi = mde_b = _NAN
    measured = ev.ceiling_measured
    mde_a = mde(a, margin, level, vopts.power) if measured and a is not None else _NAN
    kind: VerdictKind = found.verdict  # type: ignore[assignment]
    needed = seeds_to_decide(ev, seeds_now, vopts.power) if kind == "undecided" and measured else None
    a_txt = explain.a_text(ev, s.pooled_a.seed_sd, vopts.seed_sd, s.why.get(n, ""))
    reason = explain.reason(
        found,
        a_txt,
        explain.efficiency_text(ev),
        knobs,
        mde_a,
        vopts.power,
        explain.seeds_phrase(needed, seeds_now, vopts.power),
    )
    target = vopts.detect_d_a
    for_a = None
    if target is not None and measured and a is not None and target > margin:
        for_a = seeds_needed(Contrast(target, a.se, a.df), margin, seeds_now, level, vopts.power)
    p_eff = found.probability(Claim.SHAPER) if ev.efficiency_compared else _NAN
    p_same = found.probability(Claim.NO_EFFECT) if measured and ev.efficiency_compared else _NAN
    return Verdict(
        vc.knob, n, vc.alternative, kind, a_base, a_var, d_a, lo, hi,
        b0, b_var, d_b, d_b_lo, d_b_hi, margin, reason + notes, d_c, c_lo, c_hi,
        mde_a=mde_a, mde_b=mde_b,
        pending="" if kind != "undecided" else ("seeds" if measured else "compute"), p_value=found.p,
        power_note=explain.power_note(target, margin, for_a, seeds_now) if measured else "",
        seeds_for_a=for_a, evidence=ev, seeds_needed=needed, seeds_now=seeds_now,
        p_ceiling=found.probability(Claim.MOVER) if a is not None else _NAN, p_efficiency=p_eff,
        p_no_effect=p_same,
        efficiency="differs" if Claim.SHAPER in found.made else ("same" if kind == "no-effect" else ""),
    )  # fmt: skip


def _unfitted_note(s: _Sweep, n: str) -> str:
    """The healthy seeds whose own fit gave no parameters (too few points, flat): they count in
    the pooled fit but not among the seeds' estimates, and the verdict names them."""
    e = s.est.get(n)
    if e is None:
        return ""
    g = s.seeds[n]
    left = [f"{g.run(i)} ({g.fits[i].status})" for i in g.healthy if i not in e.used]
    return f"; note: no usable fit of its own, so not among {n}'s seeds: {', '.join(left)}" if left else ""


def _a_base(s: _Sweep) -> float:
    """The baseline's ceiling as every contrast uses it: its pooled seed estimate."""
    est = s.pooled_a.groups.get(s.baseline.variant)
    return est.mean if est is not None else s.base.fit.a


def _blank(s: _Sweep, vc: VariantCurves, kind: VerdictKind, reason: str, *, pending: str = "") -> Verdict:
    """A verdict without contrasts: the pooled fits' A and B, no intervals."""
    base, var = s.base, s.pooled.get(vc.variant)
    return Verdict(
        vc.knob, vc.variant, vc.alternative, kind, base.fit.a, var.fit.a if var else _NAN, _NAN, _NAN, _NAN,
        base.fit.b, var.fit.b if var else _NAN, _NAN, _NAN, _NAN, s.vopts.margin, reason, pending=pending,
    )  # fmt: skip


# exp() of a log-scale interval's end: an interval of a B that is barely identified (a curve cut
# early, looked at by stop-when-decided) can reach e^710 and beyond, which math.exp cannot hold.
_LOG_MAX = math.log(np.finfo(np.float64).max)


def _exp(x: float) -> float:
    return math.exp(x) if x < _LOG_MAX else math.inf


def _expm1(x: float) -> float:
    return math.expm1(x) if x < _LOG_MAX else math.inf

"""Knob verdicts: :func:`classify`, the steps that turn a sweep's curves into each knob's evidence.

The decision itself is one function, :func:`.rule.decide` (its docstring is the rule's contract);
this module prepares what it judges and renders what it found. Each variant is compared with the
baseline (same metric, same compute axis) by intervals at the sweep's level
(``VerdictOptions.level``, 95%), in the stages :func:`classify` runs in order:

1. **Noise and seeds.** Every point has its standard error (binomial where its sample count is
   known, else the curve's residual scatter). Every run is fitted on its own, with one R0 for the
   whole sweep (:func:`.ceiling.shared_r0`: the runs' first evaluations, when they share a start).
   Each seed is judged (:mod:`scalerl.harness.analysis.verdicts.collapse`): a diverged or collapsed seed is
   set aside and *named in the verdict*, which is judged on the remaining seeds; only when more
   than half of a variant's seeds fail is it ``unstable`` (a baseline that fails makes every
   verdict ``unfit``). A seed that overshot and settled is kept and noted.
2. **Is the ceiling measured?** Not when a pooled fit has not passed its inflection, when its A
   lies more than max(0.05, 2 x margin) above anything its curves reached, or when its curves are
   still rising at the end (:func:`.ceiling.still_rising`, a fit-free check on the last 40% of compute).
   Then comparing A would turn a guess about unspent compute into a verdict; the variant is
   ``undecided`` (what would decide it: compute), except that a rising variant's late level is a
   lower bound on its A: "the ceiling rises" can still be shown against a measured baseline.
3. **dA with a t interval.** Each seed's ceiling is one observation: its plateau level (the mean
   of its points over the last 20% of compute; its own fit's A where evaluations are log-spaced
   and too few points lie there). The seeds of every measured group are pooled over the sweep
   (:mod:`scalerl.harness.analysis.verdicts.inference`: random effects, Hartung-Knapp scale, seeds -
   groups degrees of freedom, a group's own scatter where it is significantly larger); dA = the
   variant's weighted seed mean less the baseline's. A plateau level sits below A by what the
   curve still has to climb, shared by the variant's seeds: its late creep (less what the
   seeds' noise alone would show) joins the group's variance, and half of what its pooled fit
   still climbs past the window (:func:`.ceiling.remaining_climb`) moves the estimate up, with the
   variance of a shortfall anywhere between none and all of that climb.
4. **Efficiency at a common A** (the paper's rule): every seed of the baseline and the variant is
   refitted with A fixed at the two groups' mean; d log B and d log C_mid get t intervals the same
   way, at 1 - alpha/2 each (Bonferroni over the two).
5. **The rule** (:func:`.rule.decide`): each claim (``asymptote-mover``, ``efficiency-shaper``,
   ``no-effect``) with a p-value that is below alpha exactly when its printed interval(s) lie in
   its region (``m`` = the margin, 0.02 by default, the paper's practical threshold; noise enters
   through the intervals, never the margin; ``t`` = log(1 + ``min_rel_effect``)).
6. **Many knobs at once.** Each variant's best claim enters Benjamini-Hochberg at false-discovery
   rate 1 - level over the sweep's variants (every variant counts). Decided claims become the
   verdict; everything else is ``undecided``, and its reason (:mod:`.explain`) gives the
   intervals, the smallest |dA| the sweep detects with 80% power and the seeds per variant that
   would decide it (:func:`.power.seeds_to_decide`, the number every message prints).

Every verdict carries dA with its interval, dB (in B's units: the log-scale interval times the
baseline's B, the B of its pooled fit, the same number the report's panels show) and d log C_mid
with theirs, the margin, the p-value of its best claim and the evidence itself, so a reader can
disagree.
Error rates of this rule against known truth (simulated sweeps with the real curves' noise):
bench/README.md, "Verdicts against known truth (simulator)".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.bootstrap import BootstrapResult, bootstrap_fits
from scalerl.harness.analysis.fit.curve import FitOptions, FloatArray, SigmoidFit
from scalerl.harness.analysis.fit.fitters import Curve, Fitter, fit_sigmoid_many
from scalerl.harness.analysis.groups import VariantCurves
from scalerl.harness.analysis.noise.point import NoiseSource, point_se
from scalerl.harness.analysis.verdicts import explain
from scalerl.harness.analysis.verdicts.ceiling import (
    a_se_from_noise,
    group_top,
    late_level,
    late_rises,
    pins_ceiling,
    plateau_level,
    remaining_climb,
    seed_a_var,
    shared_r0,
    still_rising,
    typical_a_se,
    unpinned_reason,
)
from scalerl.harness.analysis.verdicts.inference import Contrast, Pooled, bh, pool_groups, pool_pairs
from scalerl.harness.analysis.verdicts.power import mde, seeds_needed, seeds_to_decide
from scalerl.harness.analysis.verdicts.rule import Claim, Evidence, Ruling, decide
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
    _measure_ceilings(s)
    _pool_ceilings(s)
    judged, blanks = _contrast_ceilings(s)
    _compare_efficiency(s, judged)
    rulings = {n: decide(j.evidence(s)) for n, j in judged.items()}
    names = [vc.variant for vc in variants]
    accepted, threshold = _false_discovery(names, rulings, 1.0 - s.vopts.level)
    verdicts = blanks | {
        n: _verdict(s, j, rulings[n], accepted[n], threshold, len(names)) for n, j in judged.items()
    }
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
    sources: dict[str, NoiseSource]
    run_fits: dict[str, SigmoidFit]
    seeds: dict[str, SeedGroup]
    # Stage 2: pooled fits over each variant's healthy seeds.
    pooled: dict[str, BootstrapResult] = field(default_factory=dict)
    healthy_sigma: dict[str, list[FloatArray]] = field(default_factory=dict)
    healthy_vc: dict[str, VariantCurves] = field(default_factory=dict)
    # Stage 2b: the late rises, why each ceiling is not measured ('' when it is) and which are.
    rises: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)
    rise_pool: Pooled | None = None
    ceiling: str = "plateau"
    unpinned: dict[str, str] = field(default_factory=dict)
    rising: dict[str, bool] = field(default_factory=dict)
    measured: dict[str, bool] = field(default_factory=dict)
    # Stage 3: per-seed ceilings pooled over the sweep; free fits' log B.
    pooled_a: Pooled = field(default_factory=lambda: Pooled({}, _NAN, _NAN, 0))
    log_b: Pooled = field(default_factory=lambda: Pooled({}, _NAN, _NAN, 0))
    a_ses: list[float] = field(default_factory=list)

    @property
    def everyone(self) -> list[VariantCurves]:
        return [self.baseline, *self.variants]

    @property
    def base(self) -> BootstrapResult:
        return self.pooled[self.baseline.variant]

    @property
    def base_seeds(self) -> SeedGroup:
        return self.seeds[self.baseline.variant]


@dataclass
class _Judged:
    """A variant with a dA contrast, before the rule and the sweep-wide false-discovery step."""

    seeds: SeedGroup
    a: Contrast
    b: Contrast | None = None  # log B at the common A
    c: Contrast | None = None  # log C_mid at the common A
    a_common: float = _NAN
    late: bool = False  # the late-level lower-bound claim (a ceiling not measured)
    why_late: str = ""  # why the ceiling is not measured

    def evidence(self, s: _Sweep) -> Evidence:
        v = s.vopts
        return Evidence(self.a, self.b, self.c, v.margin, math.log1p(v.min_rel_effect), v.level, self.late)


def _fit_seeds(
    baseline: VariantCurves,
    variants: Sequence[VariantCurves],
    opts: FitOptions,
    vopts: VerdictOptions,
    method: str | Fitter,
) -> _Sweep:
    """Stages 0-1: every point's standard error (binomial where n is known, else the curve's
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
    r0 = shared_r0(flat_curves, opts)
    fopts = opts if r0 is None else replace(opts, r0=r0)
    flat_sigma: list[ArrayLike | None] = [se for vc in everyone for se in sigma[vc.variant]]
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
    return _Sweep(baseline, variants, vopts, fopts, method, r0, sources, run_fits, seeds)


def _pool_fits(s: _Sweep) -> None:
    """Stage 2: pooled fits (all healthy seeds' points together) with bootstrap bands: the curves
    the report draws, and the test of whether a variant's ceiling is measured at all."""
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


def _measure_ceilings(s: _Sweep) -> None:
    """Stage 2b: why each variant's ceiling is not measured ('' when it is): a pooled fit that has
    not passed its inflection or extrapolates its A, or curves still rising at the end."""
    s.rises = {
        vc.variant: late_rises(s.healthy_vc[vc.variant], s.healthy_sigma[vc.variant])
        for vc in s.everyone
        if not s.seeds[vc.variant].unstable
    }
    s.rise_pool = rise_pool = pool_groups({n: r[0] for n, r in s.rises.items()})
    # Plateau levels need points near the end: evaluations spaced evenly in compute (a trainer's
    # "every N steps") have them; log-spaced ones (a few points per decade) do not, and there the
    # plateau cannot be checked, so every ceiling is the fits' A (as before issue 23's rule).
    s.ceiling = s.vopts.ceiling
    if s.ceiling == "plateau" and any(len(r[0]) < len(s.healthy_vc[n].curves) for n, r in s.rises.items()):
        s.ceiling = "fit"
    margin = s.vopts.margin
    for n in s.healthy_vc:
        fitted = unpinned_reason(s.healthy_vc[n], s.pooled[n].fit, margin)
        rising = (
            ""
            if fitted
            else still_rising(n, *s.rises.get(n, ([], [])), rise_pool.seed_sd, rise_pool.df, margin)
        )
        s.unpinned[n] = fitted or rising
        s.rising[n] = bool(rising)
    s.measured = {
        vc.variant: not s.seeds[vc.variant].unstable
        and s.pooled[vc.variant].fit.ok
        and not s.unpinned[vc.variant]
        for vc in s.everyone
    }


def _pool_ceilings(s: _Sweep) -> None:
    """Stage 3: per-seed ceilings (plateau levels, or the fits' A), pooled over every variant whose
    ceiling is measured: one seed variance for the sweep (:mod:`.inference`)."""
    a_vals: dict[str, list[float]] = {}
    a_vars: dict[str, list[float]] = {}
    climb: dict[str, float] = {}  # what each variant's pooled fit still climbs past its plateau window
    for vc in s.everyone:
        if not s.measured[vc.variant]:
            continue
        g = s.seeds[vc.variant]
        fitted = [i for i in g.healthy if g.fits[i].ok]
        se_of = {i: a_se_from_noise(g.fits[i], g.vc.curves[i], g.sigma[i], s.fopts) for i in fitted}
        if s.ceiling == "plateau":
            top = group_top(s.healthy_vc[vc.variant])
            levels = [plateau_level(g.vc.curves[i], g.sigma[i], top) for i in g.healthy]
            rest = [remaining_climb(s.pooled[vc.variant].fit, g.vc.curves[i], top) for i in g.healthy]
            climb[vc.variant] = float(np.mean(rest)) if rest else 0.0
            a_vals[vc.variant] = [m for m, _ in levels]
            a_vars[vc.variant] = [v for _, v in levels]
        else:
            a_vals[vc.variant] = [g.fits[i].a for i in fitted]
            a_vars[vc.variant] = [seed_a_var(g.fits[i], g.vc.curves[i], se_of[i]) for i in fitted]
        s.a_ses += [se_of[i] for i in fitted if pins_ceiling(g.fits[i], g.vc.curves[i], s.fopts)]
    # The baseline's variance is never below its own seeds' scatter: it is in every contrast
    # (inference._floor_own).
    s.pooled_a = pool_groups(a_vals, a_vars, known_sd=s.vopts.seed_sd, own_floor=(s.baseline.variant,))
    if s.ceiling == "plateau":
        s.pooled_a = _plateau_allowances(s, climb)
    # Free fits' log B, for movers (their efficiency at different ceilings is only descriptive).
    s.log_b = pool_groups(
        {
            n: [math.log(s.seeds[n].fits[i].b) for i in s.seeds[n].healthy if s.seeds[n].fits[i].ok]
            for n in a_vals
        }
    )


def _plateau_allowances(s: _Sweep, climb: dict[str, float]) -> Pooled:
    """Each variant's plateau estimate with what its curve still has to climb allowed for.

    A plateau level sits below its ceiling by what the curve still has to climb, and that
    shortfall is shared by every seed of the variant: it does not average away with seeds. Two
    allowances for it join each variant's estimate:

    - its late creep (the mean rise its seeds still show over their late windows, under the
      still-rising threshold or the ceiling would not count as measured), squared, into the
      variance, less that mean's own sampling variance (the sweep's pooled spread of late rises
      over the seeds): the squared mean of three noisy rises is mostly their noise, and counting
      it as creep made 3-seed intervals hold the truth 98-100% of the time where 95% was
      promised. Without the creep term the intervals held 88% at 8 seeds on the simulator, where
      the seeds make the rest of the interval narrow;
    - what its pooled fit still climbs past the window (remaining_climb): the fit's extrapolation
      is known only roughly, so the shortfall is taken as anywhere between no climb and all of
      it: the estimate moves up by half of it, and its variance is that of a uniform spread over
      the climb (climb^2 / 12). Knobs that change the speed sit at different stages of their rise
      when the budget ends before the plateau: without the allowance their dA intervals held the
      truth 60-87% of the time at the 90%-of-gain budget; (climb/2)^2 as the variance held 98-100%
      (three seeds); climb^2 / 12 held 96% (simulation seed 21, tuning only; the published table
      is scored on other seeds).

    Each variant keeps its own allowance in full rather than only what differs from the
    baseline's (between variants at the same stage the shortfalls cancel): tried on seed 0, the
    differenced allowance covered 86% at 5 seeds and the 90% budget, 92% at 8 seeds.
    """
    assert s.rise_pool is not None
    rise_sd = s.rise_pool.seed_sd
    rise_var = rise_sd**2 if math.isfinite(rise_sd) else 0.0
    groups = dict(s.pooled_a.groups)
    for n, g in groups.items():
        diffs, noise = s.rises.get(n, ([], []))
        creep2 = 0.0
        if diffs:
            mean = float(np.mean(diffs))
            creep2 = max(0.0, mean) ** 2 - max(rise_var, float(np.mean(noise))) / len(diffs)
        climb_n = climb.get(n, 0.0)
        allowed = g.var + max(creep2, 0.0) + climb_n * climb_n / 12.0
        groups[n] = replace(g, mean=g.mean + climb_n / 2.0, var=allowed)
    return replace(s.pooled_a, groups=groups)


def _contrast_ceilings(s: _Sweep) -> tuple[dict[str, _Judged], dict[str, Verdict]]:
    """Stage 3b: each variant's dA contrast with the baseline, or the verdict that needs none
    (``unstable``, ``unfit``, ``undecided`` for a ceiling not measured on either side). A variant
    whose curves are still rising is compared by its late level, a lower bound on its A."""
    judged: dict[str, _Judged] = {}
    blanks: dict[str, Verdict] = {}
    base, base_seeds, base_name = s.base, s.base_seeds, s.baseline.variant
    for vc in s.variants:
        g = s.seeds[vc.variant]
        var = s.pooled[vc.variant]
        if g.unstable or var.fit.status == "decreasing":
            why = g.unstable or f"pooled curve is decreasing: {var.fit.reason}"
            blanks[vc.variant] = _blank(s, vc, "unstable", why)
            continue
        why = ""
        if base_seeds.unstable:
            why = f"baseline is unstable ({base_seeds.unstable}); nothing sound to compare with"
        elif not base.fit.ok and base.fit.status != "pre-inflection":
            why = f"baseline fit is {base.fit.status}: {base.fit.reason}"
        elif not var.fit.ok and var.fit.status != "pre-inflection":
            why = f"variant fit is {var.fit.status}: {var.fit.reason}"
        if why:
            blanks[vc.variant] = _blank(s, vc, "unfit", why)
            continue
        why_unpinned = s.unpinned[base_name] or s.unpinned[vc.variant]
        if not why_unpinned:
            judged[vc.variant] = _Judged(g, Contrast.between(s.pooled_a, base_name, vc.variant))
            continue
        # The late level (each seed's mean over its last points) bounds a rising curve's A from
        # below: "the ceiling rises" is still decidable against a measured baseline.
        level_v, level_se = late_level(s.healthy_vc[vc.variant], s.healthy_sigma[vc.variant])
        b_est = s.pooled_a.groups.get(base_name)
        if s.measured[base_name] and b_est is not None and math.isfinite(level_v):
            n_v = len(g.healthy)
            sd = s.pooled_a.seed_sd
            se_seed = sd / math.sqrt(n_v) if math.isfinite(sd) else 0.0
            se = math.sqrt(max(level_se, se_seed) ** 2 + b_est.var)
            contrast = Contrast(level_v - b_est.mean, se, float(s.pooled_a.df))
            judged[vc.variant] = _Judged(g, contrast, late=True, why_late=why_unpinned)
            continue
        reason = (
            explain.unmeasured(why_unpinned, level_v, level_se, base.fit.a) + base_seeds.note() + g.note()
        )
        blanks[vc.variant] = _blank(s, vc, "undecided", reason, pending="compute", rising=_rising(s, vc))
    return judged, blanks


def _compare_efficiency(s: _Sweep, judged: dict[str, _Judged]) -> None:
    """Stage 4: efficiency at a common A (the paper's rule), per seed, for every variant whose
    ceiling was measured: every seed of the baseline and the variant refitted with A fixed at the
    two groups' mean (one batch of refits), d log B and d log C_mid pooled over the pairs."""
    refit_for = [n for n, j in judged.items() if not j.late and j.a.ok]
    if not refit_for:
        return
    base_seeds = s.base_seeds
    batch: list[Curve] = []
    batch_sigma: list[ArrayLike | None] = []
    fixed: list[float] = []
    spans: list[tuple[str, int, int]] = []
    for n in refit_for:
        a_common = s.pooled_a.groups[s.baseline.variant].mean + 0.5 * judged[n].a.d
        judged[n].a_common = a_common
        start = len(batch)
        for group in (base_seeds, s.seeds[n]):
            batch += [group.vc.curves[i] for i in group.healthy]
            batch_sigma += [group.sigma[i] for i in group.healthy]
        fixed += [a_common] * (len(batch) - start)
        spans.append((n, start, len(base_seeds.healthy)))
    refits = fit_sigmoid_many(batch, options=s.fopts, method=s.method, fixed_a=fixed, sigma=batch_sigma)

    def logs(fs: Sequence[SigmoidFit], col: str) -> list[float]:
        return [math.log(getattr(f, col)) if f.ok and getattr(f, col) > 0 else _NAN for f in fs]

    per_pair = []
    for n, start, nb in spans:
        stop = start + nb + len(s.seeds[n].healthy)
        per_pair.append((refits[start : start + nb], refits[start + nb : stop]))
    cb = pool_pairs([logs(b, "b") for b, _ in per_pair], [logs(o, "b") for _, o in per_pair])
    cc = pool_pairs([logs(b, "c_mid") for b, _ in per_pair], [logs(o, "c_mid") for _, o in per_pair])
    for (n, _, _), con_b, con_c in zip(spans, cb, cc, strict=True):
        if con_b.ok and con_c.ok:
            judged[n].b, judged[n].c = con_b, con_c


def _false_discovery(
    names: Sequence[str], rulings: dict[str, Ruling], alpha: float
) -> tuple[dict[str, bool], float]:
    """Stage 6: Benjamini-Hochberg at false-discovery rate alpha over the sweep's variants (every
    variant counts, decided or not, so a sweep cannot buy decisions by leaving knobs out): which
    variants' best claims pass, and the largest p that passed (the threshold a reason quotes)."""
    ps = [rulings[n].best[1] if n in rulings else 1.0 for n in names]
    accepted = dict(zip(names, bh(ps, alpha), strict=True))
    passed = [p for p, ok in zip(ps, accepted.values(), strict=True) if ok]
    return accepted, max(passed, default=alpha / max(len(names), 1))


def _verdict(s: _Sweep, j: _Judged, ruling: Ruling, accepted: bool, threshold: float, knobs: int) -> Verdict:
    """Stage 7: one judged variant's verdict, its numbers and its reason (:mod:`.explain`)."""
    vc, ev, vopts = j.seeds.vc, ruling.evidence, s.vopts
    n, base_name, base = vc.variant, s.baseline.variant, s.base
    var = s.pooled[n]
    claim, p = ruling.best
    margin, level = vopts.margin, vopts.level
    notes = (
        s.base_seeds.note()
        + j.seeds.note()
        + explain.extrapolation_note([(s.baseline, base.fit.a), (vc, var.fit.a)], margin)
    )
    seeds_now = min(len(s.base_seeds.healthy), len(j.seeds.healthy))
    lo, hi = j.a.ci(level)
    if j.late:
        decided = accepted and claim == Claim.MOVER
        reason = explain.late(j.why_late, ev, decided, p, knobs)
        if decided:
            return Verdict(
                vc.knob, n, vc.alternative, "asymptote-mover", _a_base(s), var.fit.a, j.a.d, lo, _NAN,
                base.fit.b, var.fit.b, _NAN, _NAN, _NAN, margin, reason + notes, p_value=p,
                evidence=ev, seeds_now=seeds_now, rising=_rising(s, vc),
            )  # fmt: skip
        return _blank(
            s, vc, "undecided", reason + notes, pending="compute", evidence=ev, rising=_rising(s, vc)
        )
    a_est = s.pooled_a.groups.get(n)
    a_var = a_est.mean if a_est is not None else var.fit.a
    # dB in B's units: the log-scale contrast times the baseline's B (its pooled fit's, one number
    # for the whole sweep); the claims are on log B (a factor, symmetric).
    b0 = base.fit.b
    if ev.log_b is not None and ev.log_c is not None:
        log_b, log_b_level, c_ci = ev.log_b, ev.level2, ev.log_c.ci(ev.level2)
        mde_b = b0 * _expm1(mde(ev.log_b, ev.efficiency, ev.level2, vopts.power))
    else:  # the refits at a common A failed: the free fits' log B, described only
        log_b, log_b_level, c_ci = Contrast.between(s.log_b, base_name, n), level, (_NAN, _NAN)
        mde_b = _NAN
    blo, bhi = log_b.ci(log_b_level)
    a_txt = explain.a_text(ev, s.pooled_a.seed_sd, vopts.seed_sd)
    eff_txt = explain.efficiency_text(ev, j.a_common)
    mde_a = mde(j.a, margin, level, vopts.power)
    needed = seeds_to_decide(ev, seeds_now, vopts.power)
    kind: VerdictKind = claim.value if accepted else "undecided"
    if accepted:
        reason = explain.claimed(kind, a_txt, eff_txt, ev, p, knobs)
    else:
        seeds = explain.seeds_phrase(needed, seeds_now, vopts.power)
        reason = explain.not_decided(
            a_txt, eff_txt, ev, (claim.value, p), threshold, knobs, mde_a, vopts.power, seeds
        )
    target = vopts.detect_d_a
    for_a = None
    if target is not None and j.a.ok and target > margin:
        for_a = seeds_needed(Contrast(target, j.a.se, j.a.df), margin, seeds_now, level, vopts.power)
    d_c = ev.log_c.d if ev.log_c is not None else _NAN
    return Verdict(
        vc.knob, n, vc.alternative, kind, _a_base(s), a_var, j.a.d, lo, hi,
        b0, b0 * _exp(log_b.d), b0 * _expm1(log_b.d), b0 * _expm1(blo), b0 * _expm1(bhi),
        margin, reason + notes, d_c, *c_ci, mde_a=mde_a, mde_b=mde_b,
        pending="seeds" if kind == "undecided" else "", p_value=p,
        power_note=explain.power_note(target, margin, for_a, seeds_now),
        seeds_for_a=for_a, evidence=ev, seeds_needed=needed, seeds_now=seeds_now,
    )  # fmt: skip


def _a_base(s: _Sweep) -> float:
    """The baseline's ceiling as every contrast uses it: its pooled seed estimate."""
    est = s.pooled_a.groups.get(s.baseline.variant)
    return est.mean if est is not None else s.base.fit.a


def _rising(s: _Sweep, vc: VariantCurves) -> tuple[str, ...]:
    """The variant whose still-rising curves are why the ceiling is not measured (the baseline's
    reason first, as the verdict's reason says it)."""
    name = s.baseline.variant if s.unpinned[s.baseline.variant] else vc.variant
    return (name,) if s.rising.get(name) else ()


def _blank(
    s: _Sweep,
    vc: VariantCurves,
    kind: VerdictKind,
    reason: str,
    *,
    pending: str = "",
    evidence: Evidence | None = None,
    rising: tuple[str, ...] = (),
) -> Verdict:
    """A verdict without contrasts: the pooled fits' A and B, no intervals."""
    base, var = s.base, s.pooled.get(vc.variant)
    return Verdict(
        vc.knob, vc.variant, vc.alternative, kind, base.fit.a, var.fit.a if var else _NAN, _NAN, _NAN, _NAN,
        base.fit.b, var.fit.b if var else _NAN, _NAN, _NAN, _NAN, s.vopts.margin, reason,
        pending=pending, evidence=evidence, rising=rising,
    )  # fmt: skip


# exp() of a log-scale interval's end: an interval of a B that is barely identified (a curve cut
# early, looked at by stop-when-decided) can reach e^710 and beyond, which math.exp cannot hold.
_LOG_MAX = math.log(np.finfo(np.float64).max)


def _exp(x: float) -> float:
    return math.exp(x) if x < _LOG_MAX else math.inf


def _expm1(x: float) -> float:
    return math.expm1(x) if x < _LOG_MAX else math.inf

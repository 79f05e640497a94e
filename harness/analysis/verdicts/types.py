"""The verdicts' types: what a verdict is asked with (:class:`VerdictOptions`), what it says
(:class:`Verdict`, one per knob) and what a sweep's analysis returns (:class:`SweepAnalysis`).

The rule that decides is :mod:`scalerl.harness.analysis.verdicts.rule`; the steps that prepare
its evidence are :mod:`scalerl.harness.analysis.verdicts.pipeline`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from scalerl.harness.analysis.fit.bootstrap import DEFAULT_BOOT, BootstrapResult
from scalerl.harness.analysis.fit.curve import SigmoidFit
from scalerl.harness.analysis.noise.point import NoiseSource
from scalerl.harness.analysis.verdicts.inference import Pooled
from scalerl.harness.analysis.verdicts.power import DEFAULT_POWER
from scalerl.harness.analysis.verdicts.rule import MARGIN, Evidence

VerdictKind = Literal["asymptote-mover", "efficiency-shaper", "no-effect", "undecided", "unstable", "unfit"]

_NAN = math.nan


@dataclass(frozen=True)
class VerdictOptions:
    margin: float = MARGIN
    n_boot: int = DEFAULT_BOOT
    level: float = 0.95
    seed: int = 0
    # Smallest efficiency change worth a verdict: 10% in B, or C_mid moving by a factor of 1.1.
    min_rel_effect: float = 0.1
    # Collapse test (see the module docstring): false-alarm rate per curve before the Bonferroni
    # correction over candidate peaks, the smallest drop worth calling a collapse (the paper's
    # 0.02 margin), the last window's share of the points and its minimum width.
    collapse_alpha: float = 0.001
    collapse_drop: float = MARGIN
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
    # The p-value of the verdict's claim (the smallest of the three when undecided), before the
    # sweep's false-discovery step; NaN when no claim could be tested.
    p_value: float = _NAN
    # How sure the rule is of each claim: 1 - its Benjamini-Hochberg adjusted p-value over the
    # sweep's knobs (:func:`.rule.claims`); NaN when the claim could not be tested.
    p_ceiling: float = _NAN  # the ceiling moves beyond the margin
    p_efficiency: float = _NAN  # B or C_mid differs beyond min_rel_effect
    p_no_effect: float = _NAN  # all three inside their thresholds
    # The efficiency claim: "differs" (made; on an asymptote-mover the knob is both), "same"
    # (equivalence shown, part of no-effect), "" (not shown either way, or not compared).
    efficiency: str = ""
    # What the rule judged (:class:`.rule.Evidence`: the contrasts and their thresholds); None for a
    # verdict no contrast could be made for (unstable, unfit, a ceiling not measured on either side).
    # Stop-when-decided runs the rule on it again (:func:`.rule.decided`).
    evidence: Evidence | None = field(default=None, repr=False, compare=False)
    # The seeds per variant that would decide an ``undecided`` verdict pending seeds
    # (:func:`.power.seeds_to_decide`; None: no seed count would, or it is not a question of seeds),
    # and the seeds it rests on now (the fewer of the baseline's and the variant's healthy seeds).
    seeds_needed: int | None = None
    seeds_now: int = 0

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
    seeds: int = 1  # the fewest seeds of any variant
    df: int = 0  # degrees of freedom of the pooled seed variance on A (seeds - groups)
    r0: float = _NAN  # the sweep's shared R0 (NaN: each fit has its own)
    r0_source: str = ""  # where the shared R0 came from, in words
    # The per-seed parameters pooled over the sweep ("a", "log_b", "log_c_mid").
    pooled: dict[str, Pooled] = field(default_factory=dict)

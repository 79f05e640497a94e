"""Simulated LOO sweeps whose truth is known: price a sweep design, or score a verdict rule.

A lab can simulate its own design (seeds, budget, evaluation size) before paying for it, and the
bench (``bench/verdict_sim.py``) drives thousands of simulated knobs through ``scalerl fit`` to
measure how often each verdict is right (issue 23). The truth is ScaleRL's sigmoid
(:func:`scalerl.harness.analysis.fit.curve.sigmoid_curve`)::

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)

for the baseline (:class:`CurveTruth`) and for each knob's variant (:class:`VariantTruth`): a
``null`` (the baseline's curve), a ``mover`` (A shifted by dA), a ``shaper-b`` (B times a
factor) or a ``shaper-c-mid`` (C_mid times a factor). Every run of a variant (one per seed) is
evaluated at compute 0 (the untrained policy, R0) and at ``points`` evenly spaced computes up to
the budget, and each evaluation gets the noise of :class:`NoiseModel`, in this order:

1. seed-to-seed spread: the run's own A = A + N(0, seed_sd_a), B and C_mid times
   exp(N(0, seed_sd_log_b)) and exp(N(0, seed_sd_log_c_mid)) (R0 is the untrained model's, shared);
2. within-run deviations of the policy from its curve: a stationary AR(1) process over the
   evaluations after compute 0, standard deviation ``sigma_extra``, lag-1 correlation ``ar1``;
3. a late dip, with probability ``dip_prob`` per run: from a point drawn uniformly in the last
   ``1 - dip_after`` of the run, the curve sits ``depth`` lower to the end (depth uniform on
   [0.5, 1.5] x ``dip_depth``);
4. measurement: the value is Binomial(n, p) / n with p clipped to [0, 1] (no sampling noise when
   ``n`` is None); ``record_n`` writes n with each point, as a trainer logging through
   ``scalerl.harness.client`` does (imported curves carry none).

:func:`simulate_sweep` returns the points in the store's curves shape
(:data:`scalerl.db.queries.CURVE_COLUMNS`) and the truth; :func:`write_sweep` writes them into a
results store through the same writer a trainer uses, so ``scalerl fit`` reads them like any
sweep. Deterministic: the same design, noise and seed give the same bits (the draws happen in a
fixed order, and every draw is made whether or not its scale is zero). The noise parameters fitted
on real curves are bench/noise_fit.py's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.curve import FloatArray, sigmoid_curve
from scalerl.harness.analysis.verdicts.rule import MARGIN
from scalerl.harness.axes import COMPUTE_AXES
from scalerl.harness.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

KnobKind = Literal["baseline", "null", "mover", "shaper-b", "shaper-c-mid"]
KNOB_KINDS: tuple[KnobKind, ...] = ("null", "mover", "shaper-b", "shaper-c-mid")
BASELINE = "baseline"


@dataclass(frozen=True)
class CurveTruth:
    """One true curve: R0, the ceiling A, the exponent B and the half-gain compute C_mid."""

    r0: float
    a: float
    b: float
    c_mid: float

    def __post_init__(self) -> None:
        for name, lo, hi in (("r0", 0.0, 1.0), ("a", 0.0, 1.0)):
            value = getattr(self, name)
            if not lo <= value <= hi:
                raise ConfigError("must be in [0, 1]", field=name, value=value, fix="use a pass rate")
        for name in ("b", "c_mid"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError("must be finite and > 0", field=name, value=value, fix="use e.g. 1.5")

    def value(self, compute: ArrayLike) -> FloatArray:
        """R(C) (compute 0 gives R0)."""
        return sigmoid_curve(compute, self.r0, self.a, self.b, self.c_mid)

    def compute_at(self, fraction: float) -> float:
        """The compute at which the curve has made ``fraction`` (0-1) of its gain A - R0."""
        if not 0.0 < fraction < 1.0:
            raise ConfigError("must be in (0, 1)", field="fraction", value=fraction, fix="use e.g. 0.9")
        return float(self.c_mid * (fraction / (1.0 - fraction)) ** (1.0 / self.b))


@dataclass(frozen=True)
class VariantTruth:
    """One knob's variant: its true curve, what kind of effect it has and how large
    (dA for a mover, the factor on B or C_mid for a shaper, 0 for a null)."""

    name: str
    knob: str
    kind: KnobKind
    effect: float
    curve: CurveTruth


def knob_variant(
    base: CurveTruth, kind: KnobKind, effect: float = 0.0, *, name: str, knob: str = ""
) -> VariantTruth:
    """The variant of ``base`` that a knob of ``kind`` produces: ``null`` (effect ignored),
    ``mover`` (A + effect), ``shaper-b`` (B x effect), ``shaper-c-mid`` (C_mid x effect)."""
    c = base
    if kind == "null":
        effect = 0.0
    elif kind == "mover":
        c = CurveTruth(base.r0, base.a + effect, base.b, base.c_mid)
    elif kind == "shaper-b":
        c = CurveTruth(base.r0, base.a, base.b * effect, base.c_mid)
    elif kind == "shaper-c-mid":
        c = CurveTruth(base.r0, base.a, base.b, base.c_mid * effect)
    else:
        raise ConfigError("unknown knob kind", field="kind", value=kind, fix=f"use one of {KNOB_KINDS}")
    return VariantTruth(name, knob or name, kind, float(effect), c)


@dataclass(frozen=True)
class SweepDesign:
    """A LOO sweep to simulate: the baseline, the knobs' variants, seeds per variant, and the
    evaluation schedule (compute 0, then ``points`` evenly spaced computes up to ``budget``;
    the store's step of evaluation k is ``k * steps_per_point``). ``window_fraction`` and
    ``margin`` go into the sweep's ``fit`` section, as a sweep file's would (the demo's: no window,
    the whole curve fitted, and 0.02)."""

    baseline: CurveTruth
    variants: tuple[VariantTruth, ...]
    seeds: int = 3
    budget: float = 1.0
    points: int = 30
    steps_per_point: int = 10
    name: str = "sim"
    metric: str = "val/pass_rate"
    axis: str = "gpu_hours"
    window_fraction: float | None = None
    margin: float = MARGIN

    def __post_init__(self) -> None:
        if self.seeds < 1:
            raise ConfigError("must be >= 1", field="seeds", value=self.seeds, fix="use 3")
        if self.points < 4:
            raise ConfigError("too few evaluations to fit", field="points", value=self.points, fix="use 30")
        if not (math.isfinite(self.budget) and self.budget > 0):
            raise ConfigError("must be finite and > 0", field="budget", value=self.budget, fix="use 1.0")
        if self.axis not in COMPUTE_AXES:
            raise ConfigError(
                "not a compute axis", field="axis", value=self.axis, fix=f"use one of {COMPUTE_AXES}"
            )
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names) or BASELINE in names:
            raise ConfigError(
                "variant names must be unique and not 'baseline'",
                field="variants",
                value=names,
                fix="name each variant once",
            )

    @property
    def compute(self) -> FloatArray:
        """The evaluation computes: 0 (R0), then ``points`` evenly spaced up to the budget."""
        return np.linspace(0.0, self.budget, self.points + 1)


@dataclass(frozen=True)
class NoiseModel:
    """How a simulated run departs from its variant's true curve (see the module docstring).
    The default is noise-free; bench/noise_fit.py fits one to real curves."""

    n: int | None = None
    record_n: bool = True
    sigma_extra: float = 0.0
    ar1: float = 0.0
    seed_sd_a: float = 0.0
    seed_sd_log_b: float = 0.0
    seed_sd_log_c_mid: float = 0.0
    dip_prob: float = 0.0
    dip_depth: float = 0.06
    dip_after: float = 0.7

    def __post_init__(self) -> None:
        if self.n is not None and self.n < 1:
            raise ConfigError(
                "must be >= 1 (or None: no sampling noise)", field="n", value=self.n, fix="use 640"
            )
        if not -1.0 < self.ar1 < 1.0:
            raise ConfigError("must be in (-1, 1)", field="ar1", value=self.ar1, fix="use e.g. 0.5")
        for name in ("sigma_extra", "seed_sd_a", "seed_sd_log_b", "seed_sd_log_c_mid", "dip_depth"):
            if not getattr(self, name) >= 0.0:
                raise ConfigError("must be >= 0", field=name, value=getattr(self, name), fix="use 0")
        for name in ("dip_prob", "dip_after"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError("must be in [0, 1]", field=name, value=getattr(self, name), fix="use 0")


@dataclass(frozen=True)
class SimulatedSweep:
    """What :func:`simulate_sweep` drew.

    ``points``: the store's curves frame (``scalerl.db.queries.CURVE_COLUMNS``; the design's axis
    holds the compute, the other units are NaN). ``truth``: one row per variant (the baseline
    first): variant, knob, kind, effect, r0, a, b, c_mid and the true d_a, d_b, d_log_c_mid
    against the baseline. ``runs``: one row per run: run_id, variant, seed, its own a, b, c_mid,
    and its dip (depth 0 and start NaN when none)."""

    design: SweepDesign
    noise: NoiseModel
    points: pd.DataFrame = field(repr=False)
    truth: pd.DataFrame = field(repr=False)
    runs: pd.DataFrame = field(repr=False)


def run_id_for(design: SweepDesign, variant: str, seed: int) -> str:
    """``<sweep>/<variant>/s<seed>`` (the store keeps up to 64 characters)."""
    rid = f"{design.name}/{variant}/s{seed}"
    if len(rid) > 64:
        raise ConfigError(
            "run id longer than 64 characters", field="name", value=rid, fix="use shorter names"
        )
    return rid


def _ar1(rng: np.random.Generator, size: int, sigma: float, phi: float) -> FloatArray:
    """A stationary AR(1) path of ``size`` values (standard deviation sigma, lag-1 phi)."""
    eps = rng.standard_normal(size)
    out = np.empty(size)
    if size:
        out[0] = eps[0]
        scale = math.sqrt(1.0 - phi * phi)
        for i in range(1, size):
            out[i] = phi * out[i - 1] + scale * eps[i]
    return out * sigma


def _one_run(
    rng: np.random.Generator, truth: CurveTruth, compute: FloatArray, noise: NoiseModel
) -> tuple[FloatArray, tuple[float, float, float, float, float]]:
    """(values, (a, b, c_mid, dip depth, dip start compute)) of one simulated run."""
    z = rng.standard_normal(3)
    a = float(np.clip(truth.a + noise.seed_sd_a * z[0], 0.0, 1.0))
    b = truth.b * math.exp(noise.seed_sd_log_b * z[1])
    c_mid = truth.c_mid * math.exp(noise.seed_sd_log_c_mid * z[2])
    p = sigmoid_curve(compute, truth.r0, a, b, c_mid)
    p[1:] += _ar1(rng, compute.size - 1, noise.sigma_extra, noise.ar1)
    u = rng.random(3)
    depth, start = 0.0, math.nan
    if u[0] < noise.dip_prob:
        first = min(compute.size - 1, max(1, math.ceil(noise.dip_after * (compute.size - 1))))
        k = first + min(int(u[1] * (compute.size - first)), compute.size - first - 1)
        depth = noise.dip_depth * (0.5 + u[2])
        start = float(compute[k])
        p[k:] -= depth
    p = np.clip(p, 0.0, 1.0)
    values = rng.binomial(noise.n, p) / noise.n if noise.n is not None else p
    return np.asarray(values, dtype=np.float64), (a, b, c_mid, depth, start)


def simulate_sweep(design: SweepDesign, noise: NoiseModel, rng: np.random.Generator | int) -> SimulatedSweep:
    """Draw every run of ``design`` under ``noise``; see :class:`SimulatedSweep` for what comes back.

    ``rng`` is a numpy Generator or a seed. Runs are drawn baseline first, then the variants in
    order, seeds 0.. within each, so adding a variant at the end leaves the others' draws alone.
    """
    import pandas as pd

    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    compute = design.compute
    steps = np.arange(compute.size, dtype=np.int64) * design.steps_per_point
    base_kind: KnobKind = "baseline"
    everyone: list[tuple[str, str | None, KnobKind, float, CurveTruth]] = [
        (BASELINE, None, base_kind, 0.0, design.baseline)
    ] + [(v.name, v.knob, v.kind, v.effect, v.curve) for v in design.variants]
    frames: list[dict[str, Any]] = []
    run_rows: list[dict[str, Any]] = []
    for variant, knob, _, _, curve in everyone:
        for seed in range(design.seeds):
            values, (a, b, c_mid, depth, start) = _one_run(gen, curve, compute, noise)
            rid = run_id_for(design, variant, seed)
            frames.append(
                {
                    "run_id": rid,
                    "variant": variant,
                    "knob": knob,
                    "alternative": None if knob is None else variant,
                    "seed": seed,
                    "values": values,
                }
            )
            run_rows.append(
                {"run_id": rid, "variant": variant, "seed": seed, "a": a, "b": b, "c_mid": c_mid}
                | {"dip_depth": depth, "dip_start": start}
            )
    m = compute.size
    cols: dict[str, Any] = {
        "run_id": np.repeat([f["run_id"] for f in frames], m),
        "variant": np.repeat([f["variant"] for f in frames], m),
        "knob": np.repeat(np.array([f["knob"] for f in frames], dtype=object), m),
        "alternative": np.repeat(np.array([f["alternative"] for f in frames], dtype=object), m),
        "seed": np.repeat([f["seed"] for f in frames], m).astype(np.int64),
        "step": np.tile(steps, len(frames)),
        "metric": design.metric,
        "value": np.concatenate([f["values"] for f in frames]) if frames else np.zeros(0),
        "n": float(noise.n) if noise.n is not None and noise.record_n else math.nan,
    }
    for unit in (*COMPUTE_AXES, "wall_s"):
        cols[unit] = np.tile(compute, len(frames)) if unit == design.axis else math.nan
    points = pd.DataFrame(cols)
    base = design.baseline
    truth = pd.DataFrame(
        [
            {"variant": name, "knob": knob, "kind": kind, "effect": effect}
            | {"r0": c.r0, "a": c.a, "b": c.b, "c_mid": c.c_mid}
            | {"d_a": c.a - base.a, "d_b": c.b - base.b, "d_log_c_mid": math.log(c.c_mid / base.c_mid)}
            for name, knob, kind, effect, c in everyone
        ]
    )
    return SimulatedSweep(design, noise, points, truth, pd.DataFrame(run_rows))


def sweep_spec(design: SweepDesign) -> dict[str, Any]:
    """The sweep spec :func:`write_sweep` stores: its ``fit`` and ``loo`` sections as a sweep file
    would set them, so ``scalerl fit`` picks the metric, axis, window and margin from it."""
    fit: dict[str, Any] = {"metric": design.metric, "axis": design.axis, "margin": design.margin}
    if design.window_fraction is not None:
        fit["window"] = {"fraction": design.window_fraction}
    return {
        "source": "simulated",
        "fit": fit,
        "loo": {"baseline_name": BASELINE},
        "seeds": list(range(design.seeds)),
        "budget": {"value": design.budget, "unit": design.axis},
    }


def write_sweep(store: Any, sim: SimulatedSweep, *, sweep: str | None = None) -> int:
    """Write a simulated sweep into a results store (``scalerl.db.open_store``): the sweep with
    :func:`sweep_spec`, one registered run per (variant, seed), each run's points through
    ``store.writer`` (the trainer's writer: one attempt, points with their n), runs marked
    ``completed``. Returns the number of points written. Writing the same sweep again upserts."""
    from scalerl.db import RunRecord

    design = sim.design
    name = sweep or design.name
    store.ensure_sweep(name, sweep_spec(design))
    pts = sim.points
    knobs = {v.name: v.knob for v in design.variants}
    records = [
        RunRecord(
            run_id=str(r["run_id"]),
            sweep=name,
            variant=str(r["variant"]),
            seed=int(r["seed"]),
            config={"simulated": True, "variant": str(r["variant"])},
            config_hash=str(r["run_id"]),
            knob=knobs.get(str(r["variant"])),
            alternative=str(r["variant"]) if str(r["variant"]) in knobs else None,
        )
        for r in sim.runs.to_dict("records")
    ]
    store.register_runs(records)
    written = 0
    for rid, rdf in pts.groupby("run_id", sort=False, observed=True):
        attempt = store.start_attempt(str(rid), executor="simulated", job_id=None, host="simulated")
        writer = store.writer(str(rid), attempt)
        try:
            for step, value, c, n in zip(
                rdf["step"].tolist(),
                rdf["value"].tolist(),
                rdf[design.axis].tolist(),
                rdf["n"].tolist(),
                strict=True,
            ):
                counts = {design.metric: int(n)} if math.isfinite(n) else None
                writer.add(int(step), {design.metric: float(value)}, {design.axis: float(c)}, counts)
                written += 1
        finally:
            writer.close()
        store.finish_run(str(rid), attempt, "completed")
    return written


def loo_variants(
    base: CurveTruth,
    *,
    nulls: int = 0,
    d_a: Sequence[float] = (),
    b_factors: Sequence[float] = (),
    c_mid_factors: Sequence[float] = (),
) -> tuple[VariantTruth, ...]:
    """A knob set: ``nulls`` nulls, a mover per dA, a B shaper per factor, a C_mid shaper per
    factor, named ``null-0``, ``mover+0.05``, ``shaper-b-x1.5``, ``shaper-c-mid-x2``, ..."""
    out = [knob_variant(base, "null", name=f"null-{i}") for i in range(nulls)]
    out += [knob_variant(base, "mover", d, name=f"mover{d:+g}") for d in d_a]
    out += [knob_variant(base, "shaper-b", f, name=f"shaper-b-x{f:g}") for f in b_factors]
    out += [knob_variant(base, "shaper-c-mid", f, name=f"shaper-c-mid-x{f:g}") for f in c_mid_factors]
    return tuple(out)

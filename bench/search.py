"""Search benchmark: pruners side by side on replayed real RL curves, one run, same samplers.

Trials are real curves (/work/shared/data/real-rl-curves, read by ``bench/forecast.py``'s
``load_real``). A *pool* is a set of curves that a search would compare at one common budget
``T`` (the target compute, in training steps): every curve of the pool reaches ``T`` and is cut
there, nothing is rescaled. Pools (14, 144 curves in all):

- W&B: the 15 GSM8K validation curves of 17 that reach 2,500 steps (one point every 5 steps);
- TensorBoard: 11 GSM8K validation curves and, separately, 11 train-reward curves (T = 105);
- verl CSV: the 7 train-reward replicates of one config (T = 116): only seed noise separates them;
- SPEED-RL: one pool per (model size, benchmark): 5 benchmarks x {1.5B: 8 runs, T = 425;
  7B: 12 runs, T = 700} (one point every 25 steps).

The search space is one categorical over the pool's curve ids. A trial replays its curve point by
point, ``trial.report(value, step)`` then ``trial.should_prune()``; a completed trial's value is
its curve's final value (mean of its last 3 points at or before ``T``). Two samplers, each with
seeds 0-4 and ``n_trials`` = the pool size, identical for every pruner:

- ``random order``: ``BruteForceSampler(seed)``: every curve exactly once, in a seeded random
  order (the order depends only on the seed: pruners see the same sequence);
- ``TPE``: ``TPESampler(seed)``; a curve sampled again is a cache hit: it costs no compute and
  replays the stored outcome (the value of a completed curve; a pruned curve is pruned again)
  without reporting anything (so it does not count twice in a median).

Pruners: none (``NopPruner``), ``MedianPruner()`` (defaults: 5 startup trials, no warm-up),
``MedianPruner`` with the forecast pruner's warm-up (1 startup trial, ``n_warmup_steps`` = the step
of the pool's 5th point), ``HyperbandPruner(max_resource=T)`` (else defaults; every study has a
fixed name, since Hyperband assigns trials to brackets by hashing it), and
``ForecastPruner(target=T)`` at its defaults (upper edge < the best reference's lower edge,
level 0.9, 8 points, 2x past the inflection, 1 completed trial) and at its faster preset
(level 0.8, 5 points: the --loso grid's pick), both with ``interval_steps`` = max(1, points per
curve // 50) so a 500-point curve is re-forecast every 10 reports (the only per-pool setting).

``--loso`` chooses the forecast pruner's settings leave-one-source-out: a grid of 72 settings
(``edge`` / ``reference`` rule: hi<lo, hi<value, value<lo; level 0.5, 0.7, 0.8, 0.9;
``inflection_margin`` 1, 1.5, 2; ``min_points`` 5, 8), random order, ``--select-seeds`` seeds
(3). For each source, the setting chosen on the other three (criterion, :func:`choose`: the least
compute with the same best as no pruning in >= 90% of the training runs; ties by regret; if none
qualifies, the highest same-best share) is scored on it with ``--seeds`` seeds and both samplers,
next to Median, Hyperband and the defaults; then the choice on all four sources (the faster
preset; the defaults stay conservative, see bench/README.md "Search"). Two variants: any setting
("LOSO"), and only the settings that pass the unit tests' synthetic guard (:func:`passes_guard`,
"LOSO + guard"; the preset comes from this one).
Forecasts are memoised by curve prefix across settings and seeds (:class:`_Memo`; the pruner's
rule runs unchanged), so the whole grid takes about a minute on 2 cores with ``--jobs 2``.

``--loso`` and ``--beat`` are leave-one-source-out throughout, calibrations included (``--loso``
until 2026-11-26 used the library's, fitted on all four sources): for each held-out source the
single-curve and sweep interval calibrations are fitted on the other three sources' curves
(:func:`loso_calibrations`, the fits of ``bench/forecast_sweep.py``), and every forecast pruner
scored on that source, or trained without it, uses them. It scores ``ForecastPruner(rule="beat")``
(prune when P(beat the best COMPLETE trial's observed value, less ``margin_noise`` x the sweep's
noise) < ``p``; sweep forecasts from the other trials) on the grid ``p`` 0.02 / 0.05 / 0.1 / 0.2 x
``margin_noise`` 0 / 1 / 2 with ``min_points`` 5 (until 2026-11-26 09:50 UTC: ``min_points`` 5 / 8
without a margin; inflection margin 2, ``interval_steps`` as above), only the settings that pass
the synthetic guard (``--beat-ps``, ``--beat-noise`` and ``--beat-inflections`` replace the
grid's axes; with several inflection margins the comparison column is the choice among the
inflection-2 settings). For each
source, the setting chosen on the other three (random order, ``--select-seeds`` seeds; criterion
fixed before any held-out score was seen: the least compute with the same best as no pruning in
>= 95% of the training runs, ties by regret; else the highest same-best share) is scored on it
with ``--seeds`` seeds and both samplers, next to Median (defaults), Hyperband, the bound
rule's defaults (with the same held-out calibrations) and the same criterion's choice among the
settings without a margin. "best pruned" = the share of runs that
pruned the pool's best curve; the last lines check issue 24's item-4 targets. ``--beat-peers``
adds the ``peers`` axis (0 = off: the sweep forecast only; k: read P(beat) from the COMPLETE
trials once k of them reached the trial's compute, :mod:`scalerl.harness.analysis.forecast.peers`); the
comparison column is then the choice without peers. Written before the first such run
(2026-11-26 13:35 UTC): the pruner's ``peers`` default changes from 0 only if the held-out
choice keeps the best pruned <= 5% and regret <= Median's in both samplers and spends less
than the choice without peers in both. ``--beat-finished 0 1`` adds the finished-sweep
calibration axis (1: ``finished_calibration`` = the fold's, fitted like the library's
``FINISHED_SWEEP_CALIBRATION`` on the other sources; the comparison column is then the choice
without it). ``--reliability``
checks P(beat) against outcomes (:func:`reliability`): every prefix the beat rule would decide on,
with every other curve of the pool as a COMPLETE trial, each source with its held-out calibrations.

``--ties`` (no forecasts, seconds): how much of "best pruned" is noise. Per pool, the best and
runner-up finals (the bench's own finals) against the per-point noise sd of the curves' later
halves (``late_noise``; pooled = the median over the pool's curves, as ``margin_noise`` uses, or
the two curves' own); the share of pools and of random-order searches where the gap is under 1
and 2 sds. Then :class:`HindsightOracle` through the same replay: it knows every curve's smoothed
final (the mean of its last 5 points, or the whole-curve forecast at ``T``) and prunes a trial at
its 5th report iff that is below the incumbent's observed final (less 0 / 1 / 2 pooled sds), next
to Median and Hyperband: the "best pruned" share no forecaster can beat without a margin.

Per run (pool x sampler x seed x pruner): compute = sum over trials of the last step each
reported (training to step s costs s; a cache hit costs 0); found = the true final value of the
best completed trial; regret = the pool's best final value - found. ``regret @ x%`` is the regret
at equal compute: the best among trials completed before the run's cumulative compute passed x%
of the no-pruning run's compute for the same pool, sampler and seed (nothing completed yet: the
pool's worst final value). Tables average over runs; compute is also given as the ratio to no
pruning (mean over runs of the per-run ratio).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/search.py [--seeds 5]``, or ``... --loso --jobs 2``,
or ``... --beat --jobs 2``, or ``... --ties``;
prints markdown (bench/README.md, section "Search").
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import re
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import numpy as np
import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent))
from forecast import SHORT, SOURCES, RealCurve, load_real

import scalerl.harness.analysis.forecast.ensemble as forecaster_module
import scalerl.harness.analysis.forecast.sweep_prior as hierarchical_module
import scalerl.harness.optuna.pruner as pruner_module
from scalerl.harness.analysis.fit.curve import SigmoidFit, sigmoid_curve
from scalerl.harness.analysis.fit.fitters import fit_sigmoid_many
from scalerl.harness.analysis.forecast.calibrations import (
    FINISHED_SWEEP_CALIBRATION,
    LINEAR_CALIBRATION,
    SWEEP_CALIBRATION,
)
from scalerl.harness.analysis.forecast.conformal import fit_calibration
from scalerl.harness.analysis.forecast.ensemble import PointForecast, point_forecast_many
from scalerl.harness.analysis.forecast.intervals import IntervalCalibration
from scalerl.harness.analysis.forecast.sweep_prior import (
    DEFAULT_SWEEP,
    SWEEP_MEMBERS,
    Prior,
    SweepSettings,
    point_forecast_with_prior,
    sweep_priors,
)
from scalerl.harness.optuna import ForecastPruner
from scalerl.harness.optuna.pruner import late_noise

FINAL_POINTS = 3
BUDGET_SHARES = (0.25, 0.5)
MIN_POINTS = 5  # ForecastPruner's default warm-up, mirrored by the matched MedianPruner


@dataclass(frozen=True)
class Curve:
    name: str
    steps: np.ndarray  # int64, sorted
    values: np.ndarray

    @property
    def final(self) -> float:
        return float(np.mean(self.values[-FINAL_POINTS:]))


@dataclass(frozen=True)
class Pool:
    name: str
    source: str
    target: int
    curves: tuple[Curve, ...]

    @property
    def finals(self) -> np.ndarray:
        return np.array([c.final for c in self.curves])

    @property
    def points(self) -> int:
        return int(np.median([c.steps.size for c in self.curves]))


def _cut(c: RealCurve, target: int) -> Curve:
    keep = c.x <= target
    return Curve(c.name, c.x[keep].astype(np.int64), c.y[keep].astype(np.float64))


def _pool(name: str, source: str, curves: Sequence[RealCurve], target: int | None = None) -> Pool:
    t = int(min(c.x[-1] for c in curves)) if target is None else target
    kept = [c for c in curves if c.x[-1] >= t]
    return Pool(name, source, t, tuple(_cut(c, t) for c in kept))


def build_pools(real: Sequence[RealCurve]) -> list[Pool]:
    by: dict[str, list[RealCurve]] = defaultdict(list)
    for c in real:
        by[c.source].append(c)
    pools = [_pool("W&B GSM8K val", SOURCES[0], by[SOURCES[0]], target=2500)]
    tb = by[SOURCES[1]]
    pools.append(_pool("TB GSM8K val", SOURCES[1], [c for c in tb if ":val-core" in c.name]))
    pools.append(_pool("TB train reward", SOURCES[1], [c for c in tb if ":critic" in c.name]))
    pools.append(_pool("verl train reward", SOURCES[2], by[SOURCES[2]]))
    groups: dict[tuple[str, str], list[RealCurve]] = defaultdict(list)
    for c in by[SOURCES[3]]:
        m = re.search(r"val-core/([^/]+?)-Qwen-instruct/", c.name)
        bench = m.group(1) if m else c.name.split(":", 1)[1]
        groups[(c.name.split("-", 1)[0], bench)].append(c)
    for (size, bench), cs in sorted(groups.items()):
        pools.append(_pool(f"SPEED {size} {bench}", SOURCES[3], cs))
    return pools


PrunerFactory = Callable[[Pool], optuna.pruners.BasePruner]


def _warmup_step(pool: Pool) -> int:
    return int(np.median([c.steps[min(MIN_POINTS, c.steps.size) - 1] for c in pool.curves]))


PRUNERS: dict[str, PrunerFactory] = {
    "none": lambda p: optuna.pruners.NopPruner(),
    "Median (defaults)": lambda p: optuna.pruners.MedianPruner(),
    "Median (matched warm-up)": lambda p: optuna.pruners.MedianPruner(
        n_startup_trials=1, n_warmup_steps=_warmup_step(p)
    ),
    "Hyperband": lambda p: optuna.pruners.HyperbandPruner(max_resource=p.target),
    "Forecast (defaults: 0.9, 8 pt)": lambda p: ForecastPruner(
        float(p.target), interval_steps=max(1, p.points // 50)
    ),
    "Forecast (faster preset: 0.8, 5 pt)": lambda p: ForecastPruner(
        float(p.target), interval_steps=max(1, p.points // 50), level=0.8, min_points=5
    ),
}
SAMPLERS: dict[str, Callable[[int], optuna.samplers.BaseSampler]] = {
    "random order": lambda s: optuna.samplers.BruteForceSampler(seed=s),
    "TPE": lambda s: optuna.samplers.TPESampler(seed=s),
}


@dataclass(frozen=True)
class Run:
    pool: str
    source: str
    sampler: str
    seed: int
    pruner: str
    compute: float
    found: float
    regret: float
    trajectory: tuple[tuple[float, float], ...]  # (cumulative compute, final) per completed trial
    worst: float
    best: float
    wall: float
    best_pruned: bool = False  # the pool's best curve (highest final) was pruned

    def regret_at(self, budget: float) -> float:
        done = [f for c, f in self.trajectory if c <= budget + 1e-9]
        return self.best - (max(done) if done else self.worst)


def run_study(pool: Pool, sampler: str, seed: int, pruner: str, factory: PrunerFactory | None = None) -> Run:
    ids = [str(i) for i in range(len(pool.curves))]
    seen: dict[str, float | None] = {}  # curve id -> final value, None if it was pruned
    cum = 0.0
    trajectory: list[tuple[float, float]] = []

    def objective(trial: optuna.Trial) -> float:
        nonlocal cum
        k = str(trial.suggest_categorical("curve", ids))
        if k in seen:  # cache hit: no compute, same outcome
            hit = seen[k]
            if hit is None:
                raise optuna.TrialPruned()
            trajectory.append((cum, hit))
            return hit
        c = pool.curves[int(k)]
        for step, value in zip(c.steps, c.values, strict=True):
            trial.report(float(value), int(step))
            if trial.should_prune():
                cum += float(step)
                seen[k] = None
                raise optuna.TrialPruned()
        cum += float(c.steps[-1])
        seen[k] = c.final
        trajectory.append((cum, c.final))
        return c.final

    study = optuna.create_study(  # a fixed name: HyperbandPruner assigns brackets by its hash
        study_name=f"{pool.name}/{sampler}/{seed}/{pruner}",
        direction="maximize",
        sampler=SAMPLERS[sampler](seed),
        pruner=(factory or PRUNERS[pruner])(pool),
    )
    t0 = time.perf_counter()
    study.optimize(objective, n_trials=len(pool.curves))
    wall = time.perf_counter() - t0
    finals = pool.finals
    found = max((f for _, f in trajectory), default=float(finals.min()))
    top = str(int(np.argmax(finals)))
    return Run(
        pool.name,
        pool.source,
        sampler,
        seed,
        pruner,
        cum,
        found,
        float(finals.max()) - found,
        tuple(trajectory),
        float(finals.min()),
        float(finals.max()),
        wall,
        top in seen and seen[top] is None,
    )


def summary(runs: Sequence[Run], sampler: str) -> str:
    mine = [r for r in runs if r.sampler == sampler]
    base = {(r.pool, r.seed): r for r in mine if r.pruner == "none"}
    head = (
        "| pruner | compute (steps) | vs none | same best as none | found | regret | "
        + " | ".join(f"regret @ {int(b * 100)}%" for b in BUDGET_SHARES)
        + " | wall s |"
    )
    lines = [head, "|" + "---|" * (7 + len(BUDGET_SHARES))]
    for p in PRUNERS:
        rs = [r for r in mine if r.pruner == p]
        ratio = np.mean([r.compute / base[(r.pool, r.seed)].compute for r in rs])
        same = np.mean([abs(r.found - base[(r.pool, r.seed)].found) < 1e-12 for r in rs])
        at = [np.mean([r.regret_at(b * base[(r.pool, r.seed)].compute) for r in rs]) for b in BUDGET_SHARES]
        lines.append(
            f"| {p} | {np.mean([r.compute for r in rs]):,.0f} | {ratio:.2f}x | {same:.0%} | "
            f"{np.mean([r.found for r in rs]):.4f} | {np.mean([r.regret for r in rs]):.4f} | "
            + " | ".join(f"{a:.4f}" for a in at)
            + f" | {sum(r.wall for r in rs):.1f} |"
        )
    return "\n".join(lines)


def by_source(runs: Sequence[Run], sampler: str) -> str:
    mine = [r for r in runs if r.sampler == sampler]
    base = {(r.pool, r.seed): r for r in mine if r.pruner == "none"}
    names = [p for p in PRUNERS if p != "none"]
    lines = [
        "| source | pools | " + " | ".join(f"{p}: compute / regret" for p in names) + " |",
        "|" + "---|" * (2 + len(names)),
    ]
    for s in SOURCES:
        rs = [r for r in mine if r.source == s]
        cells = []
        for p in names:
            q = [r for r in rs if r.pruner == p]
            ratio = np.mean([r.compute / base[(r.pool, r.seed)].compute for r in q])
            cells.append(f"{ratio:.2f}x / {np.mean([r.regret for r in q]):.4f}")
        lines.append(f"| {SHORT[s]} | {len({r.pool for r in rs})} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- Leave-one-source-out choice of the forecast pruner's settings (--loso) -------------------

SAME_BEST = 0.9  # selection: keep the same best as no pruning in >= 90% of the training runs
GRID_RULES = (("hi", "lo"), ("hi", "value"), ("value", "lo"))  # (trial's edge, reference's edge)
GRID_LEVELS = (0.5, 0.7, 0.8, 0.9)
GRID_MARGINS = (1.0, 1.5, 2.0)
GRID_POINTS = (5, 8)
BASELINES = ("none", "Median (defaults)", "Hyperband")


@dataclass(frozen=True)
class Calibrations:
    """The interval calibrations a forecast pruner gets: single-curve and sweep forecasts."""

    single: IntervalCalibration = LINEAR_CALIBRATION
    sweep: IntervalCalibration = SWEEP_CALIBRATION
    finished: IntervalCalibration = FINISHED_SWEEP_CALIBRATION  # siblings ran on (siblings_finished)


SHIPPED = Calibrations()  # the pruner's defaults, fitted on all four sources


@dataclass(frozen=True)
class Setting:
    """One forecast-pruner configuration of the --loso grid (bound rule)."""

    edge: str
    reference: str
    level: float
    margin: float
    min_points: int
    cal: Calibrations = SHIPPED

    @property
    def label(self) -> str:
        return f"{self.edge}<{self.reference} {self.level:g} x{self.margin:g} {self.min_points}pt"

    def factory(self) -> PrunerFactory:
        def make(p: Pool) -> optuna.pruners.BasePruner:
            return ForecastPruner(
                float(p.target),
                interval_steps=max(1, p.points // 50),
                level=self.level,
                inflection_margin=self.margin,
                min_points=self.min_points,
                edge="value" if self.edge == "value" else "hi",
                reference="value" if self.reference == "value" else "lo",
                calibration=self.cal.single,
                sweep_calibration=self.cal.sweep,
            )

        return make


@dataclass(frozen=True)
class BeatSetting:
    """One configuration of the beat rule (--beat): prune when P(beat the incumbent less
    ``margin_noise`` noise sds) < ``p``."""

    p: float
    min_points: int
    margin: float = 2.0
    cal: Calibrations = SHIPPED
    margin_noise: float = 0.0
    peers: int = 0
    finished: bool = False  # finished_calibration = cal.finished (else None: the sweep one)

    @property
    def label(self) -> str:
        tail = (f" peers{self.peers}" if self.peers else "") + (" fin" if self.finished else "")
        return f"beat p<{self.p:g} x{self.margin:g} {self.min_points}pt -{self.margin_noise:g}sd{tail}"

    def factory(self) -> PrunerFactory:
        def make(pool: Pool) -> optuna.pruners.BasePruner:
            return ForecastPruner(
                float(pool.target),
                rule="beat",
                min_probability=self.p,
                interval_steps=max(1, pool.points // BEAT_REPORTS),
                inflection_margin=self.margin,
                min_points=self.min_points,
                margin_noise=self.margin_noise,
                peers=self.peers,
                calibration=self.cal.single,
                sweep_calibration=self.cal.sweep,
                finished_calibration=self.cal.finished if self.finished else None,
            )

        return make


GRID = tuple(
    Setting(e, r, lv, m, n)
    for (e, r), lv, m, n in itertools.product(GRID_RULES, GRID_LEVELS, GRID_MARGINS, GRID_POINTS)
)
OLD_DEFAULTS = Setting("hi", "lo", 0.9, 2.0, 8)  # ForecastPruner's defaults (kept after --loso)


GUARD_STEPS = np.arange(5, 205, 5)  # tests/unit/optuna/test_forecast_pruner.py's synthetic case
GUARD_SEEDS = ((1, 3), (5, 6), (7, 8), (9, 10))


def passes_guard(setting: Setting | BeatSetting) -> bool:
    """The unit tests' synthetic guard: sigmoids (R0 0.1, B 2, C_mid 40, noise sd 0.005, reports
    every 5 steps to T = 200) with ceilings 0.8, 0.4, 0.81, 0.6, in that order: the 0.81 trial
    must complete (not be pruned against the 0.80 one) for each of 4 noise-seed pairs. A setting
    that decides at the inflection fails it: a fit ending at C_mid puts C_mid inside the data and
    underestimates the ceiling with a narrow interval."""

    def curve(a: float, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        return sigmoid_curve(GUARD_STEPS, 0.1, a, 2.0, 40.0) + rng.normal(0.0, 0.005, GUARD_STEPS.size)

    pool = Pool("guard", "synthetic", 200, (Curve("guard", GUARD_STEPS, GUARD_STEPS * 0.0),))
    for s1, s3 in GUARD_SEEDS:
        study = optuna.create_study(direction="maximize", pruner=setting.factory()(pool))
        for a, seed in ((0.8, s1), (0.4, 2), (0.81, s3), (0.6, 4)):
            y = curve(a, seed)
            trial = study.ask()
            for step, value in zip(GUARD_STEPS, y, strict=True):
                trial.report(float(value), int(step))
                if trial.should_prune():
                    if a == 0.81:
                        return False
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    break
            else:
                study.tell(trial, float(np.mean(y[-FINAL_POINTS:])))
    return True


class _Memo:
    """Point forecasts and sigmoid fits memoised by curve prefix (and, for the sweep forecast, the
    siblings' prefixes), shared by every pruner instance in this process: the pruner's rule runs
    unchanged, but a state is forecast once, not once per grid setting, seed and calibration
    (a point forecast depends on neither ``level`` nor the calibration: the pruner attaches
    those). Every function fits each curve on its own, so batching changes nothing."""

    def __init__(self) -> None:
        self.points: dict[tuple[bytes, ...], PointForecast] = {}
        self.sweep: dict[tuple[bytes, ...], PointForecast] = {}
        self.priors: dict[tuple[bytes, ...], Prior | None] = {}
        self.fits: dict[tuple[bytes, bytes, float], SigmoidFit] = {}

    @staticmethod
    def _key(x: object, y: object) -> tuple[bytes, bytes]:
        return np.asarray(x, dtype=np.float64).tobytes(), np.asarray(y, dtype=np.float64).tobytes()

    def point_forecast_many(
        self, curves: Sequence[tuple[np.ndarray, np.ndarray]], at: Sequence[np.ndarray]
    ) -> list[PointForecast]:
        keys = [
            (*self._key(x, y), np.asarray(a, dtype=np.float64).tobytes())
            for (x, y), a in zip(curves, at, strict=True)
        ]
        todo = [i for i, k in enumerate(keys) if k not in self.points]
        if todo:
            made = point_forecast_many([curves[i] for i in todo], [at[i] for i in todo])
            for i, pf in zip(todo, made, strict=True):
                self.points[keys[i]] = pf
        return [self.points[k] for k in keys]

    def _set_key(self, curves: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[bytes, ...]:
        return tuple(b for x, y in curves for b in self._key(x, y))

    def sweep_priors(
        self, sets: Sequence[Sequence[tuple[np.ndarray, np.ndarray]]], settings: SweepSettings = DEFAULT_SWEEP
    ) -> list[Prior | None]:
        assert settings == DEFAULT_SWEEP  # the key leaves the settings out
        out = []
        for sibs in sets:
            k = self._set_key(sibs)
            if k not in self.priors:
                self.priors[k] = sweep_priors([sibs])[0]
            out.append(self.priors[k])
        return out

    def point_forecast_with_prior(
        self,
        curves: Sequence[tuple[np.ndarray, np.ndarray]],
        at: Sequence[np.ndarray],
        priors: Sequence[Prior | None],
        *,
        siblings: Sequence[Sequence[tuple[np.ndarray, np.ndarray]]],
    ) -> list[PointForecast]:
        out = []
        for c, a, pr, sibs in zip(curves, at, priors, siblings, strict=True):
            # The prior is a function of the siblings (sweep_priors above), so they key it.
            k = (*self._key(*c), np.asarray(a, dtype=np.float64).tobytes(), *self._set_key(sibs))
            if k not in self.sweep:
                self.sweep[k] = point_forecast_with_prior([c], [a], [pr], siblings=[sibs])[0]
            out.append(self.sweep[k])
        return out

    def fit_sigmoid_many(
        self,
        curves: Sequence[tuple[np.ndarray, np.ndarray]],
        *,
        r0: Sequence[float],
        sigma: Sequence[np.ndarray | None] | None = None,
    ) -> list[SigmoidFit]:
        if sigma is not None:
            return fit_sigmoid_many(list(curves), r0=list(r0), sigma=list(sigma))
        keys = [(*self._key(x, y), float(r)) for (x, y), r in zip(curves, r0, strict=True)]
        todo = [i for i, k in enumerate(keys) if k not in self.fits]
        if todo:
            made = fit_sigmoid_many([curves[i] for i in todo], r0=[r0[i] for i in todo])
            for i, fit in zip(todo, made, strict=True):
                self.fits[keys[i]] = fit
        return [self.fits[k] for k in keys]


_PATCHED = (
    (pruner_module, "point_forecast_many"),
    (pruner_module, "point_forecast_with_prior"),
    (pruner_module, "sweep_priors"),
    (pruner_module, "fit_sigmoid_many"),
    # The sweep forecast's own sibling and validation fits (every curve on its own: same result).
    (hierarchical_module, "fit_sigmoid_many"),
    (forecaster_module, "fit_sigmoid_many"),
)


@contextmanager
def memoised() -> Iterator[_Memo]:
    memo = _Memo()
    saved = [getattr(mod, name) for mod, name in _PATCHED]
    for mod, name in _PATCHED:
        setattr(mod, name, getattr(memo, name))
    try:
        yield memo
    finally:
        for (mod, name), fn in zip(_PATCHED, saved, strict=True):
            setattr(mod, name, fn)


Task = tuple[str, int, str, Setting | BeatSetting | None]  # sampler, seed, pruner name, grid setting


def _pool_runs(job: tuple[Pool, Sequence[Task]]) -> list[Run]:
    """Every study of one pool (one process, one memo): the unit of work of --jobs."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    pool, tasks = job
    with memoised():
        return [
            run_study(pool, sampler, seed, name, None if s is None else s.factory())
            for sampler, seed, name, s in tasks
        ]


def _run_all(jobs: Sequence[tuple[Pool, Sequence[Task]]], n_jobs: int) -> list[Run]:
    if n_jobs <= 1:
        return [r for job in jobs for r in _pool_runs(job)]
    with ProcessPoolExecutor(n_jobs) as ex:
        return [r for rs in ex.map(_pool_runs, jobs) for r in rs]


S = TypeVar("S", Setting, BeatSetting)


@dataclass(frozen=True)
class Score:
    runs: int
    ratio: float  # mean over runs of compute / no pruning's
    same: float  # share of runs that found the same best as no pruning
    regret: float
    at: tuple[float, ...]  # regret at BUDGET_SHARES of no pruning's compute
    best_pruned: float = 0.0  # share of runs that pruned the pool's best curve


def score(runs: Sequence[Run], base: dict[tuple[str, str, int], Run]) -> Score:
    b = [base[(r.pool, r.sampler, r.seed)] for r in runs]
    return Score(
        len(runs),
        float(np.mean([r.compute / x.compute for r, x in zip(runs, b, strict=True)])),
        float(np.mean([abs(r.found - x.found) < 1e-12 for r, x in zip(runs, b, strict=True)])),
        float(np.mean([r.regret for r in runs])),
        tuple(
            float(np.mean([r.regret_at(f * x.compute) for r, x in zip(runs, b, strict=True)]))
            for f in BUDGET_SHARES
        ),
        float(np.mean([r.best_pruned for r in runs])),
    )


def by_source_table(
    runs: Sequence[Run],
    sampler: str,
    names: Sequence[str],
    base: dict[tuple[str, str, int], Run],
    first: str,
    label: Callable[[str], str],
    n_pools: int,
) -> None:
    """One sampler's table, a row per source and one over all pools: per pruner in ``names``,
    compute vs none / same best / best pruned / regret / regret at each budget share."""
    print(f"| {first} | runs | " + " | ".join(names) + " |")
    print("|" + "---|" * (2 + len(names)))
    for src in (*SOURCES, None):
        rs = [r for r in runs if r.sampler == sampler and (src is None or r.source == src)]
        cells = []
        for n in names:
            sc = score([r for r in rs if r.pruner == n], base)
            cells.append(
                f"{sc.ratio:.2f}x / {sc.same:.0%} / {sc.best_pruned:.0%} / {sc.regret:.4f} / "
                + " / ".join(f"{a:.4f}" for a in sc.at)
            )
        name = f"all {n_pools} pools" if src is None else label(src)
        print(f"| {name} | {len([r for r in rs if r.pruner == 'none'])} | " + " | ".join(cells) + " |")


def choose(scores: dict[S, Score], floor: float = SAME_BEST) -> S:
    """The selection criterion, fixed before any held-out score was seen: the least compute
    among settings that keep the same best as no pruning in >= ``floor`` of the training runs
    (ties: lower regret); if none does, the highest same-best share (then the least compute)."""
    ok = [s for s, v in scores.items() if v.same >= floor - 1e-12]
    if ok:
        return min(ok, key=lambda s: (scores[s].ratio, scores[s].regret))
    return max(scores, key=lambda s: (scores[s].same, -scores[s].ratio))


def loso(pools: Sequence[Pool], select_seeds: int, seeds: int, n_jobs: int) -> None:
    """Choose the grid setting on three sources (random order, ``select_seeds`` seeds), score it
    on the fourth (both samplers, ``seeds`` seeds) next to Median and Hyperband; then the choice
    on all four sources (the pruner's defaults)."""
    t0 = time.perf_counter()
    # Leave-one-source-out calibrations too (issue 24, item 3): the grid is run once per fold, the
    # fold's forecasts calibrated without its held-out source; None = all four (the preset).
    cals = loso_calibrations(n_jobs)
    folds: tuple[str | None, ...] = (*SOURCES, None)
    jobs_sel = []
    for p in pools:
        tasks: list[Task] = [("random order", sd, "none", None) for sd in range(select_seeds)]
        for src in folds:
            if src == p.source:
                continue
            tasks += [
                ("random order", sd, f"{src}|{g.label}", replace(g, cal=cals[src]))
                for g in GRID
                for sd in range(select_seeds)
            ]
        jobs_sel.append((p, tasks))
    sel = _run_all(jobs_sel, n_jobs)
    t_sel = time.perf_counter() - t0
    base = {(r.pool, r.sampler, r.seed): r for r in sel if r.pruner == "none"}
    by_label = {f"{src}|{g.label}": (src, g) for src in folds for g in GRID}
    grid_runs: dict[tuple[str | None, Setting], list[Run]] = defaultdict(list)
    for r in sel:
        if r.pruner != "none":
            grid_runs[by_label[r.pruner]].append(r)

    def scores_without(source: str | None) -> dict[Setting, Score]:
        return {
            g: score([r for r in rs if r.source != source], base)
            for (src, g), rs in grid_runs.items()
            if src == source
        }

    with memoised():
        guarded = {src: {g for g in GRID if passes_guard(replace(g, cal=cals[src]))} for src in folds}
    variants = {"LOSO": {src: set(GRID) for src in folds}, "LOSO + guard": guarded}
    chosen = {
        (v, src): choose({g: sc for g, sc in scores_without(src).items() if g in allowed[src]})
        for v, allowed in variants.items()
        for src in folds
    }
    # Held-out: each source with the setting chosen without it, plus the baselines; every forecast
    # pruner calibrated without that source.
    t1 = time.perf_counter()
    jobs = []
    for p in pools:
        cal = cals[p.source]
        tasks = [(sm, sd, b, None) for sm in SAMPLERS for sd in range(seeds) for b in BASELINES]
        tasks += [
            (sm, sd, "Forecast (defaults)", replace(OLD_DEFAULTS, cal=cal))
            for sm in SAMPLERS
            for sd in range(seeds)
        ]
        for v in variants:
            tasks += [
                (sm, sd, f"Forecast ({v})", replace(chosen[(v, p.source)], cal=cal))
                for sm in SAMPLERS
                for sd in range(seeds)
            ]
        jobs.append((p, tasks))
    held = _run_all(jobs, n_jobs)
    t_held = time.perf_counter() - t1
    hbase = {(r.pool, r.sampler, r.seed): r for r in held if r.pruner == "none"}

    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    cpu = platform.processor() or platform.machine()
    print(f"machine: {platform.platform()}, {cpu}, {os.cpu_count()} cores")
    print(f"command: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} python {' '.join(sys.argv)}")
    print(
        f"optuna {optuna.__version__}; grid of {len(GRID)} settings x {len(pools)} pools x "
        f"{select_seeds} seeds (random order) in {t_sel:.0f} s; held-out studies in {t_held:.0f} s"
    )
    print(
        f"\nselection: least compute with the same best as no pruning in >= {SAME_BEST:.0%} of the "
        "training runs (random order); ties by regret. LOSO: any grid setting; LOSO + guard: only "
        f"the {len(guarded[None])} of {len(GRID)} settings that pass the synthetic guard (passes_guard; "
        "per fold with its calibrations); calibrations fitted without the held-out source\n"
    )
    print("| held out | LOSO: chosen on the other three | train | LOSO + guard: chosen | train |")
    print("|---|---|---|---|---|")
    for src in (*SOURCES, None):
        sc = scores_without(src)
        cells = []
        for v in variants:
            c = chosen[(v, src)]
            cells.append(f"{c.label} | {sc[c].ratio:.2f}x / {sc[c].same:.0%} / {sc[c].regret:.4f}")
        print(f"| {'(none: all four)' if src is None else SHORT[src]} | " + " | ".join(cells) + " |")
    names = [*BASELINES[1:], "Forecast (defaults)", *(f"Forecast ({v})" for v in variants)]
    for sm in SAMPLERS:
        print(f"\n### {sm}, held-out source (compute vs none / same best as none / regret / regret @ 50%)\n")
        print("| held out | runs | " + " | ".join(names) + " |")
        print("|" + "---|" * (2 + len(names)))
        rows: list[str | None] = [*SOURCES, None]
        for row in rows:
            rs = [r for r in held if r.sampler == sm and (row is None or r.source == row)]
            cells = []
            for n in names:
                h = score([r for r in rs if r.pruner == n], hbase)
                cells.append(f"{h.ratio:.2f}x / {h.same:.0%} / {h.regret:.4f} / {h.at[-1]:.4f}")
            label = f"all {len(pools)} pools" if row is None else SHORT[row]
            print(f"| {label} | {len([r for r in rs if r.pruner == 'none'])} | " + " | ".join(cells) + " |")
    print(f"\n### grid on all four sources (random order, {select_seeds} seeds), best 16 by the criterion\n")
    allsc = scores_without(None)
    order = sorted(allsc, key=lambda s: (allsc[s].same < SAME_BEST - 1e-12, allsc[s].ratio, allsc[s].regret))
    print("| setting | guard | compute | same best | regret | regret @ 25% | regret @ 50% |")
    print("|---|---|---|---|---|---|---|")
    for s in order[:16]:
        g = allsc[s]
        at = " | ".join(f"{a:.4f}" for a in g.at)
        guard = "pass" if s in guarded[None] else "fail"
        print(f"| {s.label} | {guard} | {g.ratio:.2f}x | {g.same:.0%} | {g.regret:.4f} | {at} |")
    print("\n### frontier per rule (all four sources): least compute at each same-best share\n")
    print("| rule | same best >= 95% | >= 90% | >= 80% |")
    print("|---|---|---|---|")
    for e, ref in GRID_RULES:
        cells = []
        for floor in (0.95, 0.9, 0.8):
            ok = [s for s in allsc if s.edge == e and s.reference == ref and allsc[s].same >= floor - 1e-12]
            if ok:
                b = min(ok, key=lambda s: (allsc[s].ratio, allsc[s].regret))
                cells.append(f"{allsc[b].ratio:.2f}x ({b.label})")
            else:
                cells.append("-")
        print(f"| {e}<{ref} | " + " | ".join(cells) + " |")


# --- The beat rule, leave-one-source-out with leave-one-source-out calibrations (--beat) ---------

BEAT_REPORTS = 50  # re-forecast every points // BEAT_REPORTS reports, as the bound rule
BEAT_PS = (0.02, 0.05, 0.1, 0.2)
# min_points 8 was dropped when margin_noise joined the grid (2026-11-26), to keep the run under
# ~45 min on 2 cores: with 8 points no fold chose it, and each 8-point setting spent more compute
# than its 5-point twin at the same or a lower same-best share.
BEAT_POINTS = (5,)
BEAT_MARGINS = (0.0, 1.0, 2.0)  # margin_noise: indifference margin, in the sweep's noise sds
BEAT_FLOOR = 0.95  # selection: the same best as no pruning in >= 95% of the training runs
BEAT_BASELINES = ("none", "Median (defaults)", "Hyperband")


def _cal_forecasts(job: tuple[str, Sequence[object]]) -> list[PointForecast]:
    from forecast_sweep import SHIPPED_KAPPA, forecasts

    mode, cs = job
    return forecasts(cs, mode, SHIPPED_KAPPA)  # type: ignore[arg-type]


def loso_calibrations(n_jobs: int) -> dict[str | None, Calibrations]:
    """Per held-out source (None: none held out), the single-curve and sweep calibrations fitted
    on the other sources' curves exactly as ``bench/forecast_sweep.py`` fits them (backtests cut at
    1/30, 10, 25, 50, 75% of each curve; the sweep forecast with same-stage and finished siblings)."""
    from forecast_sweep import CAL_CUTS, SWEEP_GRID, cases, loso_fit, sweeps_of

    curves = load_real()
    cs = cases(curves, sweeps_of(curves), CAL_CUTS)
    modes = ("single", "same", "finished")
    with ProcessPoolExecutor(max(1, n_jobs)) as ex:
        made = dict(zip(modes, ex.map(_cal_forecasts, [(m, cs) for m in modes]), strict=True))
    src = [curves[c.i].source for c in cs]
    single = [(pf, c.y_test, g) for pf, c, g in zip(made["single"], cs, src, strict=True)]
    sweep = [
        (pf, c.y_test, g)
        for m in ("same", "finished")
        for pf, c, g in zip(made[m], cs, src, strict=True)
        if pf.names == SWEEP_MEMBERS
    ]
    # The finished-sweep calibration as the library's is fitted (bench/forecast_sweep.py): the
    # sweep forecasts siblings_finished calls finished, either sibling setting, nested objective.
    far = [
        (pf, c)
        for m in ("same", "finished")
        for pf, c in zip(made[m], cs, strict=True)
        if pf.names == SWEEP_MEMBERS and c.ran_on(m)
    ]
    out: dict[str | None, Calibrations] = {}
    for held in (*SOURCES, None):
        one = [t for t in single if t[2] != held]
        two = [t for t in sweep if t[2] != held]
        out[held] = Calibrations(
            fit_calibration([t[0] for t in one], [t[1] for t in one], groups=[t[2] for t in one]),
            fit_calibration(
                [t[0] for t in two],
                [t[1] for t in two],
                groups=[t[2] for t in two],
                horizon_slopes=SWEEP_GRID["horizon_slopes"],
                trend_weights=SWEEP_GRID["trend_weights"],
                sibling_weights=SWEEP_GRID["sibling_weights"],
            ),
            loso_fit([p for p, _ in far], [c for _, c in far], curves, str(held), True, **SWEEP_GRID)[0],
        )
    return out


def _cal_label(c: IntervalCalibration) -> str:
    return (
        f"h={c.horizon_slope:g} g={c.log_horizon_slope:g} m={c.move_weight:g} t={c.trend_weight:g} "
        f"v={c.sibling_weight:g} q50={c.quantile(0.5):.2f} q90={c.quantile(0.9):.2f}"
    )


def beat(
    pools: Sequence[Pool],
    select_seeds: int,
    seeds: int,
    n_jobs: int,
    ps: Sequence[float] = BEAT_PS,
    noises: Sequence[float] = BEAT_MARGINS,
    inflections: Sequence[float] = (2.0,),
    peer_counts: Sequence[int] = (0,),
    finished: Sequence[bool] = (False,),
) -> None:
    """The beat rule's threshold chosen leave-one-source-out (calibrations too), scored held out
    next to Median, Hyperband and the bound rule's defaults (see the module docstring). ``ps``,
    ``noises`` (margin_noise) and ``inflections`` (inflection_margin) span the grid; the
    comparison column is the same criterion's choice among the inflection-2 settings when
    ``inflections`` has more than one value, else among the settings without peers when
    ``peer_counts`` (``peers``) has more than one, else among the margin-0 settings."""
    t0 = time.perf_counter()
    cals = loso_calibrations(n_jobs)
    t_cal = time.perf_counter() - t0
    grid = [
        BeatSetting(p, n, margin=f, margin_noise=m, peers=k, finished=fin)
        for p in ps
        for n in BEAT_POINTS
        for m in noises
        for f in inflections
        for k in peer_counts
        for fin in finished
    ]
    # The comparison column: the first axis with several values, held at the previous grid's value.
    previous: Callable[[BeatSetting], bool]
    if len(inflections) > 1:
        comparison, previous = "inflection 2", lambda g: g.margin == 2.0
    elif len(peer_counts) > 1:
        comparison, previous = "no peers", lambda g: g.peers == 0
    elif len(finished) > 1:
        comparison, previous = "sweep calibration only", lambda g: not g.finished
    else:
        comparison, previous = "margin 0", lambda g: g.margin_noise == 0

    with memoised():
        guarded = [g for g in grid if passes_guard(g)]
    # Selection: every pool with the grid under each calibration that treats it as training data.
    t1 = time.perf_counter()
    jobs = []
    for pl in pools:
        tasks: list[Task] = [("random order", sd, "none", None) for sd in range(select_seeds)]
        for held in SOURCES:
            if held != pl.source:
                tasks += [
                    ("random order", sd, f"{held}|{g.label}", replace(g, cal=cals[held]))
                    for g in guarded
                    for sd in range(select_seeds)
                ]
        jobs.append((pl, tasks))
    sel = _run_all(jobs, n_jobs)
    t_sel = time.perf_counter() - t1
    base = {(r.pool, r.sampler, r.seed): r for r in sel if r.pruner == "none"}
    by_label = {g.label: g for g in guarded}
    train: dict[tuple[str, BeatSetting], Score] = {}
    for held in SOURCES:
        for g in guarded:
            rs = [r for r in sel if r.pruner == f"{held}|{g.label}"]
            train[(held, g)] = score(rs, base)
    chosen = {held: choose({g: train[(held, g)] for g in guarded}, BEAT_FLOOR) for held in SOURCES}
    # The same criterion on the previous grid's settings (no margin, or inflection 2), for comparison.
    plain = {
        held: choose(
            {g: train[(held, g)] for g in guarded if previous(g)}
            or {chosen[held]: train[(held, chosen[held])]},
            BEAT_FLOOR,
        )
        for held in SOURCES
    }
    del by_label
    # Held out: each source with its choice and its calibrations, next to the baselines.
    t2 = time.perf_counter()
    names = [
        *BEAT_BASELINES[1:],
        "Forecast bound (defaults)",
        f"Forecast beat (LOSO, {comparison})",
        "Forecast beat (LOSO)",
    ]
    jobs = []
    for pl in pools:
        cal = cals[pl.source]
        tasks = [(sm, sd, b, None) for sm in SAMPLERS for sd in range(seeds) for b in BEAT_BASELINES]
        tasks += [
            (sm, sd, names[2], replace(OLD_DEFAULTS, cal=cal)) for sm in SAMPLERS for sd in range(seeds)
        ]
        tasks += [
            (sm, sd, names[3], replace(plain[pl.source], cal=cal)) for sm in SAMPLERS for sd in range(seeds)
        ]
        tasks += [
            (sm, sd, names[4], replace(chosen[pl.source], cal=cal)) for sm in SAMPLERS for sd in range(seeds)
        ]
        jobs.append((pl, tasks))
    held_runs = _run_all(jobs, n_jobs)
    t_held = time.perf_counter() - t2
    hbase = {(r.pool, r.sampler, r.seed): r for r in held_runs if r.pruner == "none"}

    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    cpu = platform.processor() or platform.machine()
    print(f"machine: {platform.platform()}, {cpu}, {os.cpu_count()} cores")
    print(f"command: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} python {' '.join(sys.argv)}")
    print(
        f"optuna {optuna.__version__}; LOSO calibrations {t_cal:.0f} s; selection ({len(guarded)} settings x "
        f"3 folds x {select_seeds} seeds, random order) {t_sel:.0f} s; held-out studies {t_held:.0f} s"
    )
    print(
        f"\ngrid: p in {tuple(ps)} x min_points {BEAT_POINTS} x margin_noise {tuple(noises)} x inflection "
        f"margin {tuple(inflections)} x peers {tuple(peer_counts)} x finished {tuple(finished)}; "
        "passing the synthetic "
    )
    print(f"guard (passes_guard): {', '.join(g.label for g in guarded) or 'none'}")
    print("\n### Calibrations fitted without the held-out source\n")
    print("| held out | single-curve forecast | sweep forecast | sweep forecast, siblings ran on |")
    print("|---|---|---|---|")
    for fold in (*SOURCES, None):
        c, name = cals[fold], "(none)" if fold is None else SHORT[fold]
        print(f"| {name} | {_cal_label(c.single)} | {_cal_label(c.sweep)} | {_cal_label(c.finished)} |")
    print(
        f"\n### Selection on the other three sources (random order, {select_seeds} seeds): compute vs none / "
        f"same best / best pruned / regret; chosen: least compute with same best >= {BEAT_FLOOR:.0%} "
        + f"(**: any setting; *: {comparison} only)\n"
    )
    print("| setting | " + " | ".join(f"without {SHORT[h]}" for h in SOURCES) + " |")
    print("|---|" + "---|" * len(SOURCES))
    for g in guarded:
        cells = []
        for h in SOURCES:
            v = train[(h, g)]
            mark = "**" if chosen[h] == g else ("*" if plain[h] == g else "")
            cells.append(f"{mark}{v.ratio:.2f}x / {v.same:.0%} / {v.best_pruned:.0%} / {v.regret:.4f}{mark}")
        print(f"| {g.label} | " + " | ".join(cells) + " |")
    for sm in SAMPLERS:
        print(
            f"\n### {sm}, held-out source (compute vs none / same best as none / best pruned / regret / "
            "regret @ 25% / regret @ 50%)\n"
        )
        by_source_table(
            held_runs,
            sm,
            names,
            hbase,
            "held out",
            lambda row: f"{SHORT[row]} ({plain[row].label}; {chosen[row].label})",
            len(pools),
        )
        rs = [r for r in held_runs if r.sampler == sm]
        sc = {n: score([r for r in rs if r.pruner == n], hbase) for n in names}
        b, hb, med = sc[names[4]], sc["Hyperband"], sc["Median (defaults)"]
        print(
            f"\nitem-4 targets ({sm}, all pools): compute {b.ratio:.2f}x vs Hyperband {hb.ratio:.2f}x "
            f"({'met' if b.ratio <= hb.ratio else 'not met'}); "
            f"regret {b.regret:.4f} vs Median {med.regret:.4f} "
            f"({'met' if b.regret <= med.regret else 'not met'}); best pruned in {b.best_pruned:.1%} of "
            f"searches ({'met' if b.best_pruned <= 0.05 else 'not met'})"
        )


# --- The noise floor of "best pruned": near-ties and a hindsight oracle (--ties) ----------------

TIE_SDS = (1.0, 2.0)  # "not distinguishable": the best and runner-up finals within k noise sds
ORACLE_POINTS = 5  # the oracle decides where the beat grid's rule first could: the 5th report
ORACLE_SMOOTH = 5  # the "last-5 mean" oracle's smoothed final


def pool_noise(pool: Pool) -> np.ndarray:
    """Per curve: the per-point noise sd of its later half (``late_noise``, as ``margin_noise``)."""
    return np.array([late_noise(c.values) for c in pool.curves])


_FIT_FINALS: dict[str, np.ndarray] = {}


def smoothed_finals(pool: Pool, how: str) -> np.ndarray:
    """Each curve's final with its noise smoothed away, known in hindsight: the mean of its last
    ``ORACLE_SMOOTH`` points (``"last5"``), or the whole-curve ensemble forecast at ``T``
    (``"fit"``: ``point_forecast_many`` on all points; the last-5 mean where it has no sound one)."""
    last = np.array([float(np.mean(c.values[-ORACLE_SMOOTH:])) for c in pool.curves])
    if how == "last5":
        return last
    if pool.name not in _FIT_FINALS:
        at = np.array([float(pool.target)])
        pfs = point_forecast_many([(c.steps, c.values) for c in pool.curves], [at] * len(pool.curves))
        fit = np.array([float(pf.value[0]) if pf.status == "ok" else np.nan for pf in pfs])
        _FIT_FINALS[pool.name] = np.where(np.isfinite(fit), fit, last)
    return _FIT_FINALS[pool.name]


class HindsightOracle(optuna.pruners.BasePruner):
    """Prunes a trial at its ``ORACLE_POINTS``-th report iff its smoothed final (known in hindsight,
    :func:`smoothed_finals`) is below the best COMPLETE trial's observed value, less ``margin`` x
    the median ``late_noise`` of the COMPLETE curves. Any forecaster decides with less than this;
    so the best it can do on "best pruned" is this oracle's share. Trials run one at a time here,
    so the incumbent cannot move while a trial runs: deciding once loses nothing."""

    def __init__(self, smoothed: np.ndarray, noise: np.ndarray, margin: float = 0.0) -> None:
        self.smoothed, self.noise, self.margin = smoothed, noise, margin

    def prune(self, study: optuna.study.Study, trial: optuna.trial.FrozenTrial) -> bool:
        if len(trial.intermediate_values) != ORACLE_POINTS:
            return False
        done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if not done:
            return False
        bar = max(float(t.value) for t in done if t.value is not None)
        if self.margin > 0:
            ids = sorted({int(t.params["curve"]) for t in done})
            bar -= self.margin * float(np.median(self.noise[ids]))
        return bool(self.smoothed[int(trial.params["curve"])] < bar)


def _oracle(how: str, margin: float = 0.0) -> PrunerFactory:
    return lambda p: HindsightOracle(smoothed_finals(p, how), pool_noise(p), margin)


TIE_PRUNERS: dict[str, PrunerFactory] = {
    "none": PRUNERS["none"],
    "Median (defaults)": PRUNERS["Median (defaults)"],
    "Hyperband": PRUNERS["Hyperband"],
    "oracle, last-5 mean": _oracle("last5"),
    "oracle, whole-curve fit": _oracle("fit"),
    "oracle, last-5 mean, margin 1 sd": _oracle("last5", 1.0),
    "oracle, last-5 mean, margin 2 sd": _oracle("last5", 2.0),
}


def _tie_runs(job: tuple[Pool, int]) -> list[Run]:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    pool, seeds = job
    return [
        run_study(pool, sm, sd, name, f)
        for sm in SAMPLERS
        for sd in range(seeds)
        for name, f in TIE_PRUNERS.items()
    ]


@dataclass(frozen=True)
class Tie:
    """The pool's best and runner-up finals (the bench's definition: mean of the last 3 points)."""

    pool: Pool
    best: int
    runner_up: int
    noise: np.ndarray  # per curve, late_noise

    @property
    def gap(self) -> float:
        f = self.pool.finals
        return float(f[self.best] - f[self.runner_up])

    @property
    def pooled(self) -> float:  # the sweep's noise: median over the pool's curves (margin_noise's)
        return float(np.nanmedian(self.noise))

    @property
    def pair(self) -> float:  # the two curves' own: root mean square of their noise sds
        return float(np.sqrt((self.noise[self.best] ** 2 + self.noise[self.runner_up] ** 2) / 2))

    def within(self, k: float) -> int:
        """Curves other than the best whose final is within ``k`` pooled noise sds of the best's."""
        f = self.pool.finals
        return int(np.sum(f[self.best] - f <= k * self.pooled)) - 1


def tie_of(pool: Pool) -> Tie:
    order = np.argsort(-pool.finals, kind="stable")
    return Tie(pool, int(order[0]), int(order[1]), pool_noise(pool))


def _tie_first(run: Run, tie: Tie, k: float) -> bool:
    """In a no-pruning random-order run: a curve within ``k`` pooled sds of the best completed
    before the best (the state where noise alone can decide against the best)."""
    f = tie.pool.finals
    best = float(f[tie.best])
    near = {float(v) for i, v in enumerate(f) if i != tie.best and best - v <= k * tie.pooled}
    for _, v in run.trajectory:
        if abs(v - best) < 1e-12:
            return False
        if v in near:
            return True
    return False


def ties(pools: Sequence[Pool], seeds: int, n_jobs: int) -> None:
    """How much of "best pruned" is noise: near-ties between the best and runner-up, and a
    hindsight oracle pruner through the same replay (see the module docstring)."""
    t0 = time.perf_counter()
    tie = {pl.name: tie_of(pl) for pl in pools}
    jobs = [(pl, seeds) for pl in pools]
    if n_jobs <= 1:
        runs = [r for job in jobs for r in _tie_runs(job)]
    else:
        with ProcessPoolExecutor(n_jobs) as ex:
            runs = [r for rs in ex.map(_tie_runs, jobs) for r in rs]
    base = {(r.pool, r.sampler, r.seed): r for r in runs if r.pruner == "none"}
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {time.perf_counter() - t0:.0f} s")
    cpu = platform.processor() or platform.machine()
    print(f"machine: {platform.platform()}, {cpu}, {os.cpu_count()} cores")
    print(f"command: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} python {' '.join(sys.argv)}")
    print(
        f"optuna {optuna.__version__}; {seeds} seeds x {len(SAMPLERS)} samplers x {len(TIE_PRUNERS)} pruners"
    )
    print(
        "\n### Best vs runner-up (finals = mean of the last 3 points; noise sd = per-point, late half: "
        "pooled = median over the pool's curves, pair = rms of the two curves')\n"
    )
    print(
        "| pool | curves | best | runner-up | gap | pooled sd | gap / pooled sd | pair sd | "
        "gap / pair sd | within 1 / 2 sd |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for pl in pools:
        t = tie[pl.name]
        f = pl.finals
        print(
            f"| {pl.name} | {len(pl.curves)} | {f[t.best]:.4f} | {f[t.runner_up]:.4f} | {t.gap:.4f} | "
            f"{t.pooled:.4f} | {t.gap / t.pooled:.2f} | {t.pair:.4f} | {t.gap / t.pair:.2f} | "
            f"{t.within(1.0)} / {t.within(2.0)} |"
        )
    rand = [r for r in runs if r.sampler == "random order" and r.pruner == "none"]
    print(
        "\n### Share where the best is not distinguishable from the runner-up (gap < k sd); searches: "
        "the random-order runs, each run counted once as in the bench (so the same as pools); "
        "'tie first': a curve within k pooled sd of the best completed before it\n"
    )
    head = " | ".join(f"gap < {k:g} pooled sd | < {k:g} pair sd | tie first (k={k:g})" for k in TIE_SDS)
    print(f"| source | pools | searches | {head} |")
    print("|---|---|---|" + "---|---|---|" * len(TIE_SDS))
    for src in (*SOURCES, None):
        ps = [pl for pl in pools if src is None or pl.source == src]
        rs = [r for r in rand if src is None or r.source == src]
        cells = []
        for k in TIE_SDS:
            by_pool = np.mean([tie[r.pool].gap < k * tie[r.pool].pooled for r in rs])
            by_pair = np.mean([tie[r.pool].gap < k * tie[r.pool].pair for r in rs])
            first = np.mean([_tie_first(r, tie[r.pool], k) for r in rs])
            n_pool = sum(tie[p.name].gap < k * tie[p.name].pooled for p in ps)
            n_pair = sum(tie[p.name].gap < k * tie[p.name].pair for p in ps)
            cells.append(f"{n_pool} ({by_pool:.0%}) | {n_pair} ({by_pair:.0%}) | {first:.0%}")
        name = f"all {len(pools)} pools" if src is None else SHORT[src]
        print(f"| {name} | {len(ps)} | {len(rs)} | " + " | ".join(cells) + " |")
    names = [n for n in TIE_PRUNERS if n != "none"]
    for sm in SAMPLERS:
        print(
            f"\n### {sm}: the hindsight oracle through the replay (compute vs none / same best as none / "
            "best pruned / regret / regret @ 25% / regret @ 50%)\n"
        )
        by_source_table(runs, sm, names, base, "source", lambda src: SHORT[src], len(pools))


RELIABILITY_BINS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def _reliability_pool(job: tuple[Pool, Calibrations, int]) -> list[tuple[bool, int, float, bool]]:
    """For every curve of the pool and every prefix the beat rule would decide on (its default
    warm-up, ``interval_steps`` as in the bench): P(beat) from ``ForecastPruner.probability``
    with every other curve COMPLETE (finished siblings; incumbent = their best final), and
    whether the curve's final did beat it; with ``peers`` > 0 the probability is the peer rule's
    (every other curve a peer). Rows: (is the pool's best, curve, P, beat)."""
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pool, cal, peers = job
    finals = pool.finals
    top = int(np.argmax(finals))
    g = BeatSetting(0.1, 5, cal=cal, peers=peers)
    rows = []
    with memoised():
        for i, c in enumerate(pool.curves):
            pruner = g.factory()(pool)
            assert isinstance(pruner, ForecastPruner)
            study = optuna.create_study(direction="maximize", study_name=f"{pool.name}/{i}")
            for j, o in enumerate(pool.curves):
                if j != i:
                    iv = {int(s): float(v) for s, v in zip(o.steps, o.values, strict=True)}
                    study.add_trial(optuna.trial.create_trial(value=o.final, intermediate_values=iv))
            incumbent = float(np.max(np.delete(finals, i)))
            step = max(1, pool.points // BEAT_REPORTS)
            for k in range(g.min_points, c.steps.size + 1, step):
                iv = {int(s): float(v) for s, v in zip(c.steps[:k], c.values[:k], strict=True)}
                trial = optuna.trial.create_trial(
                    state=optuna.trial.TrialState.RUNNING, intermediate_values=iv
                )
                pr = pruner.probability(study, trial)
                if np.isfinite(pr):
                    rows.append((i == top, i, float(pr), bool(c.final > incumbent)))
    return rows


def reliability(pools: Sequence[Pool], n_jobs: int, peers: int = 0) -> None:
    """Is P(beat) calibrated where the pruner uses it? Each source with its held-out calibrations;
    with ``peers`` > 0 the peer rule's P (no calibration: the other curves of the pool are the
    peers; no margin), on every prefix from the 5th report."""
    t0 = time.perf_counter()
    cals = loso_calibrations(n_jobs) if not peers else dict.fromkeys((*SOURCES, None), SHIPPED)
    with ProcessPoolExecutor(max(1, n_jobs)) as ex:
        got = list(ex.map(_reliability_pool, [(pl, cals[pl.source], peers) for pl in pools]))
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {time.perf_counter() - t0:.0f} s")
    print(f"command: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} python {' '.join(sys.argv)}")
    what = f"the peer rule ({peers}+ peers)" if peers else "held-out calibrations"
    print(f"\n### P(beat the incumbent) against what happened, {what}\n")
    print("| P(beat) | decisions | mean P | share that did beat | of them, the pool's best curve |")
    print("|---|---|---|---|---|")
    rows = [r for rs in got for r in rs]
    for lo, hi in itertools.pairwise(RELIABILITY_BINS):
        sel = [r for r in rows if lo <= r[2] < hi or (hi == 1.0 and r[2] == 1.0)]
        if sel:
            print(
                f"| [{lo:g}, {hi:g}) | {len(sel)} | {np.mean([r[2] for r in sel]):.3f} | "
                f"{np.mean([r[3] for r in sel]):.3f} | {sum(r[0] for r in sel)} |"
            )
    print("\n### The pool's best curve: lowest P(beat) over its decisions (random order aside)\n")
    print("| pool | decisions | min P | first P | last P | decisions with P < 0.05 |")
    print("|---|---|---|---|---|---|")
    for pl, rs in zip(pools, got, strict=True):
        best = [r[2] for r in rs if r[0]]
        if best:
            low = sum(p < 0.05 for p in best)
            print(f"| {pl.name} | {len(best)} | {min(best):.3f} | {best[0]:.3f} | {best[-1]:.3f} | {low} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--loso", action="store_true", help="choose the forecast pruner's settings by LOSO")
    ap.add_argument("--select-seeds", type=int, default=3, help="--loso: seeds for the selection grid")
    ap.add_argument("--beat", action="store_true", help="score the beat rule leave-one-source-out")
    ap.add_argument("--beat-ps", type=float, nargs="+", help=f"--beat: p grid (default {BEAT_PS})")
    ap.add_argument(
        "--beat-noise", type=float, nargs="+", help=f"--beat: margin_noise grid (default {BEAT_MARGINS})"
    )
    ap.add_argument(
        "--beat-inflections", type=float, nargs="+", help="--beat: inflection_margin grid (default 2)"
    )
    ap.add_argument("--beat-peers", type=int, nargs="+", help="--beat: peers grid (0: off; default 0)")
    ap.add_argument(
        "--beat-finished",
        type=int,
        nargs="+",
        choices=(0, 1),
        help="--beat: 1 = the finished-sweep calibration where siblings ran on (default 0)",
    )
    ap.add_argument("--reliability", action="store_true", help="check P(beat) against outcomes")
    ap.add_argument(
        "--reliability-peers", type=int, default=0, help="--reliability: the peer rule's P (peers >= this)"
    )
    ap.add_argument("--ties", action="store_true", help="near-ties of the best, and a hindsight oracle")
    ap.add_argument("--jobs", type=int, default=1, help="--loso/--beat: processes (one pool at a time each)")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    pools = build_pools(load_real())
    if args.loso:
        loso(pools, args.select_seeds, args.seeds, args.jobs)
        return
    if args.beat:
        beat(
            pools,
            args.select_seeds,
            args.seeds,
            args.jobs,
            ps=args.beat_ps or BEAT_PS,
            noises=args.beat_noise or BEAT_MARGINS,
            inflections=args.beat_inflections or (2.0,),
            peer_counts=args.beat_peers or (0,),
            finished=tuple(bool(f) for f in args.beat_finished or (0,)),
        )
        return
    if args.reliability:
        reliability(pools, args.jobs, args.reliability_peers)
        return
    if args.ties:
        ties(pools, args.seeds, args.jobs)
        return
    t0 = time.perf_counter()
    runs = [
        run_study(pool, sampler, seed, pruner)
        for pool in pools
        for sampler in SAMPLERS
        for seed in range(args.seeds)
        for pruner in PRUNERS
    ]
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    cpu = platform.processor() or platform.machine()
    print(f"machine: {platform.platform()}, {cpu}, {os.cpu_count()} cores")
    print(f"command: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} python {' '.join(sys.argv)}")
    print(f"optuna {optuna.__version__}; {len(pools)} pools, {sum(len(p.curves) for p in pools)} curves")
    print(f"{args.seeds} seeds x {len(SAMPLERS)} samplers x {len(PRUNERS)} pruners = {len(runs)} studies")
    print(f"total wall {time.perf_counter() - t0:.0f} s\n")
    print("| pool | curves | T (steps) | points | best final | spread of finals |")
    print("|---|---|---|---|---|---|")
    for p in pools:
        f = p.finals
        print(f"| {p.name} | {len(p.curves)} | {p.target} | {p.points} | {f.max():.4f} | {np.ptp(f):.4f} |")
    for sampler in SAMPLERS:
        print(f"\n### {sampler}: all pools\n")
        print(summary(runs, sampler))
        print(f"\n### {sampler}: per source (compute vs none / mean regret)\n")
        print(by_source(runs, sampler))


if __name__ == "__main__":
    main()

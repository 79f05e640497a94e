"""One search replayed: a study over a pool's curves with one sampler, seed and pruner.

The search space is one categorical over the pool's curve ids. A trial replays its curve point by
point, ``trial.report(value, step)`` then ``trial.should_prune()``; ``n_trials`` = the pool size.
Samplers (:data:`SAMPLERS`), identical for every pruner:

- ``random order``: ``BruteForceSampler(seed)``: every curve exactly once, in a seeded random
  order (the order depends only on the seed: pruners see the same sequence);
- ``TPE``: ``TPESampler(seed)``; a curve sampled again is a cache hit: it costs no compute and
  replays the stored outcome (the value of a completed curve; a pruned curve is pruned again)
  without reporting anything (so it does not count twice in a median).

Pruners (:data:`PRUNERS`): none (``NopPruner``), ``MedianPruner()`` (defaults: 5 startup trials,
no warm-up), ``MedianPruner`` with the forecast pruner's faster warm-up (1 startup trial,
``n_warmup_steps`` = the step of the pool's 5th point), ``HyperbandPruner(max_resource=T)`` (else
defaults; every study has a fixed name, since Hyperband assigns trials to brackets by hashing it),
and ``BoundPruner(target=T)`` at its defaults and at its faster preset (level 0.8, 5 points), both
with ``interval_steps`` = max(1, points per curve // 50) so a 500-point curve is re-forecast every
10 reports (the only per-pool setting).

Per run (:class:`Run`): compute = sum over trials of the last step each reported (training to step
s costs s; a cache hit costs 0); found = the final value of the best completed trial; regret = the
pool's best final value - found; ``regret_at(b)`` is the regret at equal compute: the best among
trials completed before the run's cumulative compute passed ``b`` (nothing completed yet: the
pool's worst final value).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import optuna

from bench.search.pools import Pool
from scalerl.harness.optuna import BoundPruner

BUDGET_SHARES = (0.25, 0.5)  # regret at these shares of the no-pruning run's compute
MIN_POINTS = 5  # the faster preset's warm-up, mirrored by the matched MedianPruner

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
    "Forecast (defaults: 0.9, 8 pt)": lambda p: BoundPruner(
        float(p.target), interval_steps=max(1, p.points // 50)
    ),
    "Forecast (faster preset: 0.8, 5 pt)": lambda p: BoundPruner(
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

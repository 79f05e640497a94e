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
of the pool's 8th point), ``HyperbandPruner(max_resource=T)`` (else defaults), and
``ForecastPruner(target=T)`` at its defaults (level 0.9, 8 points, past inflection, 1 completed
trial) with ``interval_steps`` = max(1, points per curve // 50) so a 500-point curve is
re-forecast every 10 reports (the only per-pool setting; none of its constants were tuned here).

Per run (pool x sampler x seed x pruner): compute = sum over trials of the last step each
reported (training to step s costs s; a cache hit costs 0); found = the true final value of the
best completed trial; regret = the pool's best final value - found. ``regret @ x%`` is the regret
at equal compute: the best among trials completed before the run's cumulative compute passed x%
of the no-pruning run's compute for the same pool, sampler and seed (nothing completed yet: the
pool's worst final value). Tables average over runs; compute is also given as the ratio to no
pruning (mean over runs of the per-run ratio).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/search.py [--seeds 5]``; prints markdown
(bench/README.md, section "Search").
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent))
from forecast import SHORT, SOURCES, RealCurve, load_real

from harness.optuna import ForecastPruner

FINAL_POINTS = 3
BUDGET_SHARES = (0.25, 0.5)
MIN_POINTS = 8  # ForecastPruner's default warm-up, mirrored by the matched MedianPruner


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
    "Forecast": lambda p: ForecastPruner(float(p.target), interval_steps=max(1, p.points // 50)),
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

    def regret_at(self, budget: float) -> float:
        done = [f for c, f in self.trajectory if c <= budget + 1e-9]
        return self.best - (max(done) if done else self.worst)


def run_study(pool: Pool, sampler: str, seed: int, pruner: str) -> Run:
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

    study = optuna.create_study(
        direction="maximize", sampler=SAMPLERS[sampler](seed), pruner=PRUNERS[pruner](pool)
    )
    t0 = time.perf_counter()
    study.optimize(objective, n_trials=len(pool.curves))
    wall = time.perf_counter() - t0
    finals = pool.finals
    found = max((f for _, f in trajectory), default=float(finals.min()))
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    pools = build_pools(load_real())
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

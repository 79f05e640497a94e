"""How much of "best pruned" is noise: near-ties of the best, and a hindsight oracle (no forecasts).

Per pool, the best and runner-up finals (the bench's own finals) against the per-point noise sd of
the curves' later halves (``late_noise``; pooled = the median over the pool's curves, as
``margin_noise`` uses, or the two curves' own); the share of pools and of random-order searches
where the gap is under 1 and 2 sds. Then :class:`HindsightOracle` through the same replay: it
knows every curve's smoothed final (the mean of its last 5 points, or the whole-curve forecast at
``T``) and prunes a trial at its 5th report iff that is below the incumbent's observed final (less
0 / 1 / 2 pooled sds), next to Median and Hyperband: the "best pruned" share no forecaster can
beat without a margin.

Run: ``OMP_NUM_THREADS=1 python -m bench.search.ties`` (seconds); prints markdown (bench/README.md,
"Search").
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
import optuna

from bench.data import SHORT, SOURCES, load_real
from bench.provenance import header
from bench.search.pools import Pool, build_pools
from bench.search.replay import PRUNERS, SAMPLERS, PrunerFactory, Run, run_study
from bench.search.scoring import by_source_table
from scalerl.harness.analysis.forecast.ensemble import point_forecast_many
from scalerl.harness.optuna import late_noise

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
    print(header())
    print(f"wall: {time.perf_counter() - t0:.0f} s")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=1, help="processes (one pool at a time each)")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    ties(build_pools(load_real()), args.seeds, args.jobs)


if __name__ == "__main__":
    main()

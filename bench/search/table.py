"""The default search table: every pruner of :data:`~bench.search.replay.PRUNERS` on every pool.

Each pool x sampler (random order, TPE) x seed (0 .. ``--seeds`` - 1) x pruner is one replayed
search (:mod:`bench.search.replay`); no memo: each forecast pruner forecasts for itself, as in a
real study. Tables average over runs; compute is also given as the ratio to no pruning (mean over
runs of the per-run ratio); "same best as none" = the run found the same best as no pruning (pool,
sampler, seed); "regret @ x%" = the regret once the run has spent x% of the no-pruning run's compute.

Run: ``OMP_NUM_THREADS=1 python -m bench.search [--seeds 5]`` (or ``-m bench.search.table``);
prints markdown (bench/README.md, "Search").
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Sequence

import numpy as np
import optuna

from bench.data import SHORT, SOURCES, load_real
from bench.provenance import header
from bench.search.pools import build_pools
from bench.search.replay import BUDGET_SHARES, PRUNERS, SAMPLERS, Run, run_study


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
    print(header())
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

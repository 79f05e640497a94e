"""The bound rule's settings chosen leave-one-source-out, calibrations included.

A grid of 72 settings (``edge`` / ``reference`` rule: hi<lo, hi<value, value<lo; level 0.5, 0.7,
0.8, 0.9; ``inflection_margin`` 1, 1.5, 2; ``min_points`` 5, 8), random order, ``--select-seeds``
seeds (3), run once per fold with the fold's calibrations (:mod:`bench.search.calibrations`: fitted
without the held-out source). For each source, the setting chosen on the other three (criterion,
:func:`~bench.search.scoring.choose`: the least compute with the same best as no pruning in >= 90%
of the training runs; ties by regret; if none qualifies, the highest same-best share) is scored on
it with ``--seeds`` seeds and both samplers, next to Median, Hyperband and the defaults (with the
same held-out calibrations); then the choice on all four sources. Two variants: any setting
("LOSO"), and only the settings that pass the unit tests' synthetic guard
(:func:`~bench.search.settings.passes_guard`, per fold with its calibrations; "LOSO + guard").
Forecasts are memoised by curve prefix across settings and seeds (:mod:`bench.search.memo`).

Run: ``OMP_NUM_THREADS=1 python -m bench.search.loso --jobs 2``; prints markdown (bench/README.md,
"Search").
"""

from __future__ import annotations

import argparse
import itertools
import time
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

import optuna

from bench.data import SHORT, SOURCES, load_real
from bench.provenance import header
from bench.search.calibrations import loso_calibrations
from bench.search.memo import MemoForecaster
from bench.search.pools import Pool, build_pools
from bench.search.replay import SAMPLERS, Run
from bench.search.scoring import SAME_BEST, Score, choose, score
from bench.search.settings import OLD_DEFAULTS, Setting, Task, passes_guard, run_all

GRID_RULES = (("hi", "lo"), ("hi", "value"), ("value", "lo"))  # (trial's edge, reference's edge)
GRID_LEVELS = (0.5, 0.7, 0.8, 0.9)
GRID_MARGINS = (1.0, 1.5, 2.0)
GRID_POINTS = (5, 8)
BASELINES = ("none", "Median (defaults)", "Hyperband")
GRID = tuple(
    Setting(e, r, lv, m, n)
    for (e, r), lv, m, n in itertools.product(GRID_RULES, GRID_LEVELS, GRID_MARGINS, GRID_POINTS)
)


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
    sel = run_all(jobs_sel, n_jobs)
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

    memo = MemoForecaster()
    guarded = {src: {g for g in GRID if passes_guard(replace(g, cal=cals[src]), memo)} for src in folds}
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
    held = run_all(jobs, n_jobs)
    t_held = time.perf_counter() - t1
    hbase = {(r.pool, r.sampler, r.seed): r for r in held if r.pruner == "none"}

    print(header())
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5, help="held-out seeds")
    ap.add_argument("--select-seeds", type=int, default=3, help="seeds for the selection grid")
    ap.add_argument("--jobs", type=int, default=1, help="processes (one pool at a time each)")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    loso(build_pools(load_real()), args.select_seeds, args.seeds, args.jobs)


if __name__ == "__main__":
    main()

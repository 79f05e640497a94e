"""The beat rule's settings chosen leave-one-source-out, calibrations included.

Scores ``BeatPruner`` (prune when P(beat the best COMPLETE trial's observed value, less
``margin_noise`` x the sweep's noise) < ``p``; sweep forecasts from the other trials) on the grid
``p`` 0.02 / 0.05 / 0.1 / 0.2 x ``margin_noise`` 0 / 1 / 2 with ``min_points`` 5 (inflection
margin 2, ``interval_steps`` = max(1, points // 50)), only the settings that pass the synthetic
guard (``--ps``, ``--noise``, ``--inflections``, ``--peers`` and ``--finished`` replace the grid's
axes). For each source, the setting chosen on the other three (random order, ``--select-seeds``
seeds; criterion fixed before any held-out score was seen: the least compute with the same best
as no pruning in >= 95% of the training runs, ties by regret; else the highest same-best share)
is scored on it with ``--seeds`` seeds and both samplers, next to Median (defaults), Hyperband,
the bound rule's defaults (with the same held-out calibrations) and the same criterion's choice
among the settings of the previous grid (the comparison column: the first axis given several
values, held at its old value: inflection 2, no peers, the sweep calibration only, or no margin).
"best pruned" = the share of runs that pruned the pool's best curve. ``--peers 0 3 4`` adds the
``peers`` axis (k: read P(beat) from the COMPLETE trials once k of them reached the trial's
compute, :mod:`scalerl.harness.analysis.forecast.peers`); ``--finished 0 1`` the finished-sweep
calibration (1: ``finished_calibration`` = the fold's).

Run: ``OMP_NUM_THREADS=1 python -m bench.search.beat --jobs 2`` (~45 min on 2 cores); prints
markdown (bench/README.md, "Search").
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace

import optuna

from bench.data import SHORT, SOURCES, load_real
from bench.provenance import header
from bench.search.calibrations import label as cal_label
from bench.search.calibrations import loso_calibrations
from bench.search.memo import MemoForecaster
from bench.search.pools import Pool, build_pools
from bench.search.replay import SAMPLERS
from bench.search.scoring import Score, by_source_table, choose, score
from bench.search.settings import OLD_DEFAULTS, BeatSetting, Task, passes_guard, run_all

BEAT_PS = (0.02, 0.05, 0.1, 0.2)
# min_points 8 was dropped when margin_noise joined the grid, to keep the run under ~45 min on 2
# cores: with 8 points no fold chose it, and each 8-point setting spent more compute than its
# 5-point twin at the same or a lower same-best share.
BEAT_POINTS = (5,)
BEAT_MARGINS = (0.0, 1.0, 2.0)  # margin_noise: indifference margin, in the sweep's noise sds
BEAT_FLOOR = 0.95  # selection: the same best as no pruning in >= 95% of the training runs
BEAT_BASELINES = ("none", "Median (defaults)", "Hyperband")


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

    memo = MemoForecaster()
    guarded = [g for g in grid if passes_guard(g, memo)]
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
    sel = run_all(jobs, n_jobs)
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
    held_runs = run_all(jobs, n_jobs)
    t_held = time.perf_counter() - t2
    hbase = {(r.pool, r.sampler, r.seed): r for r in held_runs if r.pruner == "none"}

    print(header())
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
        print(f"| {name} | {cal_label(c.single)} | {cal_label(c.sweep)} | {cal_label(c.finished)} |")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5, help="held-out seeds")
    ap.add_argument("--select-seeds", type=int, default=3, help="seeds for the selection grid")
    ap.add_argument("--ps", type=float, nargs="+", help=f"min_probability grid (default {BEAT_PS})")
    ap.add_argument("--noise", type=float, nargs="+", help=f"margin_noise grid (default {BEAT_MARGINS})")
    ap.add_argument("--inflections", type=float, nargs="+", help="inflection_margin grid (default 2)")
    ap.add_argument("--peers", type=int, nargs="+", help="peers grid (0: off; default 0)")
    ap.add_argument(
        "--finished",
        type=int,
        nargs="+",
        choices=(0, 1),
        help="1 = the finished-sweep calibration where siblings ran on (default 0)",
    )
    ap.add_argument("--jobs", type=int, default=1, help="processes (one pool at a time each)")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    beat(
        build_pools(load_real()),
        args.select_seeds,
        args.seeds,
        args.jobs,
        ps=args.ps or BEAT_PS,
        noises=args.noise or BEAT_MARGINS,
        inflections=args.inflections or (2.0,),
        peer_counts=args.peers or (0,),
        finished=tuple(bool(f) for f in args.finished or (0,)),
    )


if __name__ == "__main__":
    main()

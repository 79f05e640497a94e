"""Pruners at matched safety (issue 37): each pruner's compute / best-pruned frontier over its own settings.

Optuna's pruners at their defaults prune the pool's best curve in 30-40% of searches, so their
compute cannot be compared with a pruner that rarely does. Here every pruner is run over a grid of
its own settings on the replay bench (:mod:`bench.search.replay`: the 14 pools of real curves,
random order, ``--seeds`` seeds), and each setting is one point of its frontier:

- ``MedianPruner(n_startup_trials, n_warmup_steps)``: startup 1 / 3 / 5 trials x warm-up 0 / 10 /
  25 / 50 / 75 / 90% of the pool's budget ``T``;
- ``PercentilePruner(percentile, n_startup_trials, n_warmup_steps)``: percentile 10 / 25 (50 is
  the median) x the same startup x warm-up 10 / 25 / 50 / 75 / 90%;
- ``HyperbandPruner(min_resource, max_resource=T, reduction_factor)``: min_resource 2 / 5 / 10 /
  25 / 50 / 75% of ``T`` x reduction factor 2 / 3 / 4;
- the forecast pruner ``BeatPruner`` (prune when P(beat the incumbent less ``margin_noise`` noise
  sds) < ``p``; :mod:`scalerl.harness.optuna`): ``p`` 0.02 / 0.05 / 0.1 / 0.2 x ``margin_noise``
  0 / 1 / 2, 5 points, inflection margin 2 (only settings passing the synthetic guard), each pool
  forecast with the calibrations fitted without its source (:mod:`bench.search.calibrations`).

Per setting: compute vs no pruning (mean of the per-search ratio), **best pruned** (share of
searches that pruned the pool's best curve), **best lost** (best pruned and no completed trial
within 1 noise sd of it: the pool's median ``late_noise``; issue 24 found the best and runner-up
within 1 sd in 9 of 14 pools, so a pruned best is often a tie), and the mean regret. **At matched
safety**: each pruner's cheapest setting with best pruned <= 5% (and, separately, best lost <= 5%),
chosen on these same searches for every pruner alike (the grid is each pruner's own; nothing is
held out), then rerun on fresh seeds (``--seeds`` .. 2 x ``--seeds`` - 1) under both samplers to
show the choice was not luck.

Run: ``OMP_NUM_THREADS=1 python -m bench.search.frontier --jobs 2`` (about 30 minutes on 2 cores);
``--no-forecast`` skips the forecast pruner (minutes); ``--plot FILE.html`` writes the frontiers as
a Plotly figure. Prints markdown (bench/README.md, "Forecast targets (issue 37)", target 4).
"""

from __future__ import annotations

import argparse
import itertools
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import optuna

from bench.data import load_real
from bench.provenance import header
from bench.search.calibrations import loso_calibrations
from bench.search.memo import MemoForecaster
from bench.search.pools import Pool, build_pools
from bench.search.replay import SAMPLERS, PrunerFactory, Run
from bench.search.settings import BeatSetting, Task, passes_guard, run_all
from bench.search.ties import pool_noise
from scalerl.harness.optuna import Forecaster

SAFETY = 0.05  # the bar: the best trial pruned in <= 5% of searches
WARMUPS = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9)  # n_warmup_steps as a share of the budget T
STARTUPS = (1, 3, 5)


@dataclass(frozen=True)
class MedianSetting:
    startup: int
    warmup: float
    percentile: float = 50.0

    @property
    def family(self) -> str:
        return "Median" if self.percentile == 50.0 else "Percentile"

    @property
    def label(self) -> str:
        pct = "" if self.percentile == 50.0 else f"{self.percentile:g}th pct, "
        return f"{self.family}({pct}startup {self.startup}, warm-up {self.warmup:.0%} T)"

    def factory(self, forecaster: Forecaster | None = None) -> PrunerFactory:
        def make(p: Pool) -> optuna.pruners.BasePruner:
            return optuna.pruners.PercentilePruner(
                self.percentile, n_startup_trials=self.startup, n_warmup_steps=int(self.warmup * p.target)
            )

        return make


@dataclass(frozen=True)
class HyperbandSetting:
    min_share: float
    factor: int

    family = "Hyperband"

    @property
    def label(self) -> str:
        return f"Hyperband(min_resource {self.min_share:.0%} T, reduction {self.factor})"

    def factory(self, forecaster: Forecaster | None = None) -> PrunerFactory:
        def make(p: Pool) -> optuna.pruners.BasePruner:
            return optuna.pruners.HyperbandPruner(
                min_resource=max(1, int(self.min_share * p.target)),
                max_resource=p.target,
                reduction_factor=self.factor,
            )

        return make


MEDIAN_GRID = tuple(MedianSetting(s, w) for s, w in itertools.product(STARTUPS, WARMUPS))
PERCENTILE_GRID = tuple(
    MedianSetting(s, w, pct) for pct, s, w in itertools.product((10.0, 25.0), STARTUPS, WARMUPS[1:])
)
HYPERBAND_GRID = tuple(
    HyperbandSetting(m, f) for m, f in itertools.product((0.02, 0.05, 0.1, 0.25, 0.5, 0.75), (2, 3, 4))
)
BEAT_GRID = tuple(
    BeatSetting(p, 5, margin_noise=m) for p, m in itertools.product((0.02, 0.05, 0.1, 0.2), (0.0, 1.0, 2.0))
)
SHIPPED_BEAT = BeatSetting(0.05, 5, margin_noise=1.0)  # BeatPruner's defaults (issue 24)
Setting = MedianSetting | HyperbandSetting | BeatSetting


def family(s: Setting) -> str:
    return "Forecast (beat)" if isinstance(s, BeatSetting) else s.family


@dataclass(frozen=True)
class Point:
    """One setting's searches, summarised."""

    runs: int
    ratio: float
    best_pruned: float
    best_lost: float
    regret: float


def summarise(runs: Sequence[Run], base: dict[tuple[str, str, int], Run], noise: dict[str, float]) -> Point:
    b = [base[(r.pool, r.sampler, r.seed)] for r in runs]
    lost = [r.best_pruned and r.regret > noise[r.pool] for r in runs]
    return Point(
        len(runs),
        float(np.mean([r.compute / x.compute for r, x in zip(runs, b, strict=True)])),
        float(np.mean([r.best_pruned for r in runs])),
        float(np.mean(lost)),
        float(np.mean([r.regret for r in runs])),
    )


def cheapest(points: dict[Setting, Point], key: str) -> Setting | None:
    """The least compute among settings whose ``key`` share is <= :data:`SAFETY` (ties: regret)."""
    ok = [s for s, p in points.items() if getattr(p, key) <= SAFETY + 1e-12]
    return min(ok, key=lambda s: (points[s].ratio, points[s].regret)) if ok else None


def run_grid(
    pools: Sequence[Pool],
    grid: Sequence[Setting],
    seeds: Sequence[int],
    samplers: Sequence[str],
    n_jobs: int,
    cals: dict,
) -> list[Run]:
    """Every (pool, sampler, seed, setting) search, plus no pruning; forecast settings get the
    calibrations fitted without the pool's source."""
    jobs = []
    for pl in pools:
        tasks: list[Task] = [(sm, sd, "none", None) for sm in samplers for sd in seeds]
        for g in grid:
            s = g
            if isinstance(g, BeatSetting):
                s = BeatSetting(g.p, g.min_points, g.margin, cals[pl.source], g.margin_noise)
            tasks += [(sm, sd, g.label, s) for sm in samplers for sd in seeds]  # type: ignore[misc]
        jobs.append((pl, tasks))
    return run_all(jobs, n_jobs)


def frontier_table(name: str, points: dict[Setting, Point], chosen: dict[str, Setting | None]) -> None:
    print(f"\n#### {name}: compute vs none / best pruned / best lost / regret (random order)\n")
    print("| setting | searches | compute vs none | best pruned | best lost (net of ties) | regret |")
    print("|---|---|---|---|---|---|")
    for s, p in sorted(points.items(), key=lambda kv: kv[1].ratio):
        mark = "".join(
            m for m, c in (("¹", chosen.get("best_pruned")), ("²", chosen.get("best_lost"))) if c == s
        )
        cells = f"{p.ratio:.2f}x | {p.best_pruned:.1%} | {p.best_lost:.1%} | {p.regret:.4f}"
        print(f"| {s.label}{mark} | {p.runs} | {cells} |")


def plot(points: dict[Setting, Point], path: Path) -> None:
    """The frontiers as one Plotly figure (compute vs none against best pruned, one trace per
    pruner family), written to ``path`` (HTML, plotly.js from the CDN)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for fam in dict.fromkeys(family(s) for s in points):
        mine = sorted(((s, p) for s, p in points.items() if family(s) == fam), key=lambda t: t[1].ratio)
        fig.add_trace(
            go.Scatter(
                x=[p.best_pruned for _, p in mine],
                y=[p.ratio for _, p in mine],
                mode="markers",
                name=fam,
                text=[s.label for s, _ in mine],
                hovertemplate="%{text}<br>best pruned %{x:.1%}<br>compute %{y:.2f}x<extra></extra>",
            )
        )
    fig.add_vline(x=SAFETY, line_dash="dash", annotation_text="5%")
    fig.update_layout(
        title="Pruners on replayed real curves: compute against how often the best trial is pruned",
        xaxis_title="searches that pruned the pool's best curve",
        yaxis_title="compute vs no pruning",
        xaxis_tickformat=".0%",
    )
    fig.write_html(path, include_plotlyjs="cdn")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20, help="random-order seeds for the baselines' grids")
    ap.add_argument("--forecast-seeds", type=int, default=10, help="random-order seeds for the forecast grid")
    ap.add_argument("--no-forecast", action="store_true", help="the optuna pruners only")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--plot", type=Path, default=None, help="write the frontiers to this HTML file")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    pools = build_pools(load_real())
    noise = {p.name: float(np.median(pool_noise(p))) for p in pools}
    t0 = time.perf_counter()
    baselines: list[Setting] = [*MEDIAN_GRID, *PERCENTILE_GRID, *HYPERBAND_GRID]
    runs = run_grid(pools, baselines, range(args.seeds), ["random order"], args.jobs, {})
    t_base = time.perf_counter() - t0
    beat: list[Setting] = []
    cals: dict = {}
    t_fc = 0.0
    if not args.no_forecast:
        t1 = time.perf_counter()
        cals = loso_calibrations(args.jobs)
        memo = MemoForecaster()
        beat = [g for g in BEAT_GRID if passes_guard(g, memo)]
        runs += run_grid(pools, beat, range(args.forecast_seeds), ["random order"], args.jobs, cals)
        t_fc = time.perf_counter() - t1
    base = {(r.pool, r.sampler, r.seed): r for r in runs if r.pruner == "none"}
    points = {
        s: summarise([r for r in runs if r.pruner == s.label], base, noise) for s in (*baselines, *beat)
    }
    print(header())
    print(
        f"optuna {optuna.__version__}; {len(pools)} pools; baselines {len(baselines)} settings x "
        f"{args.seeds} seeds ({t_base:.0f} s); forecast {len(beat)} settings passing the guard x "
        f"{args.forecast_seeds} seeds ({t_fc:.0f} s, LOSO calibrations included)"
    )
    print(
        "\npool noise (median late_noise of its curves, the 'best lost' tie margin): "
        + ", ".join(f"{k} {v:.4f}" for k, v in noise.items())
    )
    families = dict.fromkeys(family(s) for s in points)
    chosen: dict[str, dict[str, Setting | None]] = {}
    for fam in families:
        mine = {s: p for s, p in points.items() if family(s) == fam}
        chosen[fam] = {key: cheapest(mine, key) for key in ("best_pruned", "best_lost")}
        frontier_table(fam, mine, chosen[fam])
    if not args.no_forecast:
        p = points.get(SHIPPED_BEAT)
        if p is not None:
            print(
                f"\nBeatPruner's shipped defaults ({SHIPPED_BEAT.label}): {p.ratio:.2f}x / best pruned "
                f"{p.best_pruned:.1%} / best lost {p.best_lost:.1%} / regret {p.regret:.4f}"
            )

    # At matched safety, rerun on fresh seeds under both samplers.
    picks = {(fam, key): s for fam, c in chosen.items() for key, s in c.items() if s is not None}
    fresh = range(args.seeds, 2 * args.seeds)
    fresh_fc = range(args.forecast_seeds, 2 * args.forecast_seeds)
    picked = list(dict.fromkeys(picks.values()))
    opt_picks = [g for g in picked if not isinstance(g, BeatSetting)]
    fc_picks = [g for g in picked if isinstance(g, BeatSetting)]
    check = run_grid(pools, opt_picks, fresh, list(SAMPLERS), args.jobs, cals) if opt_picks else []
    if fc_picks:
        check += run_grid(pools, fc_picks, fresh_fc, list(SAMPLERS), args.jobs, cals)
    cbase = {(r.pool, r.sampler, r.seed): r for r in check if r.pruner == "none"}
    print(
        "\n#### At matched safety: each pruner's cheapest setting with best pruned (¹) or best lost (²) "
        "<= 5%, rerun on fresh seeds\n"
    )
    print(
        "| pruner | safety | setting | chosen on: compute / best pruned / best lost / regret | "
        "fresh, random order | fresh, TPE |"
    )
    print("|---|---|---|---|---|---|")
    for (fam, key), s in sorted(picks.items()):
        cells = []
        for sm in SAMPLERS:
            rs = [
                r for r in check if r.pruner == s.label and r.sampler == sm and (r.pool, sm, r.seed) in cbase
            ]
            q = summarise(rs, cbase, noise) if rs else None
            cells.append(
                "-"
                if q is None
                else f"{q.ratio:.2f}x / {q.best_pruned:.1%} / {q.best_lost:.1%} / {q.regret:.4f}"
            )
        p = points[s]
        print(
            f"| {fam} | {'best pruned' if key == 'best_pruned' else 'best lost'} <= 5% | {s.label} | "
            f"{p.ratio:.2f}x / {p.best_pruned:.1%} / {p.best_lost:.1%} / {p.regret:.4f} | "
            + " | ".join(cells)
            + " |"
        )
    for key in ("best_pruned", "best_lost"):
        opt = [
            (fam, points[s].ratio) for (fam, k), s in picks.items() if k == key and fam != "Forecast (beat)"
        ]
        fc = picks.get(("Forecast (beat)", key))
        if opt and fc is not None:
            best_fam, best_ratio = min(opt, key=lambda t: t[1])
            ours = points[fc].ratio
            verdict = (
                "spends less" if ours < best_ratio else f"misses by {ours - best_ratio:.2f}x of no pruning"
            )
            print(
                f"\n{key.replace('_', ' ')} <= 5%: forecast pruner {ours:.2f}x vs the better optuna pruner "
                f"({best_fam}) {best_ratio:.2f}x: {verdict}"
            )
        elif opt:
            print(
                f"\n{key.replace('_', ' ')} <= 5%: no forecast setting reaches it"
                if not args.no_forecast
                else ""
            )
    if args.plot is not None:
        plot(points, args.plot)
        print(f"\nfrontiers drawn to {args.plot}")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

"""Forecasts from the whole sweep, and intervals checked per horizon and per source.

Data: the real curves of bench/forecast.py (146: W&B 17, TensorBoard 22, verl CSV 7, SPEED-RL
100), grouped into the sweeps they came from (a curve's siblings are the other curves of its
sweep): W&B, the export file a run first appears in (6 files, 1-5 runs each once deduplicated);
TensorBoard, the metric (11 runs of validation reward, 11 of train reward); verl, its 7 replicate
runs; SPEED-RL, the benchmark x model size (5 x {1.5B: 8 runs, 7B: 12 runs}).

Point forecasts: each curve cut at 25/50/75% of its last step, the rest scored (mean absolute
error per curve, median over curves per source). Methods:

- ``single``: :func:`scalerl.harness.analysis.forecaster.point_forecast_many` (``forecast_curve``);
- ``sweep, same stage``: :func:`scalerl.harness.analysis.hierarchical.point_forecast_with_prior`
  with the prior from the siblings *cut at the same step* as the curve (a sweep whose runs started
  together, forecast mid-sweep: nobody has seen further);
- ``sweep, finished``: the same with the siblings' whole curves (forecasting a new run of a
  finished sweep; the members are then weighted by how well each forecast the siblings' own
  later points from this curve's last step);
- ``flat-last-3``: the mean of the last 3 points before the cut;
- ``paper``: ``--paper-cache FILE`` reads another method's predictions (JSON ``{"name@cut": [...]}``,
  the format of bench/forecast.py's paper caches); nothing is computed for it here.

Hindsight (not methods): the held-out MAE of the ensemble fitted on the *whole* curve, and of
each held-out point's 5 neighbours on either side (itself left out). They saw the future, so a
cell where their ratio to the better baseline is above 0.85 is a cell where the issue's target
is out of reach for any forecast from the past: the held-out points' own noise sets the floor
(for a flat curve with independent noise even the true mean scores sqrt(3/4) = 0.87x flat-last-3).

Leave-one-source-out: the prior's ``kappa`` (:class:`SweepSettings`, grid 0.5 / 1 / 2) is chosen on
the other three sources (criterion of bench/forecast.py: max + mean over (cut, source) of log(median
error / flat's)), then the held-out source is scored. Nothing else is tuned.

Intervals: both forecasts are backtested at five cuts, 1/30, 10%, 25%, 50% and 75% of the last
step (a cut needs >= 5 points before it), so held-out points lie 1-30x past the fitted compute.
For each source the calibration (:func:`scalerl.harness.analysis.calibration.fit_calibration`:
split-conformal quantiles; linear or log-horizon growth, movement and trend weights chosen to
even out coverage across horizon buckets and the training sources) is fitted on the other three
sources and the held-out source's coverage is reported per horizon bucket (C / last fitted
compute: 1-2x, 2-4x, 4-10x, 10-30x); the sweep forecast's on both sibling settings together, at
the library's ``kappa``. Both forecasts are calibrated twice: as until 2026-11-26 (worst-gap
objective, no own-error term), and with the own-error term (``IntervalCalibration.own_weight``:
the error the forecast's own blend made in its rolling-origin validation) in the grid and the
objective chosen leave-one-source-out inside the training sources (``nested``). Also shown: the
single-curve calibration shipped before (fitted on all sources, so in-sample) and its linear
form fitted leave-one-source-out. The "fitted on all four sources" lines are the nested
procedure run on all four (the single-curve one is what the library ships).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/forecast_sweep.py [--paper-cache FILE]``.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from forecast import REAL, SHORT, SOURCES, RealCurve, load_real

from scalerl.harness.analysis.calibration import (
    CHECK_LEVELS,
    HORIZON_EDGES,
    OBJECTIVES,
    bucket_label,
    coverage_table,
    fit_calibration,
    fit_calibrations,
)
from scalerl.harness.analysis.forecaster import IntervalCalibration, PointForecast, point_forecast_many
from scalerl.harness.analysis.hierarchical import (
    DEFAULT_SWEEP,
    SWEEP_MEMBERS,
    SweepSettings,
    point_forecast_with_prior,
    sweep_priors,
)
from scalerl.harness.importers import read_curves

CUTS = (0.25, 0.5, 0.75)
CAL_CUTS = (1 / 30, 0.1, 0.25, 0.5, 0.75)
KAPPAS = (0.5, 1.0, 2.0)
SHIPPED_KAPPA = DEFAULT_SWEEP.kappa  # the intervals are calibrated for the library's setting
# The sweep forecast's calibration grid: log-horizon growth, movement and the error on siblings
# that went on (linear slope and trend were never chosen for it; left out to keep the run short).
SWEEP_GRID: dict[str, Sequence[float]] = {
    "horizon_slopes": (0.0,),
    "trend_weights": (0.0,),
    "sibling_weights": (0.0, 0.5, 1.0, 2.0),
    "own_weights": (0.0, 0.5, 1.0, 2.0),
}
# The forecast's own validation error as a term of the single-curve calibration (0 = without it).
OWN_WEIGHTS = (0.0, 0.5, 1.0, 2.0)
# The calibration forecast_curve shipped before this bench (bench/forecast.py, all sources).
OLD_CALIBRATION = IntervalCalibration(
    levels=(0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98),
    quantiles=(0.734, 0.932, 1.21, 1.572, 2.171, 2.851, 3.783),
    horizon_slope=0.5,
    spread_weight=1.0,
)
MIN_TRAIN = 5


def sweeps_of(curves: Sequence[RealCurve]) -> list[str]:
    """The sweep (sibling group) of every curve; see the module docstring."""
    first_file: dict[str, str] = {}
    for f in sorted((REAL / SOURCES[0]).glob("*.csv")):
        for c in read_curves(f):
            first_file.setdefault(c.run, f.stem)
    out = []
    for c in curves:
        if c.source == SOURCES[0]:
            out.append(f"wandb:{first_file[c.name]}")
        elif c.source == SOURCES[1]:
            out.append(f"tb:{c.name.split(':', 1)[1]}")
        elif c.source == SOURCES[2]:
            out.append("verl")
        else:
            run, metric = c.name.split(":", 1)
            out.append(f"speed:{run.split('-', 1)[0]}:{metric.split('/')[1]}")
    return out


@dataclass(frozen=True)
class Case:
    """One curve cut at one fraction: fitted part, held-out part, and its siblings' curves."""

    i: int
    cut: float
    x: np.ndarray
    y: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    same_stage: list[tuple[np.ndarray, np.ndarray]]
    finished: list[tuple[np.ndarray, np.ndarray]]


def cases(curves: Sequence[RealCurve], groups: Sequence[str], cuts: Sequence[float]) -> list[Case]:
    out = []
    for cut in cuts:
        for i, c in enumerate(curves):
            at = cut * float(c.x[-1])
            tr = c.x <= at
            if int((tr & (c.x > 0)).sum()) < MIN_TRAIN or tr.all():
                continue
            sibs = [j for j in range(len(curves)) if j != i and groups[j] == groups[i]]
            same = [(curves[j].x[curves[j].x <= at], curves[j].y[curves[j].x <= at]) for j in sibs]
            out.append(
                Case(
                    i,
                    cut,
                    c.x[tr],
                    c.y[tr],
                    c.x[~tr],
                    c.y[~tr],
                    same,
                    [(curves[j].x, curves[j].y) for j in sibs],
                )
            )
    return out


def forecasts(cs: Sequence[Case], mode: str, kappa: float) -> list[PointForecast]:
    curves = [(c.x, c.y) for c in cs]
    at = [c.x_test for c in cs]
    if mode == "single":
        return point_forecast_many(curves, at)
    sibs = [c.same_stage if mode == "same" else c.finished for c in cs]
    priors = sweep_priors(sibs, SweepSettings(kappa=kappa))
    return point_forecast_with_prior(curves, at, priors, siblings=sibs)


def mae(pf: PointForecast, case: Case) -> float:
    return float(np.mean(np.abs(pf.value - case.y_test))) if pf.status == "ok" else math.nan


def fmt(v: float, digits: int = 4) -> str:
    return "-" if not math.isfinite(v) else f"{v:.{digits}f}"


def median_by(
    errs: dict[tuple[int, float], float], curves: Sequence[RealCurve], src: str, cut: float
) -> float:
    vals = [e for (i, c), e in errs.items() if c == cut and curves[i].source == src and math.isfinite(e)]
    return float(np.median(vals)) if vals else math.nan


def choose_kappa(
    errs: dict[float, dict[tuple[int, float], float]],
    flat: dict[tuple[int, float], float],
    curves: Sequence[RealCurve],
    train_srcs: Sequence[str],
) -> float:
    def loss(k: float) -> float:
        r = [
            math.log(median_by(errs[k], curves, s, cut) / median_by(flat, curves, s, cut))
            for s in train_srcs
            for cut in CUTS
        ]
        return max(r) + float(np.mean(r))

    return min(KAPPAS, key=loss)


def loo_smooth(y: np.ndarray, k: int) -> np.ndarray:
    """Each point's estimate from its k neighbours on either side, itself left out."""
    out = np.empty(y.size)
    for t in range(y.size):
        nb = np.r_[y[max(0, t - k) : t], y[t + 1 : t + k + 1]]
        out[t] = nb.mean() if nb.size else math.nan
    return out


def hindsight(
    curves: Sequence[RealCurve], point: Sequence[Case]
) -> dict[str, dict[tuple[int, float], float]]:
    """Held-out MAE of two forecasts that saw the future (not methods: bounds on what a forecast
    can reach, since the held-out points are noisy). ``whole-curve fit``: forecast_curve's
    ensemble fitted on the whole curve, held-out part included; ``neighbours``: each held-out
    point predicted by the mean of its 5 neighbours on either side (itself left out)."""
    full = point_forecast_many([(curves[c.i].x, curves[c.i].y) for c in point], [c.x_test for c in point])
    fit = {(c.i, c.cut): mae(p, c) for c, p in zip(point, full, strict=True)}
    nb = {
        (c.i, c.cut): float(np.nanmean(np.abs(loo_smooth(curves[c.i].y, 5)[c.y.size :] - c.y_test)))
        for c in point
    }
    return {"hindsight: whole-curve fit": fit, "hindsight: 5 neighbours each side": nb}


def inner_gaps(
    pfs: Sequence[PointForecast], cs: Sequence[Case], srcs: Sequence[str], **grid: Sequence[float]
) -> dict[str, float]:
    """Per objective: the mean |coverage - level| over the cells (level x bucket, >= 3 forecasts)
    of each of these sources held out in turn from a calibration fitted on the others."""
    gaps: dict[str, list[float]] = {o: [] for o in OBJECTIVES}
    for held in sorted(set(srcs)):
        tr = [k for k, s in enumerate(srcs) if s != held]
        te = [k for k, s in enumerate(srcs) if s == held]
        cals = fit_calibrations(
            [pfs[k] for k in tr], [cs[k].y_test for k in tr], groups=[srcs[k] for k in tr], **grid
        )
        for o, cal in cals.items():
            cells = coverage_table([pfs[k] for k in te], [cs[k].y_test for k in te], cal)
            gaps[o] += [abs(c.coverage - c.level) for c in cells if c.bucket != "all" and c.forecasts >= 3]
    return {o: float(np.mean(g)) for o, g in gaps.items()}


def choose_objective(gaps: dict[str, float]) -> str:
    """The objective with the least inner gap (:func:`inner_gaps`); ties go to ``worst``, the
    objective used before there was a choice."""
    return min(OBJECTIVES, key=lambda o: (gaps[o], o != "worst"))


def coverage_block(
    title: str,
    pfs: Sequence[PointForecast],
    cs: Sequence[Case],
    curves: Sequence[RealCurve],
    fixed: IntervalCalibration | None = None,
    fit_on: tuple[Sequence[PointForecast], Sequence[Case]] | None = None,
    nested: bool = False,
    **grid: Sequence[float],
) -> dict[str, str]:
    """Held-out coverage per source and horizon bucket of ``pfs``: the calibration is fitted on
    the other three sources of ``fit_on`` (default: ``pfs`` itself), or ``fixed`` for all. With
    ``nested`` the fit's objective is itself chosen on the other three sources
    (:func:`choose_objective`); returns the objective per source."""
    fit_pfs, fit_cs = fit_on if fit_on is not None else (pfs, cs)
    fit_srcs = [curves[c.i].source for c in fit_cs]
    srcs = [curves[c.i].source for c in cs]
    rows = []
    chosen: dict[str, str] = {}
    for src in SOURCES:
        tr = [k for k, s in enumerate(fit_srcs) if s != src]
        te = [k for k, s in enumerate(srcs) if s == src]
        objective = "worst"
        if nested and fixed is None:
            inner = inner_gaps(
                [fit_pfs[k] for k in tr], [fit_cs[k] for k in tr], [fit_srcs[k] for k in tr], **grid
            )
            objective = choose_objective(inner)
        chosen[src] = objective
        cal = fixed or fit_calibration(
            [fit_pfs[k] for k in tr],
            [fit_cs[k].y_test for k in tr],
            groups=[fit_srcs[k] for k in tr],
            objective=objective,  # type: ignore[arg-type]
            **grid,
        )
        cells = coverage_table([pfs[k] for k in te], [cs[k].y_test for k in te], cal)
        rows.append((src, cal, cells))
    nb = len(HORIZON_EDGES) - 1
    print(f"\n### {title}: held-out coverage, 50 / 80 / 90% (forecasts in the cell)\n")
    print(
        "| held out | calibration (linear slope h, log slope g, move m, trend t, siblings v, own o, q90) | "
        + " | ".join(bucket_label(b) for b in range(nb))
        + " | all |"
    )
    print("|---|---|" + "---|" * (nb + 1))
    for src, cal, cells in rows:
        row = []
        for b in [bucket_label(b) for b in range(nb)] + ["all"]:
            got = {c.level: c for c in cells if c.bucket == b}
            if not got:
                row.append("-")
                continue
            n = next(iter(got.values())).forecasts
            row.append(" / ".join(fmt(100 * got[lv].coverage, 0) for lv in CHECK_LEVELS) + f" ({n})")
        print(
            f"| {SHORT[src]} | h={cal.horizon_slope:g}, g={cal.log_horizon_slope:g}, "
            f"m={cal.move_weight:g}, t={cal.trend_weight:g}, v={cal.sibling_weight:g}, o={cal.own_weight:g}, "
            f"q90={cal.quantile(0.9):.2f}{', ' + chosen[src] if nested else ''} | " + " | ".join(row) + " |"
        )
    return chosen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paper-cache", type=Path, default=None, help="JSON predictions of the paper procedure")
    ap.add_argument("--paper-label", default="paper", help="the paper row's name")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    curves = load_real()
    groups = sweeps_of(curves)
    sizes: dict[str, int] = {}
    for g in groups:
        sizes[g] = sizes.get(g, 0) + 1
    print(
        f"date {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {platform.node()} ({os.cpu_count()} CPUs, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}); {len(curves)} curves in "
        f"{len(sizes)} sweeps: " + ", ".join(f"{g} {n}" for g, n in sizes.items())
    )
    cs = cases(curves, groups, CAL_CUTS)
    point = [c for c in cs if c.cut in CUTS]
    pidx = [k for k, c in enumerate(cs) if c.cut in CUTS]

    single = forecasts(cs, "single", 1.0)
    sweep = {(mode, k): forecasts(cs, mode, k) for mode in ("same", "finished") for k in KAPPAS}
    t_fc = time.perf_counter() - t0

    def errs_of(pfs: Sequence[PointForecast]) -> dict[tuple[int, float], float]:
        return {(cs[k].i, cs[k].cut): mae(pfs[k], cs[k]) for k in pidx}

    flat = {(c.i, c.cut): float(np.mean(np.abs(np.mean(c.y[-3:]) - c.y_test))) for c in point}
    rows: dict[str, dict[tuple[int, float], float]] = {"single (forecast_curve)": errs_of(single)}
    kappas: dict[str, dict[str, float]] = {}
    for mode, label in (
        ("same", "sweep, same stage (LOSO)"),
        ("finished", "sweep, finished siblings (LOSO)"),
    ):
        by_k = {k: errs_of(sweep[(mode, k)]) for k in KAPPAS}
        mine: dict[tuple[int, float], float] = {}
        kappas[mode] = {}
        for src in SOURCES:
            k = choose_kappa(by_k, flat, curves, [s for s in SOURCES if s != src])
            kappas[mode][src] = k
            mine.update({key: e for key, e in by_k[k].items() if curves[key[0]].source == src})
        rows[label] = mine
    rows["flat-last-3"] = flat
    base_names = ["flat-last-3"]
    try:
        from forecast import paper_procedure  # the other bench's faithful paper baseline
    except ImportError:
        paper_procedure = None
    if paper_procedure is not None:
        every = paper_procedure(curves)[0]
        rows["paper's procedure"] = {
            (c.i, c.cut): float(np.mean(np.abs(np.asarray(every[c.cut].pred[c.i]) - c.y_test)))
            if every[c.cut].pred[c.i] is not None
            else math.nan
            for c in point
        }
        base_names.append("paper's procedure")
    if args.paper_cache is not None:
        import json

        cache = json.loads(args.paper_cache.read_text())
        paper = {}
        for c in point:
            p = cache.get(f"{curves[c.i].name}@{c.cut}")
            paper[(c.i, c.cut)] = float(np.mean(np.abs(np.asarray(p) - c.y_test))) if p else math.nan
        rows[args.paper_label] = paper
        base_names.append(args.paper_label)
    print(
        "\nkappa chosen on the other three sources: "
        + "; ".join(
            f"{mode}: " + ", ".join(f"{SHORT[s]} {k:g}" for s, k in ks.items()) for mode, ks in kappas.items()
        )
    )
    n_single = sum(1 for k in pidx if sweep[("same", SHIPPED_KAPPA)][k].names == single[k].names)
    print(
        "forecasts without a sweep prior (fewer than 2 fitted siblings at the cut), same stage: "
        f"{n_single} of {len(pidx)}"
    )

    print("\n### Median over curves of the held-out MAE, per source (leave-one-source-out)\n")
    print("| cut | method | " + " | ".join(SHORT[s] for s in SOURCES) + " |")
    print("|---|---|" + "---|" * len(SOURCES))
    for cut in CUTS:
        for name, errs in rows.items():
            print(
                f"| {int(100 * cut)}% | {name} | "
                + " | ".join(fmt(median_by(errs, curves, s, cut)) for s in SOURCES)
                + " |"
            )
    print("\n### Ratio to the better baseline (" + " / ".join(base_names) + "): target <= 0.85\n")
    print("| cut | method | " + " | ".join(SHORT[s] for s in SOURCES) + " |")
    print("|---|---|" + "---|" * len(SOURCES))
    for cut in CUTS:
        for name in [n for n in rows if n not in base_names]:
            cells = []
            for s in SOURCES:
                best = min(median_by(rows[b], curves, s, cut) for b in base_names)
                cells.append(fmt(median_by(rows[name], curves, s, cut) / best, 2))
            print(f"| {int(100 * cut)}% | {name} | " + " | ".join(cells) + " |")

    bound = hindsight(curves, point)
    print(
        "\n### What a forecast that saw the future reaches: ratio to the better baseline (not "
        "methods; a cell above 0.85 means the issue's target is out of reach there)\n"
    )
    print("| cut | hindsight | " + " | ".join(SHORT[s] for s in SOURCES) + " |")
    print("|---|---|" + "---|" * len(SOURCES))
    for cut in CUTS:
        for name, errs in bound.items():
            cells = []
            for s in SOURCES:
                best = min(median_by(rows[b], curves, s, cut) for b in base_names)
                med = median_by(errs, curves, s, cut)
                cells.append(f"{fmt(med)} ({fmt(med / best, 2)})")
            print(f"| {int(100 * cut)}% | {name} | " + " | ".join(cells) + " |")

    coverage_block(
        "single, before: the calibration shipped until now (fitted on all sources, linear horizon)",
        single,
        cs,
        curves,
        fixed=OLD_CALIBRATION,
    )
    coverage_block(
        "single, the earlier form (linear horizon slope 0/0.5/1/2) fitted leave-one-source-out",
        single,
        cs,
        curves,
        log_slopes=(0.0,),
        move_weights=(0.0,),
        trend_weights=(0.0,),
        horizon_slopes=(0.0, 0.5, 1.0, 2.0),
    )
    coverage_block(
        "single (forecast_curve), the calibration until now (worst-gap objective, no own-error term), "
        "leave-one-source-out",
        single,
        cs,
        curves,
    )
    coverage_block(
        "single (forecast_curve), own-error term in the grid and the objective chosen on the other "
        "three sources (nested), leave-one-source-out",
        single,
        cs,
        curves,
        nested=True,
        own_weights=OWN_WEIGHTS,
    )
    # The sweep forecast's intervals: only forecasts that used a prior (the rest are single-curve
    # forecasts with the single-curve calibration); fitted on both sibling settings together.
    both_pfs: list[PointForecast] = []
    both_cs: list[Case] = []
    used: dict[str, tuple[list[PointForecast], list[Case]]] = {}
    for mode in ("same", "finished"):
        keep = [k for k, p in enumerate(sweep[(mode, SHIPPED_KAPPA)]) if p.names == SWEEP_MEMBERS]
        used[mode] = ([sweep[(mode, SHIPPED_KAPPA)][k] for k in keep], [cs[k] for k in keep])
        both_pfs += used[mode][0]
        both_cs += used[mode][1]
    before_grid = {k: v for k, v in SWEEP_GRID.items() if k != "own_weights"}
    for nested, how, grid in (
        (False, "the calibration until now (worst-gap objective, no own-error term)", before_grid),
        (True, "own-error term in the grid, objective chosen on the other three sources", SWEEP_GRID),
    ):
        for mode, label in (("same", "same stage"), ("finished", "finished siblings")):
            coverage_block(
                f"sweep forecast ({label}, kappa {SHIPPED_KAPPA:g}), {how}; fitted on both sibling "
                "settings, leave-one-source-out",
                used[mode][0],
                used[mode][1],
                curves,
                fit_on=(both_pfs, both_cs),
                nested=nested,
                **grid,
            )
    srcs = [curves[c.i].source for c in cs]
    for title, pfs, pcs, grid in (
        ("single", single, cs, {"own_weights": OWN_WEIGHTS}),
        ("sweep", both_pfs, both_cs, SWEEP_GRID),
    ):
        psrc = [curves[c.i].source for c in pcs]
        gaps = inner_gaps(pfs, pcs, psrc, **grid)
        objective = choose_objective(gaps)
        cal = fit_calibration(pfs, [c.y_test for c in pcs], groups=psrc, objective=objective, **grid)
        print(
            f"\nfitted on all four sources ({title}), objective {objective} (mean inner gap "
            + ", ".join(f"{o} {g:.3f}" for o, g in gaps.items())
            + f"): IntervalCalibration(levels={cal.levels}, "
            f"quantiles={tuple(round(q, 3) for q in cal.quantiles)}, horizon_slope={cal.horizon_slope}, "
            f"spread_weight=1.0, log_horizon_slope={cal.log_horizon_slope}, move_weight={cal.move_weight}, "
            f"trend_weight={cal.trend_weight}, sibling_weight={cal.sibling_weight}, "
            f"own_weight={cal.own_weight})"
        )
    del srcs
    kap = {
        mode: choose_kappa({k: errs_of(sweep[(mode, k)]) for k in KAPPAS}, flat, curves, SOURCES)
        for mode in ("same", "finished")
    }
    print(f"kappa chosen on all four sources: same stage {kap['same']:g}, finished {kap['finished']:g}")
    print(f"\nforecasts {t_fc:.0f} s; total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

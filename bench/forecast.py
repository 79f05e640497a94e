"""Forecast benchmark: backtest every real RL curve, leave one source out.

Data: every curve in /work/shared/data/real-rl-curves on its step axis (see SOURCES.md there):
4 sources: W&B panel exports (17 validation curves once deduplicated: several exports repeat a
run; ``scale_budget.csv`` is read on its step column), TensorBoard events (11 runs x validation
and train reward = 22), verl parsed CSVs (7 train-reward curves), SPEED-RL JSON lines (20 runs x 5
benchmarks = 100 validation curves).

Backtest: each curve is cut at 25%, 50% and 75% of its last step; a method sees the points at or
before the cut and forecasts every later point. Methods, side by side:

- ``this project``: :func:`scalerl.harness.analysis.forecast.ensemble.point_forecast_many` (ensemble) with the
  calibrated interval of :mod:`scalerl.harness.analysis.forecast.ensemble`;
- ``fit_sigmoid defaults``: the batched fit at its defaults (R0 fitted, or a step-0 evaluation);
  with ``--boot N`` its 90%/80%/50% intervals from ``bootstrap_fits`` + ``forecast_value``;
- ``paper's procedure``: ScaleRL's App. A.5 fit with its grid widened to the data as DESIGN.md
  §4 says (``paper`` fitter: A from max(fitted y) - 0.2 to 1.0 step 0.005 x 100 C_mid values from
  half the smallest to four times the largest fitted step, B > 0 fitted per cell, R0 = first
  point); nothing in it is tuned, so it needs no leave-one-source-out. It forecasts from every
  fit, as the procedure does, including those whose C_mid lies beyond the data (raw A);
  ``paper's procedure, ok fits only`` drops those, as this project's ``ok`` status would;
- ``paper grid`` (only with ``--paper-every k``): the paper's literal grid (``paper_grid``
  fitter: A 0.450..0.800, C_mid inside the data, curve_fit for B, R0 = first point);
- ``paper grid, A recentred`` (only with ``--recentred-every k``): the literal grid's 71 A values
  placed per curve at max(0, max(fitted y) - 0.05) .. +0.35, values above 1.0 dropped;
- ``curve_fit loop``: scipy ``curve_fit`` per curve (R0 = first point);
- ``power law``: :func:`scalerl.harness.analysis.fit.powerlaw.fit_power_law` at its defaults;
- ``flat-last-3``: the mean of the last 3 fitted points.

A method that returns no forecast for a curve (a fit that is not ``ok``) is counted in ``n`` and
left out of its error columns. Errors per curve: mean absolute error over its held-out points;
"median" is the median over curves; "pooled" the median |error| over all held-out points of
the curves with a forecast (the issue's metric); "end" the median over curves of |mean error over the last
5% (>= 3) held-out points|. Coverage: the share of held-out observations inside the interval,
averaged with each curve weighing the same.

Leave-one-source-out: for each source, the ensemble settings (a small grid: temperature x
rolling origins x members) and the interval calibration (split-conformal quantiles, horizon slope)
are chosen on the other three sources' backtests at all three cuts, then the held-out source is
scored with them. Tuning criterion: with r = log(median error / flat's median error) per
(cut, source), minimise max(r) + mean(r): the worst case counts as much as the average.

The literal grids take ~2 s a curve, so they are off by default (``--paper-every 0``); with
``--paper-every k`` they run on every k-th curve of each source (``--recentred-every`` for the
recentred row, default the same); ``--paper-cache FILE`` / ``--recentred-cache FILE`` keep their
predictions between runs (they do not depend on anything this bench tunes). Their rows show ``n``
out of the curves they ran on, and a like-for-like table compares every method on that subset.
The widened grid (``paper's procedure``) is vectorised and runs on every curve.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python -m bench.forecast [--paper-every 0] [--boot 0]``.
Prints markdown tables (paste them into bench/README.md, section "Forecasts") and the
calibration chosen on all sources (the constants the library ships).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bench import calibration_files
from bench.backtest import forecast_value, score
from bench.data import SHORT, SOURCES, RealCurve, load_real
from scalerl.harness.analysis.fit.bootstrap import bootstrap_fits
from scalerl.harness.analysis.fit.curve import sigmoid_curve
from scalerl.harness.analysis.fit.fitters import Fitter, PaperGridFitter, fit_sigmoid_many
from scalerl.harness.analysis.fit.powerlaw import fit_power_law
from scalerl.harness.analysis.forecast.ensemble import (
    DEFAULT_ENSEMBLE,
    MEMBERS,
    EnsembleSettings,
    PointForecast,
    point_forecast_many,
)
from scalerl.harness.analysis.forecast.intervals import CALIBRATED_LEVELS, IntervalCalibration

CUTS = (0.25, 0.5, 0.75)
LEVELS = (0.5, 0.8, 0.9)
SLOPES = (0.0, 0.5, 1.0, 2.0)
# The member spread enters the interval unscaled (k = 1: noise and model disagreement add as
# variances). Not tuned inside the folds: see bench/README.md, "Forecasts", for k = 0.5 and for a
# choice among 0 / 0.5 / 1 inside the folds.
SPREAD_WEIGHTS = (1.0,)
# The paper's procedure with its A grid (same 71 values, step 0.005) placed per curve from 0.05
# below the fitted part's maximum: the fixed 0.45-0.80 grid cannot reach TensorBoard's ~0.9
# ceilings or SPEED-RL's 0.05-0.3 AIME curves, so without this row the paper baseline is a strawman.
RECENTRED = PaperGridFitter(recentre_below=0.05)
RECENTRED_LABEL = "paper grid, A recentred"
# The settings grid searched inside each leave-one-source-out fold.
GRID = tuple(
    EnsembleSettings(origins=o, temperature=t, members=m)
    for o, t, m in itertools.product(
        ((0.6, 0.8), (0.7, 0.85)), (0.1, 0.25, 0.5, 1.0), (MEMBERS, ("sigmoid", "flat"))
    )
)


@dataclass(frozen=True)
class Split:
    x: np.ndarray
    y: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def split(c: RealCurve, cut: float) -> Split:
    train = c.x <= cut * float(c.x[-1])
    return Split(c.x[train], c.y[train], c.x[~train], c.y[~train])


@dataclass
class Scored:
    """One method at one cut: per-curve prediction (None = no forecast) and optional intervals."""

    pred: list[np.ndarray | None]
    lo: dict[float, list[np.ndarray]] | None = None
    hi: dict[float, list[np.ndarray]] | None = None


# ---------------------------------------------------------------- baseline methods


def flat_last3(splits: Sequence[Split]) -> Scored:
    return Scored([np.full(s.x_test.size, float(np.mean(s.y[-3:]))) for s in splits])


def sigmoid_method(splits: Sequence[Split], method: str | Fitter, first_r0: bool) -> Scored:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = fit_sigmoid_many(
            [(s.x, s.y) for s in splits],
            method=method,
            r0=[float(s.y[0]) for s in splits] if first_r0 else None,
        )
    return Scored([f.predict(s.x_test) if f.ok else None for f, s in zip(fits, splits, strict=True)])


def power_law(splits: Sequence[Split]) -> Scored:
    preds: list[np.ndarray | None] = []
    for s in splits:
        p = fit_power_law(s.x, s.y)
        preds.append(p.predict(s.x_test) if p.ok else None)
    return Scored(preds)


def sigmoid_bootstrap(splits: Sequence[Split], n_boot: int) -> Scored:
    """The defaults before this bench: bootstrap_fits + forecast_value at each level."""
    boots = bootstrap_fits([[(s.x, s.y)] for s in splits], n_boot=n_boot, seed=0)
    pred: list[np.ndarray | None] = []
    lo: dict[float, list[np.ndarray]] = {lv: [] for lv in LEVELS}
    hi: dict[float, list[np.ndarray]] = {lv: [] for lv in LEVELS}
    for b, s in zip(boots, splits, strict=True):
        pred.append(b.fit.predict(s.x_test) if b.fit.ok else None)
        for lv in LEVELS:
            fc = [forecast_value(b, float(c), level=lv) for c in s.x_test]
            lo[lv].append(np.array([f.lo for f in fc]))
            hi[lv].append(np.array([f.hi for f in fc]))
    return Scored(pred, lo, hi)


def paper_grid(
    curves: Sequence[RealCurve],
    every: int,
    cache: Path | None,
    fitter: PaperGridFitter | None = None,
    label: str = "paper grid",
) -> dict[tuple[str, float], list[float]]:
    """Paper-grid predictions for every ``every``-th curve of each source, keyed (name, cut);
    ``every=0`` skips it. ``fitter`` (default the paper's fixed A grid) is the same code path
    with its A grid recentred per curve for the second paper row. Curves of the ``every=3``
    subset are fitted first, so a run stopped early still leaves that subset complete in
    ``cache`` (written after every fit)."""
    if every <= 0:
        return {}
    fitter = fitter or PaperGridFitter()
    done: dict[str, list[float]] = json.loads(cache.read_text()) if cache and cache.exists() else {}
    out: dict[tuple[str, float], list[float]] = {}
    fresh = 0
    chosen: list[tuple[bool, int, RealCurve]] = []
    for src in SOURCES:
        mine = [c for c in curves if c.source == src]
        chosen += [(k % 3 != 0, k, c) for k, c in enumerate(mine) if k % every == 0]
    for _, _, c in sorted(chosen, key=lambda t: (t[0], SOURCES.index(t[2].source), t[1])):
        for cut in CUTS:
            key = f"{c.name}@{cut}"
            if key not in done:
                s = split(c, cut)
                p = sigmoid_method([s], fitter, first_r0=True).pred[0]
                done[key] = [] if p is None else [float(v) for v in p]
                fresh += 1
                if cache:
                    cache.write_text(json.dumps(done))
            out[(c.name, cut)] = done[key]
    print(f"{label}: {fresh} fit(s) computed now, {len(out) - fresh} read from {cache}")
    return out


PAPER_LABEL = "paper's procedure"
PAPER_OK_LABEL = "paper's procedure, ok fits only"


def paper_procedure(
    curves: Sequence[RealCurve],
) -> tuple[dict[float, Scored], dict[float, Scored], float, dict[str, int]]:
    """The paper's App. A.5 fit, grid widened to the data (``paper`` fitter, R0 = first point), on
    every curve at every cut. Two rows: forecasts from every fit, as the procedure gives them
    (a fit whose C_mid lies beyond the data, status ``pre-inflection`` here, still extrapolates
    with its raw A), and from the ``ok`` fits only (this project's rule). Also the seconds the
    fits took and how many sat on each kind of grid edge (the fit's reason says which)."""
    t = time.perf_counter()
    every: dict[float, Scored] = {}
    ok_only: dict[float, Scored] = {}
    edges = dict.fromkeys(
        ("A at the top", "A at the bottom", "C_mid at the bottom", "C_mid at the top", "B at"), 0
    )
    for cut in CUTS:
        splits = [split(c, cut) for c in curves]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # R0 = the first point: the paper fitter's own R0 (the run's initial performance).
            fits = fit_sigmoid_many([(s.x, s.y) for s in splits], method="paper")
        for kind in edges:
            edges[kind] += sum(
                f"paper grid edge: {kind}" in f.reason or f"; {kind}" in f.reason for f in fits
            )
        every[cut] = Scored(
            [
                sigmoid_curve(s.x_test, f.r0, f.a_raw, f.b, f.c_mid)
                if f.status in ("ok", "pre-inflection")
                else None
                for f, s in zip(fits, splits, strict=True)
            ]
        )
        ok_only[cut] = Scored(
            [f.predict(s.x_test) if f.ok else None for f, s in zip(fits, splits, strict=True)]
        )
    return every, ok_only, time.perf_counter() - t, edges


def versus_baselines(
    rows: dict[str, dict[float, Scored]], curves: Sequence[RealCurve], ours: str = "this project (LOSO)"
) -> None:
    """Median error over curves of ``ours`` divided by the paper's procedure's and by
    flat-last-3's, per source and over all curves (< 1: ours is better)."""
    print(f"\n### {ours}: median error / the paper's procedure's, / flat-last-3's\n")
    print("| cut | " + " | ".join(SHORT[s] for s in SOURCES) + " | all |")
    print("|---|" + "---|" * (len(SOURCES) + 1))
    groups = [[i for i, c in enumerate(curves) if c.source == s] for s in SOURCES] + [
        list(range(len(curves)))
    ]
    for cut in CUTS:
        e = {k: curve_errors(rows[k][cut].pred, cut, curves) for k in (ours, PAPER_LABEL, "flat-last-3")}
        cells = []
        for idx in groups:
            mine = float(np.nanmedian(e[ours][idx]))
            cells.append(
                " / ".join(
                    fmt(mine / float(np.nanmedian(e[k][idx])), 2) for k in (PAPER_LABEL, "flat-last-3")
                )
            )
        print(f"| {int(cut * 100)}% | " + " | ".join(cells) + " |")


# ---------------------------------------------------------------- this project's forecast


def backtest_points(
    curves: Sequence[RealCurve], settings: EnsembleSettings
) -> dict[float, list[PointForecast]]:
    out = {}
    for cut in CUTS:
        splits = [split(c, cut) for c in curves]
        out[cut] = point_forecast_many(
            [(s.x, s.y) for s in splits], [s.x_test for s in splits], settings=settings
        )
    return out


def calibrate(
    pfs: Sequence[PointForecast], actual: Sequence[np.ndarray], slope: float, spread: float
) -> IntervalCalibration:
    """Split-conformal quantiles of |e| / unit (PointForecast.interval_scale), every curve
    weighing the same."""
    scores, weights = [], []
    for pf, y in zip(pfs, actual, strict=True):
        if pf.status != "ok" or y.size == 0:
            continue
        scores.append(np.abs(y - pf.value) / pf.interval_scale(slope, spread))
        weights.append(np.full(y.size, 1.0 / y.size))
    sc, wt = np.concatenate(scores), np.concatenate(weights)
    order = np.argsort(sc)
    cum = np.cumsum(wt[order]) / wt.sum()
    qs = tuple(float(sc[order][min(int(np.searchsorted(cum, lv)), sc.size - 1)]) for lv in CALIBRATED_LEVELS)
    return IntervalCalibration(
        levels=CALIBRATED_LEVELS, quantiles=qs, horizon_slope=slope, spread_weight=spread
    )


def coverage_spread(
    pfs: Sequence[PointForecast], actual: Sequence[np.ndarray], cal: IntervalCalibration
) -> float:
    """The worst |coverage - nominal| over the levels 50/80/90% x horizon terciles (each curve
    weighing the same inside a tercile): the slope that keeps coverage even across horizons wins."""
    hs, errs, wts = [], [], []
    for pf, y in zip(pfs, actual, strict=True):
        if pf.status != "ok" or y.size == 0:
            continue
        hs.append(pf.horizon)
        errs.append(np.abs(y - pf.value) / pf.interval_scale(cal.horizon_slope, cal.spread_weight))
        wts.append(np.full(y.size, 1.0 / y.size))
    h, e, w = np.concatenate(hs), np.concatenate(errs), np.concatenate(wts)
    bins = np.digitize(h, np.quantile(h, [1 / 3, 2 / 3]))
    worst = 0.0
    for lv in LEVELS:
        inside = e <= cal.quantile(lv)
        for b in range(3):
            sel = bins == b
            if sel.any():
                worst = max(worst, abs(float(np.sum(w[sel] * inside[sel]) / np.sum(w[sel])) - lv))
    return worst


def choose(
    curves: Sequence[RealCurve],
    idx: Sequence[int],
    cache: dict[EnsembleSettings, dict[float, list[PointForecast]]],
    flat: dict[float, Scored],
) -> tuple[EnsembleSettings, IntervalCalibration]:
    """Pick settings and calibration on the curves ``idx`` only."""
    srcs = sorted({curves[i].source for i in idx})

    def loss(settings: EnsembleSettings) -> float:
        ratios = []
        for cut in CUTS:
            errs = curve_errors([cache[settings][cut][i].value for i in range(len(curves))], cut, curves)
            flat_errs = curve_errors(flat[cut].pred, cut, curves)
            for src in srcs:
                sel = [i for i in idx if curves[i].source == src]
                ratios.append(math.log(np.nanmedian(errs[sel]) / np.nanmedian(flat_errs[sel])))
        # Worst (cut, source) plus the average: a forecast must not lose badly anywhere.
        return max(ratios) + float(np.mean(ratios))

    best = min(GRID, key=loss)
    pfs = [cache[best][cut][i] for cut in CUTS for i in idx]
    actual = [split(curves[i], cut).y_test for cut in CUTS for i in idx]
    cals = [calibrate(pfs, actual, slope, k) for slope in SLOPES for k in SPREAD_WEIGHTS]
    cal = min(cals, key=lambda c: coverage_spread(pfs, actual, c))
    return best, cal


# ---------------------------------------------------------------- scoring


def curve_errors(pred: Sequence[np.ndarray | None], cut: float, curves: Sequence[RealCurve]) -> np.ndarray:
    out = np.full(len(curves), np.nan)
    for i, (p, c) in enumerate(zip(pred, curves, strict=True)):
        if p is not None and len(p) and np.isfinite(p).all():
            out[i] = score(np.asarray(p), split(c, cut).y_test)[0]
    return out


def end_errors(pred: Sequence[np.ndarray | None], cut: float, curves: Sequence[RealCurve]) -> np.ndarray:
    out = np.full(len(curves), np.nan)
    for i, (p, c) in enumerate(zip(pred, curves, strict=True)):
        if p is not None and len(p) and np.isfinite(p).all():
            out[i] = abs(score(np.asarray(p), split(c, cut).y_test)[2])
    return out


def pooled_error(
    pred: Sequence[np.ndarray | None], cut: float, curves: Sequence[RealCurve], idx: Sequence[int]
) -> float:
    """Median |error| over every held-out point of the curves in ``idx`` with a forecast, pooled
    (the issue's metric: a curve with more held-out points weighs more)."""
    errs = []
    for i in idx:
        p = pred[i]
        if p is not None and len(p) and np.isfinite(p).all():
            errs.append(np.abs(np.asarray(p) - split(curves[i], cut).y_test))
    return float(np.median(np.concatenate(errs))) if errs else math.nan


def coverage(sc: Scored, cut: float, curves: Sequence[RealCurve], level: float, idx: Sequence[int]) -> float:
    if sc.lo is None or sc.hi is None:
        return math.nan
    cov = []
    for i in idx:
        y = split(curves[i], cut).y_test
        lo, hi = sc.lo[level][i], sc.hi[level][i]
        if y.size and lo.size == y.size and np.isfinite(lo).all():
            cov.append(float(np.mean((y >= lo) & (y <= hi))))
        elif y.size:
            cov.append(0.0)  # no interval where a forecast was needed: nothing is covered
    return float(np.mean(cov)) if cov else math.nan


def fmt(v: float, digits: int = 4) -> str:
    return "-" if not np.isfinite(v) else f"{v:.{digits}f}"


def table(
    title: str,
    rows: dict[str, dict[float, Scored]],
    curves: Sequence[RealCurve],
    idx: Sequence[int],
) -> None:
    print(f"\n### {title}\n")
    srcs = [s for s in SOURCES if any(curves[i].source == s for i in idx)]
    head = (
        "| cut | method | n | median | pooled | "
        + " | ".join(SHORT[s] for s in srcs)
        + " | end | cov 50 | cov 80 | cov 90 |"
    )
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for cut in CUTS:
        for name, by_cut in rows.items():
            sc = by_cut[cut]
            e = curve_errors(sc.pred, cut, curves)
            fe = end_errors(sc.pred, cut, curves)
            have = [i for i in idx if np.isfinite(e[i])]
            per = [
                np.nanmedian(e[[i for i in idx if curves[i].source == s]])
                if any(curves[i].source == s and np.isfinite(e[i]) for i in idx)
                else math.nan
                for s in srcs
            ]
            covs = [coverage(sc, cut, curves, lv, idx) for lv in LEVELS]
            print(
                f"| {int(cut * 100)}% | {name} | {len(have)}/{len(idx)} | "
                f"{fmt(np.nanmedian(e[idx]) if have else math.nan)} | "
                f"{fmt(pooled_error(sc.pred, cut, curves, idx))} | "
                + " | ".join(fmt(v) for v in per)
                + f" | {fmt(np.nanmedian(fe[idx]) if have else math.nan)} | "
                + " | ".join(fmt(100 * c, 1) for c in covs)
                + " |"
            )


def common_pooled(rows: dict[str, dict[float, Scored]], curves: Sequence[RealCurve]) -> None:
    """Pooled median |error| on the curves every method forecasts: the pooled column of the main
    table leaves out each method's unfitted curves, which are mostly the hard ones."""
    print("\n### Pooled median |error| on the curves every method forecasts (like for like)\n")
    print("| cut | curves | " + " | ".join(rows) + " |")
    print("|---|---|" + "---|" * len(rows))
    for cut in CUTS:
        errs = {name: curve_errors(by_cut[cut].pred, cut, curves) for name, by_cut in rows.items()}
        common = [i for i in range(len(curves)) if all(np.isfinite(e[i]) for e in errs.values())]
        cells = [fmt(pooled_error(by_cut[cut].pred, cut, curves, common)) for by_cut in rows.values()]
        print(f"| {int(cut * 100)}% | {len(common)} | " + " | ".join(cells) + " |")


def pooled_noise_median(sds: np.ndarray, counts: np.ndarray) -> float:
    """The median of |noise| over all points when curve i has ``counts[i]`` points of Gaussian
    noise with sd ``sds[i]``: solves sum_i n_i P(|N(0, sd_i)| <= m) = N / 2 by bisection."""
    lo, hi = 0.0, float(sds.max()) * 5 + 1e-12
    for _ in range(60):
        m = (lo + hi) / 2
        # A curve with no measurable noise (sd 0) has all its |noise| at 0, inside any m.
        inside = np.array([math.erf(m / (sd * math.sqrt(2))) if sd > 0 else 1.0 for sd in sds])
        lo, hi = (m, hi) if float(np.sum(counts * inside)) < counts.sum() / 2 else (lo, m)
    return (lo + hi) / 2


def with_intervals(
    pfs: Sequence[PointForecast], cal: IntervalCalibration
) -> tuple[dict[float, list[np.ndarray]], dict[float, list[np.ndarray]]]:
    lo: dict[float, list[np.ndarray]] = {}
    hi: dict[float, list[np.ndarray]] = {}
    for lv in LEVELS:
        q = cal.quantile(lv)
        half = [q * p.interval_scale(cal.horizon_slope, cal.spread_weight) for p in pfs]
        lo[lv] = [p.value - h for p, h in zip(pfs, half, strict=True)]
        hi[lv] = [p.value + h for p, h in zip(pfs, half, strict=True)]
    return lo, hi


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--paper-every",
        type=int,
        default=0,
        help="run the paper's literal grid (A 0.45-0.80) on every k-th curve per source (0: not at all)",
    )
    ap.add_argument("--paper-cache", type=Path, default=None, help="JSON file keeping paper-grid predictions")
    ap.add_argument(
        "--recentred-every",
        type=int,
        default=None,
        help="as --paper-every, for the paper grid with its A grid recentred per curve (default: same)",
    )
    ap.add_argument(
        "--recentred-cache",
        type=Path,
        default=None,
        help="JSON file keeping recentred paper-grid predictions",
    )
    ap.add_argument(
        "--paper-only", action="store_true", help="only compute the paper grids into their caches, then stop"
    )
    ap.add_argument(
        "--boot", type=int, default=0, help="bootstrap replicates for the old fit_sigmoid intervals"
    )
    ap.add_argument(
        "--write-calibrations",
        action="store_true",
        help="replace the library's linear calibration file (the pruners') with the one chosen here",
    )
    args = ap.parse_args()
    recentred_every = args.paper_every if args.recentred_every is None else args.recentred_every
    t0 = time.perf_counter()
    curves = load_real()
    n = len(curves)
    print(
        f"date {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {platform.node()} ({os.cpu_count()} CPUs, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}); {n} curves: "
        + ", ".join(f"{SHORT[s]} {sum(c.source == s for c in curves)}" for s in SOURCES)
    )

    if args.paper_only:
        paper_grid(curves, args.paper_every, args.paper_cache)
        paper_grid(curves, recentred_every, args.recentred_cache, RECENTRED, RECENTRED_LABEL)
        return

    # Every settings candidate's point forecasts, once (they do not depend on the fold).
    cache = {st: backtest_points(curves, st) for st in GRID}
    flat = {cut: flat_last3([split(c, cut) for c in curves]) for cut in CUTS}

    # Leave one source out: choose on three sources, score the fourth.
    ours: dict[float, Scored] = {
        cut: Scored(
            [None] * n, {lv: [np.zeros(0)] * n for lv in LEVELS}, {lv: [np.zeros(0)] * n for lv in LEVELS}
        )
        for cut in CUTS
    }
    print("\nleave-one-source-out choices:")
    for src in SOURCES:
        train = [i for i, c in enumerate(curves) if c.source != src]
        test = [i for i, c in enumerate(curves) if c.source == src]
        st, cal = choose(curves, train, cache, flat)
        print(
            f"- held out {SHORT[src]}: origins={st.origins}, temperature={st.temperature}, "
            f"members={'+'.join(st.members)}, slope={cal.horizon_slope}, spread={cal.spread_weight}, "
            f"q50/80/90={cal.quantile(0.5):.2f}/{cal.quantile(0.8):.2f}/{cal.quantile(0.9):.2f}"
        )
        for cut in CUTS:
            pfs = cache[st][cut]
            lo, hi = with_intervals(pfs, cal)
            sc = ours[cut]
            for i in test:
                ok = pfs[i].status == "ok"
                sc.pred[i] = pfs[i].value if ok else None
                for lv in LEVELS:
                    assert sc.lo is not None and sc.hi is not None
                    sc.lo[lv][i] = lo[lv][i]
                    sc.hi[lv][i] = hi[lv][i]

    rows: dict[str, dict[float, Scored]] = {"this project (LOSO)": ours}
    rows["fit_sigmoid defaults"] = {}
    for cut in CUTS:
        splits = [split(c, cut) for c in curves]
        rows["fit_sigmoid defaults"][cut] = (
            sigmoid_bootstrap(splits, args.boot)
            if args.boot
            else sigmoid_method(splits, "fast", first_r0=False)
        )
    rows["curve_fit loop"] = {
        cut: sigmoid_method([split(c, cut) for c in curves], "curve_fit", True) for cut in CUTS
    }
    rows["power law"] = {cut: power_law([split(c, cut) for c in curves]) for cut in CUTS}
    rows["flat-last-3"] = flat
    rows[PAPER_LABEL], rows[PAPER_OK_LABEL], t_widened, n_edge = paper_procedure(curves)
    t_paper = time.perf_counter()
    papers = {
        "paper grid": (paper_grid(curves, args.paper_every, args.paper_cache), args.paper_every),
        RECENTRED_LABEL: (
            paper_grid(curves, recentred_every, args.recentred_cache, RECENTRED, RECENTRED_LABEL),
            recentred_every,
        ),
    }
    t_paper = time.perf_counter() - t_paper
    partial: dict[str, int] = {}  # paper rows not run on every curve -> their --every
    for label, (paper, every) in papers.items():
        rows[label] = {
            cut: Scored(
                [np.array(paper[(c.name, cut)]) if paper.get((c.name, cut)) else None for c in curves]
            )
            for cut in CUTS
        }
        if sum((c.name, CUTS[0]) in paper for c in curves) < n:
            partial[label] = every
    # A paper row run on a subset only appears in the like-for-like table on that subset.
    shown = {k: v for k, v in rows.items() if k not in partial}
    sub = [i for i, c in enumerate(curves) if all((c.name, CUTS[0]) in papers[label][0] for label in partial)]
    if any(every <= 0 for every in partial.values()):
        sub = []
    table("All curves (leave-one-source-out for this project)", shown, curves, range(n))
    common_pooled(shown, curves)
    versus_baselines(rows, curves)
    print(
        "\nheld-out points per source (what weighs in the pooled column): "
        + "; ".join(
            f"{int(100 * cut)}% cut "
            + ", ".join(
                f"{SHORT[src]} {sum(split(c, cut).y_test.size for c in curves if c.source == src)}"
                for src in SOURCES
            )
            for cut in CUTS
        )
    )
    # The error a perfect forecast of the noiseless curve would still make: mean |noise| of the
    # held-out points, noise sd from the MAD of their first differences / sqrt(2) (Gaussian).
    floor, pooled_floor = [], []
    for cut in CUTS:
        per, sds, counts = [], [], []
        for c in curves:
            y = split(c, cut).y_test
            if y.size > 3:
                d = np.diff(y)
                sd = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2)
                per.append(sd * math.sqrt(2 / math.pi))
                sds.append(sd)
                counts.append(y.size)
        floor.append(float(np.median(per)))
        pooled_floor.append(pooled_noise_median(np.array(sds), np.array(counts)))
    print(
        "\nnoise floor (median over curves of the held-out points' mean |noise|): "
        + ", ".join(f"{int(100 * cut)}% cut {f:.4f}" for cut, f in zip(CUTS, floor, strict=True))
        + "; pooled over points (median |noise|, the pooled column's floor): "
        + ", ".join(f"{f:.4f}" for f in pooled_floor)
    )
    print("\n### This project's interval coverage per held-out source (50 / 80 / 90%)\n")
    print("| cut | " + " | ".join(SHORT[s] for s in SOURCES) + " |")
    print("|---|" + "---|" * len(SOURCES))
    for cut in CUTS:
        cells = []
        for src in SOURCES:
            idx = [i for i, c in enumerate(curves) if c.source == src]
            cells.append(" / ".join(fmt(100 * coverage(ours[cut], cut, curves, lv, idx), 0) for lv in LEVELS))
        print(f"| {int(cut * 100)}% | " + " | ".join(cells) + " |")
    if sub and partial:
        table(
            f"Paper-grid subset ({len(sub)} curves: every {max(partial.values())}-th per source), "
            "like for like",
            rows,
            curves,
            sub,
        )

    # The constants the library ships: chosen on all sources.
    st, cal = choose(curves, range(n), cache, flat)
    print(
        f"\ncalibration shipped (all sources): EnsembleSettings(origins={st.origins}, "
        f"temperature={st.temperature}, members={st.members}); IntervalCalibration(levels={cal.levels}, "
        f"quantiles={tuple(round(q, 3) for q in cal.quantiles)}, horizon_slope={cal.horizon_slope}, "
        f"spread_weight={cal.spread_weight})"
    )
    if st != DEFAULT_ENSEMBLE:
        print("NOTE: the library's DEFAULT_ENSEMBLE differs from these; update it.")
    calibration_files.report(
        "linear",
        cal,
        output="the line 'calibration shipped (all sources)'",
        procedure="split-conformal quantiles of |error| / unit over every backtest (cuts 25, 50, 75%) of "
        "all four sources, horizon slope chosen to even out coverage across horizon terciles; quantiles "
        "rounded to 3 decimals",
        write=args.write_calibrations,
    )
    print(
        "(LINEAR_CALIBRATION is the pruner's; forecast_curve's DEFAULT_CALIBRATION is fitted by "
        "bench/forecast_sweep.py, for horizons up to 30x.)"
    )
    print(
        f"\n{PAPER_LABEL}: {3 * n} fits in {t_widened:.1f} s (on a grid edge: "
        + ", ".join(f"{k} {v}" for k, v in n_edge.items())
        + "); "
        f"literal paper grids: {t_paper:.0f} s this run; total {time.perf_counter() - t0:.0f} s"
    )


if __name__ == "__main__":
    main()

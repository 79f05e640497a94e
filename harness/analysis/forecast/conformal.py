"""Fitting and checking forecast intervals: split-conformal quantiles, horizon growth, coverage.

A forecast's interval is ``value +- q(level) * u`` (:meth:`.ensemble.PointForecast.unit`); the
unit ``u`` grows with the log of the compute ratio ``r = C / C_last`` and with the forecast's
own movement, by two constants this module chooses. :func:`fit_calibration` takes backtested
point forecasts with the observations they should have covered and returns the
:class:`.intervals.IntervalCalibration`: for every candidate (log-horizon slope, movement
weight) the quantiles of ``|error| / u`` (every forecast weighing the same), then the candidate
whose coverage is most even across horizon buckets and groups (sources): by default the worst
``|coverage - level|`` over levels x buckets x groups is the criterion, so a calibration cannot
trade an under-covered long horizon or source for an over-covered one. One group unlike the
rest (on the real curves, verl's train reward, still at 0.01 when a forecast is made and at 0.5
later) then steers everything: no candidate covers it, and the widest one over-covers every
other group. The ``trimmed`` objectives leave out the group with the largest worst gap, and
``mean`` averages the gaps; :func:`fit_calibrations` fits every objective in one pass, so a
bench can choose the objective on sources it does not score (``bench/forecast_sweep.py``).

Fit it on curves other than those it is scored on: ``bench/forecast_sweep.py`` fits it with one
source left out and scores that source (bench/README.md, "Forecasts from the whole sweep").
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from scalerl.harness.analysis.fit.curve import FloatArray
from scalerl.harness.analysis.forecast.ensemble import PointForecast
from scalerl.harness.analysis.forecast.intervals import CALIBRATED_LEVELS, IntervalCalibration, UnitTerms
from scalerl.harness.errors import ConfigError

# Compute-ratio buckets (C / the last fitted compute) in which coverage is checked: 1-2x, 2-4x,
# 4-10x, 10-30x; a ratio past the last edge falls in the last bucket.
HORIZON_EDGES = (1.0, 2.0, 4.0, 10.0, 30.0)
CHECK_LEVELS = (0.5, 0.8, 0.9)
LOG_SLOPES = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
MOVE_WEIGHTS = (0.0, 0.5, 1.0)
TREND_WEIGHTS = (0.0, 1.0)
HORIZON_SLOPES = (0.0, 0.5, 1.0)
_MIN_CELL = 3  # a (bucket, group) cell with fewer forecasts does not steer the choice
# How a candidate's coverage gaps (|coverage - level| per level x bucket x group) become its
# score: the worst gap, the mean gap, or either with the group whose worst gap is largest left
# out ("trimmed": one training source unlike the rest, whose errors no candidate covers, would
# otherwise widen every other source's intervals to no avail).
Objective = Literal["worst", "mean", "trimmed-worst", "trimmed-mean"]
OBJECTIVES: tuple[Objective, ...] = ("worst", "mean", "trimmed-worst", "trimmed-mean")


def bucket_label(k: int) -> str:
    lo, hi = HORIZON_EDGES[k], HORIZON_EDGES[k + 1]
    return f"{lo:g}-{hi:g}x"


def buckets(ratio: FloatArray) -> np.ndarray:
    """Bucket index (0 .. len(HORIZON_EDGES) - 2) of each compute ratio."""
    return np.clip(np.searchsorted(HORIZON_EDGES, ratio, side="right") - 1, 0, len(HORIZON_EDGES) - 2)


@dataclass(frozen=True)
class _Flat:
    """Every scored point of every usable forecast, flattened."""

    err: FloatArray  # |observation - forecast|
    weight: FloatArray  # 1 / points of its forecast (every forecast weighs the same)
    forecast: np.ndarray  # index of the forecast each point belongs to
    bucket: np.ndarray
    group: np.ndarray  # group index per point


def _flatten(
    pfs: Sequence[PointForecast], actual: Sequence[FloatArray], groups: Sequence[Hashable] | None
) -> tuple[_Flat, list[int], list[Hashable]]:
    if len(pfs) != len(actual) or (groups is not None and len(groups) != len(pfs)):
        raise ConfigError(
            "pfs, actual and groups must have one entry per forecast",
            field="actual",
            value=(len(pfs), len(actual), None if groups is None else len(groups)),
            fix="pass aligned sequences",
        )
    names: list[Hashable] = sorted({g for g in groups}, key=str) if groups is not None else ["all"]
    used: list[int] = []
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("err", "weight", "forecast", "bucket", "group")}
    for i, (pf, y) in enumerate(zip(pfs, actual, strict=True)):
        y = np.asarray(y, dtype=np.float64)
        if pf.status != "ok" or y.size == 0 or y.size != pf.value.size:
            continue
        used.append(i)
        ratio = np.ones(y.size) if pf.ratio is None else pf.ratio
        parts["err"].append(np.abs(y - pf.value))
        parts["weight"].append(np.full(y.size, 1.0 / y.size))
        parts["forecast"].append(np.full(y.size, i))
        parts["bucket"].append(buckets(ratio))
        parts["group"].append(np.full(y.size, 0 if groups is None else names.index(groups[i])))
    if not used:
        raise ConfigError(
            "no usable forecast to calibrate on (every one failed or has no observations)",
            field="pfs",
            value=len(pfs),
            fix="backtest curves with at least 4 points before the cut",
        )
    flat = _Flat(**{k: np.concatenate(v) for k, v in parts.items()})
    return flat, used, names


def _terms(pfs: Sequence[PointForecast], used: Sequence[int]) -> UnitTerms:
    return UnitTerms.concat([pfs[i].terms() for i in used])


def _quantiles(scores: FloatArray, weight: FloatArray) -> tuple[float, ...]:
    order = np.argsort(scores)
    cum = np.cumsum(weight[order]) / weight.sum()
    s = scores[order]
    return tuple(float(s[min(int(np.searchsorted(cum, lv)), s.size - 1)]) for lv in CALIBRATED_LEVELS)


def _cells(flat: _Flat, inside: np.ndarray) -> dict[tuple[int, int], tuple[float, int]]:
    """(bucket, group) -> (coverage with every forecast weighing the same, forecasts in it)."""
    out: dict[tuple[int, int], tuple[float, int]] = {}
    for b, g in set(zip(flat.bucket.tolist(), flat.group.tolist(), strict=True)):
        sel = (flat.bucket == b) & (flat.group == g)
        f = flat.forecast[sel]
        uniq, inv = np.unique(f, return_inverse=True)
        # Share inside per forecast, then the mean over forecasts.
        per = np.bincount(inv, weights=inside[sel].astype(np.float64)) / np.bincount(inv)
        out[(b, g)] = (float(per.mean()), int(uniq.size))
    return out


def fit_calibration(
    pfs: Sequence[PointForecast],
    actual: Sequence[FloatArray],
    *,
    groups: Sequence[Hashable] | None = None,
    log_slopes: Sequence[float] = LOG_SLOPES,
    move_weights: Sequence[float] = MOVE_WEIGHTS,
    trend_weights: Sequence[float] = TREND_WEIGHTS,
    horizon_slopes: Sequence[float] = HORIZON_SLOPES,
    sibling_weights: Sequence[float] = (0.0,),
    own_weights: Sequence[float] = (0.0,),
    spread_weight: float = 1.0,
    objective: Objective = "worst",
) -> IntervalCalibration:
    """The calibration for these backtested forecasts (see the module docstring).

    ``actual[i]`` holds the observations at ``pfs[i].at``; ``groups[i]`` (e.g. the source) is the
    group whose coverage must hold on its own. The candidates are every combination of
    ``log_slopes`` x ``move_weights`` x ``trend_weights`` x ``horizon_slopes`` (the linear
    horizon slope of the earlier calibration) x ``sibling_weights`` (for sweep forecasts) x
    ``own_weights`` (the forecast's own validation error); ``objective`` (:data:`OBJECTIVES`)
    scores each candidate's coverage gaps. Raises ConfigError when nothing is usable.
    """
    return fit_calibrations(
        pfs,
        actual,
        groups=groups,
        log_slopes=log_slopes,
        move_weights=move_weights,
        trend_weights=trend_weights,
        horizon_slopes=horizon_slopes,
        sibling_weights=sibling_weights,
        own_weights=own_weights,
        spread_weight=spread_weight,
        objectives=(objective,),
    )[objective]


def fit_calibrations(
    pfs: Sequence[PointForecast],
    actual: Sequence[FloatArray],
    *,
    groups: Sequence[Hashable] | None = None,
    log_slopes: Sequence[float] = LOG_SLOPES,
    move_weights: Sequence[float] = MOVE_WEIGHTS,
    trend_weights: Sequence[float] = TREND_WEIGHTS,
    horizon_slopes: Sequence[float] = HORIZON_SLOPES,
    sibling_weights: Sequence[float] = (0.0,),
    own_weights: Sequence[float] = (0.0,),
    spread_weight: float = 1.0,
    objectives: Sequence[Objective] = OBJECTIVES,
) -> dict[Objective, IntervalCalibration]:
    """:func:`fit_calibration` under several objectives at once (one pass over the candidates):
    the best calibration per objective."""
    for objective in objectives:
        if objective not in OBJECTIVES:
            raise ConfigError(
                "unknown calibration objective",
                field="objective",
                value=objective,
                fix=f"use one of {OBJECTIVES}",
            )
    flat, used, _ = _flatten(pfs, actual, groups)
    terms = _terms(pfs, used)
    best: dict[Objective, tuple[float, IntervalCalibration]] = {}
    grid = itertools.product(
        log_slopes, move_weights, trend_weights, horizon_slopes, sibling_weights, own_weights
    )
    for g, m, t, h, v, o in grid:
        trial = IntervalCalibration(
            levels=CALIBRATED_LEVELS,
            quantiles=(1.0,) * len(CALIBRATED_LEVELS),
            horizon_slope=float(h),
            spread_weight=spread_weight,
            log_horizon_slope=float(g),
            move_weight=float(m),
            trend_weight=float(t),
            sibling_weight=float(v),
            own_weight=float(o),
        )
        scores = flat.err / terms.for_calibration(trial)
        cal = replace(trial, quantiles=_quantiles(scores, flat.weight))
        per_group: dict[int, list[float]] = {}
        for lv in CHECK_LEVELS:
            for (_, g_ix), (cov, n) in _cells(flat, scores <= cal.quantile(lv)).items():
                if n >= _MIN_CELL:
                    per_group.setdefault(g_ix, []).append(abs(cov - lv))
        for objective in objectives:
            crit = _criterion(per_group, objective)
            if objective not in best or crit < best[objective][0] - 1e-12:
                best[objective] = (crit, cal)
    return {objective: found for objective, (_, found) in best.items()}


def _criterion(per_group: dict[int, list[float]], objective: Objective) -> float:
    """One candidate's score from its |coverage - level| gaps per group (see :data:`OBJECTIVES`)."""
    groups = sorted(per_group.values(), key=max)
    if objective.startswith("trimmed") and len(groups) > 1:
        groups = groups[:-1]  # the group least like the rest (largest worst gap) does not steer
    gaps = [g for grp in groups for g in grp]
    if not gaps:
        return 0.0
    return max(gaps) if objective.endswith("worst") else float(np.mean(gaps))


@dataclass(frozen=True)
class CoverageCell:
    """Coverage of one (group, horizon bucket) cell at one level: the share of observations
    inside the interval, every forecast weighing the same; ``forecasts`` in the cell."""

    group: Hashable
    bucket: str
    level: float
    coverage: float
    forecasts: int


def coverage_table(
    pfs: Sequence[PointForecast],
    actual: Sequence[FloatArray],
    calibration: IntervalCalibration,
    *,
    groups: Sequence[Hashable] | None = None,
    levels: Sequence[float] = CHECK_LEVELS,
) -> list[CoverageCell]:
    """Coverage per (group, horizon bucket, level), plus each group's row over all buckets
    (bucket ``"all"``)."""
    flat, used, names = _flatten(pfs, actual, groups)
    scores = flat.err / _terms(pfs, used).for_calibration(calibration)
    out: list[CoverageCell] = []
    for lv in levels:
        inside = scores <= calibration.quantile(lv)
        for (b, g), (cov, n) in sorted(_cells(flat, inside).items()):
            out.append(CoverageCell(names[g], bucket_label(b), lv, cov, n))
        for g, name in enumerate(names):
            sel = flat.group == g
            if sel.any():
                f = flat.forecast[sel]
                _, inv = np.unique(f, return_inverse=True)
                per = np.bincount(inv, weights=inside[sel].astype(np.float64)) / np.bincount(inv)
                out.append(CoverageCell(name, "all", lv, float(per.mean()), int(per.size)))
    return out

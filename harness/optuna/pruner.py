"""A forecast pruner for any Optuna study: stop a trial once its forecast cannot catch the best.

A trial reports ``trial.report(value, step)`` with ``step`` the compute spent so far in integer
units (steps, GPU-seconds, 1e9-FLOP units...). The pruner forecasts each trial's curve at the
``target`` compute with :func:`scalerl.harness.analysis.forecast_curves` (the sigmoid / flat / power-law
ensemble with a calibrated prediction interval) and prunes a trial whose optimistic edge is below
what another trial is already confidently worth. It reads the study only through
``study.get_trials(deepcopy=False)``, so it works with any storage (in-memory, RDB, journal) and
needs nothing else from the harness.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np
import optuna
from optuna.pruners import BasePruner
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from scalerl.harness.analysis.fit.fitters import fit_sigmoid_many
from scalerl.harness.analysis.forecast.calibrations import LINEAR_CALIBRATION, SWEEP_CALIBRATION
from scalerl.harness.analysis.forecast.ensemble import PointForecast, point_forecast_many, with_interval
from scalerl.harness.analysis.forecast.intervals import IntervalCalibration
from scalerl.harness.analysis.forecast.peers import exceed_probability, peer_forecast, smoothed_at
from scalerl.harness.analysis.forecast.sweep_prior import (
    DEFAULT_SWEEP,
    SweepSettings,
    point_forecast_with_prior,
    siblings_finished,
    sweep_priors,
)
from scalerl.harness.analysis.noise.point import noise_scale
from scalerl.harness.errors import ConfigError

_STATES = (TrialState.COMPLETE, TrialState.RUNNING, TrialState.PRUNED)
Rule = Literal["bound", "beat"]


@dataclass(frozen=True)
class TrialForecast:
    """One trial's forecast at the target, in the maximised frame (see :class:`ForecastPruner`).

    ``n_points`` is the number of intermediate values it was made from; ``ok`` is False (and
    the numbers NaN) when the forecaster had no sound forecast; ``past_inflection`` is False
    when the trial's sigmoid fit puts C_mid beyond its last reported compute."""

    n_points: int
    value: float
    lo: float
    hi: float
    ok: bool
    past_inflection: bool


@dataclass(frozen=True)
class BeatForecast:
    """One trial's chance of beating the incumbent (``rule="beat"``), in the maximised frame.

    ``value`` is the point forecast at the target and ``unit`` the interval unit its calibrated
    quantiles multiply (:meth:`scalerl.harness.analysis.forecast.ensemble.PointForecast.unit`);
    ``method`` is ``"sweep"`` when the other trials gave a prior
    (:mod:`scalerl.harness.analysis.forecast.sweep_prior`), ``"single"`` otherwise; ``ok`` is False
    (numbers NaN) without a sound forecast. :func:`beat_probability` turns it into a probability."""

    n_points: int
    siblings: tuple[tuple[int, int], ...]  # (trial number, points) of the siblings it used
    value: float
    unit: float
    method: Literal["sweep", "single"]
    ok: bool
    past_inflection: bool
    finished: bool = False  # the unit is ``finished_calibration``'s (siblings ran on past it)


def central_level(score: float, calibration: IntervalCalibration) -> float:
    """P(|error| <= score x unit): the calibration's quantile table read backwards.

    Between its levels (0.5 .. 0.98) it interpolates linearly (and from (0, 0) to the first
    level); past the last it continues with the normal distribution that has the last quantile
    at the last level, so the tail decays instead of stopping at 0.98. Increasing in ``score``."""
    qs, lv = calibration.quantiles, calibration.levels
    if not score > 0:
        return 0.0
    if score <= qs[-1]:
        return float(np.interp(score, (0.0, *qs), (0.0, *lv)))
    sigma = qs[-1] / NormalDist().inv_cdf((1.0 + lv[-1]) / 2.0)
    return max(lv[-1], math.erf(score / sigma / math.sqrt(2.0)))


def late_noise(values: np.ndarray) -> float:
    """Per-point noise sd of a curve's later half
    (:func:`scalerl.harness.analysis.noise.point.noise_scale` of its last ``size // 2`` finite
    values, at least 3; NaN with fewer): the part of the curve that decides near-ties, without
    the climb's changing slope in the first differences."""
    y = np.asarray(values, dtype=np.float64)
    y = y[np.isfinite(y)]
    tail = y[-max(3, y.size // 2) :]
    return noise_scale(tail) if tail.size >= 3 else math.nan


def sweep_noise(curves: Sequence[np.ndarray]) -> float:
    """The median of :func:`late_noise` over ``curves`` (NaN where none has 3 values): the noise
    scale ``margin_noise`` multiplies."""
    scales = [s for s in (late_noise(y) for y in curves) if math.isfinite(s)]
    return float(np.median(scales)) if scales else math.nan


def beat_probability(value: float, unit: float, incumbent: float, calibration: IntervalCalibration) -> float:
    """P(the outcome at the target > ``incumbent``) for a forecast ``value`` with interval unit
    ``unit``, the forecast error taken as symmetric with the calibrated central levels
    (:func:`central_level`): ``(1 - L) / 2`` when the incumbent is above the forecast,
    ``(1 + L) / 2`` when below, ``L`` the level whose interval just reaches it. Decreasing in
    ``incumbent - value``; NaN when the forecast is not finite."""
    if not (math.isfinite(value) and math.isfinite(unit) and unit > 0 and math.isfinite(incumbent)):
        return math.nan
    level = central_level(abs(incumbent - value) / unit, calibration)
    return (1.0 - level) / 2.0 if incumbent >= value else (1.0 + level) / 2.0


class ForecastPruner(BasePruner):
    """Prune a trial once the upper edge of its forecast at ``target`` is below the best's lower edge.

    The rule, for a maximised objective (a minimised one is mirrored, see below), each time
    ``trial.should_prune()`` is called:

    1. Warm-up: never prune a trial with fewer than ``min_points`` intermediate values (default
       5), nor (with ``require_inflection``) one that is not clearly past its inflection: its
       sigmoid fit (R0 = its first value) must be ``ok`` with ``inflection_margin`` x C_mid <=
       its last reported compute (default 2: one doubling of compute past the inflection; a fit
       ending at C_mid underestimates the ceiling with a deceptively narrow interval, and with 1
       a 0.81-ceiling trial is pruned against a 0.80 one), or ``decreasing`` (a collapsing
       run); nor before ``min_completed`` trials are COMPLETE. After warm-up the trial is
       re-forecast on every ``interval_steps``-th report and left alone on the others.
    2. Forecast the trial at ``target`` (compute = step x ``compute_scale``) with a ``level``
       prediction interval [lo, hi] (default 0.9). A forecast whose status is not ``ok`` never
       prunes: a flat curve (e.g. a run stuck at 0) is left to finish; pair it with a threshold
       if that matters.
    3. References: every other trial with a sound forecast at ``target``: COMPLETE trials
       (whatever their length, no inflection required), and RUNNING or PRUNED trials that are
       themselves past warm-up (``min_points``, inflection). Their forecasts are cached per trial
       and recomputed only when the trial has reported new values.
    4. Prune when the trial's ``edge`` (``"hi"``, default: its interval's upper edge; or
       ``"value"``: its point forecast) is below the bar: the max over references of their
       ``reference`` (``"lo"``, default: the best trial is confidently better than this one's
       optimistic edge; or ``"value"``: the best point forecast), or, with ``quantile=q``, the
       q-quantile of the COMPLETE trials' point forecasts at ``target`` (q = 0.5: even this
       trial's optimistic edge is worse than the median completed trial).

    Defaults (``edge="hi"``, ``reference="lo"``, ``level=0.9``, ``min_points=8``,
    ``inflection_margin=2.0``): the conservative rule. ``bench/search.py --loso`` (bench/README.md,
    "Search") scored it leave-one-source-out on 144 replayed real RL curves (4 sources) against a
    grid of 72 settings: on unseen sources it runs at 0.85x the compute of no pruning and keeps the
    same best trial in 97% of runs (regret 0.0017). The grid's choice, ``level=0.8, min_points=5``
    (the faster preset), runs at 0.72x but keeps the best in only 84% of runs on unseen sources
    (regret 0.0050), and a filter was added to that selection after its held-out table had been
    seen; a pruner that drops the winning trial one search in six is not the default here. With
    the interval calibrations also fitted without the held-out source (2026-11-26), the guarded
    choice (level 0.8, 1.5x past the inflection) ran at 0.77x with the best kept in 97% (regret
    0.0017), the defaults at 0.86x / 97%: the defaults stay, the preset is unchanged.

    ``direction`` is the study's: for ``minimize`` every curve is mirrored to ``1 - value``
    before forecasting (a loss or error rate in [0, 1] becomes a score in [0, 1], where the
    sigmoid member of the ensemble applies; outside [0, 1] the flat and power-law members carry
    the forecast) and the rule above applies unchanged. Multi-objective studies raise
    :class:`~scalerl.harness.errors.ConfigError`.

    ``rule="beat"`` (``rule="bound"``, the default, is the rule above) prunes on the chance of
    beating the incumbent instead: after the same warm-up (``min_points``, the inflection,
    ``min_completed``), the incumbent is the best COMPLETE trial's observed value, the trial is
    forecast at ``target`` borrowing from the other trials of the study as its sweep (the
    hierarchical prior of :func:`scalerl.harness.analysis.forecast.sweep_prior.point_forecast_with_prior`,
    siblings = every other trial with at least ``min_points`` values; with fewer than 2 fitted
    ones, the single-curve forecast), and it is pruned when :func:`beat_probability` (its
    forecast error read from ``sweep_calibration``, or ``calibration`` for a single-curve
    forecast) is below ``min_probability``. No reference forecasts are needed: the incumbent is
    observed. ``bench/search.py --beat`` scores it leave-one-source-out, calibrations included
    (bench/README.md, "Search"): with the threshold chosen per fold (0.02-0.1, 5 points) it ran
    at 0.71x the compute of no pruning and kept the best trial in 79% of searches on unseen
    sources (bound defaults: 0.86x, 97%); ``min_probability=0.05`` (default) is the choice of
    the folds that trained on SPEED-RL (with 5 points 0.81-0.83x and the best kept in 97% of
    those training runs; 0.84-0.85x with the default 8), while 0.1 dropped the best in 21-44%.
    ``level``, ``quantile``, ``reference`` and ``edge`` belong to the bound rule.

    ``margin_noise`` (beat rule only; default 1; 0: the rule above) is an indifference margin: prune
    when P(value at ``target`` > incumbent - delta) < ``min_probability``, delta =
    ``margin_noise`` x the sweep's noise, the median over the COMPLETE trials of
    :func:`late_noise` (per-point noise sd of each one's later half). A trial that can only tie
    the incumbent within its noise is kept: the incumbent's observed value is itself one noisy
    draw, and pruning a near-tie saves little regret. The median over the COMPLETE trials, not
    the incumbent's own scale: one curve's estimate rests on a dozen differences, and the
    incumbent is the trial whose last points came out highest, so its own noise is the least
    representative; evaluation noise is shared by the sweep's trials (same benchmark, same
    evaluation size). With no COMPLETE trial of 3 or more values, delta is 0. In
    ``bench/search.py --beat`` (2026-11-26, margins 0 / 1 / 2 in the grid, same criterion) three
    folds of four chose a 1-sd margin (p 0.05-0.1), the SPEED-RL fold p 0.2 with 2 sd; held out
    that ran at 0.71x with the best pruned in 7% of searches and regret 0.0010, against 0.71x,
    21% and 0.0041 without a margin. ``bench/search.py --ties`` shows why: in 9 of 14 pools the
    best and runner-up finals are within 1 noise sd, and an oracle that knows every smoothed final
    still prunes the nominal best in 10-19% of searches without a margin, none with 1 sd. The
    default (p 0.05, 1 sd: the setting every fold's training runs kept the best with in >= 97%,
    chosen after the table above was seen, then measured held out on its own): 0.85x, the best
    pruned in 1% of random-order searches (4% in TPE), regret 0.0009 (0.0084 in TPE), below
    Median's in both; the bound rule's defaults spend 0.86x.

    ``peers`` (beat rule only; default 0: off) reads the chance of beating the incumbent from the
    study's own finished trials once ``peers`` COMPLETE trials have reported at least 3 values up
    to this trial's compute: their smoothed values there against their finals, a least-squares
    line with a Student-t prediction interval (:mod:`scalerl.harness.analysis.forecast.peers`); the bar
    (incumbent less the margin) and ``min_probability`` are the same. Until then, the sweep
    forecast above. The peer rule needs no inflection (no sigmoid is fitted) and no
    cross-source calibration: each study's finished trials calibrate it. On the real curves its
    P is calibrated per decision (``bench/search.py --reliability --reliability-peers 3``:
    decisions at 0.02-0.05 beat the incumbent 3.8% of the time, the sweep forecast's at 0.1-0.2
    3%), but a trial is judged at every report and 5% per decision compounds: leave-one-source-
    out (``--beat-peers 0 3 4``) it pruned the best more often than the sweep forecast at equal
    compute, and the choice with peers in the grid (0.76x / 4.3% best pruned / 0.0009 random
    order; 0.82x / 5.7% / 0.0087 TPE) missed the rule written before the run for a new default
    (best pruned <= 5% in both samplers), so it is off by default (bench/README.md, "Peers").

    ``calibration`` (default :data:`~scalerl.harness.analysis.forecast.calibrations.LINEAR_CALIBRATION`, the
    calibration its defaults were chosen with)
    gives every single-curve forecast its interval, ``sweep_calibration`` (default
    :data:`~scalerl.harness.analysis.forecast.calibrations.SWEEP_CALIBRATION`) the sweep forecasts'; a
    benchmark passes calibrations fitted without the curves it scores.

    ``finished_calibration`` (default None: ``sweep_calibration`` for every sweep forecast) is the
    interval calibration for a sweep forecast whose siblings ran on past the trial (at least 2 of
    them to 2x its last compute: :func:`~scalerl.harness.analysis.forecast.sweep_prior.siblings_finished`;
    e.g. :data:`~scalerl.harness.analysis.forecast.calibrations.FINISHED_SWEEP_CALIBRATION`). Off by
    default: leave-one-source-out (``bench/search.py --beat-finished 0 1``) its narrower intervals
    bought compute only at the price of pruning the best more often (held out with it in the grid
    0.70x / 7.1% best pruned, without 0.77x / 1.4%; bench/README.md, "The finished-sweep
    calibration in the pruner").

    Cost: at most one batched forecast of the trial and of the references that reported new
    values since their last forecast per call (each forecast is a few milliseconds; with
    ``rule="beat"`` one sweep forecast of the trial, tens of milliseconds). Thread-safe: one lock
    guards the cache, so ``study.optimize(n_jobs=...)`` may share an instance.
    """

    def __init__(
        self,
        target: float,
        *,
        level: float = 0.9,
        min_points: int = 8,
        compute_scale: float = 1.0,
        quantile: float | None = None,
        min_completed: int = 1,
        require_inflection: bool = True,
        interval_steps: int = 1,
        inflection_margin: float = 2.0,
        reference: Literal["lo", "value"] = "lo",
        edge: Literal["hi", "value"] = "hi",
        rule: Rule = "bound",
        min_probability: float = 0.05,
        margin_noise: float = 1.0,
        peers: int = 0,
        calibration: IntervalCalibration = LINEAR_CALIBRATION,
        sweep_calibration: IntervalCalibration = SWEEP_CALIBRATION,
        finished_calibration: IntervalCalibration | None = None,
    ) -> None:
        if not (math.isfinite(target) and target > 0):
            raise ConfigError(
                "must be a finite compute > 0", field="target", value=target, fix="use e.g. 1000"
            )
        if rule not in ("bound", "beat"):
            raise ConfigError("must be 'bound' or 'beat'", field="rule", value=rule, fix="use 'bound'")
        if not 0.0 < min_probability < 1.0:
            raise ConfigError(
                "must be in (0, 1)", field="min_probability", value=min_probability, fix="use 0.05"
            )
        if not (math.isfinite(margin_noise) and margin_noise >= 0.0):
            raise ConfigError(
                "must be a finite number >= 0 (noise sds below the incumbent)",
                field="margin_noise",
                value=margin_noise,
                fix="use 0 (no margin) or e.g. 1",
            )
        if isinstance(peers, bool) or not isinstance(peers, int) or peers == 1 or peers < 0:
            raise ConfigError(
                "must be 0 (off) or an integer >= 2 (COMPLETE trials needed to judge by them)",
                field="peers",
                value=peers,
                fix="use 0 or e.g. 3",
            )
        named = [("calibration", calibration), ("sweep_calibration", sweep_calibration)]
        if finished_calibration is not None:
            named.append(("finished_calibration", finished_calibration))
        for name, cal in named:
            if not isinstance(cal, IntervalCalibration):
                raise ConfigError(
                    "must be an IntervalCalibration",
                    field=name,
                    value=type(cal).__name__,
                    fix="pass one fitted by scalerl.harness.analysis.forecast.conformal.fit_calibration",
                )
        lo_level, hi_level = calibration.levels[0], calibration.levels[-1]
        if not lo_level <= level <= hi_level:
            raise ConfigError(
                "outside the calibrated range",
                field="level",
                value=level,
                fix=f"use [{lo_level}, {hi_level}]",
            )
        if min_points < 4:
            raise ConfigError(
                "the forecaster needs >= 4 points", field="min_points", value=min_points, fix="use 5"
            )
        if not (math.isfinite(compute_scale) and compute_scale > 0):
            raise ConfigError("must be > 0", field="compute_scale", value=compute_scale, fix="use 2.0")
        if quantile is not None and not 0.0 < quantile < 1.0:
            raise ConfigError("must be in (0, 1)", field="quantile", value=quantile, fix="use 0.5 or None")
        if min_completed < 1:
            raise ConfigError("must be >= 1", field="min_completed", value=min_completed, fix="use 1")
        if not inflection_margin >= 1.0:
            raise ConfigError(
                "must be >= 1", field="inflection_margin", value=inflection_margin, fix="use 2.0"
            )
        if interval_steps < 1:
            raise ConfigError("must be >= 1", field="interval_steps", value=interval_steps, fix="use 1")
        if reference not in ("lo", "value"):
            raise ConfigError("must be 'lo' or 'value'", field="reference", value=reference, fix="use 'lo'")
        if edge not in ("hi", "value"):
            raise ConfigError("must be 'hi' or 'value'", field="edge", value=edge, fix="use 'hi'")
        self.target = float(target)
        self.level = float(level)
        self.min_points = int(min_points)
        self.compute_scale = float(compute_scale)
        self.quantile = quantile
        self.min_completed = int(min_completed)
        self.require_inflection = bool(require_inflection)
        self.interval_steps = int(interval_steps)
        self.inflection_margin = float(inflection_margin)
        self.reference: Literal["lo", "value"] = reference
        self.edge: Literal["hi", "value"] = edge
        self.rule: Rule = rule
        self.min_probability = float(min_probability)
        self.margin_noise = float(margin_noise)
        self.peers = int(peers)
        self.calibration = calibration
        self.sweep_calibration = sweep_calibration
        self.finished_calibration = finished_calibration
        self.sweep_settings: SweepSettings = DEFAULT_SWEEP
        self._cache: dict[tuple[str, int], TrialForecast] = {}  # (study name, trial number) -> latest
        self._beat: dict[tuple[str, int], BeatForecast] = {}
        self._lock = threading.Lock()

    def prune(self, study: optuna.study.Study, trial: FrozenTrial) -> bool:
        if len(study.directions) != 1:
            raise ConfigError(
                "ForecastPruner prunes single-objective studies only",
                field="directions",
                value=[d.name for d in study.directions],
                fix="use one objective, or optuna.pruners.NopPruner",
            )
        n = len(trial.intermediate_values)
        if n < self.min_points or (n - self.min_points) % self.interval_steps:
            return False
        trials = study.get_trials(deepcopy=False, states=_STATES)
        completed = [t for t in trials if t.state == TrialState.COMPLETE and t.number != trial.number]
        if len(completed) < self.min_completed:
            return False
        minimize = study.direction == StudyDirection.MINIMIZE
        if self.rule == "beat":
            return self._beat_probability(study, trial, trials, completed, minimize) < self.min_probability
        own = self._forecasts(study.study_name, [trial], minimize)[0]
        if not own.ok or (self.require_inflection and not own.past_inflection):
            return False
        # COMPLETE trials are references at any length; others only once past their own warm-up.
        others = [t for t in completed if len(t.intermediate_values) >= 4]
        if self.quantile is None:
            others += [
                t
                for t in trials
                if t.state != TrialState.COMPLETE
                and t.number != trial.number
                and len(t.intermediate_values) >= self.min_points
            ]
        pairs = [
            (f, t)
            for f, t in zip(self._forecasts(study.study_name, others, minimize), others, strict=True)
            if f.ok and (t.state == TrialState.COMPLETE or f.past_inflection or not self.require_inflection)
        ]
        if not pairs:
            return False
        if self.quantile is not None:
            bar = float(np.quantile([f.value for f, _ in pairs], self.quantile))
        elif self.reference == "value":
            bar = max(f.value for f, _ in pairs)
        else:
            bar = max(f.lo for f, _ in pairs)
        return (own.value if self.edge == "value" else own.hi) < bar

    def forecast(self, study: optuna.study.Study, trial: FrozenTrial) -> TrialForecast:
        """The (cached) forecast the bound rule uses for ``trial``, in the maximised frame."""
        minimize = study.direction == StudyDirection.MINIMIZE
        return self._forecasts(study.study_name, [trial], minimize)[0]

    def probability(self, study: optuna.study.Study, trial: FrozenTrial) -> float:
        """P(``trial`` beats the incumbent at ``target``, less the ``margin_noise`` margin) as
        ``rule="beat"`` computes it, warm-up aside (NaN with no COMPLETE trial, no sound forecast,
        or not past the inflection when ``require_inflection``; a pruner never prunes on NaN)."""
        trials = study.get_trials(deepcopy=False, states=_STATES)
        completed = [t for t in trials if t.state == TrialState.COMPLETE and t.number != trial.number]
        return self._beat_probability(
            study, trial, trials, completed, study.direction == StudyDirection.MINIMIZE
        )

    def _beat_probability(
        self,
        study: optuna.study.Study,
        trial: FrozenTrial,
        trials: Sequence[FrozenTrial],
        completed: Sequence[FrozenTrial],
        minimize: bool,
    ) -> float:
        finals = [1.0 - t.value if minimize else t.value for t in completed if t.value is not None]
        finals = [v for v in finals if math.isfinite(v)]
        if not finals:
            return math.nan
        bar = max(finals)
        if self.margin_noise > 0:
            # Intermediate values only (no mirroring needed: a noise scale is unchanged by 1 - y).
            noise = sweep_noise([self._curve(t, False)[1] for t in completed])
            bar -= self.margin_noise * noise if math.isfinite(noise) else 0.0
        if self.peers:
            p = self._peer_probability(trial, completed, bar, minimize)
            if math.isfinite(p):
                return p
        sibs = [
            t for t in trials if t.number != trial.number and len(t.intermediate_values) >= self.min_points
        ]
        own = self._beat_forecast(study.study_name, trial, sibs, minimize)
        if not own.ok or (self.require_inflection and not own.past_inflection):
            return math.nan
        return beat_probability(own.value, own.unit, bar, self._calibration_of(own.method, own.finished))

    def _calibration_of(self, method: str, finished: bool) -> IntervalCalibration:
        """The calibration a beat forecast's interval unit and probability read."""
        if method != "sweep":
            return self.calibration
        if finished and self.finished_calibration is not None:
            return self.finished_calibration
        return self.sweep_calibration

    def _peer_probability(
        self, trial: FrozenTrial, completed: Sequence[FrozenTrial], bar: float, minimize: bool
    ) -> float:
        """P(beat ``bar``) read from the COMPLETE trials at the trial's compute
        (:mod:`scalerl.harness.analysis.forecast.peers`); NaN with fewer than ``peers`` of them that
        reported :data:`~scalerl.harness.analysis.forecast.peers.PEER_POINTS` values up to that compute."""
        x, y = self._curve(trial, minimize)
        upto = float(x[-1])
        own = smoothed_at(x, y, upto)
        xs, ys = [], []
        for t in completed:
            if t.value is None or not math.isfinite(t.value):
                continue
            px = smoothed_at(*self._curve(t, minimize), upto)
            if math.isfinite(px):
                xs.append(px)
                ys.append(1.0 - t.value if minimize else t.value)
        if len(xs) < self.peers:
            return math.nan
        return exceed_probability(peer_forecast(own, xs, ys), bar)

    def _beat_forecast(
        self, study: str, trial: FrozenTrial, siblings: Sequence[FrozenTrial], minimize: bool
    ) -> BeatForecast:
        """The trial's forecast with ``siblings`` as its sweep; cached until it or they change."""
        key = (study, trial.number)
        sig = tuple((t.number, len(t.intermediate_values)) for t in siblings)
        with self._lock:
            hit = self._beat.get(key)
            if hit is not None and hit.n_points == len(trial.intermediate_values) and hit.siblings == sig:
                return hit
            curve = self._curve(trial, minimize)
            sib_curves = [self._curve(t, minimize) for t in siblings]
            at = [np.array([self.target])]
            prior = sweep_priors([sib_curves], self.sweep_settings)
            pf: PointForecast
            if prior[0] is None:
                pf, method = point_forecast_many([curve], at)[0], "single"
            else:
                pf, method = point_forecast_with_prior([curve], at, prior, siblings=[sib_curves])[0], "sweep"
            finished = (
                method == "sweep"
                and self.finished_calibration is not None
                and siblings_finished(curve[0], sib_curves)
            )
            cal = self._calibration_of(method, finished)
            unit = float(pf.unit(cal)[0]) if pf.status == "ok" else math.nan
            value = float(pf.value[0])
            out = BeatForecast(
                n_points=int(curve[1].size),
                siblings=sig,
                value=value,
                unit=unit,
                method="sweep" if method == "sweep" else "single",
                ok=pf.status == "ok" and math.isfinite(value) and math.isfinite(unit),
                past_inflection=self._past_inflection([curve])[0],
                finished=finished,
            )
            self._beat[key] = out
            return out

    def _past_inflection(self, curves: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[bool]:
        """Per curve: its sigmoid fit (R0 = its first value) puts ``inflection_margin`` x C_mid at
        or before its last compute, or it is decreasing; all True without ``require_inflection``."""
        if not self.require_inflection:
            return [True] * len(curves)
        starts = []
        for _, y in curves:
            fin = y[np.isfinite(y)]
            starts.append(float(fin[0]) if fin.size else math.nan)
        fits = fit_sigmoid_many(list(curves), r0=starts)
        return [
            fit.status == "decreasing"
            or (fit.status == "ok" and fit.c_mid * self.inflection_margin <= float(np.nanmax(x)))
            for (x, _), fit in zip(curves, fits, strict=True)
        ]

    def _forecasts(self, study: str, trials: Sequence[FrozenTrial], minimize: bool) -> list[TrialForecast]:
        """Forecasts for ``trials``: cached ones reused, the rest made in one batch."""
        with self._lock:
            out: list[TrialForecast | None] = []
            todo: list[int] = []
            for i, t in enumerate(trials):
                hit = self._cache.get((study, t.number))
                if hit is not None and hit.n_points == len(t.intermediate_values):
                    out.append(hit)
                else:
                    out.append(None)
                    todo.append(i)
            if todo:
                curves = [self._curve(trials[i], minimize) for i in todo]
                for i, f in zip(todo, self._forecast_many(curves), strict=True):
                    self._cache[(study, trials[i].number)] = f
                    out[i] = f
        return [f for f in out if f is not None]

    def _curve(self, trial: FrozenTrial, minimize: bool) -> tuple[np.ndarray, np.ndarray]:
        steps = sorted(trial.intermediate_values)
        x = np.asarray(steps, dtype=np.float64) * self.compute_scale
        y = np.asarray([trial.intermediate_values[s] for s in steps], dtype=np.float64)
        return x, (1.0 - y if minimize else y)

    def _forecast_many(self, curves: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[TrialForecast]:
        at = np.array([self.target])
        pfs = point_forecast_many(curves, [at] * len(curves))
        fcs = [with_interval(pf, self.level, self.calibration) for pf in pfs]
        out = []
        for (_, y), fc, past in zip(curves, fcs, self._past_inflection(curves), strict=True):
            ok = fc.ok and bool(np.isfinite(fc.hi[0]) and np.isfinite(fc.lo[0]))
            out.append(
                TrialForecast(
                    n_points=int(y.size),
                    value=float(fc.value[0]),
                    lo=float(fc.lo[0]),
                    hi=float(fc.hi[0]),
                    ok=ok,
                    past_inflection=past,
                )
            )
        return out

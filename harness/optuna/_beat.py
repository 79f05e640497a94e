"""The beat rule: prune once a trial's chance of beating the incumbent is below a threshold."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from scalerl.harness.analysis.forecast.calibrations import LINEAR_CALIBRATION, SWEEP_CALIBRATION
from scalerl.harness.analysis.forecast.ensemble import PointForecast
from scalerl.harness.analysis.forecast.intervals import IntervalCalibration
from scalerl.harness.analysis.forecast.peers import exceed_probability, peer_forecast, smoothed_at
from scalerl.harness.analysis.forecast.sweep_prior import siblings_finished
from scalerl.harness.analysis.noise.point import noise_scale
from scalerl.harness.errors import ConfigError
from scalerl.harness.optuna._base import STATES, ForecastPrunerBase, check_calibration
from scalerl.harness.optuna._forecaster import DEFAULT_FORECASTER, Forecaster


@dataclass(frozen=True)
class BeatForecast:
    """One trial's forecast at the target for :class:`BeatPruner`, in the maximised frame.

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


class BeatPruner(ForecastPrunerBase):
    """Prune a trial once P(it beats the incumbent at ``target``) is below ``min_probability``.

    After the shared warm-up (:class:`~scalerl.harness.optuna.ForecastPrunerBase`: ``min_points``,
    the inflection, ``min_completed``), each time the trial is judged:

    1. The bar: the best COMPLETE trial's observed value (the incumbent), less ``margin_noise`` x
       the sweep's noise (:func:`sweep_noise`: the median over the COMPLETE trials of
       :func:`late_noise`, the per-point noise sd of each one's later half; 0 with no COMPLETE
       trial of 3 or more values). The margin keeps a trial that can only tie the incumbent
       within its noise: the incumbent's value is itself one noisy draw, and pruning a near-tie
       saves little regret. The median over the COMPLETE trials, not the incumbent's own scale:
       the incumbent is the trial whose last points came out highest, so its own noise is the
       least representative.
    2. With ``peers`` >= 2 and at least that many COMPLETE trials that reported
       :data:`~scalerl.harness.analysis.forecast.peers.PEER_POINTS` values up to this trial's compute,
       P(beat the bar) is read from them (:mod:`scalerl.harness.analysis.forecast.peers`: their smoothed
       values there against their finals; no inflection and no cross-source calibration needed).
    3. Otherwise the trial is forecast at ``target`` with the other trials as its sweep (siblings
       = every other trial with at least ``min_points`` values; the forecaster's
       :meth:`~scalerl.harness.optuna.Forecaster.sweep`, or its single-curve forecast when the
       siblings give no prior), and P = :func:`beat_probability` with the forecast's calibration:
       ``sweep_calibration`` for a sweep forecast (``finished_calibration``, when given, where at
       least 2 siblings ran to 2x the trial's last compute:
       :func:`~scalerl.harness.analysis.forecast.sweep_prior.siblings_finished`), ``calibration`` for a
       single-curve one. No sound forecast, or not past the inflection: P is NaN and the trial
       is kept.

    Defaults: ``min_probability=0.05``, ``margin_noise=1`` (noise sds), ``peers=0`` (off),
    ``finished_calibration=None`` (the sweep calibration for every sweep forecast). How each was
    chosen on real curves, leave one source out, calibrations included: bench/README.md, "Search".

    Cost per judged report: one sweep forecast of the trial (cached until it or its siblings
    report new values).
    """

    rule = "beat"

    def __init__(
        self,
        target: float,
        *,
        min_probability: float = 0.05,
        margin_noise: float = 1.0,
        peers: int = 0,
        sweep_calibration: IntervalCalibration = SWEEP_CALIBRATION,
        finished_calibration: IntervalCalibration | None = None,
        min_points: int = 8,
        compute_scale: float = 1.0,
        min_completed: int = 1,
        require_inflection: bool = True,
        interval_steps: int = 1,
        inflection_margin: float = 2.0,
        calibration: IntervalCalibration = LINEAR_CALIBRATION,
        forecaster: Forecaster = DEFAULT_FORECASTER,
    ) -> None:
        super().__init__(
            target,
            min_points=min_points,
            compute_scale=compute_scale,
            min_completed=min_completed,
            require_inflection=require_inflection,
            interval_steps=interval_steps,
            inflection_margin=inflection_margin,
            calibration=calibration,
            forecaster=forecaster,
        )
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
        check_calibration("sweep_calibration", sweep_calibration)
        if finished_calibration is not None:
            check_calibration("finished_calibration", finished_calibration)
        self.min_probability = float(min_probability)
        self.margin_noise = float(margin_noise)
        self.peers = int(peers)
        self.sweep_calibration = sweep_calibration
        self.finished_calibration = finished_calibration
        self._cache: dict[tuple[str, int], BeatForecast] = {}  # (study name, trial number) -> latest

    def decide(
        self,
        study: optuna.study.Study,
        trial: FrozenTrial,
        trials: Sequence[FrozenTrial],
        completed: Sequence[FrozenTrial],
    ) -> bool:
        return self._probability(study, trial, trials, completed) < self.min_probability

    def probability(self, study: optuna.study.Study, trial: FrozenTrial) -> float:
        """P(``trial`` beats the incumbent at ``target``, less the ``margin_noise`` margin) as the
        rule computes it, warm-up aside (NaN with no COMPLETE trial, no sound forecast, or not past
        the inflection when ``require_inflection``; the rule never prunes on NaN)."""
        trials = study.get_trials(deepcopy=False, states=STATES)
        completed = [t for t in trials if t.state == TrialState.COMPLETE and t.number != trial.number]
        return self._probability(study, trial, trials, completed)

    def forecast(self, study: optuna.study.Study, trial: FrozenTrial) -> BeatForecast:
        """The (cached) sweep forecast the rule uses for ``trial`` (siblings: every other trial with
        at least ``min_points`` values), in the maximised frame."""
        trials = study.get_trials(deepcopy=False, states=STATES)
        return self._forecast(study.study_name, trial, self._siblings(trial, trials), self.minimize(study))

    def _siblings(self, trial: FrozenTrial, trials: Sequence[FrozenTrial]) -> list[FrozenTrial]:
        return [
            t for t in trials if t.number != trial.number and len(t.intermediate_values) >= self.min_points
        ]

    def _probability(
        self,
        study: optuna.study.Study,
        trial: FrozenTrial,
        trials: Sequence[FrozenTrial],
        completed: Sequence[FrozenTrial],
    ) -> float:
        minimize = self.minimize(study)
        finals = [1.0 - t.value if minimize else t.value for t in completed if t.value is not None]
        finals = [v for v in finals if math.isfinite(v)]
        if not finals:
            return math.nan
        bar = max(finals)
        if self.margin_noise > 0:
            # Intermediate values only (no mirroring needed: a noise scale is unchanged by 1 - y).
            noise = sweep_noise([self.curve(t, False)[1] for t in completed])
            bar -= self.margin_noise * noise if math.isfinite(noise) else 0.0
        if self.peers:
            p = self._peer_probability(trial, completed, bar, minimize)
            if math.isfinite(p):
                return p
        own = self._forecast(study.study_name, trial, self._siblings(trial, trials), minimize)
        if not own.ok or (self.require_inflection and not own.past_inflection):
            return math.nan
        return beat_probability(own.value, own.unit, bar, self._calibration_of(own.method, own.finished))

    def _calibration_of(self, method: str, finished: bool) -> IntervalCalibration:
        """The calibration a forecast's interval unit and probability read."""
        if method != "sweep":
            return self.calibration
        if finished and self.finished_calibration is not None:
            return self.finished_calibration
        return self.sweep_calibration

    def _peer_probability(
        self, trial: FrozenTrial, completed: Sequence[FrozenTrial], bar: float, minimize: bool
    ) -> float:
        """P(beat ``bar``) read from the COMPLETE trials at the trial's compute; NaN with fewer
        than ``peers`` of them that reported enough values up to that compute."""
        x, y = self.curve(trial, minimize)
        upto = float(x[-1])
        own = smoothed_at(x, y, upto)
        xs, ys = [], []
        for t in completed:
            if t.value is None or not math.isfinite(t.value):
                continue
            px = smoothed_at(*self.curve(t, minimize), upto)
            if math.isfinite(px):
                xs.append(px)
                ys.append(1.0 - t.value if minimize else t.value)
        if len(xs) < self.peers:
            return math.nan
        return exceed_probability(peer_forecast(own, xs, ys), bar)

    def _forecast(
        self, study: str, trial: FrozenTrial, siblings: Sequence[FrozenTrial], minimize: bool
    ) -> BeatForecast:
        """The trial's forecast with ``siblings`` as its sweep; cached until it or they change."""
        key = (study, trial.number)
        sig = tuple((t.number, len(t.intermediate_values)) for t in siblings)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit.n_points == len(trial.intermediate_values) and hit.siblings == sig:
                return hit
            curve = self.curve(trial, minimize)
            sib_curves = [self.curve(t, minimize) for t in siblings]
            at = [np.array([self.target])]
            swept = self.forecaster.sweep([curve], at, [sib_curves])[0]
            pf: PointForecast
            if swept is None:
                pf, method = self.forecaster.single([curve], at)[0], "single"
            else:
                pf, method = swept, "sweep"
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
                past_inflection=self.past_inflection([curve])[0],
                finished=finished,
            )
            self._cache[key] = out
            return out

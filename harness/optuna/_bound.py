"""The bound rule: prune once a trial's optimistic edge at the target is below the best's pessimistic one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from scalerl.harness.analysis.forecast.calibrations import LINEAR_CALIBRATION
from scalerl.harness.analysis.forecast.ensemble import with_interval
from scalerl.harness.analysis.forecast.intervals import IntervalCalibration
from scalerl.harness.errors import ConfigError
from scalerl.harness.optuna._base import ForecastPrunerBase
from scalerl.harness.optuna._forecaster import DEFAULT_FORECASTER, Curve, Forecaster


@dataclass(frozen=True)
class TrialForecast:
    """One trial's forecast at the target, in the maximised frame (see :class:`BoundPruner`).

    ``n_points`` is the number of intermediate values it was made from; ``ok`` is False (and
    the numbers NaN) when the forecaster had no sound forecast; ``past_inflection`` is False
    when the trial's sigmoid fit puts C_mid beyond its last reported compute."""

    n_points: int
    value: float
    lo: float
    hi: float
    ok: bool
    past_inflection: bool


class BoundPruner(ForecastPrunerBase):
    """Prune a trial once the upper edge of its forecast at ``target`` is below the best's lower edge.

    After the shared warm-up (:class:`~scalerl.harness.optuna.ForecastPrunerBase`: ``min_points``,
    ``interval_steps``, ``min_completed``), for a maximised objective:

    1. Forecast the trial at ``target`` with a ``level`` prediction interval [lo, hi] (its
       ``calibration``). A forecast that is not sound, or (``require_inflection``) a trial not
       past its inflection, is never pruned.
    2. References: every other trial with a sound forecast at ``target``: COMPLETE trials
       (whatever their length, no inflection required), and RUNNING or PRUNED trials that are
       themselves past warm-up (``min_points``, inflection). Their forecasts are cached per trial
       and recomputed only when the trial has reported new values.
    3. Prune when the trial's ``edge`` (``"hi"``: its interval's upper edge; ``"value"``: its
       point forecast) is below the bar: the max over references of their ``reference`` (``"lo"``:
       the best trial is confidently better than this one's optimistic edge; ``"value"``: the best
       point forecast), or, with ``quantile=q``, the q-quantile of the COMPLETE trials' point
       forecasts at ``target`` (q = 0.5: even this trial's optimistic edge is worse than the median
       completed trial).

    The defaults (``edge="hi"``, ``reference="lo"``, ``level=0.9``, ``min_points=8``,
    ``inflection_margin=2.0``) are the conservative rule; ``level=0.8, min_points=5`` is the
    faster preset. How each was chosen and what it costs on real curves, leave one source out:
    bench/README.md, "Search".

    Cost per call: at most one batched forecast of the trial and of the references that reported
    new values since their last forecast.
    """

    rule = "bound"

    def __init__(
        self,
        target: float,
        *,
        level: float = 0.9,
        quantile: float | None = None,
        reference: Literal["lo", "value"] = "lo",
        edge: Literal["hi", "value"] = "hi",
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
        lo_level, hi_level = calibration.levels[0], calibration.levels[-1]
        if not lo_level <= level <= hi_level:
            raise ConfigError(
                "outside the calibrated range",
                field="level",
                value=level,
                fix=f"use [{lo_level}, {hi_level}]",
            )
        if quantile is not None and not 0.0 < quantile < 1.0:
            raise ConfigError("must be in (0, 1)", field="quantile", value=quantile, fix="use 0.5 or None")
        if reference not in ("lo", "value"):
            raise ConfigError("must be 'lo' or 'value'", field="reference", value=reference, fix="use 'lo'")
        if edge not in ("hi", "value"):
            raise ConfigError("must be 'hi' or 'value'", field="edge", value=edge, fix="use 'hi'")
        self.level = float(level)
        self.quantile = quantile
        self.reference: Literal["lo", "value"] = reference
        self.edge: Literal["hi", "value"] = edge
        self._cache: dict[tuple[str, int], TrialForecast] = {}  # (study name, trial number) -> latest

    def decide(
        self,
        study: optuna.study.Study,
        trial: FrozenTrial,
        trials: Sequence[FrozenTrial],
        completed: Sequence[FrozenTrial],
    ) -> bool:
        minimize = self.minimize(study)
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
        """The (cached) forecast the rule uses for ``trial``, in the maximised frame."""
        return self._forecasts(study.study_name, [trial], self.minimize(study))[0]

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
                curves = [self.curve(trials[i], minimize) for i in todo]
                for i, f in zip(todo, self._forecast_many(curves), strict=True):
                    self._cache[(study, trials[i].number)] = f
                    out[i] = f
        return [f for f in out if f is not None]

    def _forecast_many(self, curves: Sequence[Curve]) -> list[TrialForecast]:
        at = np.array([self.target])
        pfs = self.forecaster.single(curves, [at] * len(curves))
        fcs = [with_interval(pf, self.level, self.calibration) for pf in pfs]
        out = []
        for (_, y), fc, past in zip(curves, fcs, self.past_inflection(curves), strict=True):
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

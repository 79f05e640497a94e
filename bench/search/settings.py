"""Forecast-pruner settings as the experiments grid them, the synthetic guard, and running a grid.

A :class:`Setting` (bound rule) or :class:`BeatSetting` (beat rule) makes one pruner per pool with
the :class:`Calibrations` it is given (a leave-one-source-out experiment passes calibrations fitted
without the held-out source) and the forecaster of its process (:class:`MemoForecaster`).
:func:`pool_runs` runs every task of one pool in one process with one memo: the unit of work of
``--jobs``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
import optuna

from bench.search.memo import MemoForecaster
from bench.search.pools import FINAL_POINTS, Curve, Pool
from bench.search.replay import PrunerFactory, Run, run_study
from scalerl.harness.analysis.fit.curve import sigmoid_curve
from scalerl.harness.analysis.forecast.calibrations import (
    FINISHED_SWEEP_CALIBRATION,
    LINEAR_CALIBRATION,
    SWEEP_CALIBRATION,
)
from scalerl.harness.analysis.forecast.intervals import IntervalCalibration
from scalerl.harness.optuna import DEFAULT_FORECASTER, BeatPruner, BoundPruner, Forecaster

BEAT_REPORTS = 50  # the beat rule re-forecasts every points // BEAT_REPORTS reports, as the bound rule


@dataclass(frozen=True)
class Calibrations:
    """The interval calibrations a forecast pruner gets: single-curve and sweep forecasts."""

    single: IntervalCalibration = LINEAR_CALIBRATION
    sweep: IntervalCalibration = SWEEP_CALIBRATION
    finished: IntervalCalibration = FINISHED_SWEEP_CALIBRATION  # siblings ran on (siblings_finished)


SHIPPED = Calibrations()  # the pruner's defaults, fitted on all four sources


@dataclass(frozen=True)
class Setting:
    """One forecast-pruner configuration of the --loso grid (bound rule)."""

    edge: str
    reference: str
    level: float
    margin: float
    min_points: int
    cal: Calibrations = SHIPPED

    @property
    def label(self) -> str:
        return f"{self.edge}<{self.reference} {self.level:g} x{self.margin:g} {self.min_points}pt"

    def factory(self, forecaster: Forecaster = DEFAULT_FORECASTER) -> PrunerFactory:
        def make(p: Pool) -> optuna.pruners.BasePruner:
            return BoundPruner(
                float(p.target),
                interval_steps=max(1, p.points // 50),
                level=self.level,
                inflection_margin=self.margin,
                min_points=self.min_points,
                edge="value" if self.edge == "value" else "hi",
                reference="value" if self.reference == "value" else "lo",
                calibration=self.cal.single,
                forecaster=forecaster,
            )

        return make


@dataclass(frozen=True)
class BeatSetting:
    """One configuration of the beat rule (--beat): prune when P(beat the incumbent less
    ``margin_noise`` noise sds) < ``p``."""

    p: float
    min_points: int
    margin: float = 2.0
    cal: Calibrations = SHIPPED
    margin_noise: float = 0.0
    peers: int = 0
    finished: bool = False  # finished_calibration = cal.finished (else None: the sweep one)

    @property
    def label(self) -> str:
        tail = (f" peers{self.peers}" if self.peers else "") + (" fin" if self.finished else "")
        return f"beat p<{self.p:g} x{self.margin:g} {self.min_points}pt -{self.margin_noise:g}sd{tail}"

    def factory(self, forecaster: Forecaster = DEFAULT_FORECASTER) -> PrunerFactory:
        def make(pool: Pool) -> optuna.pruners.BasePruner:
            return BeatPruner(
                float(pool.target),
                min_probability=self.p,
                interval_steps=max(1, pool.points // BEAT_REPORTS),
                inflection_margin=self.margin,
                min_points=self.min_points,
                margin_noise=self.margin_noise,
                peers=self.peers,
                calibration=self.cal.single,
                sweep_calibration=self.cal.sweep,
                finished_calibration=self.cal.finished if self.finished else None,
                forecaster=forecaster,
            )

        return make


OLD_DEFAULTS = Setting("hi", "lo", 0.9, 2.0, 8)  # BoundPruner's defaults (kept after --loso)


GUARD_STEPS = np.arange(5, 205, 5)  # tests/unit/optuna/test_forecast_pruner.py's synthetic case
GUARD_SEEDS = ((1, 3), (5, 6), (7, 8), (9, 10))


def passes_guard(setting: Setting | BeatSetting, forecaster: Forecaster = DEFAULT_FORECASTER) -> bool:
    """The unit tests' synthetic guard: sigmoids (R0 0.1, B 2, C_mid 40, noise sd 0.005, reports
    every 5 steps to T = 200) with ceilings 0.8, 0.4, 0.81, 0.6, in that order: the 0.81 trial
    must complete (not be pruned against the 0.80 one) for each of 4 noise-seed pairs. A setting
    that decides at the inflection fails it: a fit ending at C_mid puts C_mid inside the data and
    underestimates the ceiling with a narrow interval."""

    def curve(a: float, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        return sigmoid_curve(GUARD_STEPS, 0.1, a, 2.0, 40.0) + rng.normal(0.0, 0.005, GUARD_STEPS.size)

    pool = Pool("guard", "synthetic", 200, (Curve("guard", GUARD_STEPS, GUARD_STEPS * 0.0),))
    for s1, s3 in GUARD_SEEDS:
        study = optuna.create_study(direction="maximize", pruner=setting.factory(forecaster)(pool))
        for a, seed in ((0.8, s1), (0.4, 2), (0.81, s3), (0.6, 4)):
            y = curve(a, seed)
            trial = study.ask()
            for step, value in zip(GUARD_STEPS, y, strict=True):
                trial.report(float(value), int(step))
                if trial.should_prune():
                    if a == 0.81:
                        return False
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    break
            else:
                study.tell(trial, float(np.mean(y[-FINAL_POINTS:])))
    return True


Task = tuple[str, int, str, Setting | BeatSetting | None]  # sampler, seed, pruner name, grid setting


def pool_runs(job: tuple[Pool, Sequence[Task]]) -> list[Run]:
    """Every study of one pool (one process, one memo): the unit of work of --jobs."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    pool, tasks = job
    memo = MemoForecaster()
    return [
        run_study(pool, sampler, seed, name, None if s is None else s.factory(memo))
        for sampler, seed, name, s in tasks
    ]


def run_all(jobs: Sequence[tuple[Pool, Sequence[Task]]], n_jobs: int) -> list[Run]:
    if n_jobs <= 1:
        return [r for job in jobs for r in pool_runs(job)]
    with ProcessPoolExecutor(n_jobs) as ex:
        return [r for rs in ex.map(pool_runs, jobs) for r in rs]

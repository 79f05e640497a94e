"""The forecaster a forecast pruner is given: the seam between the pruning rule and the analysis.

A pruner asks three things of its forecaster: single-curve point forecasts, sweep point forecasts
(the trial borrowing from the other trials of its study), and sigmoid fits (the warm-up's "past
the inflection" check). :class:`EnsembleForecaster` answers them with the library's ensemble and
sweep prior; a benchmark passes its own (e.g. one that memoises by curve prefix) instead of
patching module globals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from scalerl.harness.analysis.fit.curve import SigmoidFit
from scalerl.harness.analysis.fit.fitters import ManyFitter, fit_sigmoid_many
from scalerl.harness.analysis.forecast.ensemble import PointForecast, point_forecast_many
from scalerl.harness.analysis.forecast.sweep_prior import (
    DEFAULT_SWEEP,
    SWEEP_MEMBERS,
    SweepSettings,
    point_forecast_with_prior,
    sweep_priors,
)

Curve = tuple[np.ndarray, np.ndarray]  # (compute, value), sorted by compute, float64


class Forecaster(Protocol):
    """What a forecast pruner forecasts with.

    Contract: every method is a pure function of its arguments (a pruner caches its results per
    trial and may call from several threads under its own lock, so an implementation needs no lock
    of its own unless it keeps shared state), returns one result per input curve, in order, and
    judges each curve on its own: batching several curves into one call must give the same results
    as one call per curve. Curves are ``(compute, value)`` float arrays in the maximised frame."""

    def single(self, curves: Sequence[Curve], at: Sequence[np.ndarray]) -> list[PointForecast]:
        """Point forecasts of each curve alone at its ``at`` (the ensemble of
        :func:`~scalerl.harness.analysis.forecast.ensemble.point_forecast_many`)."""
        ...

    def sweep(
        self, curves: Sequence[Curve], at: Sequence[np.ndarray], siblings: Sequence[Sequence[Curve]]
    ) -> list[PointForecast | None]:
        """Point forecasts of each curve with its ``siblings`` as its sweep; None where the
        siblings give no prior or the curve's own points refuse it (the pruner then uses
        :meth:`single`)."""
        ...

    def sigmoid(self, curves: Sequence[Curve], r0: Sequence[float]) -> list[SigmoidFit]:
        """The sigmoid fit of each curve with R0 fixed at its ``r0``."""
        ...


class EnsembleForecaster:
    """The library's forecasts: the single-curve ensemble, the sweep prior of
    :mod:`scalerl.harness.analysis.forecast.sweep_prior` with ``settings``, every sigmoid fit made
    by ``fitter`` (:class:`~scalerl.harness.analysis.fit.fitters.ManyFitter`, default the batched
    :func:`~scalerl.harness.analysis.fit.fitters.fit_sigmoid_many`). Holds no state of its own, so
    one instance may serve any number of pruners and threads when its ``fitter`` can."""

    def __init__(
        self, settings: SweepSettings = DEFAULT_SWEEP, fitter: ManyFitter = fit_sigmoid_many
    ) -> None:
        self.settings = settings
        self.fitter = fitter

    def __repr__(self) -> str:
        return f"EnsembleForecaster({'' if self.settings == DEFAULT_SWEEP else self.settings})"

    def single(self, curves: Sequence[Curve], at: Sequence[np.ndarray]) -> list[PointForecast]:
        return point_forecast_many(curves, at, fitter=self.fitter)

    def sweep(
        self, curves: Sequence[Curve], at: Sequence[np.ndarray], siblings: Sequence[Sequence[Curve]]
    ) -> list[PointForecast | None]:
        priors = sweep_priors(siblings, self.settings, fitter=self.fitter)
        have = [i for i, p in enumerate(priors) if p is not None]
        out: list[PointForecast | None] = [None] * len(curves)
        if have:
            made = point_forecast_with_prior(
                [curves[i] for i in have],
                [at[i] for i in have],
                [priors[i] for i in have],
                siblings=[siblings[i] for i in have],
                fitter=self.fitter,
            )
            for i, pf in zip(have, made, strict=True):
                # A forecast without the sweep member: the check refused the siblings.
                out[i] = pf if pf.names == SWEEP_MEMBERS else None
        return out

    def sigmoid(self, curves: Sequence[Curve], r0: Sequence[float]) -> list[SigmoidFit]:
        return self.fitter(list(curves), r0=list(r0))


DEFAULT_FORECASTER = EnsembleForecaster()

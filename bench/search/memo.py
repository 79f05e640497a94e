"""A forecaster that memoises the library's forecasts, given to every forecast pruner of a process.

Grids of pruner settings replay the same curve prefixes again and again (every setting, seed and
calibration); a point forecast depends on neither the interval level nor the calibration (the
pruner attaches those), so each state is forecast once. The pruner's rule runs unchanged: it is
given this forecaster (the ``forecaster`` seam of :mod:`scalerl.harness.optuna`), and the
forecasts it makes on a miss are given its memoised sigmoid fits (their ``fitter`` seam).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.curve import SigmoidFit
from scalerl.harness.analysis.fit.fitters import fit_sigmoid_many
from scalerl.harness.analysis.forecast.ensemble import PointForecast, point_forecast_many
from scalerl.harness.analysis.forecast.sweep_prior import (
    DEFAULT_SWEEP,
    SWEEP_MEMBERS,
    Prior,
    point_forecast_with_prior,
    sweep_priors,
)

Curve = tuple[np.ndarray, np.ndarray]


class MemoForecaster:
    """A :class:`~scalerl.harness.optuna.Forecaster` that memoises the library's forecasts by curve
    prefix (and, for the sweep forecast, the siblings' prefixes), shared by every pruner that is
    given it in this process: a state is forecast once, not once per grid setting, seed and
    calibration. Its sigmoid fits (:meth:`fit_sigmoid_many`, a
    :class:`~scalerl.harness.analysis.fit.fitters.ManyFitter`) are memoised per curve too, also
    inside the forecasts made on a miss (a sweep prior refits siblings that earlier sets fitted).
    Every function fits each curve on its own, so memoising and batching change no result. Not
    thread-safe: one per process (the benchmark's unit of work)."""

    def __init__(self) -> None:
        self.points: dict[tuple[bytes, ...], PointForecast] = {}
        self.sweeps: dict[tuple[bytes, ...], PointForecast | None] = {}
        self.priors: dict[tuple[bytes, ...], Prior | None] = {}
        self.fits: dict[tuple[bytes, bytes, float], SigmoidFit] = {}

    @staticmethod
    def _key(x: object, y: object) -> tuple[bytes, bytes]:
        return np.asarray(x, dtype=np.float64).tobytes(), np.asarray(y, dtype=np.float64).tobytes()

    def _set_key(self, curves: Sequence[Curve]) -> tuple[bytes, ...]:
        return tuple(b for x, y in curves for b in self._key(x, y))

    def single(self, curves: Sequence[Curve], at: Sequence[np.ndarray]) -> list[PointForecast]:
        keys = [
            (*self._key(x, y), np.asarray(a, dtype=np.float64).tobytes())
            for (x, y), a in zip(curves, at, strict=True)
        ]
        todo = [i for i, k in enumerate(keys) if k not in self.points]
        if todo:
            made = point_forecast_many(
                [curves[i] for i in todo], [at[i] for i in todo], fitter=self.fit_sigmoid_many
            )
            for i, pf in zip(todo, made, strict=True):
                self.points[keys[i]] = pf
        return [self.points[k] for k in keys]

    def sweep(
        self, curves: Sequence[Curve], at: Sequence[np.ndarray], siblings: Sequence[Sequence[Curve]]
    ) -> list[PointForecast | None]:
        out = []
        for c, a, sibs in zip(curves, at, siblings, strict=True):
            # The prior is a function of the siblings, so they key it (and the forecast).
            sk = self._set_key(sibs)
            if sk not in self.priors:
                self.priors[sk] = sweep_priors([sibs], DEFAULT_SWEEP, fitter=self.fit_sigmoid_many)[0]
            prior = self.priors[sk]
            k = (*self._key(*c), np.asarray(a, dtype=np.float64).tobytes(), *sk)
            if k not in self.sweeps:
                pf = (
                    None
                    if prior is None
                    else point_forecast_with_prior(
                        [c], [a], [prior], siblings=[sibs], fitter=self.fit_sigmoid_many
                    )[0]
                )
                # As EnsembleForecaster: no sweep member means the check refused the siblings.
                self.sweeps[k] = pf if pf is not None and pf.names == SWEEP_MEMBERS else None
            out.append(self.sweeps[k])
        return out

    def sigmoid(self, curves: Sequence[Curve], r0: Sequence[float]) -> list[SigmoidFit]:
        return self.fit_sigmoid_many(curves, r0=r0)

    def fit_sigmoid_many(
        self,
        curves: Sequence[Curve],
        *,
        r0: Sequence[float] | None = None,
        sigma: Sequence[ArrayLike | None] | None = None,
    ) -> list[SigmoidFit]:
        """:func:`~scalerl.harness.analysis.fit.fitters.fit_sigmoid_many`, memoised per (curve,
        R0); weighted fits (``sigma``) and fits without a given R0 pass through."""
        if sigma is not None or r0 is None:
            return fit_sigmoid_many(list(curves), r0=r0, sigma=sigma)
        keys = [(*self._key(x, y), float(r)) for (x, y), r in zip(curves, r0, strict=True)]
        todo = [i for i, k in enumerate(keys) if k not in self.fits]
        if todo:
            made = fit_sigmoid_many([curves[i] for i in todo], r0=[r0[i] for i in todo])
            for i, fit in zip(todo, made, strict=True):
                self.fits[keys[i]] = fit
        return [self.fits[k] for k in keys]

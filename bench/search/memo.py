"""A forecaster that memoises the library's forecasts, given to every forecast pruner of a process.

Grids of pruner settings replay the same curve prefixes again and again (every setting, seed and
calibration); a point forecast depends on neither the interval level nor the calibration (the
pruner attaches those), so each state is forecast once. The pruner's rule runs unchanged: it is
given this forecaster (the ``forecaster`` seam of :mod:`scalerl.harness.optuna`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

import scalerl.harness.analysis.forecast.ensemble as forecaster_module
import scalerl.harness.analysis.forecast.sweep_prior as hierarchical_module
from scalerl.harness.analysis.fit.curve import SigmoidFit
from scalerl.harness.analysis.fit.fitters import fit_sigmoid_many
from scalerl.harness.analysis.forecast.ensemble import PointForecast, point_forecast_many
from scalerl.harness.analysis.forecast.sweep_prior import (
    DEFAULT_SWEEP,
    Prior,
    point_forecast_with_prior,
    sweep_priors,
)


class MemoForecaster:
    """A :class:`~scalerl.harness.optuna.Forecaster` that memoises the library's forecasts by curve
    prefix (and, for the sweep forecast, the siblings' prefixes), shared by every pruner that is
    given it in this process: the pruner's rule runs unchanged, but a state is forecast once, not
    once per grid setting, seed and calibration (a point forecast depends on neither ``level`` nor
    the calibration: the pruner attaches those). Every function fits each curve on its own, so
    batching changes nothing."""

    def __init__(self) -> None:
        self.points: dict[tuple[bytes, ...], PointForecast] = {}
        self.sweeps: dict[tuple[bytes, ...], PointForecast | None] = {}
        self.priors: dict[tuple[bytes, ...], Prior | None] = {}
        self.fits: dict[tuple[bytes, bytes, float], SigmoidFit] = {}

    @staticmethod
    def _key(x: object, y: object) -> tuple[bytes, bytes]:
        return np.asarray(x, dtype=np.float64).tobytes(), np.asarray(y, dtype=np.float64).tobytes()

    def _set_key(self, curves: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[bytes, ...]:
        return tuple(b for x, y in curves for b in self._key(x, y))

    def single(
        self, curves: Sequence[tuple[np.ndarray, np.ndarray]], at: Sequence[np.ndarray]
    ) -> list[PointForecast]:
        keys = [
            (*self._key(x, y), np.asarray(a, dtype=np.float64).tobytes())
            for (x, y), a in zip(curves, at, strict=True)
        ]
        todo = [i for i, k in enumerate(keys) if k not in self.points]
        if todo:
            made = point_forecast_many([curves[i] for i in todo], [at[i] for i in todo])
            for i, pf in zip(todo, made, strict=True):
                self.points[keys[i]] = pf
        return [self.points[k] for k in keys]

    def sweep(
        self,
        curves: Sequence[tuple[np.ndarray, np.ndarray]],
        at: Sequence[np.ndarray],
        siblings: Sequence[Sequence[tuple[np.ndarray, np.ndarray]]],
    ) -> list[PointForecast | None]:
        out = []
        for c, a, sibs in zip(curves, at, siblings, strict=True):
            # The prior is a function of the siblings, so they key it (and the forecast).
            sk = self._set_key(sibs)
            if sk not in self.priors:
                self.priors[sk] = sweep_priors([sibs], DEFAULT_SWEEP)[0]
            prior = self.priors[sk]
            k = (*self._key(*c), np.asarray(a, dtype=np.float64).tobytes(), *sk)
            if k not in self.sweeps:
                self.sweeps[k] = (
                    None
                    if prior is None
                    else point_forecast_with_prior([c], [a], [prior], siblings=[sibs])[0]
                )
            out.append(self.sweeps[k])
        return out

    def sigmoid(
        self, curves: Sequence[tuple[np.ndarray, np.ndarray]], r0: Sequence[float]
    ) -> list[SigmoidFit]:
        keys = [(*self._key(x, y), float(r)) for (x, y), r in zip(curves, r0, strict=True)]
        todo = [i for i, k in enumerate(keys) if k not in self.fits]
        if todo:
            made = fit_sigmoid_many([curves[i] for i in todo], r0=[r0[i] for i in todo])
            for i, fit in zip(todo, made, strict=True):
                self.fits[keys[i]] = fit
        return [self.fits[k] for k in keys]

    def fit_sigmoid_many(
        self,
        curves: Sequence[tuple[np.ndarray, np.ndarray]],
        *,
        r0: Sequence[float],
        sigma: Sequence[np.ndarray | None] | None = None,
    ) -> list[SigmoidFit]:
        if sigma is not None:
            return fit_sigmoid_many(list(curves), r0=list(r0), sigma=list(sigma))
        return self.sigmoid(curves, r0)


# The sweep forecast's own sibling and validation fits (every curve on its own: same result), until
# the library's forecasts take a fitter.
_PATCHED = ((hierarchical_module, "fit_sigmoid_many"), (forecaster_module, "fit_sigmoid_many"))


@contextmanager
def memoised() -> Iterator[MemoForecaster]:
    memo = MemoForecaster()
    saved = [getattr(mod, name) for mod, name in _PATCHED]
    for mod, name in _PATCHED:
        setattr(mod, name, memo.fit_sigmoid_many)
    try:
        yield memo
    finally:
        for (mod, name), fn in zip(_PATCHED, saved, strict=True):
            setattr(mod, name, fn)

"""A forecast's interval model: ``value +- q(level) * u``, the unit ``u`` and its calibration.

The unit ``u`` (:class:`UnitTerms`, :meth:`UnitTerms.unit`) combines the curve's noise scale, the
ensemble members' disagreement, the forecast's own movement, the curve's recent trend, the error
the same forecast made on sibling runs and on the curve's own past, and grows with the horizon;
an :class:`IntervalCalibration` holds the constants that weigh them and the split-conformal
quantiles ``q`` at :data:`CALIBRATED_LEVELS`. The shipped calibrations are
:mod:`scalerl.harness.analysis.forecast.calibrations`; fitting one is
:mod:`scalerl.harness.analysis.forecast.conformal`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scalerl.harness.analysis.fit.curve import FloatArray
from scalerl.harness.errors import ConfigError


@dataclass(frozen=True)
class IntervalCalibration:
    """Split-conformal quantiles of the normalised absolute error ``|e| / u`` (the unit ``u`` of
    :meth:`PointForecast.interval_scale` with ``horizon_slope`` and ``spread_weight``) at the
    nominal levels ``levels`` (increasing); other levels interpolate linearly between them."""

    levels: tuple[float, ...]
    quantiles: tuple[float, ...]
    horizon_slope: float = 1.0
    spread_weight: float = 1.0
    # The unit's growth with the log of the compute ratio r = C / C_last (>= 1): a factor
    # (1 + log_horizon_slope * log r), monotone in r for a slope >= 0. Linear growth in h
    # (horizon_slope) was fitted near the data and overshoots at 10-100x.
    log_horizon_slope: float = 0.0
    # Weight of the forecast's own movement |value - flat member| in the unit: a forecast that
    # predicts a large climb is uncertain in proportion to that climb (rising curves' errors are
    # trend, not noise).
    move_weight: float = 0.0
    # Weight of the curve's recent trend times the log horizon, ``|beta| * log r`` (beta: the
    # slope of the metric against log compute over the later half of the fitted points): on real
    # curves the forecast error per unit of this term is the most alike across sources.
    trend_weight: float = 0.0
    # Weight of the error the same forecast made on sibling runs that went on (PointForecast's
    # sibling_error): the sweep's own evidence of how far off forecasts from here land.
    sibling_weight: float = 0.0
    # Weight of the error the forecast's own blend made in its rolling-origin validation inside
    # the fitted points (PointForecast's own_error): a curve whose recent past the forecast
    # already missed (a climb it kept under-calling) is forecast less surely, whatever its source.
    own_weight: float = 0.0

    def __post_init__(self) -> None:
        knobs = (
            self.horizon_slope,
            self.log_horizon_slope,
            self.move_weight,
            self.trend_weight,
            self.sibling_weight,
            self.own_weight,
        )
        if min(knobs) < 0:
            raise ConfigError(
                "horizon slopes and weights must be >= 0 (an interval must not narrow further ahead)",
                field="IntervalCalibration",
                value=knobs,
                fix="use non-negative values",
            )

    def quantile(self, level: float) -> float:
        if not self.levels[0] <= level <= self.levels[-1]:
            raise ConfigError(
                "interval level outside the calibrated range",
                field="level",
                value=level,
                fix=f"use a level in [{self.levels[0]}, {self.levels[-1]}]",
            )
        return float(np.interp(level, self.levels, self.quantiles))


CALIBRATED_LEVELS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98)


@dataclass(frozen=True)
class UnitTerms:
    """What an interval's unit is made of, per scored point (one forecast's, or many forecasts'
    concatenated by :meth:`concat`): a calibration search evaluates hundreds of candidates on
    the same terms, so they are computed once."""

    scale: FloatArray
    spread: FloatArray
    move: FloatArray
    trend_log_r: FloatArray
    sibling_error: FloatArray
    own_error: FloatArray
    horizon: FloatArray
    log_r: FloatArray

    @staticmethod
    def concat(parts: Sequence[UnitTerms]) -> UnitTerms:
        return UnitTerms(
            **{f: np.concatenate([getattr(p, f) for p in parts]) for f in UnitTerms.__dataclass_fields__}
        )

    def unit(
        self,
        horizon_slope: float,
        spread_weight: float = 1.0,
        log_horizon_slope: float = 0.0,
        move_weight: float = 0.0,
        trend_weight: float = 0.0,
        sibling_weight: float = 0.0,
        own_weight: float = 0.0,
    ) -> FloatArray:
        """See :meth:`PointForecast.interval_scale`."""
        base = self.scale**2 + (spread_weight * self.spread) ** 2
        if move_weight:
            base = base + (move_weight * self.move) ** 2
        if trend_weight:
            base = base + (trend_weight * self.trend_log_r) ** 2
        if sibling_weight:
            base = base + (sibling_weight * self.sibling_error) ** 2
        if own_weight:
            base = base + (own_weight * self.own_error) ** 2
        growth = (1.0 + horizon_slope * self.horizon) * (1.0 + log_horizon_slope * self.log_r)
        return np.asarray(np.sqrt(base) * growth, dtype=np.float64)

    def for_calibration(self, calibration: IntervalCalibration) -> FloatArray:
        return self.unit(
            calibration.horizon_slope,
            calibration.spread_weight,
            calibration.log_horizon_slope,
            calibration.move_weight,
            calibration.trend_weight,
            calibration.sibling_weight,
            calibration.own_weight,
        )

"""Forecasting one training curve beyond its last point: an ensemble with calibrated intervals.

Point forecast. Three members forecast the curve:

- ``sigmoid``: the batched sigmoid fit (:mod:`scalerl.harness.analysis.fit.batched`) with R0
  at the true start of training (the lowest-compute point, not the mean of the first three:
  that mean biases a fast-rising curve). A ``pre-inflection`` fit still forecasts from its raw
  parameters (A is bounded by ``FitOptions.a_bounds``), since a value forecast does not claim
  the ceiling is pinned;
- ``flat``: the mean of the last ``flat_points`` points (RL curves often sit on their plateau);
- ``power``: the power law ``A - D / C^B`` (closed form on a grid of B, see
  :mod:`scalerl.harness.analysis.fit.powerlaw`).

Each member is weighted by its own rolling-origin validation error *inside the fitted part*:
the curve's points up to ``origin`` x its last compute are fitted and the rest (of the fitted
part) predicted, for every origin in ``ensemble.origins``; with ``mae`` its mean absolute error
averaged over origins (floored at 1e-3), the weight is ``exp(-(mae / best_mae - 1) / temperature)``:
a member 25% worse than the best gets exp(-1) of its weight at temperature 0.25. Relative errors
make the rule scale-free, so one temperature serves noisy and smooth curves alike. A member that
cannot forecast (a sigmoid fit that is flat or decreasing, a power law that does not increase)
gets weight 0.

Interval. The forecast error scales with the curve's noise and with how much the members
disagree, and grows with how far ahead the forecast is. The noise scale ``s`` is the robust (MAD)
standard deviation of the fitted part's first differences divided by sqrt(2); the spread ``d`` is
the weighted standard deviation of the members' forecasts around the ensemble's at each compute;
the horizon ``h`` is ``(C - C_last) / (C_last - C_first)`` (0 inside the fitted part). With the unit
``u = sqrt(s^2 + (k d)^2) * (1 + slope * h)`` (``k`` = the calibration's ``spread_weight``), the
interval is ``value +- q(level) * u``, where ``q`` is a split-conformal quantile of ``|error| / u``
over rolling-origin backtests (cuts at 25/50/75% of every curve's compute, each curve weighted
equally). ``k = 1`` (noise and member disagreement add as variances) is fixed, not tuned;
``slope`` and ``q`` are fitted.

The defaults (:data:`DEFAULT_ENSEMBLE`, :data:`.calibrations.DEFAULT_CALIBRATION`) were chosen by
``bench/forecast.py`` on all real curves in /work/shared/data/real-rl-curves; its
leave-one-source-out table (bench/README.md, "Forecasts") shows what to expect on unseen curves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scalerl.harness.analysis.fit.curve import FitOptions, FloatArray, clean_sigma, prepare, sigmoid_curve
from scalerl.harness.analysis.fit.fitters import fit_sigmoid_many
from scalerl.harness.analysis.fit.powerlaw import B_GRID, solve_grid
from scalerl.harness.analysis.forecast.bounds import Bounds, check_bounds, clip_to_bounds
from scalerl.harness.analysis.forecast.calibrations import DEFAULT_CALIBRATION
from scalerl.harness.analysis.forecast.intervals import IntervalCalibration, UnitTerms
from scalerl.harness.analysis.noise.point import noise_scale
from scalerl.harness.errors import ConfigError

MEMBERS = ("sigmoid", "flat", "power")
ForecastStatus = Literal["ok", "too-few-points", "flat"]
_ERR_FLOOR = 1e-3  # validation errors below a tenth of a point are noise, not skill
# Every third B of the power law's own grid (80 values, 11% apart): the member's forecast barely
# moves between neighbours, and it keeps 1,000 forecasts (3 power-law fits each) under 2 s.
_POWER_B = B_GRID[::3]


@dataclass(frozen=True)
class EnsembleSettings:
    """How the point forecast combines its members (see the module docstring).

    ``origins``: rolling-origin cuts inside the fitted part, as fractions of its last compute.
    ``temperature``: member weight ``exp(-(mae / best_mae - 1) / temperature)``; large = equal
    weights, small = pick the best member.
    ``members``: which members take part. ``flat_points``: the points the flat member averages.
    """

    origins: tuple[float, ...] = (0.7, 0.85)
    temperature: float = 0.1
    members: tuple[str, ...] = MEMBERS
    flat_points: int = 3

    def __post_init__(self) -> None:
        if not self.origins or not all(0.0 < o < 1.0 for o in self.origins):
            raise ConfigError(
                "each origin must be in (0, 1)", field="origins", value=self.origins, fix="use (0.7, 0.85)"
            )
        bad = [m for m in self.members if m not in MEMBERS]
        if bad or not self.members:
            raise ConfigError(
                "unknown member", field="members", value=self.members, fix=f"use some of {MEMBERS}"
            )
        if not self.temperature > 0:
            raise ConfigError("must be > 0", field="temperature", value=self.temperature, fix="use 0.1")
        if self.flat_points < 1:
            raise ConfigError("must be >= 1", field="flat_points", value=self.flat_points, fix="use 3")


# Chosen by bench/forecast.py on all sources (see its "calibration shipped" line).
DEFAULT_ENSEMBLE = EnsembleSettings()


@dataclass(frozen=True)
class PointForecast:
    """A point forecast before its interval: ``scale`` is the noise scale s, ``horizon`` the
    relative horizon h at each ``at``, ``ratio`` the compute ratio r = max(C / C_last, 1),
    ``weights`` the member weights (member order ``names``; MEMBERS for the single-curve
    ensemble, which :mod:`.sweep_prior` extends with the sweep's member)."""

    at: FloatArray
    value: FloatArray
    scale: float
    horizon: FloatArray
    weights: tuple[float, ...]
    status: ForecastStatus
    reason: str
    members: FloatArray = field(repr=False)  # (len(names), len(at)) member forecasts, NaN where none
    ratio: FloatArray | None = None  # None: built before ratios existed; treated as r = 1
    names: tuple[str, ...] = MEMBERS
    trend: float = 0.0  # |slope of the metric against log compute|, later half of the fitted points
    # How wrong this forecast was on sibling runs that went on past this curve's last compute
    # (the sweep forecast, :mod:`.sweep_prior`); 0.0 when there were none.
    sibling_error: float = 0.0
    # How wrong the same blend was on this curve's own later fitted points, forecast from the
    # rolling-origin cuts (:func:`blended_error` of the validation); 0.0 when it was not validated.
    own_error: float = 0.0

    @property
    def spread(self) -> FloatArray:
        """How much the members disagree at each ``at``: the weighted standard deviation of their
        forecasts around the ensemble's (the model-uncertainty part of the interval). Large where
        the sigmoid, the flat line and the power law tell different stories and validation could
        not pick one; small where they agree or one clearly won."""
        w = np.asarray(self.weights)
        if self.status != "ok":
            return np.full(self.at.shape, np.nan)
        if not self.members.size or not (w > 0).any():
            return np.zeros(self.at.shape)
        dev = np.where(w[:, None] > 0, self.members - self.value[None, :], 0.0)
        return np.asarray(np.sqrt((w[:, None] * dev**2).sum(axis=0)), dtype=np.float64)

    @property
    def move(self) -> FloatArray:
        """How far the forecast moves from the curve's current level: |value - flat member|."""
        if self.status != "ok":
            return np.full(self.at.shape, np.nan)
        flat = self.members[MEMBERS.index("flat")]
        return np.asarray(np.abs(np.nan_to_num(self.value - flat)), dtype=np.float64)

    def interval_scale(
        self,
        horizon_slope: float,
        spread_weight: float = 1.0,
        log_horizon_slope: float = 0.0,
        move_weight: float = 0.0,
        trend_weight: float = 0.0,
        sibling_weight: float = 0.0,
        own_weight: float = 0.0,
    ) -> FloatArray:
        """The unit the calibrated quantiles multiply:
        ``sqrt(s^2 + (k d)^2 + (m D)^2 + (t beta log r)^2 + (v E)^2 + (o O)^2) * (1 + slope * h) *
        (1 + g * log r)`` with ``k = spread_weight``, ``d`` the member spread,
        ``m = move_weight``, ``D`` the forecast's movement (:attr:`move`), ``t = trend_weight``,
        ``beta`` the :attr:`trend`, ``v = sibling_weight``, ``E`` the :attr:`sibling_error`,
        ``o = own_weight``, ``O`` the :attr:`own_error` and ``g = log_horizon_slope``."""
        return self.terms().unit(
            horizon_slope,
            spread_weight,
            log_horizon_slope,
            move_weight,
            trend_weight,
            sibling_weight,
            own_weight,
        )

    def terms(self) -> UnitTerms:
        """The per-point ingredients of :meth:`interval_scale`, computed once."""
        r = np.ones(self.at.shape) if self.ratio is None else self.ratio
        n = self.at.shape

        def full(v: float) -> FloatArray:
            return np.full(n, v, dtype=np.float64)

        return UnitTerms(
            scale=full(self.scale),
            spread=np.asarray(self.spread, dtype=np.float64),
            move=np.asarray(self.move, dtype=np.float64),
            trend_log_r=np.asarray(self.trend * np.log(r), dtype=np.float64),
            sibling_error=full(self.sibling_error),
            own_error=full(self.own_error),
            horizon=np.asarray(self.horizon, dtype=np.float64),
            log_r=np.asarray(np.log(r), dtype=np.float64),
        )

    def unit(self, calibration: IntervalCalibration) -> FloatArray:
        """:meth:`interval_scale` with a calibration's constants."""
        return self.terms().for_calibration(calibration)


@dataclass(frozen=True)
class CurveForecast:
    """A forecast of one curve at the compute values ``at``: ``value`` with the interval
    [``lo``, ``hi``] meant to contain a future *observation* with probability ``level``.
    ``status`` is ``ok`` or says why there is no sound forecast (then the arrays hold NaN).
    ``weights`` maps each ensemble member to its weight; ``scale`` is the noise scale and
    ``spread`` the members' disagreement at each ``at`` (both enter the interval's width)."""

    at: FloatArray
    value: FloatArray
    lo: FloatArray
    hi: FloatArray
    level: float
    status: ForecastStatus
    reason: str
    weights: dict[str, float]
    scale: float
    spread: FloatArray

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def recent_trend(x: FloatArray, y: FloatArray) -> float:
    """|Least-squares slope of y against log x| over the later half of the points at x > 0
    (at least 3; 0.0 with fewer): how fast the curve still moves per e-fold of compute."""
    pos = x > 0
    x, y = x[pos], y[pos]
    late = x >= x[x.size // 2] if x.size else pos[:0]
    if int(late.sum()) < 3:
        return 0.0
    lx = np.log(x[late])
    lx = lx - lx.mean()
    den = float(np.sum(lx * lx))
    return abs(float(np.sum(lx * (y[late] - y[late].mean())) / den)) if den > 0 else 0.0


def _power_forecast(x: FloatArray, y: FloatArray, at: FloatArray) -> FloatArray:
    """The power law on its B grid (closed form, no scalar refinement: fast enough to batch)."""
    pos = x > 0
    x, y = x[pos], y[pos]
    if x.size < 4 or np.ptp(y) <= 0:
        return np.full(at.shape, np.nan)
    scale = float(x[-1])
    a, d, sse = solve_grid(x / scale, y, _POWER_B)
    k = int(np.nanargmin(np.where(np.isfinite(sse), sse, np.inf)))
    if not (np.isfinite(a[k]) and d[k] > 0):
        return np.full(at.shape, np.nan)
    with np.errstate(divide="ignore", over="ignore"):
        out = a[k] - d[k] * (np.maximum(at, 1e-300) / scale) ** -_POWER_B[k]
    return np.asarray(out, dtype=np.float64)


def member_forecasts(
    curves: Sequence[tuple[FloatArray, FloatArray]],
    ats: Sequence[FloatArray],
    r0: Sequence[float],
    sigma: Sequence[FloatArray | None] | None,
    settings: EnsembleSettings,
) -> list[FloatArray]:
    """(3, len(at)) member forecasts for every curve; NaN rows where a member cannot forecast."""
    fits = fit_sigmoid_many(list(curves), r0=list(r0), sigma=None if sigma is None else list(sigma))
    out = []
    for (x, y), at, fit in zip(curves, ats, fits, strict=True):
        m = np.full((3, at.size), np.nan)
        if "sigmoid" in settings.members:
            if fit.status == "ok":
                m[0] = fit.predict(at)
            elif fit.status == "pre-inflection":
                m[0] = sigmoid_curve(at, fit.r0, fit.a_raw, fit.b, fit.c_mid)
        if y.size:  # always computed: the fallback when no other member can forecast
            m[1] = float(np.mean(y[-settings.flat_points :]))
        if "power" in settings.members:
            m[2] = _power_forecast(x, y, at)
        m[~np.isfinite(m).all(axis=1)] = np.nan
        out.append(m)
    return out


def point_forecast_many(
    curves: Sequence[tuple[ArrayLike, ArrayLike]],
    at: Sequence[ArrayLike],
    *,
    r0: Sequence[float | None] | None = None,
    sigma: Sequence[ArrayLike | None] | None = None,
    settings: EnsembleSettings = DEFAULT_ENSEMBLE,
    options: FitOptions | None = None,
) -> list[PointForecast]:
    """Point forecasts for many curves at once (every sigmoid fit in one batched call per origin).

    ``r0`` (one per curve, None = the lowest-compute finite value) is R0 for the sigmoid;
    ``sigma`` (one array of per-point standard errors per curve, or None) weights the sigmoid
    fit (see :func:`scalerl.harness.analysis.fit.fitters.fit_sigmoid_many`). ``options`` only supplies the
    degenerate-curve checks (``min_points``, ``flat_tol``; defaults of :class:`FitOptions`).
    """
    opts = options or FitOptions()
    n = len(curves)
    clean: list[tuple[FloatArray, FloatArray]] = []
    sig_clean: list[FloatArray | None] = []
    starts: list[float] = []
    pre: list[tuple[ForecastStatus, str] | None] = []
    notes: list[str] = []  # what cleaning did, appended to each curve's reason
    ats = [np.asarray(a, dtype=np.float64).ravel() for a in at]
    for i, (c, v) in enumerate(curves):
        cv = np.asarray(c, dtype=np.float64).ravel()
        vv = np.asarray(v, dtype=np.float64).ravel()
        sd = clean_sigma(None if sigma is None else sigma[i], vv.size)
        k = min(cv.size, vv.size)
        cv, vv = cv[:k], vv[:k]
        good = np.isfinite(cv) & np.isfinite(vv)
        order = np.argsort(cv[good], kind="stable")
        x, y = cv[good][order], vv[good][order]
        clean.append((x, y))
        dropped = int(k - good.sum())
        notes.append(f"dropped {dropped} non-finite point(s)" if dropped else "")
        sig_clean.append(None if sd is None else sd[:k][good][order])
        given = None if r0 is None else r0[i]
        starts.append(float(given) if given is not None else (float(y[0]) if y.size else math.nan))
        prep = prepare(
            x, y, FitOptions(min_points=opts.min_points, flat_tol=opts.flat_tol), r0_override=starts[-1]
        )
        if prep.status in ("too-few-points", "flat"):
            pre.append((prep.status, "; ".join(r for r in (prep.reason, notes[-1]) if r)))
        else:
            pre.append(None)
    todo = [i for i in range(n) if pre[i] is None]
    # The final fit and every rolling-origin fit, all in one list of member forecasts.
    jobs_curves: list[tuple[FloatArray, FloatArray]] = []
    jobs_at: list[FloatArray] = []
    jobs_r0: list[float] = []
    jobs_sigma: list[FloatArray | None] = []
    inner: list[list[tuple[int, FloatArray]]] = []  # per todo curve: (job index, held-out values)
    base: list[int] = []  # per todo curve: the job index of its final fit
    for i in todo:
        x, y = clean[i]
        base.append(len(jobs_curves))
        jobs_curves.append((x, y))
        jobs_at.append(ats[i])
        jobs_r0.append(starts[i])
        jobs_sigma.append(sig_clean[i])
        mine = []
        for o in settings.origins:
            tr = x <= o * float(x[-1])
            if int((tr & (x > 0)).sum()) < opts.min_points or int((~tr).sum()) < 1:
                continue  # too short to validate at this origin
            mine.append((len(jobs_curves), y[~tr]))
            jobs_curves.append((x[tr], y[tr]))
            jobs_at.append(x[~tr])
            jobs_r0.append(starts[i])
            s_i = sig_clean[i]
            jobs_sigma.append(None if s_i is None else s_i[tr])
        inner.append(mine)
    any_sigma = any(s is not None for s in jobs_sigma)
    member_preds = member_forecasts(
        jobs_curves, jobs_at, jobs_r0, jobs_sigma if any_sigma else None, settings
    )
    allowed = np.array([m in settings.members for m in MEMBERS])
    out: list[PointForecast | None] = [None] * n
    for j, i in enumerate(todo):
        x, y = clean[i]
        m = member_preds[base[j]]
        validation = [(member_preds[jj], held) for jj, held in inner[j]]
        w = member_weights(m, validation, allowed, settings.temperature)
        value = (np.where(w[:, None] > 0, m, 0.0) * w[:, None]).sum(axis=0)
        pos = x[x > 0]
        c_first, c_last = float(pos[0]), float(x[-1])
        span = max(c_last - c_first, 1e-12)
        h = np.clip((ats[i] - c_last) / span, 0.0, None)
        out[i] = PointForecast(
            at=ats[i],
            value=np.asarray(value, dtype=np.float64),
            scale=noise_scale(y),
            horizon=h,
            weights=tuple(float(v) for v in w),
            status="ok",
            reason=notes[i],
            members=m,
            ratio=np.maximum(ats[i] / c_last, 1.0),
            trend=recent_trend(x, y),
            own_error=blended_error(validation, w),
        )
    for i in range(n):
        if out[i] is None:
            status, reason = pre[i]  # type: ignore[misc]
            nan = np.full(ats[i].shape, np.nan)
            out[i] = PointForecast(
                ats[i], nan, math.nan, nan, (0.0, 0.0, 0.0), status, reason, np.full((3, ats[i].size), np.nan)
            )
    return [p for p in out if p is not None]


def blended_error(validation: Sequence[tuple[FloatArray, FloatArray]], w: FloatArray) -> float:
    """Median over validation cuts of the weighted forecast's mean |error| on the points after
    the cut (members' predictions ``(k, points)`` with the observations), every member with
    weight renormalised over those that forecast there; 0.0 when nothing was validated."""
    errs = []
    for preds, held in validation:
        ok = np.isfinite(preds).all(axis=1) & (w > 0)
        if not ok.any():
            continue
        blend = (preds[ok] * w[ok, None]).sum(axis=0) / w[ok].sum()
        errs.append(float(np.mean(np.abs(blend - held))))
    return float(np.median(errs)) if errs else 0.0


def member_weights(
    final: FloatArray,
    validation: list[tuple[FloatArray, FloatArray]],
    allowed: NDArray[np.bool_],
    temperature: float,
) -> FloatArray:
    """Member weights from rolling-origin validation errors (see the module docstring).

    A member that forecasts the final horizon but could not be validated (its fit at an inner
    origin failed) is scored at the worst validated member's error; with no validation at all
    the usable members share equally; if only the flat line is usable it takes everything.
    """
    k = final.shape[0]
    usable = allowed & np.isfinite(final).all(axis=1)
    err = np.zeros(k)
    cnt = np.zeros(k)
    for pred, held in validation:
        e = np.mean(np.abs(pred - held[None, :]), axis=1)
        fin = np.isfinite(e)
        err[fin] += e[fin]
        cnt[fin] += 1
    validated = usable & (cnt > 0)
    if validated.any():
        mae = np.where(cnt > 0, err / np.maximum(cnt, 1), np.nan)
        mae = np.where(usable & ~validated, np.nanmax(mae[validated]), mae)
        mae = np.maximum(np.nan_to_num(mae, nan=1.0), _ERR_FLOOR)
        rel = mae / float(np.min(mae[usable])) - 1.0
        w = np.where(usable, np.exp(-rel / temperature), 0.0)
    else:
        w = usable.astype(np.float64)
    if w.sum() <= 0:
        w = (np.arange(k) == MEMBERS.index("flat")).astype(np.float64)
    return np.asarray(w / w.sum(), dtype=np.float64)


def with_interval(
    pf: PointForecast, level: float, calibration: IntervalCalibration, bounds: Bounds | None = None
) -> CurveForecast:
    """Attach the calibrated interval at ``level`` to a point forecast; ``bounds`` (lo, hi), the
    range the metric can take, clips the value and both edges into it (:mod:`.bounds`: with
    correct bounds this never costs coverage); None leaves them as they are."""
    q = calibration.quantile(level)
    bounds = check_bounds(bounds)
    half = q * pf.unit(calibration)
    weights = dict(zip(pf.names, pf.weights, strict=True))
    return CurveForecast(
        at=pf.at,
        value=clip_to_bounds(pf.value, bounds),
        lo=clip_to_bounds(pf.value - half, bounds),
        hi=clip_to_bounds(pf.value + half, bounds),
        level=level,
        status=pf.status,
        reason=pf.reason,
        weights=weights,
        scale=pf.scale,
        spread=pf.spread,
    )


def forecast_curves(
    curves: Sequence[tuple[ArrayLike, ArrayLike]],
    at: Sequence[ArrayLike],
    *,
    level: float = 0.9,
    r0: Sequence[float | None] | None = None,
    sigma: Sequence[ArrayLike | None] | None = None,
    bounds: Bounds | None = None,
) -> list[CurveForecast]:
    """:func:`forecast_curve` for many curves in one batch (one ``at`` array per curve)."""
    DEFAULT_CALIBRATION.quantile(level)  # validate before any work
    bounds = check_bounds(bounds)
    pfs = point_forecast_many(curves, at, r0=r0, sigma=sigma)
    return [with_interval(p, level, DEFAULT_CALIBRATION, bounds) for p in pfs]


def forecast_curve(
    compute: ArrayLike,
    values: ArrayLike,
    at: ArrayLike,
    *,
    level: float = 0.9,
    r0: float | None = None,
    sigma: ArrayLike | None = None,
    bounds: Bounds | None = None,
) -> CurveForecast:
    """Forecast one curve at the compute values ``at``, with a ``level`` prediction interval.

    Defaults: the ensemble of :data:`DEFAULT_ENSEMBLE` (sigmoid with R0 = the first point,
    flat-last-3, power law; weights from rolling-origin validation at 70% and 85% of the fitted
    compute) and the interval calibration :data:`DEFAULT_CALIBRATION`; both chosen by
    ``bench/forecast.py`` on all real curves (see bench/README.md, "Forecasts"). ``level``
    (default 0.9) must lie in [0.5, 0.98], the calibrated range. ``r0`` overrides R0 (the value at
    the start of training); ``sigma`` (per-point standard errors aligned with ``values``) weights
    the sigmoid fit. A curve with fewer than 4 usable points or no movement gets status
    ``too-few-points`` / ``flat``, a reason, and NaN arrays; it never raises on data. ``bounds``
    ``(lo, hi)``, the range the metric can take (``(0, 1)`` for a pass rate), clips the value and
    the interval into it (:mod:`.bounds`); None (the default) leaves them unclipped.
    """
    return forecast_curves(
        [(compute, values)],
        [at],
        level=level,
        r0=None if r0 is None else [r0],
        sigma=None if sigma is None else [sigma],
        bounds=bounds,
    )[0]

"""Forecasts that borrow strength from the sweep: an empirical-Bayes prior over the sigmoid.

The runs of one sweep share a task, a start and most of a recipe, so their sigmoids' parameters
are alike. For a run with siblings (other seeds, other variants, finished runs), each sibling's
curve is fitted on its own (the batched fitter, R0 = its first point); the fits that pin their
ceiling (status ``ok``) give a prior over ``theta = (A, log B, log C_mid)``: centre the
siblings' median, scale ``sqrt((kappa * 1.4826 * MAD)^2 + floor^2)`` per parameter (``kappa``
and the floors are :class:`SweepSettings`). The run's own points update it: the ``sweep`` member
is the maximum a posteriori sigmoid, the least-squares fit of ``(y - R(C; theta)) / s`` (``s`` the
run's noise scale, :func:`scalerl.harness.analysis.noise.point.noise_scale`) with the prior as a
Gaussian penalty ``(theta - centre) / scale``. Early on the prior decides the ceiling the run's own points
cannot pin; once the run has bent, its own points outweigh it.

The point forecast is the single-curve ensemble (:mod:`.ensemble`) with this fourth member,
every member weighted by its rolling-origin validation error as there (the sweep member is
refitted at each inner origin with the same prior). A run with fewer than ``min_siblings`` fitted
siblings gets the single-curve forecast unchanged, and says so (``method="single"``). Its
interval is calibrated separately (:data:`SWEEP_CALIBRATION`, chosen by ``bench/forecast_sweep.py``
with each source left out in turn; see bench/README.md, "Forecasts from the whole sweep"), and a
run whose siblings ran on to at least twice its last compute (:func:`siblings_finished`: a new
run of a finished sweep) gets :data:`FINISHED_SWEEP_CALIBRATION`, fitted on such forecasts alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.curve import FitOptions, FloatArray, sigmoid_curve
from scalerl.harness.analysis.fit.fitters import fit_sigmoid_many
from scalerl.harness.analysis.forecast.bounds import Bounds, check_bounds
from scalerl.harness.analysis.forecast.calibrations import (
    DEFAULT_CALIBRATION,
    FINISHED_SWEEP_CALIBRATION,
    SWEEP_CALIBRATION,
)
from scalerl.harness.analysis.forecast.ensemble import (
    DEFAULT_ENSEMBLE,
    MEMBERS,
    CurveForecast,
    EnsembleSettings,
    PointForecast,
    blended_error,
    member_forecasts,
    member_weights,
    point_forecast_many,
    with_interval,
)
from scalerl.harness.analysis.forecast.intervals import IntervalCalibration
from scalerl.harness.analysis.noise.point import noise_scale
from scalerl.harness.errors import ConfigError

SWEEP_MEMBERS = (*MEMBERS, "sweep")
# Siblings that ran past a curve's last point, needed to validate the members on them instead
# of inside the curve (see point_forecast_with_prior).
MIN_VALIDATING = 2
MAX_VALIDATING = 16
Method = Literal["sweep", "single"]
Curve = tuple[ArrayLike, ArrayLike]


@dataclass(frozen=True)
class SweepSettings:
    """How the sweep's prior is formed. ``kappa`` scales the siblings' spread (1 = their robust
    sd); ``floors`` (A, log B, log C_mid) keep the prior from being sharper than a sweep can
    know; ``min_siblings`` fitted siblings are needed for a prior at all."""

    kappa: float = 0.5  # chosen by bench/forecast_sweep.py (every fold and all four sources)
    floors: tuple[float, float, float] = (0.02, 0.2, 0.2)
    min_siblings: int = 2

    def __post_init__(self) -> None:
        if not self.kappa > 0 or any(not f > 0 for f in self.floors):
            raise ConfigError(
                "kappa and the floors must be > 0",
                field="SweepSettings",
                value=(self.kappa, self.floors),
                fix="use kappa=0.5, floors=(0.02, 0.2, 0.2)",
            )
        if self.min_siblings < 1:
            raise ConfigError("must be >= 1", field="min_siblings", value=self.min_siblings, fix="use 2")


DEFAULT_SWEEP = SweepSettings()


# A sweep counts as finished for a run's forecast when at least MIN_VALIDATING siblings ran to
# this many times the run's last compute: then the members are validated on the siblings' own
# futures over a real horizon (not a sliver past the run), and the forecast is much better
# informed than one from siblings at the run's own stage, so it gets its own interval calibration.
FINISHED_RATIO = 2.0


def siblings_finished(x: ArrayLike, siblings: Sequence[Curve], ratio: float = FINISHED_RATIO) -> bool:
    """Whether at least :data:`MIN_VALIDATING` of ``siblings`` ran to ``ratio`` x the run's last
    compute (the largest finite value of ``x``; False when that is not > 0). The rule that picks
    the finished-sweep calibration in :func:`forecast_with_siblings`, and the one
    ``bench/forecast_sweep.py`` scores it with."""
    xs = np.asarray(x, dtype=np.float64).ravel()
    xs = xs[np.isfinite(xs)]
    last = float(xs.max()) if xs.size else math.nan
    if not last > 0:
        return False
    reached = 0
    for sc, _ in siblings:
        s = np.asarray(sc, dtype=np.float64).ravel()
        s = s[np.isfinite(s)]
        if s.size and float(s.max()) >= ratio * last:
            reached += 1
    return reached >= MIN_VALIDATING


@dataclass(frozen=True)
class Prior:
    """Gaussian prior over (A, log B, log C_mid) from ``n`` fitted siblings; ``theta`` holds their
    parameters and ``members`` which sibling (index into its set) each row is."""

    centre: FloatArray
    scale: FloatArray
    n: int
    theta: FloatArray = field(repr=False, default_factory=lambda: np.zeros((0, 3)))
    members: tuple[int, ...] = ()
    settings: SweepSettings | None = field(repr=False, default=None)

    def without(self, sibling: int) -> Prior | None:
        """The prior with one sibling left out (None if too few remain)."""
        keep = [k for k, j in enumerate(self.members) if j != sibling]
        return _prior(self.theta[keep], tuple(self.members[k] for k in keep), self.settings or DEFAULT_SWEEP)


def _prior(theta: FloatArray, members: tuple[int, ...], settings: SweepSettings) -> Prior | None:
    if theta.shape[0] < settings.min_siblings:
        return None
    centre = np.median(theta, axis=0)
    mad = 1.4826 * np.median(np.abs(theta - centre), axis=0)
    scale = np.sqrt((settings.kappa * mad) ** 2 + np.asarray(settings.floors) ** 2)
    return Prior(centre, scale, int(theta.shape[0]), theta, members, settings)


@dataclass(frozen=True)
class SweepForecast:
    """One run's forecast: ``forecast`` (as :func:`.ensemble.forecast_curve` returns it),
    ``method`` ``"sweep"`` (the prior from ``siblings`` fitted siblings was used) or
    ``"single"`` (the single-curve forecast; ``note`` says why)."""

    forecast: CurveForecast
    method: Method
    siblings: int
    note: str = ""
    # The siblings ran on (siblings_finished): the interval is FINISHED_SWEEP_CALIBRATION's.
    finished: bool = False


def _clean(c: ArrayLike, v: ArrayLike) -> tuple[FloatArray, FloatArray]:
    x = np.asarray(c, dtype=np.float64).ravel()
    y = np.asarray(v, dtype=np.float64).ravel()
    k = min(x.size, y.size)
    x, y = x[:k], y[:k]
    good = np.isfinite(x) & np.isfinite(y)
    order = np.argsort(x[good], kind="stable")
    return x[good][order], y[good][order]


def sweep_priors(
    sibling_sets: Sequence[Sequence[Curve]], settings: SweepSettings = DEFAULT_SWEEP
) -> list[Prior | None]:
    """One prior per set of sibling curves (None when fewer than ``min_siblings`` fit ``ok``);
    every distinct sibling is fitted once, all in one batched call (a sweep's n runs appear in
    n - 1 sets each: the same curve object is fitted once)."""
    index: dict[int, int] = {}
    flat: list[tuple[FloatArray, FloatArray]] = []
    keep_alive: list[Curve] = []  # ids are only unique while the objects live
    for sibs in sibling_sets:
        for cv in sibs:
            if id(cv) not in index:
                index[id(cv)] = len(flat)
                flat.append(_clean(*cv))
                keep_alive.append(cv)
    fits = fit_sigmoid_many(flat, r0=[float(y[0]) if y.size else math.nan for _, y in flat]) if flat else []
    out: list[Prior | None] = []
    for sibs in sibling_sets:
        mine = [fits[index[id(cv)]] for cv in sibs]
        good = [j for j, f in enumerate(mine) if f.ok and f.b > 0 and f.c_mid > 0]
        theta = np.array([[mine[j].a, math.log(mine[j].b), math.log(mine[j].c_mid)] for j in good])
        out.append(_prior(theta.reshape(-1, 3), tuple(good), settings))
    return out


def fit_with_prior(
    x: FloatArray, y: FloatArray, r0: float, prior: Prior, *, a_bounds: tuple[float, float] | None = None
) -> tuple[float, float, float] | None:
    """The maximum a posteriori (A, B, C_mid) of the sigmoid with R0 fixed at ``r0``; None when
    there is nothing to fit (fewer than 2 points at compute > 0)."""
    from scipy.optimize import least_squares

    pos = x > 0
    x, y = x[pos], y[pos]
    if x.size < 2:
        return None
    s = noise_scale(y)
    lo_a, hi_a = a_bounds or FitOptions().a_bounds
    lx = np.log(x)

    def resid(t: FloatArray) -> FloatArray:
        a, lb, lc = t
        with np.errstate(over="ignore"):
            pred = r0 + (a - r0) / (1.0 + np.exp(np.exp(lb) * (lc - lx)))
        return np.concatenate([(y - pred) / s, (t - prior.centre) / prior.scale])

    lo = np.array([lo_a, math.log(0.05), float(lx[0]) - 10.0])
    hi = np.array([hi_a, math.log(20.0), float(lx[-1]) + 10.0])
    start = np.clip(prior.centre, lo + 1e-9, hi - 1e-9)
    res = least_squares(resid, start, bounds=(lo, hi), method="trf", x_scale=prior.scale, max_nfev=200)
    a, lb, lc = (float(v) for v in res.x)
    return a, math.exp(lb), math.exp(lc)


def _sweep_member(x: FloatArray, y: FloatArray, at: FloatArray, r0: float, prior: Prior) -> FloatArray:
    got = fit_with_prior(x, y, r0, prior)
    if got is None:
        return np.full(at.shape, np.nan)
    return sigmoid_curve(at, r0, *got)


def point_forecast_with_prior(
    curves: Sequence[Curve],
    at: Sequence[ArrayLike],
    priors: Sequence[Prior | None],
    *,
    siblings: Sequence[Sequence[Curve]] | None = None,
    settings: EnsembleSettings = DEFAULT_ENSEMBLE,
) -> list[PointForecast]:
    """The single-curve ensemble's point forecasts with the sweep member added where a curve has a
    prior (members ``SWEEP_MEMBERS``); a curve without one keeps its single-curve forecast.

    Member weights: where ``siblings`` (the sets the priors came from) holds at least
    :data:`MIN_VALIDATING` siblings that ran past this curve's last compute, every member is
    validated on them instead of inside the curve's own points: each such sibling is cut at this
    curve's last compute and forecast from there (its sweep member with the prior that leaves
    it out), and scored on its own later points up to the furthest ``at``. That is the question
    the forecast answers (what happens after this point), asked of runs that went on; the
    rolling-origin validation inside the curve can only ask it about the past.
    """
    base = point_forecast_many(curves, at, settings=settings)
    allowed = np.array([m in settings.members for m in MEMBERS] + [True])
    clean = [_clean(c, v) for c, v in curves]
    # Validation jobs for every curve with a prior, all single-curve members in one batch:
    # (curve, train x, train y, held-out x, held-out y, prior for the sweep member).
    jobs: list[tuple[int, FloatArray, FloatArray, FloatArray, FloatArray, Prior | None, bool]] = []
    for i, ((x, y), pf, prior) in enumerate(zip(clean, base, priors, strict=True)):
        if prior is None or pf.status != "ok":
            continue
        c_last, c_far = float(x[-1]), float(np.max(pf.at)) if pf.at.size else float(x[-1])
        mine = []
        ahead = []  # (how far it ran, sibling index, cleaned curve) for siblings past c_last
        for j, (sc, sv) in enumerate(siblings[i] if siblings is not None else []):
            sx, sy = _clean(sc, sv)
            if sx.size and float(sx[-1]) > c_last:
                ahead.append((float(sx[-1]), j, sx, sy))
        # The siblings that ran furthest, at most MAX_VALIDATING (a 100-run sweep would
        # otherwise cost 99 refits per run).
        for _, j, sx, sy in sorted(ahead, key=lambda t: (-t[0], t[1]))[:MAX_VALIDATING]:
            tr = sx <= c_last
            te = ~tr & (sx <= max(c_far, c_last * 1.05))
            if int((tr & (sx > 0)).sum()) >= 4 and int(te.sum()) >= 2:
                mine.append((i, sx[tr], sy[tr], sx[te], sy[te], prior.without(j), True))
        if len(mine) < MIN_VALIDATING:
            mine = []
            for o in settings.origins:
                tr = x <= o * c_last
                if int((tr & (x > 0)).sum()) >= 4 and int((~tr).sum()) >= 1:
                    mine.append((i, x[tr], y[tr], x[~tr], y[~tr], prior, False))
        jobs += mine
    inner = member_forecasts(
        [(j[1], j[2]) for j in jobs], [j[3] for j in jobs], [float(j[2][0]) for j in jobs], None, settings
    )
    out: list[PointForecast] = []
    for i, ((x, y), pf, prior) in enumerate(zip(clean, base, priors, strict=True)):
        if prior is None or pf.status != "ok":
            out.append(pf)
            continue
        r0 = float(y[0])
        member = _sweep_member(x, y, pf.at, r0, prior)
        m = np.vstack([pf.members, member[None, :]])
        m[~np.isfinite(m).all(axis=1)] = np.nan
        # Rolling-origin validation of all four members, as in the single-curve ensemble.
        validation = []
        on_siblings = False
        for job, single in zip(jobs, inner, strict=True):
            if job[0] == i:
                on_siblings = job[6]
                p = job[5]
                sw = (
                    np.full(job[3].shape, np.nan)
                    if p is None
                    else _sweep_member(job[1], job[2], job[3], float(job[2][0]), p)
                )
                validation.append((np.vstack([single, sw[None, :]]), job[4]))
        w = member_weights(m, validation, allowed, settings.temperature)
        value = (np.where(w[:, None] > 0, m, 0.0) * w[:, None]).sum(axis=0)
        # Validated on siblings: the error on runs that went on; inside the curve: its own past.
        err = blended_error(validation, w)
        out.append(
            replace(
                pf,
                value=np.asarray(value, dtype=np.float64),
                weights=tuple(float(v) for v in w),
                members=m,
                names=SWEEP_MEMBERS,
                sibling_error=err if on_siblings else 0.0,
                # Validated on siblings, the curve's own past is the single-curve blend's error.
                own_error=pf.own_error if on_siblings else err,
            )
        )
    return out


def forecast_with_siblings(
    curves: Sequence[Curve],
    at: Sequence[ArrayLike],
    siblings: Sequence[Sequence[Curve]],
    *,
    level: float = 0.9,
    settings: SweepSettings = DEFAULT_SWEEP,
    calibration: IntervalCalibration = SWEEP_CALIBRATION,
    finished_calibration: IntervalCalibration | None = FINISHED_SWEEP_CALIBRATION,
    single_calibration: IntervalCalibration = DEFAULT_CALIBRATION,
    bounds: Bounds | None = None,
) -> list[SweepForecast]:
    """Forecast each curve at its ``at`` using its own ``siblings`` (curves of the same sweep:
    other seeds, other variants, finished runs; any stage). A curve with fewer than
    ``settings.min_siblings`` siblings whose fit pins a ceiling gets the single-curve forecast.
    The interval: ``finished_calibration`` where the siblings ran on (:func:`siblings_finished`:
    at least 2 of them to 2x the curve's last compute; ``finished=True``), ``calibration``
    otherwise; ``finished_calibration=None`` gives every sweep forecast ``calibration``.
    ``bounds`` (lo, hi) clips every value and interval into the metric's range (:mod:`.bounds`);
    None leaves them unclipped."""
    calibration.quantile(level)
    if finished_calibration is not None:
        finished_calibration.quantile(level)
    single_calibration.quantile(level)
    bounds = check_bounds(bounds)
    if len(siblings) != len(curves):
        raise ConfigError(
            f"{len(siblings)} sibling sets for {len(curves)} curves",
            field="siblings",
            value=len(siblings),
            fix="pass one (possibly empty) list of sibling curves per curve",
        )
    priors = sweep_priors(siblings, settings)
    pfs = point_forecast_with_prior(curves, at, priors, siblings=siblings)
    out = []
    for (cx, _), pf, prior, sibs in zip(curves, pfs, priors, siblings, strict=True):
        if prior is None:
            note = (
                "no siblings"
                if not sibs
                else f"{len(sibs)} sibling(s), fewer than {settings.min_siblings} with a fitted ceiling"
            )
            out.append(SweepForecast(with_interval(pf, level, single_calibration, bounds), "single", 0, note))
        elif pf.status != "ok":
            single = with_interval(pf, level, single_calibration, bounds)
            out.append(SweepForecast(single, "single", prior.n, pf.reason))
        else:
            done = finished_calibration is not None and siblings_finished(cx, sibs)
            cal = finished_calibration if finished_calibration is not None and done else calibration
            fc = with_interval(pf, level, cal, bounds)
            out.append(SweepForecast(fc, "sweep", prior.n, finished=done))
    return out


def forecast_sweep(
    curves: Sequence[Curve],
    at: Sequence[ArrayLike],
    *,
    level: float = 0.9,
    use_siblings: bool = True,
    settings: SweepSettings = DEFAULT_SWEEP,
    bounds: Bounds | None = None,
) -> list[SweepForecast]:
    """Forecast every run (or variant) of one sweep, each borrowing strength from all the others
    (see the module docstring); ``use_siblings=False`` gives every curve the single-curve
    forecast (``method="single"``); ``bounds`` as in :func:`forecast_with_siblings`. A run the
    others ran on past (at least 2 of them to 2x its last compute: a new run of a finished sweep)
    gets :data:`FINISHED_SWEEP_CALIBRATION`'s interval, the rest :data:`SWEEP_CALIBRATION`'s."""
    sibs: list[list[Curve]] = [
        [c for j, c in enumerate(curves) if j != i] if use_siblings else [] for i in range(len(curves))
    ]
    out = forecast_with_siblings(curves, at, sibs, level=level, settings=settings, bounds=bounds)
    if not use_siblings:
        out = [replace(f, note="siblings turned off") for f in out]
    return out

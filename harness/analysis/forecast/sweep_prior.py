"""Forecasts that borrow strength from the sweep: an empirical-Bayes prior over the sigmoid,
used only where the run's own points agree with its siblings.

The runs of one sweep often share a task, a start and most of a recipe, so their sigmoids'
parameters are alike; often is not always (model sizes, a knob that moves the ceiling). For a run
with siblings (other seeds, other variants, finished runs), each sibling's curve is fitted on its
own (the batched fitter, R0 = its first point); the fits that pin their ceiling (status ``ok``)
give a prior over ``theta = (A, log B, log C_mid)``:

- centre: the siblings' median;
- scale: how much the siblings differ from each other, as the prior for one more run of their
  population: ``sqrt(kappa^2 tau^2 (1 + 1/n) + floor^2)`` per parameter, ``tau`` the siblings'
  standard deviation, ``n`` their number (the centre's own uncertainty), ``kappa`` (1: the
  empirical-Bayes spread) and the floors :class:`SweepSettings`. Siblings that differ (four model
  sizes, ceilings 0.3 to 0.75) give a prior too wide to move a run. (Before issue 37 the scale
  was half the siblings' median absolute deviation: 0 for A whenever two of three siblings agree,
  floors aside, so one run unlike them was pulled to their ceiling.)

**The check before borrowing** (:func:`borrowing`): over the later half of the run's own points,
how far they lie from the median of the siblings' fitted curves, in units of how far each
sibling lies from the others' median over the same computes (plus the run's noise and
:data:`LEVEL_FLOOR`). Past the two-sided normal quantile at ``conflict_level`` the run is not one
of its siblings' population (another model size, a knob that moved its ceiling) and nothing is
borrowed: the forecast is the single-curve one exactly, and says why. The check compares curves
where the run has data, not parameters: a run above its siblings by 0.05 is told apart long
before its own points pin a ceiling that differs, while A, B and C_mid can trade off.

**The sweep member** joins the single-curve ensemble (:mod:`.ensemble`) as a fourth member: the
run's sigmoid fitted with the prior as a Gaussian penalty (the maximum a posteriori fit of
``(y - R(C; theta)) / s``, ``s`` the noise scale of
:func:`scalerl.harness.analysis.noise.point.noise_scale`, R0 the first point). Early on the prior
decides what the run's points cannot pin; once the run has bent, its own points outweigh it. The
run's free sigmoid stays a member, so its own validation can prefer it where the prior misleads
(``replace_sigmoid=True`` drops it: on simulated sweeps that let noisy same-stage siblings drag
a run 1.3x; bench/README.md).

**Member weights** (``exp(-(err / best - 1) / temperature)`` of each member's validation error,
as in :mod:`.ensemble`): inside the curve (rolling origins) and, where at least 2 siblings ran
past this run's last compute, on the siblings' own later points from that compute (their sweep
member with the prior that leaves them out): the question the forecast answers, asked of runs
that went on. With ``validation="check"`` the siblings' weights are checked on the run's own
past: as far as their blend misses it more than the run's own blend does, the run's own weights
take over (``lambda = exp(-max(err_sib / err_own - 1, 0) / temperature)``); ``"siblings"``
trusts the siblings alone (before issue 37), which hands a run the weights of runs unlike it.

A run with fewer than ``min_siblings`` fitted siblings, or whose check fails, gets the
single-curve forecast unchanged and says so (``method="single"``). The interval is calibrated
separately (:data:`SWEEP_CALIBRATION`, chosen by the bench with each source left out in turn;
see bench/README.md), and a run whose siblings ran on to at least twice its last compute
(:func:`siblings_finished`: a new run of a finished sweep) gets
:data:`FINISHED_SWEEP_CALIBRATION`, fitted on such forecasts alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.curve import FitOptions, FloatArray, sigmoid_curve
from scalerl.harness.analysis.fit.fitters import ManyFitter, fit_sigmoid_many
from scalerl.harness.analysis.forecast.bounds import Bounds, check_bounds
from scalerl.harness.analysis.forecast.calibrations import (
    DEFAULT_CALIBRATION,
    FINISHED_SWEEP_CALIBRATION,
    SWEEP_CALIBRATION,
)
from scalerl.harness.analysis.forecast.ensemble import (
    _ERR_FLOOR,
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
Validation = Literal["check", "siblings"]
VALIDATIONS: tuple[Validation, ...] = ("check", "siblings")
Spread = Literal["sd", "mad"]
SPREADS: tuple[Spread, ...] = ("sd", "mad")
Curve = tuple[ArrayLike, ArrayLike]


@dataclass(frozen=True)
class SweepSettings:
    """How the sweep's prior is formed and when it is used (see the module docstring).

    ``kappa`` scales the siblings' between-run spread (1 = their robust sd: the empirical-Bayes
    prior for a new run of the population); ``floors`` (A, log B, log C_mid) keep the prior from
    being sharper than a sweep can know; ``min_siblings`` fitted siblings are needed for a prior
    at all. ``conflict_level``: the run does not borrow when :func:`borrowing`'s ``|z|`` exceeds
    the two-sided normal quantile at this level (1.0: never refuse). ``validation``: how members
    are weighted where siblings ran past the run (``check`` or ``siblings``).
    ``replace_sigmoid``: the sweep member stands in for the run's free sigmoid (default: both
    are members). ``spread``: the siblings' spread ``tau`` is their standard deviation (``sd``)
    or, as before issue 37, 1.4826 x their median absolute deviation without the centre's own
    uncertainty (``mad``).

    The defaults (kappa 1, level 0.99, ``check``, both sigmoids, ``sd``) are chosen by
    ``python -m bench.forecast_targets`` leave-one-source-out (bench/README.md, "Forecast
    targets (issue 37)")."""

    kappa: float = 1.0
    floors: tuple[float, float, float] = (0.02, 0.2, 0.2)
    min_siblings: int = 2
    conflict_level: float = 0.99
    validation: Validation = "check"
    replace_sigmoid: bool = False
    spread: Spread = "sd"

    def __post_init__(self) -> None:
        if not self.kappa > 0 or any(not f > 0 for f in self.floors):
            raise ConfigError(
                "kappa and the floors must be > 0",
                field="SweepSettings",
                value=(self.kappa, self.floors),
                fix="use kappa=1.0, floors=(0.02, 0.2, 0.2)",
            )
        if self.min_siblings < 1:
            raise ConfigError("must be >= 1", field="min_siblings", value=self.min_siblings, fix="use 2")
        if not 0.0 < self.conflict_level <= 1.0:
            raise ConfigError(
                "must be in (0, 1]",
                field="conflict_level",
                value=self.conflict_level,
                fix="use 0.99 (1.0 never refuses the siblings)",
            )
        if self.spread not in SPREADS:
            raise ConfigError(
                "unknown spread", field="spread", value=self.spread, fix=f"use one of {SPREADS}"
            )
        if self.validation not in VALIDATIONS:
            raise ConfigError(
                "unknown validation",
                field="validation",
                value=self.validation,
                fix=f"use one of {VALIDATIONS}",
            )

    @property
    def conflict_limit(self) -> float:
        """The largest ``|z|`` of :func:`borrowing` at which the run still borrows: the two-sided
        normal quantile at ``conflict_level`` (inf at level 1)."""
        if self.conflict_level >= 1.0:
            return math.inf
        from scipy.stats import norm

        return float(norm.ppf(0.5 + self.conflict_level / 2.0))


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
    r0s: FloatArray = field(repr=False, default_factory=lambda: np.zeros(0))  # each sibling's R0

    def without(self, sibling: int) -> Prior | None:
        """The prior with one sibling left out (None if too few remain)."""
        keep = [k for k, j in enumerate(self.members) if j != sibling]
        return _prior(
            self.theta[keep],
            tuple(self.members[k] for k in keep),
            self.settings or DEFAULT_SWEEP,
            self.r0s[keep] if self.r0s.size else None,
        )

    def curves(self, x: FloatArray) -> FloatArray:
        """(n, len(x)): every sibling's fitted curve at compute ``x``."""
        r0s = self.r0s if self.r0s.size == self.n else np.zeros(self.n)
        return np.array(
            [
                sigmoid_curve(x, float(r), float(a), math.exp(lb), math.exp(lc))
                for r, (a, lb, lc) in zip(r0s, self.theta, strict=True)
            ]
        ).reshape(self.n, x.size)


def _prior(
    theta: FloatArray, members: tuple[int, ...], settings: SweepSettings, r0s: FloatArray | None = None
) -> Prior | None:
    if theta.shape[0] < settings.min_siblings:
        return None
    n = int(theta.shape[0])
    centre = np.median(theta, axis=0)
    if settings.spread == "sd":
        # The between-run spread; a new run's parameters: that spread plus the uncertainty of
        # the centre. (A median absolute deviation of 2-5 values is 0 whenever two agree.)
        tau = np.std(theta, axis=0, ddof=1) if n > 1 else np.zeros(3)
        var = (settings.kappa * tau) ** 2 * (1.0 + 1.0 / n)
    else:  # the prior before issue 37: kappa x the robust sd, nothing for the centre
        var = (settings.kappa * 1.4826 * np.median(np.abs(theta - centre), axis=0)) ** 2
    scale = np.sqrt(var + np.asarray(settings.floors) ** 2)
    r0 = np.zeros(0) if r0s is None else np.asarray(r0s, dtype=np.float64)
    return Prior(centre, scale, n, theta, members, settings, r0)


@dataclass(frozen=True)
class SweepForecast:
    """One run's forecast: ``forecast`` (as :func:`.ensemble.forecast_curve` returns it),
    ``method`` ``"sweep"`` (the prior from ``siblings`` fitted siblings was used) or
    ``"single"`` (the single-curve forecast; ``note`` says why: no siblings, or siblings whose
    prior the run's own points refuse)."""

    forecast: CurveForecast
    method: Method
    siblings: int
    note: str = ""
    # The siblings ran on (siblings_finished): the interval is FINISHED_SWEEP_CALIBRATION's.
    finished: bool = False
    # How far the run lies from its siblings (:func:`borrowing`'s z); NaN where none was checked.
    conflict: float = math.nan


def _clean(c: ArrayLike, v: ArrayLike) -> tuple[FloatArray, FloatArray]:
    x = np.asarray(c, dtype=np.float64).ravel()
    y = np.asarray(v, dtype=np.float64).ravel()
    k = min(x.size, y.size)
    x, y = x[:k], y[:k]
    good = np.isfinite(x) & np.isfinite(y)
    order = np.argsort(x[good], kind="stable")
    return x[good][order], y[good][order]


def sweep_priors(
    sibling_sets: Sequence[Sequence[Curve]],
    settings: SweepSettings = DEFAULT_SWEEP,
    *,
    fitter: ManyFitter = fit_sigmoid_many,
) -> list[Prior | None]:
    """One prior per set of sibling curves (None when fewer than ``min_siblings`` fit ``ok``);
    every distinct sibling is fitted once, all in one batched call of ``fitter`` (a sweep's n runs
    appear in n - 1 sets each: the same curve object is fitted once)."""
    index: dict[int, int] = {}
    flat: list[tuple[FloatArray, FloatArray]] = []
    keep_alive: list[Curve] = []  # ids are only unique while the objects live
    for sibs in sibling_sets:
        for cv in sibs:
            if id(cv) not in index:
                index[id(cv)] = len(flat)
                flat.append(_clean(*cv))
                keep_alive.append(cv)
    fits = fitter(flat, r0=[float(y[0]) if y.size else math.nan for _, y in flat]) if flat else []
    out: list[Prior | None] = []
    for sibs in sibling_sets:
        mine = [fits[index[id(cv)]] for cv in sibs]
        good = [j for j, f in enumerate(mine) if f.ok and f.b > 0 and f.c_mid > 0]
        theta = np.array([[mine[j].a, math.log(mine[j].b), math.log(mine[j].c_mid)] for j in good])
        r0s = np.array([mine[j].r0 for j in good], dtype=np.float64)
        out.append(_prior(theta.reshape(-1, 3), tuple(good), settings, r0s))
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


# A run's level is not told apart from its siblings' by less than this (metric units): about
# the seed-to-seed spread of a ceiling (the paper's +-0.015 over 3 seeds), so two siblings that
# happen to agree closely do not make every run look unlike them.
LEVEL_FLOOR = 0.01


@dataclass(frozen=True)
class Borrowing:
    """Whether a run's own points agree with its siblings: ``z`` how far the run's later points
    lie from the siblings' median curve, in units of how far each sibling lies from the others'
    (plus the run's noise), ``limit`` the largest ``|z|`` that still borrows."""

    z: float
    limit: float

    @property
    def agrees(self) -> bool:
        return abs(self.z) <= self.limit

    def note(self) -> str:
        """Why nothing was borrowed, in words ('' when the run borrows)."""
        if self.agrees:
            return ""
        if not math.isfinite(self.z):
            return "too few points to check the sibling variants against"
        side = "above" if self.z > 0 else "below"
        return (
            f"this run's own points lie {side} its sibling variants' curves by {abs(self.z):.1f} times "
            f"their spread (limit {self.limit:.1f}): another population (e.g. another model size, or "
            "a knob that moves the ceiling); forecast from its own points alone"
        )


def borrowing(
    x: FloatArray, y: FloatArray, prior: Prior, settings: SweepSettings = DEFAULT_SWEEP
) -> Borrowing:
    """Check the siblings against a run's own points before borrowing (see the module docstring).

    Over the later half of the run's points (compute >= their median), ``d`` = the mean of
    ``y - m(C)``, ``m`` the median of the siblings' fitted curves; each sibling's own ``d_j``
    against the median of the others over the same computes gives their spread ``tau`` (1.4826 x
    the median |d_j|); ``z = d / sqrt(tau^2 + s^2 / k + LEVEL_FLOOR^2)``, ``s`` the run's noise
    scale over its ``k`` points. NaN (no check: the run does not borrow) with fewer than 2 points."""
    limit = settings.conflict_limit
    pos = x > 0
    x, y = x[pos], y[pos]
    if x.size < 2 or prior.n < 2:
        return Borrowing(math.nan, limit)
    late = x >= np.median(x)
    xl, yl = x[late], y[late]
    f = prior.curves(xl)
    d = float(np.mean(yl - np.median(f, axis=0)))
    d_sib = np.array([np.mean(f[j] - np.median(np.delete(f, j, axis=0), axis=0)) for j in range(prior.n)])
    if settings.spread == "sd":
        tau = float(np.sqrt(np.mean(d_sib**2)))
    else:
        tau = 1.4826 * float(np.median(np.abs(d_sib)))
    z = d / math.sqrt(tau**2 + noise_scale(y) ** 2 / xl.size + LEVEL_FLOOR**2)
    return Borrowing(z, limit)


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
    fitter: ManyFitter = fit_sigmoid_many,
) -> list[PointForecast]:
    """The single-curve ensemble's point forecasts with the sweep member added where a curve has a
    prior its own points agree with (members ``SWEEP_MEMBERS``); a curve without one, or whose
    points refuse it (:func:`borrowing`), keeps its single-curve forecast exactly. The prior's
    :class:`SweepSettings` (``Prior.settings``) say how the check and the validation are done;
    ``fitter`` makes every single-curve sigmoid fit (the sweep member's own fit is MAP, not it).

    Member weights: inside the curve (rolling origins) and, where ``siblings`` (the sets the
    priors came from) holds at least :data:`MIN_VALIDATING` siblings that ran past this curve's
    last compute, on them: each such sibling is cut at this curve's last compute and forecast from
    there (its sweep member with the prior that leaves it out), and scored on its own later points
    up to the furthest ``at``. That is the question the forecast answers (what happens after this
    point), asked of runs that went on; with ``validation="check"`` the curve's own past must
    agree.
    """
    return [pf for pf, _ in _forecasts_with_prior(curves, at, priors, siblings, settings, fitter)]


Job = tuple[int, FloatArray, FloatArray, FloatArray, FloatArray, "Prior | None", bool]


def _validation_jobs(
    i: int,
    x: FloatArray,
    y: FloatArray,
    c_far: float,
    prior: Prior,
    sibs: Sequence[Curve],
    settings: EnsembleSettings,
) -> tuple[list[Job], list[Job]]:
    """(rolling-origin jobs inside the curve, jobs on the siblings that ran past it): each
    (curve, train x, train y, held-out x, held-out y, the sweep member's prior, on a sibling)."""
    c_last = float(x[-1])
    ahead = []  # (how far it ran, sibling index, cleaned curve) for siblings past c_last
    for j, (sc, sv) in enumerate(sibs):
        sx, sy = _clean(sc, sv)
        if sx.size and float(sx[-1]) > c_last:
            ahead.append((float(sx[-1]), j, sx, sy))
    on_sibs: list[Job] = []
    # The siblings that ran furthest, at most MAX_VALIDATING (a 100-run sweep would otherwise
    # cost 99 refits per run).
    for _, j, sx, sy in sorted(ahead, key=lambda t: (-t[0], t[1]))[:MAX_VALIDATING]:
        tr = sx <= c_last
        te = ~tr & (sx <= max(c_far, c_last * 1.05))
        if int((tr & (sx > 0)).sum()) >= 4 and int(te.sum()) >= 2:
            on_sibs.append((i, sx[tr], sy[tr], sx[te], sy[te], prior.without(j), True))
    if len(on_sibs) < MIN_VALIDATING:
        on_sibs = []
    own: list[Job] = []
    for o in settings.origins:
        tr = x <= o * c_last
        if int((tr & (x > 0)).sum()) >= 4 and int((~tr).sum()) >= 1:
            own.append((i, x[tr], y[tr], x[~tr], y[~tr], prior, False))
    return own, on_sibs


def _forecasts_with_prior(
    curves: Sequence[Curve],
    at: Sequence[ArrayLike],
    priors: Sequence[Prior | None],
    siblings: Sequence[Sequence[Curve]] | None,
    settings: EnsembleSettings,
    fitter: ManyFitter = fit_sigmoid_many,
) -> list[tuple[PointForecast, Borrowing | None]]:
    """:func:`point_forecast_with_prior` with each curve's check of its prior (None: no prior)."""
    base = point_forecast_many(curves, at, settings=settings, fitter=fitter)
    allowed = np.array([m in settings.members for m in MEMBERS] + [True])
    clean = [_clean(c, v) for c, v in curves]
    checks: list[Borrowing | None] = []
    jobs: list[Job] = []
    for i, ((x, y), pf, prior) in enumerate(zip(clean, base, priors, strict=True)):
        if prior is None or pf.status != "ok":
            checks.append(None)
            continue
        sweep = prior.settings or DEFAULT_SWEEP
        checks.append(borrowing(x, y, prior, sweep))
        if not checks[-1].agrees:  # type: ignore[union-attr]
            continue
        c_far = float(np.max(pf.at)) if pf.at.size else float(x[-1])
        own, on_sibs = _validation_jobs(
            i, x, y, c_far, prior, siblings[i] if siblings is not None else [], settings
        )
        if on_sibs and sweep.validation == "siblings":
            own = []
        jobs += own + on_sibs
    # Every job's single-curve members in one batch.
    inner = member_forecasts(
        [(j[1], j[2]) for j in jobs],
        [j[3] for j in jobs],
        [float(j[2][0]) for j in jobs],
        None,
        settings,
        fitter,
    )
    by_curve: dict[int, list[tuple[tuple[FloatArray, FloatArray], bool]]] = {}
    for job, single in zip(jobs, inner, strict=True):
        p = job[5]
        sw = (
            np.full(job[3].shape, np.nan)
            if p is None
            else _sweep_member(job[1], job[2], job[3], float(job[2][0]), p)
        )
        by_curve.setdefault(job[0], []).append(((np.vstack([single, sw[None, :]]), job[4]), job[6]))
    out: list[tuple[PointForecast, Borrowing | None]] = []
    for i, ((x, y), pf, prior, check) in enumerate(zip(clean, base, priors, checks, strict=True)):
        if prior is None or check is None or not check.agrees:
            out.append((pf, check))
            continue
        member = _sweep_member(x, y, pf.at, float(y[0]), prior)
        allowed_i = allowed.copy()
        if (prior.settings or DEFAULT_SWEEP).replace_sigmoid:
            allowed_i[0] = False  # the sweep member stands in for the run's free sigmoid
        m = np.vstack([pf.members, member[None, :]])
        m[~np.isfinite(m).all(axis=1)] = np.nan
        mine = by_curve.get(i, [])
        own_v = [v for v, on_sib in mine if not on_sib]
        sib_v = [v for v, on_sib in mine if on_sib]
        w_own = member_weights(m, own_v, allowed_i, settings.temperature)
        if sib_v:
            w_sib = member_weights(m, sib_v, allowed_i, settings.temperature)
            how = (prior.settings or DEFAULT_SWEEP).validation
            if not own_v or how == "siblings":
                w = w_sib
            else:
                # The siblings' weights checked on this run's own past: as far as their blend
                # misses it more than the run's own blend does, the run's own weights take over.
                e_sib = max(blended_error(own_v, w_sib), _ERR_FLOOR)
                e_own = max(blended_error(own_v, w_own), _ERR_FLOOR)
                lam = math.exp(-max(e_sib / e_own - 1.0, 0.0) / settings.temperature)
                w = lam * w_sib + (1.0 - lam) * w_own
        else:
            w = w_own
        value = (np.where(w[:, None] > 0, m, 0.0) * w[:, None]).sum(axis=0)
        out.append(
            (
                replace(
                    pf,
                    value=np.asarray(value, dtype=np.float64),
                    weights=tuple(float(v) for v in w),
                    members=m,
                    names=SWEEP_MEMBERS,
                    # How wrong this blend was on siblings that went on (0 with none) and on the
                    # curve's own past (the single-curve blend's where it was not validated inside).
                    sibling_error=blended_error(sib_v, w) if sib_v else 0.0,
                    own_error=blended_error(own_v, w) if own_v else pf.own_error,
                ),
                check,
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
    made = _forecasts_with_prior(curves, at, priors, siblings, DEFAULT_ENSEMBLE)
    out = []
    for (cx, _), (pf, check), prior, sibs in zip(curves, made, priors, siblings, strict=True):
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
        elif check is not None and not check.agrees:
            single = with_interval(pf, level, single_calibration, bounds)
            out.append(SweepForecast(single, "single", prior.n, check.note(), conflict=check.z))
        else:
            done = finished_calibration is not None and siblings_finished(cx, sibs)
            cal = finished_calibration if finished_calibration is not None and done else calibration
            fc = with_interval(pf, level, cal, bounds)
            z = check.z if check is not None else math.nan
            out.append(SweepForecast(fc, "sweep", prior.n, finished=done, conflict=z))
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

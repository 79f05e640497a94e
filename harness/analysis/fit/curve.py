"""The sigmoidal compute-performance curve, its fit result and the shared pre/post checks.

The curve is ScaleRL's Eq. 1::

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B),   0 <= A <= 1, B > 0

In log-compute ``x = log C`` it is a logistic, ``R0 + (A - R0) * sigmoid(B * (x - log C_mid))``,
which is the form every fitter works in. This module owns what all fitters share: the options,
the frozen :class:`SigmoidFit`, :func:`prepare` (drop non-finite points, apply the fit window, pick
R0, reject degenerate curves with a status and a human reason) and :func:`finalize` (turn raw
parameters into a fit with a status: a C_mid beyond the data means the curve never passed its
inflection, so the ceiling is reported as NaN rather than as a confident number).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scalerl.harness.errors import ConfigError

FitStatus = Literal["ok", "pre-inflection", "too-few-points", "flat", "decreasing", "failed"]
# Where a curve's start R0 comes from (FitOptions.r0_rule):
# - "auto": the mean of its points at compute <= 0 (a step-0 evaluation) when it has any, else fitted;
# - "fit": always fitted (points at compute <= 0 only seed the fit);
# - "first": the mean of its first ``r0_points`` values, held fixed (the paper's "initial performance"
#   with ``r0_points=1``). On a curve logged from its first training step that value has already
#   risen, and A comes out low by up to the margin: never the default.
R0Rule = Literal["auto", "fit", "first"]
R0_RULES: tuple[R0Rule, ...] = ("auto", "fit", "first")
FloatArray = NDArray[np.float64]
NAN = float("nan")
# Smallest per-point standard error a weighted fit accepts: a pass rate of exactly 0 or 1 has a
# binomial SE of 0, which would otherwise get infinite weight. 1e-3 is a tenth of a percentage
# point, below the SE of any pass rate measured on fewer than ~250,000 prompts.
SIGMA_FLOOR = 1e-3


def sigmoid_curve(c: ArrayLike, r0: float, a: float, b: float, c_mid: float) -> FloatArray:
    """R(C) for compute ``c`` (any shape); compute <= 0 gives R0 (the curve's start)."""
    c_arr = np.asarray(c, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        ratio = np.where(c_arr > 0, (c_mid / np.where(c_arr > 0, c_arr, 1.0)) ** b, np.inf)
        out = r0 + (a - r0) / (1.0 + ratio)
    return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True)
class FitOptions:
    """How a curve is fitted; validated once here, shared by every fitter.

    ``window_start`` (absolute compute) and ``window_fraction`` (share of the curve's compute
    range, dropped from its start) drop the early noisy regime; at most one may be set. R0 is
    ``r0`` when given, else it follows ``r0_rule`` (:data:`R0Rule`; window not applied, since R0
    is the start of training): by default a step-0 evaluation where the curve has one, else
    fitted with A, B and C_mid, so that a noiseless sigmoid gives back its own parameters
    whatever its first logged compute. ``fit_r0`` is shorthand for ``r0_rule="fit"``;
    ``r0_points`` is how many first values ``"first"`` averages.
    ``fixed_a`` pins the asymptote (the paper's rule when comparing efficiency at a common A).
    ``flat_tol`` is the smallest spread / gain (in metric units) that counts as movement.
    """

    r0: float | None = None
    fit_r0: bool = False
    r0_rule: R0Rule = "auto"
    r0_points: int = 1
    window_start: float | None = None
    window_fraction: float | None = None
    fixed_a: float | None = None
    min_points: int = 4
    flat_tol: float = 0.01
    a_bounds: tuple[float, float] = (0.0, 1.0)
    max_iter: int = 40

    def __post_init__(self) -> None:
        if self.window_start is not None and self.window_fraction is not None:
            raise ConfigError(
                "window_start and window_fraction are mutually exclusive",
                field="window",
                value=(self.window_start, self.window_fraction),
                fix="set only one of --window-start / --window-fraction",
            )
        if self.window_fraction is not None and not 0.0 <= self.window_fraction < 1.0:
            raise ConfigError(
                "must be in [0, 1)",
                field="window_fraction",
                value=self.window_fraction,
                fix="use e.g. 0.1 to drop the first 10% of compute",
            )
        if self.r0_points < 1:
            raise ConfigError("must be >= 1", field="r0_points", value=self.r0_points, fix="use 1")
        if self.r0_rule not in R0_RULES:
            raise ConfigError(
                "unknown R0 rule", field="r0_rule", value=self.r0_rule, fix=f"use one of {list(R0_RULES)}"
            )
        if self.min_points < 3 + int(self.rule != "first") - int(self.fixed_a is not None):
            raise ConfigError(
                "fewer points than free parameters",
                field="min_points",
                value=self.min_points,
                fix="use min_points >= 4",
            )
        lo, hi = self.a_bounds
        if not lo < hi:
            raise ConfigError(
                "lower bound must be below upper", field="a_bounds", value=self.a_bounds, fix="use (0.0, 1.0)"
            )

    @property
    def rule(self) -> R0Rule:
        """The R0 rule in force (``fit_r0`` is shorthand for ``"fit"``)."""
        return "fit" if self.fit_r0 else self.r0_rule


@dataclass(frozen=True)
class SigmoidFit:
    """One fitted curve. Parameters are NaN when the status says they cannot be trusted:
    ``pre-inflection`` keeps B and C_mid (they say where the curve is heading) but reports A (and
    its CI) as NaN, since a curve that never turned cannot pin its ceiling. CIs are NaN until
    :func:`scalerl.harness.analysis.fit.bootstrap.bootstrap_fits` fills them (95% percentile intervals)."""

    r0: float
    a: float
    b: float
    c_mid: float
    rmse: float
    n_points: int
    status: FitStatus
    reason: str
    method: str
    window_start: float = NAN
    a_lo: float = NAN
    a_hi: float = NAN
    b_lo: float = NAN
    b_hi: float = NAN
    c_mid_lo: float = NAN
    c_mid_hi: float = NAN
    # Raw estimate of A even when it is not trusted (pre-inflection); for diagnostics only.
    a_raw: float = field(default=NAN, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def predict(self, c: ArrayLike) -> FloatArray:
        """R(c); NaN everywhere unless the fit is ``ok`` (no forecast from an unpinned ceiling)."""
        if not self.ok:
            return np.full(np.shape(np.asarray(c, dtype=np.float64)), np.nan)
        return sigmoid_curve(c, self.r0, self.a, self.b, self.c_mid)

    def compute_to_reach(self, fraction: float) -> float:
        """Compute at which R(C) = fraction * A; 0.0 if R0 already reaches it, NaN if never."""
        if not self.ok or not 0.0 < fraction < 1.0:
            return NAN
        return compute_to_reach(self.r0, self.a, self.b, self.c_mid, fraction)


def compute_to_reach(r0: float, a: float, b: float, c_mid: float, fraction: float) -> float:
    target = fraction * a
    if a <= r0:
        return NAN
    p = (target - r0) / (a - r0)
    if p <= 0.0:
        return 0.0
    return float(c_mid * (p / (1.0 - p)) ** (1.0 / b))


@dataclass(frozen=True)
class PreparedCurve:
    """A curve after cleaning and windowing; ``status`` is None when it goes on to a fitter."""

    x: FloatArray  # compute, > 0, sorted, finite, inside the window
    y: FloatArray
    r0: float
    window_start: float
    status: FitStatus | None
    reason: str
    notes: str  # what cleaning did (dropped points), appended to the final reason
    # Per-point standard errors aligned with x (floored at SIGMA_FLOOR), or None: unweighted.
    sigma: FloatArray | None = None
    # Whether the fitter fits R0 (``r0`` is then only its starting value).
    r0_free: bool = False

    @property
    def weights(self) -> FloatArray | None:
        """Least-squares weights 1/sigma^2 scaled so the largest is 1 (equal sigmas give exactly
        the unweighted problem; the scale keeps the optimiser's damping well conditioned)."""
        if self.sigma is None:
            return None
        w = 1.0 / self.sigma**2
        return np.asarray(w / w.max(), dtype=np.float64) if w.size else w


def _trend(x: FloatArray, y: FloatArray) -> tuple[float, float]:
    """(gain predicted by a straight line in log C over the data, last-third minus first-third)."""
    lx = np.log(x)
    span = float(lx[-1] - lx[0])
    dx = lx - lx.mean()
    sxx = float(dx @ dx)
    slope = float(dx @ (y - y.mean())) / sxx if span > 0 and sxx > 0 else 0.0
    k = max(1, len(y) // 3)
    return slope * span, float(np.mean(y[-k:]) - np.mean(y[:k]))


def clean_sigma(sigma: ArrayLike | None, n_values: int) -> FloatArray | None:
    """Per-point standard errors as a float array floored at :data:`SIGMA_FLOOR`, or None.

    ``sigma`` must have one entry per input value (same order). A zero entry (a pass rate of
    exactly 0 or 1) is floored like any small one; a non-finite or negative entry (a point whose
    noise is unknown) gets the median of the curve's valid entries; if none is valid the fit is
    unweighted (None).
    """
    if sigma is None:
        return None
    s = np.asarray(sigma, dtype=np.float64).ravel()
    if s.size != n_values:
        raise ConfigError(
            f"{s.size} standard error(s) for {n_values} point(s)",
            field="sigma",
            value=s.size,
            fix="pass one standard error per point of the curve, in the same order (or None)",
        )
    good = np.isfinite(s) & (s >= 0)
    if not good.any():
        return None
    s = np.where(good, s, float(np.median(s[good])))
    return np.asarray(np.maximum(s, SIGMA_FLOOR), dtype=np.float64)


def start_value(
    c: FloatArray, v: FloatArray, options: FitOptions, r0_override: float | None = None
) -> tuple[float, bool]:
    """(R0, whether it is fitted) for one curve's finite points sorted by compute (see
    :data:`R0Rule`). A fitted R0's value here only seeds the fitter: the mean of the points at
    compute <= 0 where there are any, else the first value."""
    if r0_override is not None:
        return float(r0_override), False
    if options.r0 is not None:
        return float(options.r0), False
    if not v.size:
        return NAN, False
    rule = options.rule
    if rule == "first":
        return float(np.mean(v[: options.r0_points])), False
    at_start = v[c <= 0]
    if at_start.size:
        return float(np.mean(at_start)), rule == "fit"
    return float(v[0]), True


def prepare(
    compute: ArrayLike,
    values: ArrayLike,
    options: FitOptions,
    r0_override: float | None = None,
    sigma: ArrayLike | None = None,
) -> PreparedCurve:
    """Clean one curve and decide whether it can be fitted at all. Never raises on data.

    ``sigma`` (one standard error per value, see :func:`clean_sigma`) is carried through the
    same dropping, sorting and windowing as the points.
    """
    c = np.asarray(compute, dtype=np.float64).ravel()
    v = np.asarray(values, dtype=np.float64).ravel()
    sd = clean_sigma(sigma, v.size)
    n = min(c.size, v.size)
    c, v = c[:n], v[:n]
    if sd is not None:
        sd = sd[:n]
    finite = np.isfinite(c) & np.isfinite(v)
    notes = []
    if (~finite).sum():
        notes.append(f"dropped {int((~finite).sum())} non-finite point(s)")
    c, v = c[finite], v[finite]
    order = np.argsort(c, kind="stable")
    c, v = c[order], v[order]
    if sd is not None:
        sd = sd[finite][order]
    r0, r0_free = start_value(c, v, options, r0_override)
    start = 0.0
    if c.size and options.window_fraction is not None:
        # The share of the curve's compute range dropped from its start (FitSpec's meaning).
        start = float(c[0]) + options.window_fraction * float(c[-1] - c[0])
    elif options.window_start is not None:
        start = float(options.window_start)
    keep = (c > 0) & (c >= start)
    if (c <= 0).sum():
        notes.append(f"{int((c <= 0).sum())} point(s) at compute <= 0 used for R0 only")
    x, y = c[keep], v[keep]
    s_kept = None if sd is None else sd[keep]
    note = "; ".join(notes)

    def done(status: FitStatus | None, reason: str) -> PreparedCurve:
        return PreparedCurve(x, y, r0, start, status, reason, note, s_kept, r0_free)

    distinct = np.unique(x).size
    if distinct < options.min_points:
        return done(
            "too-few-points",
            f"{distinct} distinct compute value(s) in the window (compute >= {start:g}); "
            f"need >= {options.min_points}",
        )
    ys = np.sort(y)  # 5th-95th percentile spread (nearest rank), robust to one outlier
    spread = float(ys[int(0.95 * (ys.size - 1))] - ys[int(0.05 * (ys.size - 1))])
    line_gain, thirds = _trend(x, y)
    if spread < options.flat_tol:
        return done("flat", f"values span {spread:.4f} (< flat_tol {options.flat_tol}); no gain to fit")
    if line_gain < -options.flat_tol and thirds < -options.flat_tol:
        return done(
            "decreasing",
            f"metric falls with compute (last third minus first third = {thirds:+.4f}); "
            "the run degrades or collapsed",
        )
    if max(line_gain, thirds) < options.flat_tol and options.fixed_a is None:
        return done("flat", f"no upward trend (line gain {line_gain:+.4f}, thirds {thirds:+.4f})")
    return done(None, "")


def finalize(
    prep: PreparedCurve,
    params: tuple[float, float, float, float] | None,
    method: str,
    options: FitOptions,
    failure: str = "",
) -> SigmoidFit:
    """Turn raw (r0, a, b, c_mid) from a fitter into a :class:`SigmoidFit` with its status.
    ``failure`` is why the fitter gave no parameters, or, with parameters, its note on the fit
    (e.g. a grid edge), which joins the reason."""
    n = int(prep.x.size)

    def result(
        status: FitStatus, reason: str, p: tuple[float, float, float, float], rmse: float, a_raw: float = NAN
    ) -> SigmoidFit:
        full = "; ".join(s for s in (reason, prep.notes) if s)
        return SigmoidFit(
            r0=p[0],
            a=p[1],
            b=p[2],
            c_mid=p[3],
            rmse=rmse,
            n_points=n,
            status=status,
            reason=full,
            method=method,
            window_start=prep.window_start,
            a_raw=a_raw,
        )

    if prep.status is not None:
        return result(prep.status, prep.reason, (prep.r0, NAN, NAN, NAN), NAN)
    if params is None or not all(math.isfinite(p) for p in params):
        return result(
            "failed",
            failure or "the optimiser did not converge to finite parameters",
            (prep.r0, NAN, NAN, NAN),
            NAN,
        )
    r0, a, b, c_mid = params
    pred = sigmoid_curve(prep.x, r0, a, b, c_mid)
    rmse = float(np.sqrt(np.mean((prep.y - pred) ** 2)))
    note = failure
    if a < r0 - options.flat_tol:
        return result(
            "decreasing",
            "; ".join(s for s in (f"fitted ceiling A={a:.4f} is below the start R0={r0:.4f}", note) if s),
            (r0, NAN, NAN, NAN),
            rmse,
            a_raw=a,
        )
    c_max = float(prep.x[-1])
    if c_mid > c_max:
        return result(
            "pre-inflection",
            f"C_mid={c_mid:.4g} is beyond the last compute {c_max:.4g}: the curve has not passed "
            f"its inflection, so its ceiling cannot be pinned (A >= {float(np.max(prep.y)):.4f} is "
            "all the data says); train further before trusting A" + (f"; {note}" if note else ""),
            (r0, NAN, b, c_mid),
            rmse,
            a_raw=a,
        )
    return result("ok", note, (r0, a, b, c_mid), rmse, a_raw=a)

"""Fitters registry and the public fit functions.

A fitter turns prepared curves (see :func:`scalerl.harness.analysis.fit.curve.prepare`) into raw parameters;
cleaning, windowing and status are shared, so fitters differ only in how they search:

- ``fast``: the batched closed-form search + Levenberg-Marquardt of :mod:`.batched` (default).
- ``paper``: ScaleRL's App. A.5 procedure with its grid widened to the data (DESIGN.md §4): A
  from max(R) - 0.2 to 1.0 step 0.005 x 100 C_mid values from half the smallest to four times the
  largest compute, B > 0 fitted in each cell, least squared error wins, R0 held fixed at the
  run's initial performance (its first point, as the paper defines R0; :class:`PaperR0`). The
  reference to beat on accuracy; vectorised (:mod:`.paper`), so also usable at scale.
- ``paper_grid``: the same procedure with the paper's literal grid (A 0.450..0.800, C_mid inside
  the data, B unbounded) and a scipy ``curve_fit`` per cell, R0 the same. Faithful only on curves
  whose ceiling lies in 0.45-0.80 (the paper's own); kept to reproduce its numbers. Slow (seconds
  a curve).
- ``curve_fit``: a plain scipy ``curve_fit`` of (A, B, C_mid) per curve from a generic start.
"""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar, Literal, Protocol

import numpy as np
from numpy.typing import ArrayLike

from scalerl.harness.analysis.fit.batched import fit_batch
from scalerl.harness.analysis.fit.curve import (
    FitOptions,
    FloatArray,
    PreparedCurve,
    SigmoidFit,
    finalize,
    prepare,
    sigmoid_curve,
)
from scalerl.harness.errors import ConfigError

Params = tuple[float, float, float, float]
# Parameters and a note on the fit (e.g. a grid edge), or None and why it failed.
RawResult = tuple[Params | None, str]
Curve = tuple[ArrayLike, ArrayLike]
# Where the paper's procedure takes R0 from: "first", the run's initial performance as the paper
# defines it (FitOptions.r0_rule "first" with r0_points 1: the value at the lowest compute, a
# step-0 evaluation where the run logged one, else its first logged point); "options", whatever
# FitOptions says (as the generic fitters: by default a step-0 evaluation, else fitted). An R0
# given explicitly (fit_sigmoid_many's r0=, FitOptions.r0) or a rule other than the default
# ("fit", "first") is always used as given.
PaperR0 = Literal["first", "options"]
PAPER_R0: tuple[PaperR0, ...] = ("first", "options")


class Fitter(ABC):
    """Fits prepared curves. Contract: returns one result per input, in order, never raises on
    data (a curve it cannot fit comes back as ``(None, reason)``; a fitted one as ``(params,
    note)``, the note, usually empty, joining the fit's reason); ``fixed_a`` (one per curve or
    None) pins A; a curve with ``sigma`` is fitted by weighted least squares (weights
    ``PreparedCurve.weights``). Stateless and thread-safe."""

    name: ClassVar[str]
    # Whether the fitter fits R0 itself where a curve's R0 is free (PreparedCurve.r0_free); for
    # one that holds R0 fixed, fit_sigmoid_many fits R0 first with the fast fitter and hands it
    # over, so that every fitter starts from an unbiased R0.
    fits_r0: ClassVar[bool] = False

    @abstractmethod
    def fit_prepared(
        self, curves: Sequence[PreparedCurve], options: FitOptions, fixed_a: Sequence[float] | None
    ) -> list[RawResult]: ...

    def own_options(self, options: FitOptions) -> FitOptions:
        """The options this procedure fits with when no R0 was given: ``options`` themselves,
        except for a procedure that defines R0 itself (the paper's: the first point)."""
        return options


def _paper_options(r0_from: PaperR0, options: FitOptions) -> FitOptions:
    """The paper procedures' R0: the first point unless ``options`` fix R0 or choose a rule."""
    if r0_from == "first" and options.r0 is None and options.rule == "auto":
        return replace(options, r0_rule="first", r0_points=1)
    return options


def _check_r0_from(value: str) -> None:
    if value not in PAPER_R0:
        raise ConfigError(
            "unknown R0 source for the paper's procedure",
            field="r0_from",
            value=value,
            fix="use 'first' (the run's initial performance, the paper's R0) or 'options'",
        )


class FastFitter(Fitter):
    name = "fast"
    fits_r0 = True

    def fit_prepared(
        self, curves: Sequence[PreparedCurve], options: FitOptions, fixed_a: Sequence[float] | None
    ) -> list[RawResult]:
        results: list[RawResult] = [(None, "")] * len(curves)
        # Curves whose R0 is fitted and curves whose R0 is held go in separate batches (the
        # optimiser frees a column for a whole batch).
        for free in (False, True):
            idx = [i for i, c in enumerate(curves) if c.r0_free == free]
            if not idx:
                continue
            out = fit_batch(
                [curves[i].x for i in idx],
                [curves[i].y for i in idx],
                np.array([curves[i].r0 for i in idx]),
                fit_r0=free,
                fixed_a=None if fixed_a is None else np.asarray([fixed_a[i] for i in idx], dtype=np.float64),
                a_bounds=options.a_bounds,
                max_iter=options.max_iter,
                ws=[curves[i].weights for i in idx],
            )
            for i, r in zip(idx, out, strict=True):
                results[i] = ((float(r[0]), float(r[1]), float(r[2]), float(r[3])), "")
        return results


@dataclass(frozen=True)
class PaperGridFitter(Fitter):
    """The paper's grid; the grid sizes are fields so a test can run a reduced one.

    ``recentre_below`` (default None: the fixed ``a_grid``, the paper's 0.450..0.800) places the
    A grid per curve instead: the same number of values and step as ``a_grid``, starting at
    ``max(0, max(y) - recentre_below)`` (max over the fitted points), values above 1.0 dropped.
    That is what a lab would do with the paper's procedure on a curve whose ceiling is not in
    0.45-0.80 (bench/forecast.py, "paper grid, A recentred", uses 0.05).
    """

    name: ClassVar[str] = "paper_grid"
    a_grid: tuple[float, ...] = tuple(np.round(np.arange(0.450, 0.8001, 0.005), 3).tolist())
    n_c_mid: int = 100
    recentre_below: float | None = None
    r0_from: PaperR0 = "first"  # see PaperR0

    def __post_init__(self) -> None:
        _check_r0_from(self.r0_from)

    def own_options(self, options: FitOptions) -> FitOptions:
        return _paper_options(self.r0_from, options)

    def grid_for(self, y: FloatArray) -> tuple[float, ...]:
        """The A grid searched for a curve with fitted values ``y``."""
        if self.recentre_below is None:
            return self.a_grid
        step = (self.a_grid[-1] - self.a_grid[0]) / (len(self.a_grid) - 1) if len(self.a_grid) > 1 else 0.0
        start = max(0.0, float(np.max(y)) - self.recentre_below)
        grid = np.round(start + step * np.arange(len(self.a_grid)), 6)
        return tuple(float(a) for a in grid[grid <= 1.0]) or (min(start, 1.0),)

    def fit_prepared(
        self, curves: Sequence[PreparedCurve], options: FitOptions, fixed_a: Sequence[float] | None
    ) -> list[RawResult]:
        from scipy.optimize import curve_fit

        results: list[RawResult] = []
        for i, c in enumerate(curves):
            grid_a = (fixed_a[i],) if fixed_a is not None else self.grid_for(c.y)
            c_mids = np.geomspace(c.x[0], c.x[-1], self.n_c_mid)
            wts = c.weights if c.weights is not None else np.ones_like(c.y)
            best: tuple[float, Params] | None = None
            for a in grid_a:
                for c_mid in c_mids:

                    def f(
                        x: FloatArray, b: float, a: float = a, c_mid: float = float(c_mid), r0: float = c.r0
                    ) -> FloatArray:
                        return sigmoid_curve(x, r0, a, b, c_mid)

                    # Unbounded (Levenberg-Marquardt) as a plain call would be; a cell whose B
                    # goes negative simply loses on squared error.
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            (b_hat,), _ = curve_fit(f, c.x, c.y, p0=(1.0,), sigma=c.sigma, maxfev=2000)
                    except (RuntimeError, ValueError):
                        continue
                    sse = float(np.sum(wts * (c.y - f(c.x, b_hat)) ** 2))
                    if best is None or sse < best[0]:
                        best = (sse, (c.r0, float(a), float(b_hat), float(c_mid)))
            results.append((best[1], "") if best else (None, "no grid cell converged"))
        return results


@dataclass(frozen=True)
class PaperFitter(Fitter):
    """The paper's App. A.5 grid widened to the data (DESIGN.md §4); see :mod:`.paper`.

    R0 is held fixed at the run's initial performance, its first point (``r0_from="first"``, the
    paper's definition; ``"options"`` takes R0 as :class:`FitOptions` says, as the generic
    fitters do); an R0 given explicitly, or an R0 rule other than the default, overrides it.
    Per curve (its fitted points): A on the lattice of multiples
    of ``a_step`` from ``max(y) - a_below`` (rounded down, clipped to ``options.a_bounds``) up to
    the upper A bound; ``n_c_mid`` C_mid values log-spaced from ``c_lo`` x the smallest to ``c_hi``
    x the largest compute; B fitted in every cell within ``b_range`` (log grid of ``n_b`` values,
    then refined). A winning cell on an edge of its grid is kept (it is the least-squares cell)
    and the fit's ``reason`` says which edge: at the top of A the data ask for a ceiling at or
    above the bound, at the bottom the curve sits far below its own maximum. A curve whose
    maximum is more than ``a_below`` above the upper A bound has no grid and comes back failed.
    """

    name: ClassVar[str] = "paper"
    a_step: float = 0.005
    a_below: float = 0.2
    n_c_mid: int = 100
    c_lo: float = 0.5
    c_hi: float = 4.0
    n_b: int = 161
    b_range: tuple[float, float] = (1e-2, 1e2)
    top_cells: int = 64
    r0_from: PaperR0 = "first"  # see PaperR0

    def __post_init__(self) -> None:
        _check_r0_from(self.r0_from)
        checks = (
            ("a_step", self.a_step > 0, "use 0.005 (the paper's step)"),
            ("a_below", self.a_below >= 0, "use 0.2"),
            ("n_c_mid", self.n_c_mid >= 2, "use 100 (the paper's count)"),
            ("c_lo", 0 < self.c_lo <= 1, "use 0.5 (half the smallest compute)"),
            ("c_hi", self.c_hi >= 1, "use 4.0 (four times the largest compute)"),
            ("n_b", self.n_b >= 3, "use 161"),
            ("b_range", 0 < self.b_range[0] < self.b_range[1], "use (0.01, 100.0): B must be > 0"),
            ("top_cells", self.top_cells >= 1, "use 64"),
        )
        for field, good, fix in checks:
            if not good:
                raise ConfigError(
                    "invalid paper-grid setting", field=field, value=getattr(self, field), fix=fix
                )

    def own_options(self, options: FitOptions) -> FitOptions:
        return _paper_options(self.r0_from, options)

    def a_grid_for(self, y: FloatArray, a_bounds: tuple[float, float]) -> FloatArray:
        """The A values searched for a curve with fitted values ``y`` (empty: no A fits)."""
        lo, hi = a_bounds
        start = max(lo, math.floor(round((float(np.max(y)) - self.a_below) / self.a_step, 9)) * self.a_step)
        n = math.floor(round((hi - start) / self.a_step, 9)) + 1
        return np.round(start + self.a_step * np.arange(max(n, 0)), 10)

    def c_grid_for(self, x: FloatArray) -> FloatArray:
        """The C_mid values searched for a curve with fitted compute ``x`` (sorted, > 0)."""
        return np.geomspace(self.c_lo * float(x[0]), self.c_hi * float(x[-1]), self.n_c_mid)

    def fit_prepared(
        self, curves: Sequence[PreparedCurve], options: FitOptions, fixed_a: Sequence[float] | None
    ) -> list[RawResult]:
        from scalerl.harness.analysis.fit.paper import grid_search

        b_grid = np.geomspace(self.b_range[0], self.b_range[1], self.n_b)
        results: list[RawResult] = []
        for i, c in enumerate(curves):
            if fixed_a is not None:
                a_grid = np.array([float(fixed_a[i])])
            else:
                a_grid = self.a_grid_for(c.y, options.a_bounds)
                if a_grid.size == 0:
                    results.append(
                        (
                            None,
                            f"the paper's A grid is empty: max of the fitted values {float(np.max(c.y)):.4f}"
                            f" minus {self.a_below} is above the upper A bound {options.a_bounds[1]}; "
                            "Eq. 1 needs a metric in [0, 1] (rescale it, or use a_bounds)",
                        )
                    )
                    continue
            w = c.weights if c.weights is not None else np.ones_like(c.y)
            g = grid_search(c.x, c.y, w, c.r0, a_grid, self.c_grid_for(c.x), b_grid, self.top_cells)
            results.append(((g.r0, g.a, g.b, g.c_mid), self._edge_note(g.edges, a_grid)))
        return results

    def _edge_note(self, edges: tuple[str, ...], a_grid: FloatArray) -> str:
        if not edges:
            return ""
        what = {
            "A low": f"A at the bottom of its grid ({a_grid[0]:.3f}): the fit puts the ceiling far "
            "below the curve's own maximum (an outlier, or a curve that falls)",
            "A high": f"A at the top of its grid ({a_grid[-1]:.3f}): the data ask for a ceiling at or "
            "above it",
            "C_mid low": f"C_mid at the bottom of its grid ({self.c_lo} x the smallest compute)",
            "C_mid high": f"C_mid at the top of its grid ({self.c_hi} x the largest compute)",
            "B low": f"B at its lower bound {self.b_range[0]}",
            "B high": f"B at its upper bound {self.b_range[1]} (a step, not a curve)",
        }
        return "paper grid edge: " + "; ".join(what[e] for e in edges)


class CurveFitFitter(Fitter):
    name = "curve_fit"
    fits_r0 = True

    def fit_prepared(
        self, curves: Sequence[PreparedCurve], options: FitOptions, fixed_a: Sequence[float] | None
    ) -> list[RawResult]:
        from scipy.optimize import curve_fit

        results: list[RawResult] = []
        lo_a, hi_a = options.a_bounds
        for i, c in enumerate(curves):
            a_fix = None if fixed_a is None else fixed_a[i]

            free_r0 = c.r0_free

            def f(
                x: FloatArray,
                *p: float,
                c: PreparedCurve = c,
                a_fix: float | None = a_fix,
                free_r0: bool = free_r0,
            ) -> FloatArray:
                r0 = p[0] if free_r0 else c.r0
                a = a_fix if a_fix is not None else p[int(free_r0)]
                return sigmoid_curve(x, r0, a, p[-2], p[-1])

            p0: list[float] = [float(np.clip(c.r0, lo_a, hi_a))] if free_r0 else []
            lo: list[float] = [lo_a] if free_r0 else []
            hi: list[float] = [hi_a] if free_r0 else []
            if a_fix is None:
                p0.append(float(np.clip(c.y.max(), lo_a, hi_a)))
                lo.append(lo_a)
                hi.append(hi_a)
            p0 += [1.0, float(np.median(c.x))]
            lo += [1e-3, float(c.x[0]) * 1e-3]
            hi += [50.0, float(c.x[-1]) * 1e3]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    p, _ = curve_fit(f, c.x, c.y, p0=p0, sigma=c.sigma, bounds=(lo, hi), maxfev=5000)
            except (RuntimeError, ValueError) as err:
                results.append((None, f"curve_fit failed: {err}"))
                continue
            r0 = float(p[0]) if free_r0 else c.r0
            a = a_fix if a_fix is not None else float(p[int(free_r0)])
            results.append(((r0, a, float(p[-2]), float(p[-1])), ""))
        return results


FITTERS: dict[str, type[Fitter]] = {
    FastFitter.name: FastFitter,
    PaperFitter.name: PaperFitter,
    PaperGridFitter.name: PaperGridFitter,
    CurveFitFitter.name: CurveFitFitter,
}


def get_fitter(name: str) -> Fitter:
    """The registered fitter called ``name``; an unknown name lists the valid ones."""
    try:
        return FITTERS[name]()
    except KeyError:
        raise ConfigError(
            "unknown fitter", field="method", value=name, fix=f"use one of {sorted(FITTERS)}"
        ) from None


class ManyFitter(Protocol):
    """What fits a batch of curves as :func:`fit_sigmoid_many` does: one :class:`SigmoidFit` per
    curve, in order, each curve fitted on its own (batching changes no result). The forecasts take
    one as their ``fitter`` (default :func:`fit_sigmoid_many`), so a caller can pass its own, e.g. a
    benchmark that memoises fits across the thousands of forecasts it replays."""

    def __call__(
        self,
        curves: Sequence[Curve],
        *,
        r0: Sequence[float] | None = None,
        sigma: Sequence[ArrayLike | None] | None = None,
    ) -> list[SigmoidFit]: ...


def fit_sigmoid_many(
    curves: Sequence[Curve],
    *,
    options: FitOptions | None = None,
    method: str | Fitter = "fast",
    fixed_a: Sequence[float] | None = None,
    r0: Sequence[float] | None = None,
    sigma: Sequence[ArrayLike | None] | None = None,
) -> list[SigmoidFit]:
    """Fit many ``(compute, values)`` curves in one batch; one :class:`SigmoidFit` per curve.

    ``fixed_a`` (one value per curve) pins each curve's A; otherwise ``options.fixed_a`` pins all.
    ``r0`` (one value per curve) fixes each curve's R0 (the bootstrap keeps the original R0);
    without it a procedure that defines R0 itself uses its own (the paper's: the first point,
    :meth:`Fitter.own_options`), any other R0 as ``options`` say.
    ``sigma`` (one entry per curve: an array with the standard error of each of that curve's
    points, same order as its values, or None) makes the fit weighted least squares with
    weights 1/sigma^2; sigma is floored at ``curve.SIGMA_FLOOR`` (1e-3) so that a 0/1 pass rate
    with a zero binomial SE cannot get infinite weight. None (the default) fits unweighted.
    Degenerate curves never raise: they come back with a status and a reason.
    """
    fitter = get_fitter(method) if isinstance(method, str) else method
    opts = options or FitOptions()
    if r0 is None:
        opts = fitter.own_options(opts)
    if sigma is not None and len(sigma) != len(curves):
        raise ConfigError(
            f"{len(sigma)} sigma entries for {len(curves)} curves",
            field="sigma",
            value=len(sigma),
            fix="pass one array (or None) per curve",
        )
    prepared = [
        prepare(
            c,
            v,
            opts,
            r0_override=None if r0 is None else r0[i],
            sigma=None if sigma is None else sigma[i],
        )
        for i, (c, v) in enumerate(curves)
    ]
    if fixed_a is None and opts.fixed_a is not None:
        fixed_a = [opts.fixed_a] * len(curves)
    todo = [i for i, p in enumerate(prepared) if p.status is None]
    if not fitter.fits_r0:
        prepared = _fit_start(prepared, todo, opts, fixed_a)
    raw = fitter.fit_prepared(
        [prepared[i] for i in todo], opts, None if fixed_a is None else [fixed_a[i] for i in todo]
    )
    by_index: dict[int, RawResult] = dict(zip(todo, raw, strict=True))
    fits = []
    for i, prep in enumerate(prepared):
        params, why = by_index.get(i, (None, ""))
        fits.append(finalize(prep, params, fitter.name, opts, why))
    return fits


def _fit_start(
    prepared: list[PreparedCurve], todo: Sequence[int], opts: FitOptions, fixed_a: Sequence[float] | None
) -> list[PreparedCurve]:
    """For a fitter that holds R0 fixed: each curve whose R0 is free gets the fast fitter's R0
    (fitted with A, B and C_mid, or with the curve's fixed A), then holds it."""
    free = [i for i in todo if prepared[i].r0_free]
    if not free:
        return prepared
    raw = FastFitter().fit_prepared(
        [prepared[i] for i in free], opts, None if fixed_a is None else [fixed_a[i] for i in free]
    )
    out = list(prepared)
    for i, (params, _) in zip(free, raw, strict=True):
        r0 = params[0] if params is not None and math.isfinite(params[0]) else prepared[i].r0
        out[i] = replace(prepared[i], r0=float(r0), r0_free=False)
    return out


def fit_sigmoid(
    compute: ArrayLike,
    values: ArrayLike,
    *,
    r0: float | None = None,
    fit_r0: bool = False,
    window: float | None = None,
    window_fraction: float | None = None,
    fixed_a: float | None = None,
    options: FitOptions | None = None,
    method: str | Fitter = "fast",
    sigma: ArrayLike | None = None,
) -> SigmoidFit:
    """Fit one curve. ``window`` drops compute below that absolute value; ``window_fraction``
    drops compute below that fraction of the curve's largest compute. Keyword arguments override
    the matching fields of ``options``. ``sigma`` (the standard error of each point, aligned with
    ``values``; None = unweighted) weights the fit by 1/sigma^2, sigma floored at 1e-3 (see
    :func:`fit_sigmoid_many`)."""
    base = options or FitOptions()
    opts = FitOptions(
        r0=r0 if r0 is not None else base.r0,
        fit_r0=fit_r0 or base.fit_r0,
        r0_rule=base.r0_rule,
        r0_points=base.r0_points,
        window_start=window if window is not None else base.window_start,
        window_fraction=window_fraction if window_fraction is not None else base.window_fraction,
        fixed_a=fixed_a if fixed_a is not None else base.fixed_a,
        min_points=base.min_points,
        flat_tol=base.flat_tol,
        a_bounds=base.a_bounds,
        max_iter=base.max_iter,
    )
    return fit_sigmoid_many(
        [(compute, values)], options=opts, method=method, sigma=None if sigma is None else [sigma]
    )[0]
